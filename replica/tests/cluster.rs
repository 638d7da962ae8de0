//! Three nodes in one process on loopback: election, replicated sends
//! stored byte-identically on every node, a follower's refusal, the loss of
//! the leader, a restart that replays, and a node that was down catching up.

mod common;

use common::*;
use corelog_replica::MetaMachine;
use corelog_replica::ReplicaError;
use std::time::Duration;

const ELECT: Duration = Duration::from_secs(10);

/// What the data groups' journal files of a node hold.
#[derive(Debug, Default)]
struct Records {
    pointers: usize,
    batches: usize,
    others: usize,
    bytes: u64,
}

fn journal_records(dir: &std::path::Path) -> Records {
    let mut r = Records::default();
    for group in std::fs::read_dir(dir.join("replica"))
        .expect("replica dir")
        .flatten()
    {
        if group.file_name() == "group-0" || !group.path().is_dir() {
            continue;
        }
        for f in std::fs::read_dir(group.path())
            .expect("group dir")
            .flatten()
        {
            if f.path().extension().is_none_or(|x| x != "log") {
                continue;
            }
            let bytes = bytes::Bytes::from(std::fs::read(f.path()).expect("read"));
            r.bytes += bytes.len() as u64;
            let mut at = 0;
            while at < bytes.len() {
                let d = corelog_replica::journal::record::decode(&bytes.slice(at..))
                    .expect("whole record");
                if d.pointer.is_some() {
                    r.pointers += 1;
                } else if d.batch {
                    r.batches += 1;
                } else {
                    r.others += 1;
                }
                at += d.len;
            }
        }
    }
    r
}

