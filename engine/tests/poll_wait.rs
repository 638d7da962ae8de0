//! `Handle::poll_wait`: a caught-up consumer waits for data instead of
//! spinning. It answers with the batch that lands (an append, or a
//! replica's commit mark moving), empty at its deadline, `ShuttingDown`
//! when the engine stops (without holding the shutdown for its wait), and it
//! follows its partition across a suffix cut that replaces the log.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use corelog::replication::ReplicaLog;
use corelog::{FsyncPolicy, LogConfig, PollFrom};
use std::time::Duration;

const LONG: Duration = Duration::from_secs(120);

fn first_seq(reply: &corelog::PollReply) -> u64 {
    let b = reply.batches().next().unwrap();
    decode_id(b.messages().next().unwrap().id()).1
}

#[test]
fn a_waiting_poll_answers_with_the_batch_an_append_makes_visible() {
    let _dog = Watchdog::arm("poll_wait on an append", Duration::from_secs(60));
    let dir = tempfile::tempdir().unwrap();
    let engine = open(dir.path(), 2, small_segments());
    for p in [1u64, 2] {
        engine.handle().create_partition(p).wait().unwrap();
    }
    engine.handle().append(1, batch(1, 0)).wait().unwrap();
    // At the end of partition 1, and on the empty partition 2.
    let at_end = engine
        .handle()
        .poll_wait(1, PollFrom::Offset(base_offset_of(1)), 1 << 20, LONG);
    let on_empty = engine.handle().poll_wait(2, PollFrom::First, 1 << 20, LONG);
    // Something there already: answered at once.
    let now = engine
        .handle()
        .poll_wait(1, PollFrom::Offset(0), 1 << 20, LONG)
        .wait()
        .unwrap();
    assert_eq!(first_seq(&now), 0);
    std::thread::sleep(Duration::from_millis(50));
    engine.handle().append(1, batch(1, 1)).wait().unwrap();
    engine.handle().append(2, batch(2, 0)).wait().unwrap();
    let got = at_end.wait().unwrap();
    assert_eq!(got.first_offset(), base_offset_of(1));
    assert_eq!(first_seq(&got), 1, "the batch appended while it waited");
    assert_eq!(first_seq(&on_empty.wait().unwrap()), 0);
    engine.shutdown().unwrap();
}

#[test]
fn a_waiting_poll_is_empty_at_its_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let engine = open(dir.path(), 1, small_segments());
    engine.handle().append(1, batch(1, 0)).wait().unwrap();
    let reply = engine
        .handle()
        .poll_wait(
            1,
            PollFrom::Offset(base_offset_of(1)),
            1 << 20,
            Duration::from_millis(30),
        )
        .wait()
        .unwrap();
    assert!(reply.is_empty());
    // Of a partition that does not exist: the same error as a poll.
    let err = engine
        .handle()
        .poll_wait(9, PollFrom::First, 1 << 20, Duration::from_millis(30))
        .wait()
        .unwrap_err();
    assert!(
        matches!(
            err,
            corelog::RequestError::UnknownPartition { partition: 9 }
        ),
        "{err}"
    );
    engine.shutdown().unwrap();
}

#[test]
fn shutdown_answers_waiting_polls_instead_of_waiting_for_them() {
    // A shutdown that waited for the polls would take ten minutes.
    let _dog = Watchdog::arm("shutdown with waiting polls", Duration::from_secs(60));
    let dir = tempfile::tempdir().unwrap();
    let engine = open(dir.path(), 2, small_segments());
    let waiting: Vec<_> = (0..4u64)
        .map(|p| {
            engine.handle().create_partition(p).wait().unwrap();
            engine
                .handle()
                .poll_wait(p, PollFrom::First, 1 << 20, Duration::from_secs(600))
        })
        .collect();
    std::thread::sleep(Duration::from_millis(50));
    engine.shutdown().unwrap();
    for w in waiting {
        let err = w.wait().unwrap_err();
        assert!(matches!(err, corelog::RequestError::ShuttingDown), "{err}");
    }
}

#[test]
fn a_replicas_waiting_poll_answers_when_the_commit_mark_moves_and_follows_a_cut() {
    let _dog = Watchdog::arm("poll_wait on a replica", Duration::from_secs(60));
    let dir = tempfile::tempdir().unwrap();
    let gated = LogConfig {
        fsync: FsyncPolicy::Batch,
        commit_gate: true,
        ..small_segments()
    };
    let engine = open(dir.path(), 1, gated);
    for seq in 0..6 {
        append_as_replica(&engine.handle(), 5, batch(1, seq));
    }
    // Acknowledged, not committed: a waiting poll waits.
    let waiting = engine.handle().poll_wait(5, PollFrom::First, 1 << 20, LONG);
    std::thread::sleep(Duration::from_millis(30));
    engine
        .handle()
        .set_commit_mark(5, base_offset_of(2))
        .wait()
        .unwrap();
    let got = waiting.wait().unwrap();
    assert_eq!(got.batch_count(), 2);

    // Waiting at the mark while the suffix past it is cut: the wait goes
    // on in the cut log, and answers with what the new leader sends.
    let from = base_offset_of(2);
    let waiting = engine
        .handle()
        .poll_wait(5, PollFrom::Offset(from), 1 << 20, LONG);
    std::thread::sleep(Duration::from_millis(30));
    engine.handle().cut_suffix(5, from).wait().unwrap().unwrap();
    engine.handle().set_commit_mark(5, from).wait().unwrap();
    let ack = append_as_replica(&engine.handle(), 5, batch(9, 2));
    assert_eq!(ack.base_offset, from);
    engine.handle().set_commit_mark(5, u64::MAX).wait().unwrap();
    let got = waiting.wait().unwrap();
    let b = got.batches().next().unwrap();
    assert_eq!(decode_id(b.messages().next().unwrap().id()), (9, 2, 0));
    engine.shutdown().unwrap();
}
