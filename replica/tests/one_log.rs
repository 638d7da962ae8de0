//! The partition logs are the replicated log: a batch is written once per
//! node, before its entry commits, and served only after. Three nodes in
//! one process on loopback.

mod common;

use common::*;
use corelog::replication::ReplicaLog;
use corelog_replica::{AtOpen, ReplicaError, ReplicaOptions};
use std::time::Duration;

const ELECT: Duration = Duration::from_secs(10);

/// Elections slow enough that a leader whose followers just stopped still
/// leads for a second: long enough to write an entry no one else holds.
fn slow_elections() -> ReplicaOptions {
    ReplicaOptions {
        election_ticks: 50,
        commit_timeout: Duration::from_secs(2),
        ..options()
    }
}

/// Three nodes that stored three sends in partition 1, then one follower
/// stopped: the leader's and the follower's indexes.
struct Stopped {
    dirs: Vec<tempfile::TempDir>,
    cluster: corelog_replica::ClusterConfig,
    nodes: Vec<Node>,
    li: usize,
    fi: usize,
}

fn three_sends_then_a_follower_stopped(opts: &ReplicaOptions) -> Stopped {
    three_sends_then_a_follower_stopped_once(opts, |_, _| {})
}

/// The same, `ready` waited for (given the nodes and the follower) before
/// the follower stops.
fn three_sends_then_a_follower_stopped_once(
    opts: &ReplicaOptions,
    ready: impl Fn(&[Node], usize),
) -> Stopped {
    init_log();
    let Three {
        dirs,
        cluster,
        mut nodes,
        leader,
    } = three(opts, ELECT);
    let li = (leader - 1) as usize;
    for tag in 0..3 {
        append_retrying(&nodes[li], 1, batch(tag, 2));
    }
    let want = stored(&nodes[li].engine(), 1);
    for n in &nodes {
        wait_stored(&n.engine(), 1, want.len(), ELECT);
    }
    let fi = (li + 1) % 3;
    ready(&nodes, fi);
    nodes[fi].stop();
    Stopped {
        dirs,
        cluster,
        nodes,
        li,
        fi,
    }
}

/// What the open of `node` found in its data groups, summed.
fn at_open(node: &Node) -> AtOpen {
    let views = node.handle().status();
    let mut sum = AtOpen::default();
    for v in views.iter().filter(|v| v.group > 0) {
        sum.filled += v.at_open.filled;
        sum.converted += v.at_open.converted;
        sum.logs_cut += v.at_open.logs_cut;
        sum.journal_cut |= v.at_open.journal_cut;
        sum.short_logs += v.at_open.short_logs;
    }
    sum
}

/// The engine alone on a stopped node's directory, as the replica opens it.
fn open_engine(
    dir: &std::path::Path,
    cluster: &corelog_replica::ClusterConfig,
    opts: &ReplicaOptions,
) -> corelog::Engine {
    let mut config = corelog::Config::new(dir);
    config.shards = Some(cluster.shards);
    config.pin_threads = false;
    config.log = opts.log_config(config.log);
    corelog::Engine::open(config).expect("engine opens")
}

