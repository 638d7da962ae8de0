//! A replica's partitions through the engine (`LogConfig::commit_gate`):
//! polls stop at the commit mark its owner moves (`ReplicaLog::set_commit_mark`),
//! the uncommitted suffix is cut crash-safely (`ReplicaLog::cut_suffix`) while
//! requests sent meanwhile wait for the cut log, refusals are errors a
//! caller matches, and both hold across a restart.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use corelog::replication::ReplicaLog;
use corelog::{CommitMarkError, CutError, FsyncPolicy, LogConfig, PollFrom, RequestError};

fn gated() -> LogConfig {
    LogConfig {
        fsync: FsyncPolicy::Batch,
        commit_gate: true,
        ..small_segments()
    }
}

/// The `seq` of every batch a poll from the first offset returns.
fn served(engine: &corelog::Engine, p: u64) -> Vec<u64> {
    let reply = engine
        .handle()
        .poll(p, PollFrom::First, u64::MAX)
        .wait()
        .unwrap();
    reply
        .batches()
        .map(|b| {
            let first = b.messages().next().unwrap();
            decode_id(first.id()).1
        })
        .collect()
}

#[test]
fn polls_stop_at_the_commit_mark_and_a_cut_suffix_is_gone_for_good() {
    let dir = tempfile::tempdir().unwrap();
    let engine = open(dir.path(), 1, gated());
    let p = 7;
    // A producer batch is refused: only the partition's Raft group
    // appends, stamped.
    let err = engine.handle().append(p, batch(1, 0)).wait().unwrap_err();
    assert!(
        matches!(err, RequestError::Replicated { partition: 7 }),
        "{err}"
    );
    assert_eq!(err.kind(), corelog::ErrorKind::Replication);
    for seq in 0..40 {
        append_as_replica(&engine.handle(), p, batch(1, seq));
    }
    assert_eq!(
        engine.handle().stats(p).wait().unwrap().end_offset,
        base_offset_of(40)
    );
    assert!(served(&engine, p).is_empty(), "nothing committed yet");
    engine
        .handle()
        .set_commit_mark(p, base_offset_of(20))
        .wait()
        .unwrap();
    assert_eq!(served(&engine, p), (0..20).collect::<Vec<_>>());
    // A reopen would reset the mark behind its owner's back: refused, and
    // the partition serves what it served.
    let err = engine.handle().reopen_partition(p).wait().unwrap_err();
    assert!(
        matches!(err, RequestError::Replicated { partition: 7 }),
        "{err}"
    );
    assert_eq!(served(&engine, p), (0..20).collect::<Vec<_>>());
    assert_eq!(
        engine.handle().stats(p).wait().unwrap().commit_mark,
        Some(base_offset_of(20))
    );

    // Below the mark: refused, nothing changed, matched by variant.
    let err = engine
        .handle()
        .cut_suffix(p, base_offset_of(10))
        .wait()
        .unwrap_err();
    assert!(
        matches!(
            err,
            RequestError::Cut(CutError::Committed { partition: 7, .. })
        ),
        "{err}"
    );
    assert_eq!(
        engine.handle().stats(p).wait().unwrap().end_offset,
        base_offset_of(40)
    );

    // The cut, and requests sent before it is done: they see the cut log.
    let from = base_offset_of(25);
    let last = engine.handle().stats(p).wait().unwrap().last_timestamp;
    let cut = engine.handle().cut_suffix(p, from);
    let stats = engine.handle().stats(p);
    let next = engine
        .handle()
        .append_stamped(p, stamped(p, batch(2, 25), from, last + 1));
    let report = cut.wait().unwrap().expect("something was cut");
    assert_eq!(report.suffix_cut, Some(from));
    assert_eq!(stats.wait().unwrap().end_offset, from);
    assert_eq!(next.wait().unwrap().base_offset, from);
    // Reopened by the cut: served again once the owner sets the mark.
    engine
        .handle()
        .set_commit_mark(p, from + 1_000)
        .wait()
        .unwrap();
    let seqs = served(&engine, p);
    assert_eq!(seqs.len(), 26);
    assert_eq!(seqs[..25], (0..25).collect::<Vec<_>>()[..]);
    let last = engine
        .handle()
        .poll(p, PollFrom::Last, u64::MAX)
        .wait()
        .unwrap();
    let id = last
        .batches()
        .next()
        .unwrap()
        .messages()
        .next()
        .unwrap()
        .id();
    assert_eq!(
        decode_id(id),
        (2, 25, 0),
        "the batch appended after the cut"
    );
    engine.shutdown().unwrap();

    // After a restart: the cut held, and nothing is served until the mark
    // is set again.
    let engine = open(dir.path(), 1, gated());
    assert_eq!(
        engine.handle().stats(p).wait().unwrap().end_offset,
        from + super_count()
    );
    assert!(served(&engine, p).is_empty());
    engine.handle().set_commit_mark(p, u64::MAX).wait().unwrap();
    assert_eq!(served(&engine, p).len(), 26);
    engine.shutdown().unwrap();
}

/// Messages in the batch appended after the cut (`batch(2, 25)`).
fn super_count() -> u64 {
    messages_in(25)
}

#[test]
fn an_engine_without_the_gate_has_no_commit_mark_to_move_and_nothing_to_cut() {
    let dir = tempfile::tempdir().unwrap();
    let engine = open(dir.path(), 1, small_segments());
    engine.handle().append(3, batch(1, 0)).wait().unwrap();
    engine.handle().append(3, batch(1, 1)).wait().unwrap();
    let err = engine.handle().set_commit_mark(3, 1).wait().unwrap_err();
    assert!(
        matches!(
            err,
            RequestError::CommitMark(CommitMarkError::NotGated { partition: 3 })
        ),
        "{err}"
    );
    let err = engine.handle().cut_suffix(3, 1).wait().unwrap_err();
    assert!(
        matches!(err, RequestError::Cut(CutError::NotGated { partition: 3 })),
        "{err}"
    );
    assert_eq!(served(&engine, 3), vec![0, 1]);
    // A partition that does not exist is not created by either.
    let err = engine.handle().cut_suffix(4, 0).wait().unwrap_err();
    assert!(
        matches!(err, RequestError::UnknownPartition { partition: 4 }),
        "{err}"
    );
    engine.shutdown().unwrap();
}
