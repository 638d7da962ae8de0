//! Persistence runs off each group's loop (`group/persist.rs`): a node
//! says it holds an entry only once its batch is written and its journal
//! synced, however long the sync takes, and the loop keeps going
//! meanwhile. Three nodes in one process on loopback.

mod common;

use common::*;
use corelog_replica::journal::sync_ticket::hold::hold_syncs;
use std::sync::mpsc;
use std::time::Duration;

const ELECT: Duration = Duration::from_secs(10);

/// With one follower stopped and the other's journal syncs held (a stuck
/// disk), a send through the leader is not acknowledged: the leader and
/// the held follower make a majority only once the follower's sync
/// returns, and the leader stays leader meanwhile (the follower's
/// heartbeat answers do not wait for the sync). Released, the send is
/// acknowledged, and the follower serves it.
#[test]
fn a_followers_held_sync_holds_the_commit_back() {
    init_log();
    let opts = corelog_replica::ReplicaOptions {
        sync: true,
        commit_timeout: std::time::Duration::from_secs(20),
        ..options()
    };
    let Three {
        dirs: _dirs,
        mut nodes,
        leader,
        ..
    } = three(&opts, ELECT);
    let li = (leader - 1) as usize;
    let (f1, f2) = match li {
        0 => (1, 2),
        1 => (0, 2),
        _ => (0, 1),
    };
    // One send stored everywhere first: the group is past its election.
    let first = batch(1, 3);
    append_retrying(&nodes[li], 1, first.clone());
    for n in &nodes {
        wait_stored(&n.engine(), 1, first.len(), ELECT);
    }
    nodes[f2].stop();
    let held = hold_syncs(&nodes[f1].dir);
    let h = nodes[li].handle();
    let (tx, rx) = mpsc::channel();
    let second = batch(2, 3);
    let sent = second.clone();
    let sender = std::thread::spawn(move || {
        // Waited on from a plain thread, no executor.
        let _ = tx.send(h.append(1, sent, origin()).wait());
    });
    // Meanwhile the held follower answers the leader's heartbeats (they
    // claim nothing it has not synced): the leader keeps its quorum and
    // its term.
    let group = nodes[li].handle().group_of(1);
    let why = "the only follower up was syncing";
    assert_leads_throughout(&nodes[li], Some(group), Duration::from_secs(2), why);
    match rx.recv_timeout(Duration::from_millis(10)) {
        Err(mpsc::RecvTimeoutError::Timeout) => {}
        Ok(r) => panic!(
            "a send was answered ({:?}) while the only follower up could not sync its journal",
            r.map(|a| a.base_offset)
        ),
        Err(e) => panic!("the sender went away: {e}"),
    }
    drop(held);
    let ack = rx
        .recv_timeout(Duration::from_secs(15))
        .expect("answered once the sync returns")
        .expect("acknowledged once the sync returns");
    sender.join().expect("sender");
    assert_eq!(ack.base_offset, 3, "the second send follows the first");
    let mut want = first.to_vec();
    want.extend_from_slice(&second);
    wait_stored(&nodes[f1].engine(), 1, want.len(), ELECT);
    assert_eq!(stored(&nodes[f1].engine(), 1).len(), want.len());
}