/// Whether the bytes of `engine`'s `partition` that are served hold a
/// payload of the batch tagged `tag`.
fn serves_tag(engine: &corelog::Handle, partition: u64, tag: u64) -> bool {
    let needle = format!("{tag}:0:");
    stored(engine, partition)
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

/// The two nodes other than the old `leader` elect one, which stores a
/// batch tagged 77 at the offsets after `first`'s: its place in `nodes`,
/// and the acknowledgement.
fn new_leader_stores_at_the_same_offsets(
    nodes: &[Node],
    leader: u64,
    first: &corelog::AppendAck,
) -> (usize, corelog::AppendAck) {
    let survivors: Vec<&Node> = nodes.iter().filter(|n| n.id != leader).collect();
    let ni = (wait_for_leader(&survivors, ELECT) - 1) as usize;
    let replaced = append_retrying(&nodes[ni], 1, batch(77, 3));
    let want = first.base_offset + u64::from(first.message_count);
    assert_eq!(replaced.base_offset, want, "the same offsets");
    (ni, replaced)
}

/// Every node comes to serve what node `ni` serves of partition 1: the
/// batch tagged 77 and none tagged `cut`, and its log ends at `end`,
/// nothing of the cut batches left.
fn every_node_holds_the_new_leaders_bytes(nodes: &[Node], ni: usize, cut: &[u64], end: u64) {
    let want = stored(&nodes[ni].engine(), 1);
    for n in nodes {
        wait_stored(&n.engine(), 1, want.len(), ELECT);
        assert_eq!(stored(&n.engine(), 1), want, "node {}", n.id);
        for &tag in cut {
            assert!(!serves_tag(&n.engine(), 1, tag), "node {}: {tag}", n.id);
        }
        assert!(serves_tag(&n.engine(), 1, 77), "node {}", n.id);
        let stats = n.engine().stats(1).wait().expect("stats");
        assert_eq!(stats.end_offset, end, "node {}: a remnant", n.id);
    }
}

/// A leader cut off from its followers writes a send into its partition's
/// log, where no poll sees it; a new leader elected without it stores
/// another batch at the same offsets; when the old leader comes back, it
/// cuts the batch it wrote and holds the new leader's bytes.
#[test]
fn an_uncommitted_batch_is_never_served_and_is_cut_when_a_new_leader_replaces_it() {
    init_log();
    let opts = slow_elections();
    let Three {
        dirs,
        cluster,
        mut nodes,
        leader,
    } = three(&opts, ELECT);
    let li = (leader - 1) as usize;
    let first = append_retrying(&nodes[li], 1, batch(10, 3));
    let committed = stored(&nodes[li].engine(), 1);
    for n in &nodes {
        wait_stored(&n.engine(), 1, committed.len(), ELECT);
    }

    // The followers stop; the leader takes a send that cannot commit.
    for (i, n) in nodes.iter_mut().enumerate() {
        if i != li {
            n.stop();
        }
    }
    let lost = pollster::block_on(nodes[li].handle().append(1, batch(66, 3), origin()));
    assert!(
        matches!(lost, Err(ReplicaError::NotCommitted)),
        "a send no follower holds: {lost:?}"
    );
    // Written into the log (one write per byte), never served.
    let end = nodes[li]
        .engine()
        .stats(1)
        .wait()
        .expect("stats")
        .end_offset;
    assert_eq!(end, first.base_offset + 3 + 3, "the batch was written");
    assert!(
        !serves_tag(&nodes[li].engine(), 1, 66),
        "an uncommitted batch was served"
    );
    assert_eq!(stored(&nodes[li].engine(), 1), committed);
    nodes[li].stop();

    // The two others elect a leader and store another batch there.
    for (i, n) in nodes.iter_mut().enumerate() {
        if i != li {
            *n = Node::start(n.id, dirs[i].path(), &cluster, opts.clone());
        }
    }
    let (ni, replaced) = new_leader_stores_at_the_same_offsets(&nodes, leader, &first);

    // The old leader comes back as a follower: the new leader's bytes
    // replace its own.
    nodes[li] = Node::start(leader, dirs[li].path(), &cluster, opts.clone());
    every_node_holds_the_new_leaders_bytes(&nodes, ni, &[66], replaced.base_offset + 3);
}

/// The same without a restart anywhere, as a network partition makes it:
/// a leader cut off from its followers while it runs takes three sends
/// into its log that cannot commit, and the two others elect a leader that
/// stores one batch of its own. When the links heal, the old leader, still
/// running, learns the new term and, as the new leader's entries replace
/// its own, cuts its batches from the log and writes theirs
/// (`group/write.rs`): every node serves the same bytes, the cut batches on
/// none. The three sends are answered "not accepted" as their entries are
/// replaced (`overwritten.rs`), the last one too, which lies past the new
/// leader's log: not left waiting for the commit timeout (then "not
/// committed", a send that might be stored). The next send commits on all
/// three nodes.
#[test]
fn a_leader_partitioned_while_running_has_its_uncommitted_batches_replaced_in_place() {
    partitioned_leader_rejoins(Rejoin::ByEntries);
}

/// The same, the new leader's journal compacted past the old leader's
/// entries while the links are cut: the old leader is brought back by a
/// snapshot and its partitions fetched from the new leader
/// (`group/install.rs`), which first cuts the batches past its commit
/// mark, the three it wrote, and fetches from there. The three sends are
/// answered when the snapshot is installed, not at the commit timeout:
/// "not committed", since a node that holds only a snapshot where their
/// entries were cannot tell whether they were stored.
#[test]
fn a_partitioned_leader_brought_back_by_a_snapshot_cuts_its_uncommitted_batches() {
    partitioned_leader_rejoins(Rejoin::BySnapshot);
}

/// How the partitioned leader of [`partitioned_leader_rejoins`] catches up.
#[derive(PartialEq)]
enum Rejoin {
    /// The new leader's entries: one send stored while it was cut off.
    ByEntries,
    /// A snapshot: 60 sends stored, journals compacted past 4 KiB.
    BySnapshot,
}

/// [`a_leader_partitioned_while_running_has_its_uncommitted_batches_replaced_in_place`],
/// the old leader catching up as `rejoin` says.
fn partitioned_leader_rejoins(rejoin: Rejoin) {
    init_log();
    let (compact_bytes, sends) = match rejoin {
        Rejoin::ByEntries => (u64::MAX, 1),
        Rejoin::BySnapshot => (4 << 10, 60),
    };
    let opts = ReplicaOptions {
        commit_timeout: Duration::from_secs(60),
        compact_bytes,
        ..slow_elections()
    };
    let Three {
        dirs: _dirs,
        cluster,
        nodes,
        leader,
    } = three(&opts, ELECT);
    let li = (leader - 1) as usize;
    let first = append_retrying(&nodes[li], 1, batch(10, 3));
    let committed = stored(&nodes[li].engine(), 1);
    for n in &nodes {
        wait_stored(&n.engine(), 1, committed.len(), ELECT);
    }

    let addr = |i: usize| cluster.nodes[i].replica;
    let cuts = cut_off(&cluster, li);
    let end = |n: &Node| n.engine().stats(1).wait().expect("stats").end_offset;
    let (answer, answers) = std::sync::mpsc::channel();
    for tag in [66, 67, 68] {
        let (h, answer) = (nodes[li].handle(), answer.clone());
        std::thread::spawn(move || {
            let r = pollster::block_on(h.append(1, batch(tag, 3), origin()));
            let _ = answer.send((tag, r));
        });
        // One after the other, so the three take consecutive entries.
        let want = first.base_offset + 3 * (tag - 64);
        wait_until(ELECT, &format!("send {tag} not written"), || {
            end(&nodes[li]) >= want
        });
    }
    assert_eq!(end(&nodes[li]), first.base_offset + 12, "all three written");
    for tag in [66, 67, 68] {
        assert!(
            !serves_tag(&nodes[li].engine(), 1, tag),
            "served uncommitted"
        );
    }

    let (ni, replaced) = new_leader_stores_at_the_same_offsets(&nodes, leader, &first);
    for k in 1..sends {
        append_retrying(&nodes[ni], 1, batch(1000 + k, 3));
    }
    let new_end = replaced.base_offset + 3 * sends;
    assert_eq!(
        end(&nodes[li]),
        first.base_offset + 12,
        "cut off: untouched"
    );
    assert!(answers.try_recv().is_err(), "answered while cut off");
    let group = nodes[li].handle().group_of(1) as usize;
    let (old, new) = (nodes[li].handle().status(), nodes[ni].handle().status());
    if rejoin == Rejoin::BySnapshot {
        assert!(
            new[group].snapshot >= old[group].last_index,
            "the new leader compacted past the old one's entries"
        );
    }

    // Fetches from the new leader held: a snapshot's install waits there.
    let fetches = corelog_replica::fetch_hold::hold_fetches(addr(ni));
    drop(cuts);
    if rejoin == Rejoin::BySnapshot {
        wait_until(ELECT, "no snapshot's fetch", || {
            corelog_replica::fetch_hold::held_so_far() > 0
        });
    }
    drop(fetches);
    every_node_holds_the_new_leaders_bytes(&nodes, ni, &[66, 67, 68], new_end);
    for _ in 0..3 {
        // Well before the commit timeout, which answers "not committed".
        let (tag, r) = answers
            .recv_timeout(opts.commit_timeout / 2)
            .expect("an answer before the commit timeout");
        let told = match rejoin {
            Rejoin::ByEntries => matches!(r, Err(ReplicaError::NotLeader { .. })),
            Rejoin::BySnapshot => matches!(r, Err(ReplicaError::NotCommitted)),
        };
        assert!(told, "send {tag}, replaced: {r:?}");
    }

    // The old leader takes the next send with the others.
    let lead = wait_for_leader(&nodes.iter().collect::<Vec<_>>(), ELECT);
    let after = append_retrying(&nodes[(lead - 1) as usize], 1, batch(88, 2));
    assert_eq!(after.base_offset, new_end);
    let want = stored(&nodes[(lead - 1) as usize].engine(), 1);
    for n in &nodes {
        wait_stored(&n.engine(), 1, want.len(), ELECT);
        assert_eq!(stored(&n.engine(), 1), want, "node {}", n.id);
    }
}

/// A crash after a batch reached its partition's log and before its
/// pointer reached the journal leaves a batch no entry names (this node
/// never acknowledged it): the restart cuts it from the log, and the node
/// goes on with the leader's bytes.
#[test]
fn a_restart_cuts_a_written_batch_the_journal_does_not_point_at() {
    let opts = options();
    let Stopped {
        dirs,
        cluster,
        mut nodes,
        li,
        fi,
    } = three_sends_then_a_follower_stopped(&opts);

    // The stray batch, written where the next send would go.
    {
        let engine = open_engine(dirs[fi].path(), &cluster, &opts);
        let stats = engine.handle().stats(1).wait().expect("stats");
        let end = stats.end_offset;
        let stray = corelog::Batch::admit(batch(99, 2), &corelog::Limits::default())
            .expect("admit")
            .into_stamped(corelog::Stamp {
                partition_id: 1,
                base_offset: end,
                base_timestamp: stats.last_timestamp + 1,
            });
        engine
            .handle()
            .append_stamped(1, stray)
            .wait()
            .expect("stray written");
        engine.shutdown().expect("shutdown");
    }

    nodes[fi] = Node::start(fi as u64 + 1, dirs[fi].path(), &cluster, opts.clone());
    // The open says what it found and cut: the three sends' batches read
    // back, one partition log cut, the journal whole.
    let found = AtOpen {
        filled: 3,
        logs_cut: 1,
        ..AtOpen::default()
    };
    assert_eq!(at_open(&nodes[fi]), found);
    let all: Vec<&Node> = nodes.iter().collect();
    wait_for_leader(&all, ELECT);
    let ack = append_retrying(&nodes[li], 1, batch(7, 2));
    let want = stored(&nodes[li].engine(), 1);
    wait_stored(&nodes[fi].engine(), 1, want.len(), ELECT);
    assert_eq!(stored(&nodes[fi].engine(), 1), want);
    assert!(
        !serves_tag(&nodes[fi].engine(), 1, 99),
        "the stray batch was served"
    );
    let end = nodes[fi]
        .engine()
        .stats(1)
        .wait()
        .expect("stats")
        .end_offset;
    assert_eq!(end, ack.base_offset + 2, "the stray batch was cut");
}

/// Retention deletes the oldest segments while the journal still points
/// into them: a restart keeps every entry (it compacts the journal past
/// the deleted batches instead of taking them for damage), and every node
/// still serves what it stored and takes the next send.
#[test]
fn a_restart_after_retention_deleted_journaled_batches_loses_nothing() {
    init_log();
    let opts = options();
    let dirs: Vec<_> = (0..3)
        .map(|_| tempfile::tempdir().expect("tempdir"))
        .collect();
    let cluster = cluster(3);
    let small = |c: &mut corelog::Config| c.log.segment_bytes = 4096;
    let start =
        |i: usize| Node::start_with(i as u64 + 1, dirs[i].path(), &cluster, opts.clone(), small);
    let mut nodes: Vec<Node> = (0..3).map(start).collect();
    let leader = wait_for_leader(&nodes.iter().collect::<Vec<_>>(), ELECT);
    let li = (leader - 1) as usize;
    for tag in 0..24 {
        append_retrying(&nodes[li], 1, batch(tag, 3));
    }
    let segments = nodes[li].engine().stats(1).wait().expect("stats").segments;
    assert!(segments >= 3, "{segments} segments");
    let gone = pollster::block_on(nodes[li].handle().delete_segments(1, 1)).expect("deleted");
    assert_eq!(gone, 1);
    let want = stored(&nodes[li].engine(), 1);
    // Every node applies the deletion (a follower may not have yet).
    for n in &nodes {
        let deadline = std::time::Instant::now() + ELECT;
        while stored(&n.engine(), 1).len() != want.len() {
            assert!(
                std::time::Instant::now() < deadline,
                "node {}: holds {} bytes, the leader {}",
                n.id,
                stored(&n.engine(), 1).len(),
                want.len()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(stored(&n.engine(), 1), want, "node {}", n.id);
    }

    for n in nodes.iter_mut() {
        n.stop();
    }
    nodes = (0..3).map(start).collect();
    for n in &nodes {
        // A clean stop: every log ends where its journal says; nothing cut.
        let found = at_open(n);
        assert_eq!(
            (found.logs_cut, found.journal_cut, found.short_logs),
            (0, false, 0),
            "node {}: {found:?}",
            n.id
        );
    }
    let leader = wait_for_leader(&nodes.iter().collect::<Vec<_>>(), ELECT);
    let li = (leader - 1) as usize;
    let ack = append_retrying(&nodes[li], 1, batch(100, 3));
    assert_eq!(ack.base_offset, 24 * 3, "the offsets go on");
    let after = stored(&nodes[li].engine(), 1);
    assert_eq!(&after[..want.len()], &want[..], "what was stored is served");
    for n in &nodes {
        wait_stored(&n.engine(), 1, after.len(), ELECT);
        assert_eq!(stored(&n.engine(), 1), after, "node {}", n.id);
    }
}

/// A version-02 journal holds each send's batch whole, and its batches
/// reached the partition logs only when applied. Opened now, it is
/// converted as it is read: an entry whose batch its log lacks (never
/// applied) is written into the log, and every node serves what it held.
#[test]
fn a_version_02_journal_is_converted_at_open() {
    use corelog_replica::journal::record::{self, Kind};
    init_log();
    let opts = options();
    let dir = tempfile::tempdir().expect("tempdir");
    let cluster = cluster(1);
    let mut node = Node::start(1, dir.path(), &cluster, opts.clone());
    wait_for_leader(&[&node], ELECT);
    let acks: Vec<_> = (0..3)
        .map(|tag| append_retrying(&node, 1, batch(tag, 2)))
        .collect();
    let want = stored(&node.engine(), 1);
    node.stop();

    // Rewrite the journals as version 02 wrote them (every pointer record
    // a whole batch record), and take the last batch out of its log, as
    // if it was committed but not yet applied when version 02 stopped.
    let mut config = corelog::Config::new(dir.path());
    config.shards = Some(cluster.shards);
    config.pin_threads = false;
    config.log = opts.log_config(config.log);
    let engine = corelog::Engine::open(config).expect("engine opens");
    let mut rewritten = 0;
    for group in std::fs::read_dir(dir.path().join("replica"))
        .expect("replica")
        .flatten()
    {
        for f in std::fs::read_dir(group.path()).expect("group").flatten() {
            if f.path().extension().is_none_or(|x| x != "log") {
                continue;
            }
            let bytes = bytes::Bytes::from(std::fs::read(f.path()).expect("read"));
            let (mut at, mut out) = (0, Vec::new());
            while at < bytes.len() {
                let mut d = record::decode(&bytes.slice(at..)).expect("record");
                let kind = match d.pointer {
                    Some(p) => {
                        d.entry.data = engine
                            .handle()
                            .read_written(1, p.base_offset)
                            .wait()
                            .expect("read")
                            .expect("the batch it points at")
                            .into();
                        rewritten += 1;
                        Kind::VerifiedBatch
                    }
                    None => Kind::Plain,
                };
                out.extend(
                    record::encode_parts(&d.entry, d.prev_term, kind)
                        .slices()
                        .concat(),
                );
                at += d.len;
            }
            std::fs::write(f.path(), out).expect("write");
        }
    }
    assert_eq!(rewritten, 3, "one pointer record per send");
    let last = acks.last().expect("acks").base_offset;
    engine.handle().cut_suffix(1, last).wait().expect("cut");
    assert_eq!(
        engine.handle().stats(1).wait().expect("stats").end_offset,
        last
    );
    engine.shutdown().expect("shutdown");

    let node = Node::start(1, dir.path(), &cluster, opts);
    // The batch missing from its log written into it.
    let found = AtOpen {
        converted: 1,
        ..AtOpen::default()
    };
    assert_eq!(at_open(&node), found);
    wait_for_leader(&[&node], ELECT);
    wait_stored(&node.engine(), 1, want.len(), ELECT);
    assert_eq!(stored(&node.engine(), 1), want, "every send served again");
    let next = append_retrying(&node, 1, batch(9, 2));
    assert_eq!(next.base_offset, last + 2, "the offsets go on");
}

/// The commit index is persisted lazily (with an election's term or vote),
/// so a power cut can leave it naming an entry whose pointer is durable and
/// whose batch is not (the two are written side by side). The restart cuts
/// that entry from the journal (reconcile) and must lower the commit index
/// with it: raft-rs refuses a commit past the log, and the group would not
/// start on that node. Found by the cluster simulation (`simulation.rs`).
#[test]
fn a_restart_that_cuts_an_entry_below_the_persisted_commit_starts_and_catches_up() {
    let opts = options();
    let Stopped {
        dirs,
        cluster,
        mut nodes,
        li: _,
        fi,
    } = three_sends_then_a_follower_stopped(&opts);

    // As a power cut can leave them: the last batch gone from the log, its
    // pointer in the journal, and a hard state naming it committed.
    {
        let engine = open_engine(dirs[fi].path(), &cluster, &opts);
        let end = engine.handle().stats(1).wait().expect("stats").end_offset;
        let cut = engine.handle().cut_suffix(1, end - 2).wait().expect("cut");
        assert!(cut.is_some(), "the last batch was cut");
        engine.shutdown().expect("shutdown");
    }
    let group = 1 + (1 % cluster.shards) as u32;
    let gdir = dirs[fi]
        .path()
        .join("replica")
        .join(format!("group-{group}"));
    {
        let conf = raft::eraftpb::ConfState::from((cluster.ids(), vec![]));
        let (mut journal, _) =
            corelog_replica::journal::Journal::open(&gdir, &conf).expect("journal opens");
        let mut hs = journal.hard_state().clone();
        hs.term += 1;
        hs.vote = 0;
        hs.commit = journal.last_index();
        journal.set_hard_state(&hs).expect("hard state written");
        journal.sync().expect("synced");
    }

    nodes[fi] = Node::start(fi as u64 + 1, dirs[fi].path(), &cluster, opts.clone());
    // Two entries' batches read back, the journal cut at the third.
    let found = AtOpen {
        filled: 2,
        journal_cut: true,
        ..AtOpen::default()
    };
    assert_eq!(at_open(&nodes[fi]), found);
    let all: Vec<&Node> = nodes.iter().collect();
    let leader = wait_for_leader(&all, ELECT);
    let li = (leader - 1) as usize;
    append_retrying(&nodes[li], 1, batch(7, 2));
    let want = stored(&nodes[li].engine(), 1);
    for n in &nodes {
        wait_stored(&n.engine(), 1, want.len(), ELECT);
        assert_eq!(stored(&n.engine(), 1), want, "node {}", n.id);
    }
}

/// Under a policy that does not sync each write, a power cut can take
/// bytes a compacted journal's snapshot names: the open finds the log
/// short of that end, and says so (a warning, and the count in the
/// group's status) rather than passing over it. Made here by emptying a
/// stopped follower's log below its snapshot, as a lost page cache would.
#[test]
fn an_open_reports_a_log_short_of_its_snapshot() {
    let opts = ReplicaOptions {
        sync: false,
        compact_bytes: 1,
        ..options()
    };
    // The follower's journal compacted past its three sends: its snapshot
    // names the partition's end.
    let compacted = |nodes: &[Node], fi: usize| {
        let deadline = std::time::Instant::now() + ELECT;
        loop {
            let v = nodes[fi].handle().status()[1 + nodes[fi].engine().shard_of(1)];
            if v.snapshot >= v.applied && v.applied > 0 {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "not compacted: {v}");
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let Stopped {
        dirs,
        cluster,
        mut nodes,
        li: _,
        fi,
    } = three_sends_then_a_follower_stopped_once(&opts, compacted);
    {
        let engine = open_engine(dirs[fi].path(), &cluster, &opts);
        let end = engine.handle().stats(1).wait().expect("stats").end_offset;
        assert_eq!(end, 6, "three sends of two messages");
        let cut = engine.handle().cut_suffix(1, 2).wait().expect("cut");
        assert!(cut.is_some(), "the log cut below the snapshot's end");
        engine.shutdown().expect("shutdown");
    }
    nodes[fi] = Node::start(fi as u64 + 1, dirs[fi].path(), &cluster, opts.clone());
    let found = AtOpen {
        short_logs: 1,
        ..AtOpen::default()
    };
    assert_eq!(at_open(&nodes[fi]), found);
}

/// An engine placing partitions other than by `partition % shards`: each
/// partition is replicated by the data group of the shard that holds it,
/// so its applier's engine calls are local, and every node stores the
/// same bytes.
#[test]
fn partitions_placed_by_the_engine_are_replicated_by_their_shards_groups() {
    init_log();
    let dirs: Vec<_> = (0..3)
        .map(|_| tempfile::tempdir().expect("tempdir"))
        .collect();
    let cluster = cluster(3);
    // The reverse of modulo on two shards.
    let place = || corelog::Placement::new(|p, shards| ((p + 1) % shards as u64) as usize);
    let nodes: Vec<Node> = (0..3)
        .map(|i| {
            Node::start_with(i as u64 + 1, dirs[i].path(), &cluster, options(), |c| {
                c.placement = place();
            })
        })
        .collect();
    let leader = wait_for_leader(&nodes.iter().collect::<Vec<_>>(), ELECT);
    let li = (leader - 1) as usize;
    for p in 0..4u64 {
        assert_ne!(nodes[li].engine().shard_of(p), (p % 2) as usize);
        assert_eq!(
            nodes[li].handle().group_of(p),
            1 + nodes[li].engine().shard_of(p) as u32,
            "partition {p}: its shard's group"
        );
        for tag in 0..2 {
            append_retrying(&nodes[li], p, batch(p * 10 + tag, 2));
        }
    }
    for p in 0..4u64 {
        let want = stored(&nodes[li].engine(), p);
        assert!(!want.is_empty(), "partition {p} stored on the leader");
        for n in &nodes {
            wait_stored(&n.engine(), p, want.len(), ELECT);
            assert_eq!(stored(&n.engine(), p), want, "node {} partition {p}", n.id);
        }
    }
}
