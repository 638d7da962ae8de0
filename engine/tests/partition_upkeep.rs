//! Upkeep of one partition through the handle: deleting a consumer's
//! offset, deleting the oldest segments, and retention limits set per
//! partition, which outlive the partition being closed by the open cap.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use corelog::{Config, Engine, FsyncPolicy, LogConfig, PollFrom, Retention};
use std::time::Duration;

/// A store for one consumer more than `max_consumer_offsets` is refused
/// as a `Limit` naming the partition, not retryable; those with an offset
/// store on, and a delete makes room.
#[test]
fn consumers_past_the_limit_are_refused_as_a_limit() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let engine = open(
        tmp.path(),
        2,
        LogConfig {
            max_consumer_offsets: 2,
            ..small_segments()
        },
    );
    let h = engine.handle();
    h.append(3, batch(0, 0)).wait().unwrap();
    h.store_offset(3, 7, 0).wait().unwrap();
    h.store_offset(3, 8, 0).wait().unwrap();
    let e = h.store_offset(3, 9, 0).wait().unwrap_err();
    assert_eq!(e.kind(), corelog::ErrorKind::Limit, "{e}");
    assert_eq!(e.partition(), Some(3));
    assert!(!e.is_retryable());
    assert!(e.to_string().contains("max_consumer_offsets"), "{e}");
    assert_eq!(h.load_offset(3, 9).wait().unwrap(), None);
    h.store_offset(3, 8, 0).wait().unwrap();
    assert!(h.delete_offset(3, 7).wait().unwrap());
    h.store_offset(3, 9, 0).wait().unwrap();
    engine.shutdown().unwrap();
}

#[test]
fn a_deleted_offset_is_gone_and_says_whether_it_was_there() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let engine = open(tmp.path(), 2, small_segments());
    engine.handle().append(3, batch(0, 0)).wait().unwrap();
    engine.handle().store_offset(3, 7, 0).wait().unwrap();
    engine.handle().store_offset(3, 8, 0).wait().unwrap();
    assert!(engine.handle().delete_offset(3, 7).wait().unwrap());
    assert!(!engine.handle().delete_offset(3, 7).wait().unwrap());
    assert_eq!(engine.handle().load_offset(3, 7).wait().unwrap(), None);
    assert_eq!(engine.handle().load_offset(3, 8).wait().unwrap(), Some(0));
    assert!(matches!(
        engine.handle().delete_offset(99, 7).wait(),
        Err(corelog::RequestError::UnknownPartition { partition: 99 })
    ));
    engine.shutdown().unwrap();
    let engine = open(tmp.path(), 2, small_segments());
    assert_eq!(engine.handle().load_offset(3, 7).wait().unwrap(), None);
    assert_eq!(engine.handle().load_offset(3, 8).wait().unwrap(), Some(0));
    engine.shutdown().unwrap();
}

/// Small segments, sealed as soon as they are full (under `fsync=never` a
/// segment is confirmed, and only then deletable, 30 s after its rotation).
fn sealing_at_once() -> LogConfig {
    LogConfig {
        fsync: FsyncPolicy::Batch,
        ..small_segments()
    }
}

/// Appends `n` batches to `p`; returns the partition's segment count.
fn fill(engine: &Engine, p: u64, n: u64) -> usize {
    for seq in 0..n {
        engine.handle().append(p, batch(p, seq)).wait().unwrap();
    }
    engine.handle().flush(p).wait().unwrap();
    engine.handle().stats(p).wait().unwrap().segments
}

#[test]
fn deleting_segments_removes_the_oldest_sealed_ones() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let engine = open(tmp.path(), 2, sealing_at_once());
    let segments = fill(&engine, 5, 60);
    assert!(segments >= 4, "{segments} segments");
    let before = engine.handle().stats(5).wait().unwrap();
    let deleted = engine.handle().delete_segments(5, 2).wait().unwrap();
    assert_eq!(deleted.len(), 2);
    let after = engine.handle().stats(5).wait().unwrap();
    assert_eq!(after.segments, segments - 2);
    assert!(after.first_offset > before.first_offset);
    assert_eq!(after.next_offset, before.next_offset);
    let first = engine
        .handle()
        .poll_verified(5, PollFrom::First, 0)
        .wait()
        .unwrap();
    assert_eq!(first.first_offset(), after.first_offset);
    // Asking for more than there are leaves the active segment.
    engine.handle().delete_segments(5, 1000).wait().unwrap();
    assert_eq!(engine.handle().stats(5).wait().unwrap().segments, 1);
    engine.shutdown().unwrap();
}

#[test]
fn retention_set_per_partition_applies_to_it_alone_and_survives_a_close() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    // One open partition per shard: using the other closes it.
    let engine = Engine::open(Config {
        shards: Some(1),
        max_open_partitions: 1,
        log: sealing_at_once(),
        pin_threads: false,
        retention_check: Duration::from_secs(3600),
        ..Config::new(tmp.path())
    })
    .unwrap();
    let limited = fill(&engine, 1, 60);
    let unlimited = fill(&engine, 2, 60);
    assert!(limited >= 4 && unlimited >= 4);
    let limits = Retention {
        max_age: None,
        max_bytes: Some(1),
    };
    engine.handle().set_retention(1, limits).wait().unwrap();
    // Partition 1 is reopened by this request (2 was used last).
    engine.handle().stats(2).wait().unwrap();
    engine.handle().stats(1).wait().unwrap();
    engine.handle().stats(2).wait().unwrap();
    std::thread::sleep(Duration::from_millis(100));
    engine.handle().enforce_retention().wait().unwrap();
    engine.handle().stats(1).wait().unwrap();
    engine.handle().enforce_retention().wait().unwrap();
    assert_eq!(
        engine.handle().stats(1).wait().unwrap().segments,
        1,
        "limited"
    );
    assert_eq!(engine.handle().stats(2).wait().unwrap().segments, unlimited);
    engine.shutdown().unwrap();
}

/// Requests that reach a partition while it is closed to be reopened wait
/// for the reopen and are answered by the reopened log: none is dropped.
/// (The shard held, so that all of them are queued behind the reopen and
/// popped before its close runs.)
#[test]
fn requests_arriving_during_a_reopen_are_answered_by_the_reopened_log() {
    let dir = tempfile::tempdir().unwrap();
    let engine = open(dir.path(), 1, small_segments());
    let h = engine.handle();
    let p = 6;
    h.append(p, batch(1, 0)).wait().unwrap();
    let held = hold_shard(&h, 0);
    let reopen = h.reopen_partition(p);
    let appends: Vec<_> = (1..4u64).map(|seq| h.append(p, batch(1, seq))).collect();
    let poll = h.poll(p, PollFrom::First, 1 << 20);
    held.release();
    reopen.wait().unwrap();
    for (i, a) in appends.into_iter().enumerate() {
        let ack = a.wait().unwrap();
        assert_eq!(ack.base_offset, base_offset_of(i as u64 + 1), "append {i}");
    }
    assert!(poll.wait().unwrap().batches().count() >= 1);
    let all = h.poll(p, PollFrom::First, 1 << 20).wait().unwrap();
    assert_eq!(all.batches().count(), 4);
    engine.shutdown().unwrap();
}