#[test]
fn three_nodes_replicate_byte_identically_and_survive_the_leader() {
    let Three {
        dirs,
        cluster,
        mut nodes,
        leader,
    } = three(&options(), ELECT);
    let li = (leader - 1) as usize;

    // Sends through the leader, to partitions on both shards.
    let h = nodes[li].handle();
    // Each stamped with the leader's clock (microseconds since the epoch),
    // never going back within a partition.
    let micros = || {
        let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
        since.expect("clock").as_micros() as u64
    };
    let mut expected_offsets = [0u64; 4];
    let mut last_ts = [0u64; 4];
    for k in 0..40u64 {
        let p = k % 4;
        let before = micros();
        let ack = pollster::block_on(h.append(p, batch(k, 3), origin())).expect("append");
        assert_eq!(
            ack.base_offset, expected_offsets[p as usize],
            "offsets continue"
        );
        assert!(
            (before..=micros()).contains(&ack.base_timestamp),
            "send {k} stamped {} µs, sent at {before}",
            ack.base_timestamp
        );
        assert!(ack.base_timestamp >= last_ts[p as usize], "time went back");
        expected_offsets[p as usize] += 3;
        last_ts[p as usize] = ack.base_timestamp;
    }

    // A follower refuses, storing nothing.
    let fi = (li + 1) % 3;
    let refused = pollster::block_on(nodes[fi].handle().append(0, batch(999, 1), origin()));
    assert!(
        matches!(refused, Err(ReplicaError::NotLeader { leader: Some(l) }) if l == leader),
        "{refused:?}"
    );

    // Through a follower, a send is forwarded to the leader and answered
    // with its acknowledgement.
    let fwd = pollster::block_on(
        nodes[fi]
            .handle()
            .append_or_forward(2, batch(200, 2), origin()),
    )
    .expect("forwarded");
    assert_eq!(
        fwd.base_offset, expected_offsets[2],
        "stamped by the leader"
    );
    // So is a consumer offset's change.
    let follower = nodes[fi].handle();
    pollster::block_on(follower.store_offset(3, 77, 5)).expect("forwarded offset");
    for n in &nodes {
        let deadline = std::time::Instant::now() + ELECT;
        while n.engine().load_offset(3, 77).wait().expect("load") != Some(5) {
            assert!(
                std::time::Instant::now() < deadline,
                "node {}: offset not applied",
                n.id
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    let deleted = pollster::block_on(follower.delete_offset(3, 77));
    assert!(matches!(deleted, Ok(true)), "{deleted:?}");
    assert_eq!(follower.forwarded(), 3, "a send and two offset changes");

    // Every node stores the leader's bytes.
    for p in 0..4u64 {
        let want = stored(&nodes[li].engine(), p);
        assert!(!want.is_empty());
        for n in &nodes {
            wait_stored(&n.engine(), p, want.len(), ELECT);
            assert_eq!(
                stored(&n.engine(), p),
                want,
                "partition {p} on node {}",
                n.id
            );
        }
    }

    // Every node wrote each send's bytes once, into the partition's log,
    // and journaled a pointer to it: no batch bytes in the journals.
    for n in &nodes {
        let r = journal_records(&n.dir);
        assert_eq!(
            (r.pointers, r.batches),
            (41, 0),
            "node {}: pointer and batch records ({r:?})",
            n.id
        );
        let held: u64 = (0..4u64).map(|p| stored(&n.engine(), p).len() as u64).sum();
        assert!(
            r.bytes * 4 < held,
            "node {}: the journals hold {} bytes beside {held} of batches",
            n.id,
            r.bytes
        );
    }

    // The leader stops; the two others elect one and go on.
    nodes[li].stop();
    let survivors: Vec<&Node> = nodes.iter().filter(|n| n.id != leader).collect();
    let next = wait_for_leader(&survivors, ELECT);
    assert_ne!(next, leader);
    let ni = (next - 1) as usize;
    let ack = append_retrying(&nodes[ni], 1, batch(100, 2));
    assert_eq!(
        ack.base_offset, expected_offsets[1],
        "the new leader continues the offsets"
    );
    assert!(
        ack.base_timestamp >= last_ts[1],
        "and its time never goes back"
    );

    // The old leader restarts, replays its journal and catches up.
    nodes[li] = Node::start(leader, dirs[li].path(), &cluster, options());
    let all: Vec<&Node> = nodes.iter().collect();
    wait_for_leader(&all, ELECT);
    let want = stored(&nodes[ni].engine(), 1);
    wait_stored(&nodes[li].engine(), 1, want.len(), ELECT);
    assert_eq!(stored(&nodes[li].engine(), 1), want);
}

/// A follower whose directory is wiped comes back empty and is brought up
/// to date: from the leader's journal when it still holds everything, and
/// by a snapshot plus the partitions' batches fetched from the leader once
/// the journal was compacted. The same for the embedder's metadata: its
/// changes replayed, or its machine restored from the leader's snapshot.
#[test]
fn a_wiped_follower_is_rebuilt_from_the_journal_and_from_a_snapshot() {
    for compact_bytes in [u64::MAX, 16 << 10] {
        let opts = corelog_replica::ReplicaOptions {
            compact_bytes,
            ..options()
        };
        let Three {
            dirs,
            cluster,
            mut nodes,
            leader,
        } = three(&opts, ELECT);
        let li = (leader - 1) as usize;
        for k in 0..60u64 {
            append_retrying(&nodes[li], k % 4, batch(k, 5));
        }
        // Past the metadata journal's limit too (the smaller of its own
        // and `compact_bytes`).
        for k in 0..24u8 {
            let base = nodes[li].meta.version();
            let change = bytes::Bytes::from(vec![k; 1 << 10]);
            let h = nodes[li].handle();
            h.propose_meta(base, change).wait().expect("a change");
        }
        if compact_bytes < u64::MAX {
            wait_until(ELECT, "metadata never compacted", || {
                nodes[li].handle().status()[0].snapshot > 0
            });
        }
        let fi = (li + 1) % 3;
        nodes[fi].stop();
        wipe(dirs[fi].path());
        nodes[fi] = Node::start(fi as u64 + 1, dirs[fi].path(), &cluster, opts.clone());
        for k in 60..80u64 {
            append_retrying(&nodes[li], k % 4, batch(k, 5));
        }
        for p in 0..4u64 {
            let want = stored(&nodes[li].engine(), p);
            wait_stored(&nodes[fi].engine(), p, want.len(), ELECT);
            assert_eq!(
                stored(&nodes[fi].engine(), p),
                want,
                "partition {p} (compaction at {compact_bytes} bytes)"
            );
        }
        let changes = |n: &Node| n.meta.inner.lock().expect("lock").2.clone();
        wait_until(ELECT, "metadata not rebuilt", || {
            changes(&nodes[fi]).len() >= 24
        });
        assert_eq!(changes(&nodes[fi]), changes(&nodes[li]), "{compact_bytes}");
        assert_eq!(nodes[fi].meta.version(), nodes[li].meta.version());
    }
}

/// A group's writes keep their order through a full shard queue: with
/// every engine's queue one request deep, a `Ready`'s batches find it full
/// and the persister issues the rest in order (the loop never waits for
/// room). Eight senders at once on four partitions: every send is
/// acknowledged and every node stores the same bytes. (When the loop
/// issues past a parked request, a later batch reaches its partition first
/// and is refused for its offset: the group stops and the sends fail.)
#[test]
fn writes_keep_their_order_through_a_full_shard_queue() {
    let opts = options();
    let dirs: Vec<_> = (0..3)
        .map(|_| tempfile::tempdir().expect("tempdir"))
        .collect();
    let cluster = cluster(3);
    let nodes: Vec<Node> = (0..3)
        .map(|i| {
            Node::start_with(i as u64 + 1, dirs[i].path(), &cluster, opts.clone(), |c| {
                c.queue_depth = 1;
            })
        })
        .collect();
    let leader = wait_for_leader(&nodes.iter().collect::<Vec<_>>(), ELECT);
    let li = (leader - 1) as usize;
    std::thread::scope(|s| {
        for t in 0..8u64 {
            let node = &nodes[li];
            s.spawn(move || {
                for k in 0..40u64 {
                    append_retrying(node, (t + k) % 4, batch(t * 1000 + k, 3));
                }
            });
        }
    });
    for p in 0..4u64 {
        let want = stored(&nodes[li].engine(), p);
        assert!(!want.is_empty());
        for (i, n) in nodes.iter().enumerate() {
            wait_stored(&n.engine(), p, want.len(), ELECT);
            assert_eq!(
                stored(&n.engine(), p),
                want,
                "node {}, partition {p}",
                i + 1
            );
        }
    }
    for n in &nodes {
        assert!(n.handle().status().iter().all(|g| g.early_acks == 0));
    }
}

/// A snapshot's install runs off the group's loop: while a wiped follower
/// fetches the partitions a snapshot names (the fetch held for ten
/// election timeouts, a slow leader or link) and the other follower is
/// down, it goes on answering the leader's heartbeats, so the leader keeps
/// its quorum (raft-rs's check_quorum) and its term. Released, the follower
/// holds every partition as the leader does, and new sends commit on the
/// two of them. (With the fetch on the loop, or without the heartbeat
/// answers, the leader steps down within an election timeout.)
#[test]
fn a_slow_snapshot_fetch_does_not_cost_the_leader_its_quorum() {
    use corelog_replica::fetch_hold;
    let opts = corelog_replica::ReplicaOptions {
        compact_bytes: 16 << 10,
        ..options()
    };
    let Three {
        dirs,
        cluster,
        mut nodes,
        leader,
    } = three(&opts, ELECT);
    let li = (leader - 1) as usize;
    for k in 0..60u64 {
        append_retrying(&nodes[li], k % 4, batch(k, 5));
    }
    let (fi, oi) = ((li + 1) % 3, (li + 2) % 3);
    nodes[fi].stop();
    wipe(dirs[fi].path());
    let from = cluster.node(leader).expect("leader's address").replica;
    let before = fetch_hold::held_so_far();
    let held = fetch_hold::hold_fetches(from);
    nodes[fi] = Node::start(fi as u64 + 1, dirs[fi].path(), &cluster, opts.clone());
    let deadline = std::time::Instant::now() + ELECT;
    while fetch_hold::held_so_far() == before {
        assert!(
            std::time::Instant::now() < deadline,
            "the wiped follower never fetched a snapshot's partitions"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    nodes[oi].stop();
    let window = opts.tick * opts.election_ticks as u32 * 10;
    assert_leads_throughout(&nodes[li], None, window, "a follower fetched");
    drop(held);
    for k in 60..64u64 {
        append_retrying(&nodes[li], k % 4, batch(k, 5));
    }
    for p in 0..4u64 {
        let want = stored(&nodes[li].engine(), p);
        wait_stored(&nodes[fi].engine(), p, want.len(), ELECT);
        assert_eq!(stored(&nodes[fi].engine(), p), want, "partition {p}");
    }
}

/// The metadata group's machine applies off the group's loop: a follower
/// whose machine is stuck in an apply (the test holds its lock, as an
/// embedder's machine waits on its engine) goes on answering the leader's
/// heartbeats, so with the other follower down the leader keeps every
/// group and its term. Released, the follower applies the change, and a
/// second one commits on the two of them. (With the machine applied on
/// the loop, the metadata group's leader steps down within an election
/// timeout.)
#[test]
fn a_stuck_metadata_apply_does_not_cost_the_leader_its_quorum() {
    let opts = options();
    let Three {
        dirs: _dirs,
        cluster: _cluster,
        mut nodes,
        leader,
    } = three(&opts, ELECT);
    let li = (leader - 1) as usize;
    let (fi, oi) = ((li + 1) % 3, (li + 2) % 3);
    let stuck = nodes[fi].meta.clone();
    let guard = stuck.inner.lock().expect("lock");
    let base = nodes[li].meta.version();
    nodes[li]
        .handle()
        .propose_meta(base, bytes::Bytes::from_static(b"first"))
        .wait()
        .expect("committed by the leader and the other follower");
    let window = opts.tick * opts.election_ticks as u32;
    std::thread::sleep(window);
    let applied = nodes[fi].handle().status()[0].applied;
    assert!(
        applied < nodes[li].handle().status()[0].applied,
        "the stuck follower applied the change"
    );
    nodes[oi].stop();
    assert_leads_throughout(
        &nodes[li],
        None,
        window * 10,
        "a follower's machine was stuck",
    );
    drop(guard);
    let base = nodes[li].meta.version();
    nodes[li]
        .handle()
        .propose_meta(base, bytes::Bytes::from_static(b"second"))
        .wait()
        .expect("committed by the leader and the released follower");
    let deadline = std::time::Instant::now() + ELECT;
    while stuck.inner.lock().expect("lock").2.len() < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "the follower never applied both"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(
        stuck.inner.lock().expect("lock").2,
        vec![b"first".to_vec(), b"second".to_vec()]
    );
}

/// A node whose directory was wiped has forgotten its votes and what it
/// acknowledged, so it must not elect a node lacking entries it held. Sends
/// commit on the leader and one follower while the other follower is down;
/// then the leader stops and the follower that held them is wiped. The
/// lagging node and the wiped one are a majority, but the wiped one holds
/// back its vote: no leader until the old leader returns, and then every
/// acknowledged send is on every node. (Without the fence the lagging node
/// is elected and the sends are lost: both assertions fail.)
#[test]
fn a_wiped_node_does_not_elect_a_node_lacking_what_it_acknowledged() {
    let opts = options();
    let Three {
        dirs,
        cluster,
        mut nodes,
        leader,
    } = three(&opts, ELECT);
    let li = (leader - 1) as usize;
    let (wi, bi) = ((li + 1) % 3, (li + 2) % 3);
    nodes[bi].stop();
    let mut want_len = [0usize; 4];
    for k in 0..20u64 {
        let b = batch(k, 3);
        want_len[(k % 4) as usize] += b.len();
        append_retrying(&nodes[li], k % 4, b);
    }
    nodes[li].stop();
    nodes[wi].stop();
    wipe(dirs[wi].path());
    nodes[bi] = Node::start(bi as u64 + 1, dirs[bi].path(), &cluster, opts.clone());
    nodes[wi] = Node::start(wi as u64 + 1, dirs[wi].path(), &cluster, opts.clone());

    // Fifteen election timeouts and more: nobody is elected.
    let window = opts.tick * opts.election_ticks as u32 * 15;
    let until = std::time::Instant::now() + window;
    while std::time::Instant::now() < until {
        for i in [bi, wi] {
            let l = nodes[i].handle().leader();
            assert_eq!(
                l,
                None,
                "node {} sees a leader without the acknowledged sends",
                i + 1
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }

    nodes[li] = Node::start(leader, dirs[li].path(), &cluster, opts.clone());
    let all: Vec<&Node> = nodes.iter().collect();
    // Elected: the old leader, or the lagging node once it caught up from
    // it (the data groups follow the metadata group's leader).
    wait_for_leader(&all, ELECT);
    for p in 0..4u64 {
        for n in &nodes {
            wait_stored(&n.engine(), p, want_len[p as usize], ELECT);
            assert_eq!(
                stored(&n.engine(), p).len(),
                want_len[p as usize],
                "partition {p} on node {}",
                n.id
            );
        }
    }
}

/// The same when the wiped node hears the leader and catches up only in
/// part: it is brought back by a snapshot whose fetch is held while it
/// answers the leader's heartbeats (it knows a leader), then its link to
/// the leader is cut and the fetch let go, so it holds the snapshot and
/// not the sends after it, which it had acknowledged. Neither knowing a
/// leader nor holding the snapshot lifts its fence, and holding entries
/// makes it no candidate (`group/fence.rs`): when the leader stops and the
/// lagging node returns, no node lacking the sends leads their group; when
/// the leader returns, every node holds every acknowledged send. (Before
/// the fence kept such a node from standing, it won with the lagging
/// node's vote, and the leader's last sends were cut from every node.)
#[test]
fn a_wiped_node_caught_up_in_part_neither_votes_nor_stands() {
    use corelog_replica::{fetch_hold, link_cut};
    // Elections slow enough that the leader, one follower down, keeps
    // its quorum while the other restarts wiped.
    let opts = corelog_replica::ReplicaOptions {
        compact_bytes: 4 << 10,
        election_ticks: 50,
        ..options()
    };
    let Three {
        dirs,
        cluster,
        mut nodes,
        leader,
    } = three(&opts, ELECT);
    let li = (leader - 1) as usize;
    let (wi, bi) = ((li + 1) % 3, (li + 2) % 3);
    let group = nodes[li].handle().group_of(0) as usize;
    nodes[bi].stop();
    // Sends until the journal was compacted and holds entries past its
    // snapshot: what the wiped node will lack.
    let status = |n: &Node| nodes_status(n, group);
    for k in 0..100u64 {
        append_retrying(&nodes[li], 0, batch(k, 3));
        if k >= 60 {
            // A compaction under way lands meanwhile.
            std::thread::sleep(opts.tick * 5);
            let (snapshot, last) = status(&nodes[li]);
            if snapshot > 0 && snapshot + 2 <= last {
                break;
            }
        }
    }
    let (snapshot, last) = status(&nodes[li]);
    assert!(snapshot > 0 && snapshot + 2 <= last, "{snapshot}, {last}");
    let want = stored(&nodes[li].engine(), 0);

    nodes[wi].stop();
    wipe(dirs[wi].path());
    let addr = |i: usize| cluster.nodes[i].replica;
    let before = fetch_hold::held_so_far();
    let held = fetch_hold::hold_fetches(addr(li));
    nodes[wi] = Node::start(wi as u64 + 1, dirs[wi].path(), &cluster, opts.clone());
    // Its fetch waits: it took the leader's snapshot, so it knows the
    // leader (its published status may not say so until the install).
    wait_until(ELECT, "no snapshot's fetch", || {
        fetch_hold::held_so_far() > before
    });
    std::thread::sleep(opts.tick * 10);
    let cut = link_cut::cut_link(addr(li), addr(wi));
    drop(held);
    wait_until(ELECT, "no snapshot installed", || status(&nodes[wi]).0 > 0);
    let (_, held_last) = status(&nodes[wi]);
    let (_, last) = status(&nodes[li]);
    assert!(held_last < last, "caught up: {held_last} of {last}");

    nodes[li].stop();
    nodes[bi] = Node::start(bi as u64 + 1, dirs[bi].path(), &cluster, opts.clone());
    let window = opts.tick * opts.election_ticks as u32 * 5;
    let until = std::time::Instant::now() + window;
    while std::time::Instant::now() < until {
        for i in [bi, wi] {
            // The stopped leader, until a node forgets it, or none.
            let l = nodes[i].handle().status()[group].leader;
            let lacking = l.is_some_and(|l| l != leader);
            assert!(
                !lacking,
                "node {} sees node {l:?} lead, lacking the sends",
                i + 1
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }

    nodes[li] = Node::start(leader, dirs[li].path(), &cluster, opts.clone());
    drop(cut);
    wait_for_leader(&nodes.iter().collect::<Vec<_>>(), ELECT);
    for n in &nodes {
        wait_stored(&n.engine(), 0, want.len(), ELECT);
        assert_eq!(stored(&n.engine(), 0), want, "node {}", n.id);
    }

    // Caught up, it votes again: without the leader (unless it leads,
    // which it could only by a majority's vote), the two others elect one.
    wait_until(ELECT, "never caught up", || {
        status(&nodes[wi]).1 >= status(&nodes[li]).1
    });
    std::thread::sleep(opts.tick * 10);
    let now = wait_for_leader(&nodes.iter().collect::<Vec<_>>(), ELECT);
    let gone = if now == wi as u64 + 1 {
        bi
    } else {
        (now - 1) as usize
    };
    nodes[gone].stop();
    let two: Vec<&Node> = nodes.iter().filter(|n| n.id != gone as u64 + 1).collect();
    let next = wait_for_leader(&two, Duration::from_secs(20));
    append_retrying(&nodes[(next - 1) as usize], 0, batch(1000, 3));
}

/// Group `group`'s snapshot and last indexes on `node`.
fn nodes_status(node: &Node, group: usize) -> (u64, u64) {
    let v = &node.handle().status()[group];
    (v.snapshot, v.last_index)
}

/// A send repeated after "not committed" (same client, session and request
/// number, as Iggy's SDK repeats it, not knowing whether the first was
/// stored) is stored once: the repeat waits for the first send's entry and
/// answers with its acknowledgement; a new request number is a new send.
#[test]
fn a_repeated_send_is_stored_once() {
    // Commits time out fast; the leader keeps its leadership for 3 s
    // without a majority (check-quorum), long enough for the followers to
    // come back.
    let opts = corelog_replica::ReplicaOptions {
        commit_timeout: Duration::from_millis(200),
        election_ticks: 150,
        ..options()
    };
    let Three {
        dirs,
        cluster,
        mut nodes,
        leader,
    } = three(&opts, Duration::from_secs(20));
    let li = (leader - 1) as usize;
    let h = nodes[li].handle();
    let first = batch(1, 3);
    let ack = append_retrying(&nodes[li], 0, first.clone());
    assert_eq!(ack.base_offset, 0);

    // No majority: the send's outcome is unknown, and so is its repeat's.
    let followers: Vec<usize> = (0..3).filter(|&i| i != li).collect();
    for &f in &followers {
        nodes[f].stop();
    }
    let send = batch(2, 4);
    let o = corelog_replica::Origin {
        client: 42,
        session: 1,
        request: 7,
    };
    for _ in 0..2 {
        let r = pollster::block_on(h.append(0, send.clone(), o));
        assert!(matches!(r, Err(ReplicaError::NotCommitted)), "{r:?}");
    }
    for &f in &followers {
        nodes[f] = Node::start(f as u64 + 1, dirs[f].path(), &cluster, opts.clone());
    }
    // The client repeats until it has an answer, as the SDK does.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let acked = loop {
        match pollster::block_on(h.append(0, send.clone(), o)) {
            Ok(a) => break a,
            Err(ReplicaError::NotCommitted) if std::time::Instant::now() < deadline => {}
            Err(e) => panic!("repeat: {e}"),
        }
    };
    assert_eq!(acked.base_offset, 3, "stored after the first batch");
    // Stored: a repeat is answered at once with the same acknowledgement.
    let again = pollster::block_on(h.append(0, send.clone(), o)).expect("repeat");
    assert_eq!(again, acked);
    // The next request is a new send.
    let next = batch(3, 2);
    let o2 = corelog_replica::Origin { request: 8, ..o };
    let ack2 = pollster::block_on(h.append(0, next.clone(), o2)).expect("next send");
    assert_eq!(ack2.base_offset, 7, "the repeats took no offsets");

    // Every node holds each batch once.
    let want = first.len() + send.len() + next.len();
    for n in &nodes {
        wait_stored(&n.engine(), 0, want, Duration::from_secs(20));
        assert_eq!(
            stored(&n.engine(), 0).len(),
            want,
            "partition 0 on node {}",
            n.id
        );
    }
}

/// A repeat that arrives while its send's entry waits to commit (the
/// leader cut off from its followers for a moment) takes the send's place:
/// the first call is told its outcome is unknown (the SDK repeats only
/// once it gave up on it), and the repeat waits for that entry, answered
/// with its acknowledgement once the links heal; the batch is stored once.
#[test]
fn a_repeat_while_its_send_is_pending_waits_for_that_entry() {
    let opts = corelog_replica::ReplicaOptions {
        commit_timeout: Duration::from_secs(10),
        election_ticks: 150,
        ..options()
    };
    let Three {
        dirs: _dirs,
        cluster,
        nodes,
        leader,
    } = three(&opts, Duration::from_secs(20));
    let li = (leader - 1) as usize;
    let first = batch(1, 3);
    append_retrying(&nodes[li], 0, first.clone());

    let cuts = cut_off(&cluster, li);
    let (send, o) = (
        batch(2, 4),
        corelog_replica::Origin {
            client: 42,
            session: 1,
            request: 7,
        },
    );
    let sent = || {
        let (h, send) = (nodes[li].handle(), send.clone());
        let (answer, answered) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = answer.send(pollster::block_on(h.append(0, send, o)));
        });
        answered
    };
    let call = sent();
    wait_until(ELECT, "the send not written", || {
        nodes[li]
            .engine()
            .stats(0)
            .wait()
            .expect("stats")
            .end_offset
            >= 7
    });
    let repeat = sent();
    let r = call.recv_timeout(ELECT).expect("the first call answered");
    assert!(matches!(r, Err(ReplicaError::NotCommitted)), "{r:?}");
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        repeat.try_recv().is_err(),
        "the repeat answered while cut off"
    );
    drop(cuts);

    let r = repeat.recv_timeout(opts.commit_timeout).expect("answered");
    assert_eq!(r.expect("stored").base_offset, 3);
    let want = first.len() + send.len();
    for n in &nodes {
        wait_stored(&n.engine(), 0, want, ELECT);
        assert_eq!(stored(&n.engine(), 0).len(), want, "node {}", n.id);
    }
}

/// The journal's durable point follows the fsync policy: under `batch`
/// every node's journal is synced to its last index before an entry
/// counts as held; under `interval` it follows on the interval; a
/// `never` node's stays where its opening left it.
#[test]
fn the_journals_durable_point_follows_the_fsync_policy() {
    let synced_to_last = |n: &Node| {
        n.handle()
            .status()
            .iter()
            .filter(|v| v.group > 0)
            .all(|v| v.synced == v.last_index && v.last_index > 2)
    };
    for (policy, sync, every) in [
        ("batch", true, None),
        ("interval", false, Some(Duration::from_millis(100))),
        ("never", false, None),
    ] {
        let opts = corelog_replica::ReplicaOptions {
            sync,
            sync_every: every,
            ..options()
        };
        let Three {
            dirs: _dirs,
            nodes,
            leader,
            ..
        } = three(&opts, ELECT);
        let h = nodes[(leader - 1) as usize].handle();
        for k in 0..8u64 {
            pollster::block_on(h.append(k % 2, batch(k, 2), origin())).expect("append");
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        let mut all = false;
        while !all && std::time::Instant::now() < deadline {
            all = nodes.iter().all(&synced_to_last);
            if policy == "never" {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        // No node acknowledged an entry past its journal's durable point
        // (a Ready's persisted messages sent before its sync are refused
        // at the send, and counted).
        for n in &nodes {
            for v in n.handle().status() {
                assert_eq!(
                    v.early_acks, 0,
                    "{policy}: node {} group {}: early acknowledgements",
                    n.id, v.group
                );
            }
        }
        match policy {
            "batch" => assert!(
                synced_to_last(&nodes[(leader - 1) as usize]),
                "batch: the leader synced before acknowledging"
            ),
            "interval" => assert!(all, "interval: every journal synced within 5 s"),
            _ => assert!(
                nodes.iter().all(|n| n
                    .handle()
                    .status()
                    .iter()
                    .filter(|v| v.group > 0)
                    .all(|v| v.synced < v.last_index)),
                "never: no journal synced its entries"
            ),
        }
    }
}

/// Without a per-write sync, a data group's compaction flushes its
/// partitions before the journal drops the entries' pointers, so that what
/// its snapshot names is durable (`group/snapshot.rs`): no sync before the
/// first compaction, and a sync of the partition on every node by the time
/// each compacted.
#[test]
fn a_compaction_without_per_write_sync_flushes_the_partitions_first() {
    let opts = corelog_replica::ReplicaOptions {
        sync: false,
        compact_bytes: 4 << 10,
        ..options()
    };
    let Three {
        dirs: _dirs,
        nodes,
        leader,
        ..
    } = three(&opts, ELECT);
    let li = (leader - 1) as usize;
    let syncs = |n: &Node| n.engine().stats(0).wait().expect("stats").syncs;
    let group = nodes[li].handle().group_of(0) as usize;
    let snapshot = |n: &Node| n.handle().status()[group].snapshot;
    append_retrying(&nodes[li], 0, batch(0, 2));
    for n in &nodes {
        wait_stored(&n.engine(), 0, stored(&nodes[li].engine(), 0).len(), ELECT);
        assert_eq!((snapshot(n), syncs(n)), (0, 0), "node {}: before", n.id);
    }
    for k in 1..60u64 {
        append_retrying(&nodes[li], 0, batch(k, 2));
    }
    for n in &nodes {
        let deadline = std::time::Instant::now() + ELECT;
        while snapshot(n) == 0 {
            assert!(std::time::Instant::now() < deadline, "node {}", n.id);
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(syncs(n) > 0, "node {}: compacted, never flushed", n.id);
    }
}

/// Without a per-write sync, the leader sends each batch of at least
/// `send_by_reference` bytes to its followers from the segment file it
/// wrote (`sendfile`), and every node stores the same bytes; under
/// `fsync=batch`, or with it off, everything goes from memory.
#[test]
fn a_leader_without_per_write_sync_sends_batches_from_its_files() {
    let sent_from_files = |nodes: &[Node]| -> u64 {
        nodes
            .iter()
            .flat_map(|n| n.handle().status())
            .map(|v| v.sent_from_files)
            .sum()
    };
    for (policy, sync, by_reference) in [
        ("never", false, Some(1)),
        ("batch", true, Some(1)),
        ("off", false, None),
    ] {
        let opts = corelog_replica::ReplicaOptions {
            sync,
            send_by_reference: by_reference,
            ..options()
        };
        let Three {
            dirs: _dirs,
            nodes,
            leader,
            ..
        } = three(&opts, ELECT);
        let h = nodes[(leader - 1) as usize].handle();
        // The followers connected and following before the count starts.
        pollster::block_on(h.append(0, batch(0, 2), origin())).expect("append");
        for n in &nodes {
            wait_stored(&n.engine(), 0, stored(&nodes[0].engine(), 0).len(), ELECT);
        }
        let before = sent_from_files(&nodes);
        let mut past_headers = 0u64;
        // All in flight at once, so that a Ready holds several entries
        // (each must go with its own file range).
        let replies: Vec<_> = (1..=20u64)
            .map(|k| {
                let b = batch(k, 1 + (k % 7) as u32);
                past_headers += (b.len() - corelog::BATCH_HEADER_LEN) as u64;
                h.append(k % 4, b, origin())
            })
            .collect();
        for r in replies {
            pollster::block_on(r).expect("append");
        }
        for p in 0..4u64 {
            let want = stored(&nodes[(leader - 1) as usize].engine(), p);
            for n in &nodes {
                wait_stored(&n.engine(), p, want.len(), ELECT);
                assert_eq!(
                    stored(&n.engine(), p),
                    want,
                    "{policy}: partition {p} on node {}",
                    n.id
                );
            }
        }
        let sent = sent_from_files(&nodes) - before;
        for n in &nodes {
            for v in n.handle().status() {
                assert_eq!(
                    v.refused_messages, 0,
                    "{policy}: node {} group {}: messages whose batches did not verify",
                    n.id, v.group
                );
            }
        }
        match policy {
            // Each batch to each follower at most once from its file (a
            // resend goes from memory), and to at least one of them.
            "never" => assert!(
                (past_headers..=2 * past_headers).contains(&sent),
                "never: {sent} bytes sent from files, for {past_headers} past the headers"
            ),
            _ => assert_eq!(sent, 0, "{policy}: bytes sent from files"),
        }
    }
}
