//! `Handle::metrics`: each shard counts what it stored and served, what it
//! refused, and how long its appends took; read without a request.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use corelog::{PollFrom, RequestError};
use std::time::Duration;

#[test]
fn each_shard_counts_its_appends_polls_refusals_and_latencies() {
    let dir = tempfile::tempdir().unwrap();
    let engine = open(dir.path(), 2, small_segments());
    assert_eq!(engine.handle().metrics().appends(), 0);
    // Partition 0 on shard 0, 1 on shard 1: 3 appends and 5 appends.
    let mut bytes = [0u64; 2];
    for (p, n) in [(0u64, 3u64), (1, 5)] {
        for seq in 0..n {
            let b = batch(p, seq);
            bytes[p as usize] += b.len() as u64;
            engine.handle().append(p, b).wait().unwrap();
        }
    }
    let served = engine
        .handle()
        .poll(1, PollFrom::First, 1 << 20)
        .wait()
        .unwrap()
        .len();
    let m = engine.handle().metrics();
    for s in &m.shards {
        let shard = s.health.shard;
        assert_eq!(s.appends, [3, 5][shard], "shard {shard}");
        assert_eq!(s.appended_bytes, bytes[shard], "shard {shard}");
        assert_eq!(s.append_errors, 0, "shard {shard}");
        assert_eq!(s.append_latency.count(), s.appends, "shard {shard}");
        assert_eq!(
            s.appends_in_flight, 0,
            "every append answered: shard {shard}"
        );
    }
    assert_eq!(m.shards[1].polls, 1);
    assert_eq!(m.shards[1].polled_bytes, served);
    assert_eq!(m.shards[0].polls, 0);
    assert_eq!(m.appends(), 8);
    // Each shard wrote its appends itself (small batches), and the sums
    // are over both shards.
    for s in &m.shards {
        assert!(s.writes_inline >= s.appends, "{s:?}");
    }
    assert_eq!(
        m.writes_inline(),
        m.shards[0].writes_inline + m.shards[1].writes_inline
    );
    assert_eq!(m.writes_inline_slow(), 0);
    assert_eq!(m.writes_by_ring(), 0);
    let p99 = m.append_latency().quantile_at_most(0.99).unwrap();
    assert!(
        p99 > Duration::ZERO && p99 < Duration::from_secs(60),
        "{p99:?}"
    );
    assert_eq!(m.queued(), 0);
    engine.shutdown().unwrap();
}

#[test]
fn a_refusal_the_shard_makes_is_counted_as_an_error_not_an_append() {
    let dir = tempfile::tempdir().unwrap();
    // A replica's engine: a plain append is refused by the partition's shard.
    let gated = corelog::LogConfig {
        commit_gate: true,
        ..small_segments()
    };
    let engine = open(dir.path(), 1, gated);
    let err = engine.handle().append(3, batch(3, 0)).wait().unwrap_err();
    assert!(matches!(err, RequestError::Replicated { .. }), "{err}");
    let s = &engine.handle().metrics().shards[0];
    assert_eq!((s.appends, s.appended_bytes, s.append_errors), (0, 0, 1));
    assert_eq!(s.appends_in_flight, 0);
    assert_eq!(s.append_latency.count(), 0);
    engine.shutdown().unwrap();
}

/// Each shard times its files' `fdatasync`s: under `fsync=batch` every
/// stored append waited for at least one (group commit may share one
/// among several); under `never`, with nothing sealed, there are none.
#[test]
fn each_shard_times_its_fdatasyncs() {
    for (fsync, synced) in [
        (corelog::FsyncPolicy::Batch, true),
        (corelog::FsyncPolicy::Never, false),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let log = corelog::LogConfig {
            fsync,
            ..corelog::LogConfig::default()
        };
        let engine = open(dir.path(), 2, log);
        let before = engine.handle().metrics().sync_latency().count();
        for seq in 0..4 {
            engine.handle().append(0, batch(0, seq)).wait().unwrap();
        }
        let m = engine.handle().metrics();
        let syncs = m.shards[0].sync_latency.count();
        let added = m.sync_latency().count() - before;
        if synced {
            assert!(
                (1..=4 * 3).contains(&syncs),
                "{fsync:?}: {syncs} fdatasyncs on shard 0 for 4 appends"
            );
            assert!(
                added >= 1,
                "{fsync:?}: {added} fdatasyncs during the appends"
            );
            let p99 = m.sync_latency().quantile_at_most(0.99).unwrap();
            assert!(p99 < Duration::from_secs(60), "{p99:?}");
            assert!(m.to_string().contains(" fdatasyncs (p50 <= "), "{m}");
        } else {
            assert_eq!(added, 0, "{fsync:?}: no fdatasync without a reason");
        }
        engine.shutdown().unwrap();
    }
}

/// Appends' writes are made on the shard's own thread up to
/// `Config::inline_writes`' bound and handed to the ring above it or when
/// it is off; either way a poll returns the bytes appended.
#[test]
fn small_writes_are_made_inline_by_default_and_large_ones_by_the_ring() {
    for inline in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let config = corelog::Config::new(dir.path())
            .shards(1)
            .pin_threads(false);
        let config = match inline {
            true => config,
            false => config.inline_writes(corelog::InlineWrites::OFF),
        };
        let engine = corelog::Engine::open(config).unwrap();
        let h = engine.handle();
        h.create_partition(0).wait().unwrap();
        let small = batch(0, 0);
        assert!(small.len() <= corelog::DEFAULT_INLINE_WRITE_MAX);
        h.append(0, small.clone()).wait().unwrap();
        let before = h.metrics().shards[0].clone();
        let payload = vec![7u8; corelog::DEFAULT_INLINE_WRITE_MAX];
        let mut large = corelog::BatchBuilder::new();
        large.push(corelog::MessageSpec {
            id: 1,
            timestamp: 1,
            payload: &payload,
            user_headers: b"",
        });
        let large = large.build().unwrap();
        h.append(0, large.clone()).wait().unwrap();
        let after = h.metrics().shards[0].clone();
        assert_eq!(
            after.writes_by_ring - before.writes_by_ring,
            1,
            "inline {inline}: {after:?}"
        );
        assert_eq!(after.writes_inline, before.writes_inline, "{after:?}");
        if inline {
            assert!(before.writes_inline >= 1, "{before:?}");
            assert_eq!(before.writes_by_ring, 0, "{before:?}");
        } else {
            assert_eq!(after.writes_inline, 0, "{after:?}");
        }
        assert_eq!(after.writes_inline_slow, 0, "{after:?}");
        let reply = h.poll(0, corelog::PollFrom::First, 1 << 20).wait().unwrap();
        let got: Vec<&[u8]> = reply.batches().map(|b| b.blob()).collect();
        let frames = |b: &[u8]| b[corelog::BATCH_HEADER_LEN..].to_vec();
        assert_eq!(got.len(), 2, "inline {inline}");
        assert_eq!(got[0], frames(&small), "inline {inline}");
        assert_eq!(got[1], frames(&large), "inline {inline}");
        engine.shutdown().unwrap();
    }
}
