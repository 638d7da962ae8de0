//! Tiered storage against an object store in memory that the tests fault:
//! offload past the local limit and read everything back, a store that is
//! down, a commit that never happened, a damaged object, retention over
//! the whole log. `tier/tests/seaweedfs.rs` runs the same paths against a
//! real S3 server.
#![allow(clippy::unwrap_used)]

mod common;

use common::stream::{expected, fill, read_all};
use common::*;
use corelog::tier::{MemoryStore, ObjectStore};
use corelog::{Config, Engine, ErrorKind, FsyncPolicy, LogConfig, PollFrom, Retention, TierConfig};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

const SEGMENT: u64 = 16 << 10;

fn log() -> LogConfig {
    LogConfig {
        fsync: FsyncPolicy::Batch,
        segment_bytes: SEGMENT,
        index_interval_bytes: 1024,
        ..LogConfig::default()
    }
}

/// An engine whose tier is `store`, keeping `keep` bytes of sealed
/// segments locally; passes run when the test calls them.
fn open_tiered(dir: &Path, store: &Arc<MemoryStore>, keep: u64, log: LogConfig) -> Engine {
    let tier = TierConfig {
        local_retention_bytes: keep,
        chunk_bytes: 4096,
        cache_bytes: 64 << 10,
        upload_every: Duration::from_secs(3600),
        ..TierConfig::new(store.clone())
    };
    Engine::open(Config {
        shards: Some(2),
        pin_threads: false,
        log,
        ..Config::new(dir).tier(tier)
    })
    .unwrap()
}

fn local_bytes(dir: &Path, p: u64) -> u64 {
    std::fs::read_dir(dir.join("partitions").join(p.to_string()))
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".log"))
        .map(|e| e.metadata().unwrap().len())
        .sum()
}

#[test]
fn offloaded_segments_are_read_back_from_offset_zero_as_one_log() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Arc::new(MemoryStore::new());
    let engine = open_tiered(tmp.path(), &store, 2 * SEGMENT, log());
    fill(&engine, 1, 0..600);
    let report = engine.handle().offload_pass();
    assert!(report.failed.is_empty(), "{report:?}");
    assert!(report.uploaded >= 10, "{report:?}");
    assert!(report.trimmed >= 5, "{report:?}");
    // Local disk within the limit plus two segments (the active one and
    // one sealed past the limit).
    assert!(local_bytes(tmp.path(), 1) <= 4 * SEGMENT + SEGMENT / 2);
    let stats = engine.handle().stats(1).wait().unwrap();
    assert!(
        stats.first_offset > 0,
        "nothing was trimmed locally: {stats:?}"
    );
    // From offset 0: the store's segments, then the local ones, one log.
    assert_eq!(read_all(&engine, 1, 8 << 10), expected(1, 600));
    // In one-batch polls too (every remote poll stops at a segment's end).
    assert_eq!(read_all(&engine, 1, 1), expected(1, 600));
    // From the middle of an offloaded batch, and from the first.
    let mid = base_offset_of(20) + 1;
    let r = engine
        .handle()
        .poll(1, PollFrom::Offset(mid), 1)
        .wait()
        .unwrap();
    assert_eq!(r.messages().next().map(|m| m.offset()), Some(mid));
    let r = engine.handle().poll(1, PollFrom::First, 1).wait().unwrap();
    assert_eq!(r.first_offset(), 0);
    let tier = engine.handle().tier().unwrap().clone();
    assert!(tier.cache_stats().hits > 0, "{:?}", tier.cache_stats());
    engine.shutdown().unwrap();
    // After a restart the store's manifest is found again.
    let engine = open_tiered(tmp.path(), &store, 2 * SEGMENT, log());
    assert_eq!(read_all(&engine, 1, 8 << 10), expected(1, 600));
    engine.shutdown().unwrap();
}

#[test]
fn while_the_store_is_down_sends_go_on_nothing_is_trimmed_and_the_backlog_drains_after() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Arc::new(MemoryStore::new());
    let engine = open_tiered(tmp.path(), &store, SEGMENT, log());
    store.set_down(true);
    fill(&engine, 2, 0..300);
    let report = engine.handle().offload_pass();
    assert_eq!(report.failed.len(), 1, "{report:?}");
    assert!(report.failed[0].1.contains("does not answer"), "{report:?}");
    assert!(report.backlog_segments >= 4, "{report:?}");
    assert_eq!(report.trimmed, 0);
    let tier = engine.handle().tier().unwrap().clone();
    let backlog = tier
        .counters()
        .backlog_segments
        .load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(backlog, report.backlog_segments);
    // The engine's figures say it too, as the server's stats print them.
    let said = engine.handle().metrics().to_string();
    let backlog = format!("backlog {} segments", report.backlog_segments);
    assert!(said.contains(&backlog), "{said}");
    assert!(said.contains("tier: 0 segments uploaded"), "{said}");
    assert_eq!(engine.handle().stats(2).wait().unwrap().first_offset, 0);
    // Polls of what is local go on, whatever the start they name.
    for from in [PollFrom::First, PollFrom::Offset(0), PollFrom::Timestamp(0)] {
        let r = engine.handle().poll(2, from, 1).wait().unwrap();
        assert_eq!(r.first_offset(), 0, "{from:?}");
    }
    store.set_down(false);
    let report = engine.handle().offload_pass();
    assert!(
        report.failed.is_empty() && report.backlog_segments == 0,
        "{report:?}"
    );
    assert!(report.trimmed > 0, "{report:?}");
    assert_eq!(read_all(&engine, 2, 1 << 20), expected(2, 300));
    engine.shutdown().unwrap();
}

#[test]
fn only_what_the_store_holds_is_trimmed_locally() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Arc::new(MemoryStore::new());
    let engine = open_tiered(tmp.path(), &store, 0, log());
    fill(&engine, 6, 0..300);
    // Two segments' objects and commits (log, index, manifest each), then
    // every PUT fails.
    store.fail_puts_after(Some(6));
    let report = engine.handle().offload_pass();
    assert_eq!(report.uploaded, 2, "{report:?}");
    assert!(report.backlog_segments >= 2, "{report:?}");
    let tier = engine.handle().tier().unwrap().clone();
    let through = tier.manifest(6).unwrap().end_offset();
    // Nothing kept past the store's copies (the limit is 0), nothing
    // trimmed that the store does not hold.
    assert_eq!(
        engine.handle().stats(6).wait().unwrap().first_offset,
        through
    );
    store.fail_puts_after(None);
    assert_eq!(read_all(&engine, 6, 1 << 20), expected(6, 300));
    engine.shutdown().unwrap();
}

#[test]
fn an_upload_whose_manifest_was_never_committed_is_redone_once_and_its_strays_cleaned() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Arc::new(MemoryStore::new());
    let engine = open_tiered(tmp.path(), &store, SEGMENT, log());
    fill(&engine, 3, 0..300);
    // The objects land, the manifest's commit fails: as a crash between them.
    store.refuse_puts_ending(Some(".json"));
    let report = engine.handle().offload_pass();
    assert_eq!(report.failed.len(), 1, "{report:?}");
    assert_eq!(
        report.trimmed, 0,
        "nothing the store does not hold is trimmed"
    );
    let uploaded: Vec<String> = store.keys();
    assert!(uploaded.iter().any(|k| k.ends_with(".log")), "{uploaded:?}");
    engine.shutdown().unwrap();
    // A stray that no manifest will ever name (a segment that no longer exists).
    store
        .put(
            "partitions/3/00000000000099999999-00000000000100000000.log",
            b"stray",
        )
        .unwrap();
    store.refuse_puts_ending(None);
    let engine = open_tiered(tmp.path(), &store, SEGMENT, log());
    let report = engine.handle().offload_pass();
    assert!(report.failed.is_empty(), "{report:?}");
    let tier = engine.handle().tier().unwrap().clone();
    let m = tier.manifest(3).unwrap();
    // Each segment once, contiguous; every object named by the manifest.
    for w in m.segments.windows(2) {
        assert_eq!(w[0].next_offset, w[1].base_offset, "{m:?}");
    }
    let keys = store.keys();
    let objects = keys.iter().filter(|k| !k.ends_with(".json")).count();
    assert_eq!(objects, 2 * m.segments.len(), "{keys:?}");
    assert!(!keys.iter().any(|k| k.contains("99999999")), "{keys:?}");
    assert_eq!(read_all(&engine, 3, 1 << 20), expected(3, 300));
    engine.shutdown().unwrap();
}

#[test]
fn a_damaged_object_is_named_and_never_served() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Arc::new(MemoryStore::new());
    let engine = open_tiered(tmp.path(), &store, SEGMENT, log());
    fill(&engine, 4, 0..300);
    assert!(engine.handle().offload_pass().failed.is_empty());
    let first = store
        .keys()
        .into_iter()
        .find(|k| k.ends_with(".log"))
        .unwrap();
    // A byte in the second batch's payload.
    let second = batch(4, 0).len() + 300;
    assert!(store.damage(&first, second));
    let err = engine
        .handle()
        .poll(4, PollFrom::Offset(0), 1 << 20)
        .wait()
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Corrupt, "{err}");
    assert!(err.to_string().contains(&first), "{err}");
    // The batch before the damage is still served on its own.
    let r = engine
        .handle()
        .poll(4, PollFrom::Offset(0), 1)
        .wait()
        .unwrap();
    assert_eq!(r.batch_count(), 1);
    engine.shutdown().unwrap();
}

#[test]
fn retention_applies_to_the_whole_log_and_deletes_from_the_store() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Arc::new(MemoryStore::new());
    let engine = open_tiered(tmp.path(), &store, SEGMENT, log());
    fill(&engine, 5, 0..600);
    assert!(engine.handle().offload_pass().failed.is_empty());
    let tier = engine.handle().tier().unwrap().clone();
    let before = tier.manifest(5).unwrap().segments.len();
    let max = 6 * SEGMENT;
    engine
        .handle()
        .set_retention(
            5,
            Retention {
                max_age: None,
                max_bytes: Some(max),
            },
        )
        .wait()
        .unwrap();
    let report = engine.handle().offload_pass();
    assert!(report.failed.is_empty(), "{report:?}");
    let m = tier.manifest(5).unwrap();
    assert!(
        m.segments.len() < before,
        "{} of {before}",
        m.segments.len()
    );
    let local = engine.handle().stats(5).wait().unwrap();
    let remote_only: u64 = m
        .segments
        .iter()
        .filter(|s| s.base_offset < local.first_offset)
        .map(|s| s.bytes)
        .sum();
    assert!(
        remote_only + local.bytes <= max + SEGMENT,
        "{remote_only} + {}",
        local.bytes
    );
    // The deleted objects are gone from the store, the first poll starts
    // at what is left.
    assert_eq!(store.keys().len(), 2 * m.segments.len() + 1);
    let r = engine.handle().poll(5, PollFrom::First, 1).wait().unwrap();
    assert_eq!(r.first_offset(), m.segments[0].base_offset);
    engine.shutdown().unwrap();
}

#[test]
fn a_store_that_does_not_answer_at_open_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Arc::new(MemoryStore::new());
    store.set_down(true);
    let err =
        Engine::open(Config::new(tmp.path()).tier(TierConfig::new(store.clone()))).unwrap_err();
    assert!(matches!(err, corelog::OpenError::Tier { .. }), "{err}");
    assert!(err.to_string().contains("memory://"), "{err}");
}

/// A store that reads an upload's body slowly: 64 bytes every 25 ms.
#[derive(Debug)]
struct Slow(MemoryStore);

impl ObjectStore for Slow {
    fn describe(&self) -> String {
        self.0.describe()
    }
    fn object_name(&self, key: &str) -> String {
        self.0.object_name(key)
    }
    fn check(&self) -> Result<(), corelog::tier::StoreError> {
        self.0.check()
    }
    fn put(&self, key: &str, bytes: &[u8]) -> Result<(), corelog::tier::StoreError> {
        self.0.put(key, bytes)
    }
    fn put_reader(
        &self,
        key: &str,
        body: &mut dyn std::io::Read,
        len: u64,
    ) -> Result<(), corelog::tier::StoreError> {
        let mut all = Vec::new();
        let mut buf = [0u8; 64];
        while (all.len() as u64) < len {
            let n = body
                .read(&mut buf)
                .map_err(|e| corelog::tier::StoreError::Unreachable {
                    store: self.describe(),
                    reason: e.to_string(),
                })?;
            if n == 0 {
                break;
            }
            all.extend_from_slice(&buf[..n]);
            std::thread::sleep(Duration::from_millis(25));
        }
        self.0.put(key, &all)
    }
    fn get(
        &self,
        key: &str,
        range: Option<std::ops::Range<u64>>,
    ) -> Result<Vec<u8>, corelog::tier::StoreError> {
        self.0.get(key, range)
    }
    fn delete(&self, key: &str) -> Result<(), corelog::tier::StoreError> {
        self.0.delete(key)
    }
    fn list(
        &self,
        prefix: &str,
    ) -> Result<Vec<corelog::tier::ObjectInfo>, corelog::tier::StoreError> {
        self.0.list(prefix)
    }
}

#[test]
fn a_shutdown_does_not_wait_for_an_upload_to_finish() {
    let tmp = tempfile::tempdir().unwrap();
    let slow = Arc::new(Slow(MemoryStore::new()));
    let tier = TierConfig {
        local_retention_bytes: SEGMENT,
        upload_every: Duration::from_millis(10),
        ..TierConfig::new(slow.clone())
    };
    let engine = Engine::open(Config {
        shards: Some(1),
        pin_threads: false,
        log: log(),
        ..Config::new(tmp.path()).tier(tier)
    })
    .unwrap();
    fill(&engine, 7, 0..100);
    // The offloader is sending a segment of 16 KiB at 2.6 KB/s: some 6 s
    // each, several to go.
    let started = std::time::Instant::now();
    while slow.0.keys().is_empty() && started.elapsed() < Duration::from_millis(300) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let t = std::time::Instant::now();
    engine.shutdown().unwrap();
    // Cut short, not waited for (a bound far below an upload's 6 s).
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    // Nothing half-sent is named: the store holds no manifest naming a
    // segment it lacks.
    let keys = slow.0.keys();
    assert!(!keys.iter().any(|k| k.ends_with(".json")), "{keys:?}");
}

#[test]
fn a_fresh_directory_against_a_filled_prefix_trusts_no_manifest_of_it() {
    let store = Arc::new(MemoryStore::new());
    let first = tempfile::tempdir().unwrap();
    let engine = open_tiered(first.path(), &store, SEGMENT, log());
    fill(&engine, 1, 0..300);
    let report = engine.handle().offload_pass();
    assert!(report.failed.is_empty() && report.trimmed > 0, "{report:?}");
    engine.shutdown().unwrap();
    let before = store.keys();
    // Another directory, the same prefix, its own partition 1 (the same
    // producer batches, stamped at other times).
    let second = tempfile::tempdir().unwrap();
    let engine = open_tiered(second.path(), &store, SEGMENT, log());
    fill(&engine, 1, 0..300);
    let report = engine.handle().offload_pass();
    assert_eq!(report.failed.len(), 1, "{report:?}");
    assert!(
        report.failed[0]
            .1
            .contains("does not describe the local log"),
        "{report:?}"
    );
    // Nothing of it removed locally, nothing of the store's touched.
    assert_eq!(report.trimmed, 0);
    assert_eq!(engine.handle().stats(1).wait().unwrap().first_offset, 0);
    assert_eq!(store.keys(), before);
    assert_eq!(read_all(&engine, 1, 1 << 20), expected(1, 300));
    engine.shutdown().unwrap();
    // The directory that wrote it still agrees with it after a restart.
    uploads_on_after_a_restart(first.path(), &store, SEGMENT);
}

/// A directory restarted against the manifest it wrote, still holding
/// every segment the store holds (local retention above it all), finds
/// them the same segments (same base, same first batch) and goes on
/// uploading: the trust check compares like with like.
#[test]
fn a_restarted_directory_that_kept_its_segments_trusts_its_own_manifest() {
    let store = Arc::new(MemoryStore::new());
    let tmp = tempfile::tempdir().unwrap();
    let engine = open_tiered(tmp.path(), &store, 1 << 30, log());
    fill(&engine, 1, 0..300);
    let report = engine.handle().offload_pass();
    assert!(
        report.failed.is_empty() && report.uploaded >= 3,
        "{report:?}"
    );
    assert_eq!(report.trimmed, 0);
    engine.shutdown().unwrap();
    uploads_on_after_a_restart(tmp.path(), &store, 1 << 30);
}

/// Reopens `dir` (300 batches in partition 1) against `store`, sends 100
/// more, and checks that a pass uploads without finding the manifest
/// foreign and that all 400 read back.
fn uploads_on_after_a_restart(dir: &Path, store: &Arc<MemoryStore>, keep: u64) {
    let engine = open_tiered(dir, store, keep, log());
    fill(&engine, 1, 300..400);
    let report = engine.handle().offload_pass();
    assert!(
        report.failed.is_empty() && report.uploaded > 0,
        "{report:?}"
    );
    assert_eq!(read_all(&engine, 1, 1 << 20), expected(1, 400));
    engine.shutdown().unwrap();
}

#[test]
fn a_deleted_partition_leaves_nothing_in_the_store() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Arc::new(MemoryStore::new());
    let engine = open_tiered(tmp.path(), &store, SEGMENT, log());
    fill(&engine, 8, 0..300);
    fill(&engine, 9, 0..300);
    assert!(engine.handle().offload_pass().failed.is_empty());
    let of = |p: u64| {
        let prefix = format!("partitions/{p}/");
        store
            .keys()
            .into_iter()
            .filter(|k| k.starts_with(&prefix))
            .count()
    };
    assert!(of(8) > 0 && of(9) > 0);
    engine.handle().delete_partition(8).wait().unwrap();
    assert_eq!(of(8), 0, "{:?}", store.keys());
    assert!(of(9) > 0, "another partition's objects stay");
    // The id used again: a new log, uploaded from its start.
    fill(&engine, 8, 0..300);
    let report = engine.handle().offload_pass();
    assert!(
        report.failed.is_empty() && report.uploaded > 0,
        "{report:?}"
    );
    assert_eq!(read_all(&engine, 8, 1 << 20), expected(8, 300));
    engine.shutdown().unwrap();
}

/// The store's `.log` objects of partition `p`, oldest first.
fn log_objects(store: &MemoryStore, p: u64) -> Vec<String> {
    let mut logs: Vec<String> = store
        .keys()
        .into_iter()
        .filter(|k| k.starts_with(&format!("partitions/{p}/")) && k.ends_with(".log"))
        .collect();
    logs.sort();
    logs
}

/// `polls` run on a thread of their own, answered within 20 s: a poll
/// that never answers fails the test (the engine is then leaked, as
/// dropping it would wait for the stuck thread).
fn within_20s<T: Send + 'static>(
    engine: Engine,
    polls: impl FnOnce(corelog::Handle) -> T + Send + 'static,
) -> (Engine, T) {
    let (tx, rx) = std::sync::mpsc::channel();
    let handle = engine.handle().clone();
    std::thread::spawn(move || {
        let _ = tx.send(polls(handle));
    });
    let Ok(got) = rx.recv_timeout(Duration::from_secs(20)) else {
        std::mem::forget(engine);
        panic!("no answer in 20 s: the poll walks the store's bytes forever");
    };
    (engine, got)
}

/// The first batch of `log` (`(base offset, base timestamp)`, in order)
/// whose timestamp is at or after `t`.
fn first_at_or_after(log: &[(u64, u64)], t: u64) -> Option<u64> {
    log.iter().find(|(_, ts)| *ts >= t).map(|(o, _)| *o)
}

#[test]
fn polls_by_timestamp_and_by_offset_find_the_same_batches_in_the_store_as_on_disk() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Arc::new(MemoryStore::new());
    let engine = open_tiered(tmp.path(), &store, SEGMENT, log());
    for seq in 0..300 {
        fill(&engine, 5, seq..seq + 1);
        if seq % 3 == 0 {
            // Timestamps apart, so that "at or after" has batches to skip.
            std::thread::sleep(Duration::from_micros(50));
        }
    }
    // Every batch's offset and timestamp, while all of it is local.
    let mut log = Vec::new();
    let mut next = 0;
    loop {
        let r = engine
            .handle()
            .poll(5, PollFrom::Offset(next), 1)
            .wait()
            .unwrap();
        let Some(b) = r.batches().next() else { break };
        log.push((b.base_offset(), b.base_timestamp()));
        next = b.next_offset();
    }
    assert_eq!(log.len(), 300);
    let at = |from: PollFrom| {
        let r = engine.handle().poll(5, from, 1).wait().unwrap();
        r.verify(&engine.handle().limits()).unwrap();
        let first = r.messages().next().map(|m| m.offset());
        first
    };
    // Targets across the log: each sampled batch's own timestamp, one
    // past it (the next later batch), and offsets inside batches.
    let targets: Vec<u64> = log
        .iter()
        .step_by(7)
        .flat_map(|(_, ts)| [*ts, ts + 1])
        .collect();
    let offsets: Vec<u64> = (0..next).step_by(13).collect();
    let local_ts: Vec<_> = targets
        .iter()
        .map(|&t| at(PollFrom::Timestamp(t)))
        .collect();
    let want: Vec<_> = targets
        .iter()
        .map(|&t| first_at_or_after(&log, t))
        .collect();
    assert_eq!(local_ts, want, "on disk");
    assert!(engine.handle().offload_pass().failed.is_empty());
    let local_start = engine.handle().stats(5).wait().unwrap().first_offset;
    assert!(
        local_start > next / 2,
        "most of the log is in the store only: {local_start} of {next}"
    );
    let remote_ts: Vec<_> = targets
        .iter()
        .map(|&t| at(PollFrom::Timestamp(t)))
        .collect();
    assert_eq!(remote_ts, want, "from the store");
    for o in offsets {
        assert_eq!(at(PollFrom::Offset(o)), Some(o), "offset {o}");
    }
    // Past the last batch's timestamp there is nothing.
    let last = log.last().unwrap().1;
    assert_eq!(at(PollFrom::Timestamp(last + 1)), None);
    engine.shutdown().unwrap();
}

#[test]
fn an_index_in_the_store_naming_the_wrong_batches_is_not_followed() {
    use corelog::testing::segment::log::index::{decode_file, encode_all, IndexEntry};
    let tmp = tempfile::tempdir().unwrap();
    let store = Arc::new(MemoryStore::new());
    let engine = open_tiered(tmp.path(), &store, SEGMENT, log());
    fill(&engine, 6, 0..300);
    assert!(engine.handle().offload_pass().failed.is_empty());
    // Every offloaded segment's index replaced by well-formed entries (each
    // passes its checksum, the first is the segment's start, as in every
    // index): in half of them the entries name positions where no batch
    // starts, in the other half real batches under the wrong offsets.
    let mut indexes: Vec<String> = store
        .keys()
        .into_iter()
        .filter(|k| k.ends_with(".index"))
        .collect();
    indexes.sort();
    assert!(indexes.len() >= 4, "{indexes:?}");
    for (n, key) in indexes.iter().enumerate() {
        let (real, _) = decode_file(&store.get(key, None).unwrap());
        assert!(real.len() >= 4, "{key}: {real:?}");
        let lying: Vec<IndexEntry> = real
            .iter()
            .enumerate()
            .map(|(i, e)| match (i, n % 2) {
                (0, _) => *e,
                (_, 0) => IndexEntry {
                    position: e.position + 13,
                    ..*e
                },
                _ => IndexEntry {
                    rel_offset: e.rel_offset + 1,
                    ..*e
                },
            })
            .collect();
        store.put(key, &encode_all(&lying)).unwrap();
    }
    // A fresh engine, so that no index was read before the change.
    engine.shutdown().unwrap();
    let engine = open_tiered(tmp.path(), &store, SEGMENT, log());
    assert!(engine.handle().stats(6).wait().unwrap().first_offset > 0);
    assert_eq!(read_all(&engine, 6, 1), expected(6, 300));
    for o in (0..base_offset_of(300)).step_by(5) {
        let r = engine
            .handle()
            .poll(6, PollFrom::Offset(o), 1)
            .wait()
            .unwrap();
        r.verify(&engine.handle().limits()).unwrap();
        assert_eq!(r.messages().next().map(|m| m.offset()), Some(o));
    }
    engine.shutdown().unwrap();
}

#[test]
fn a_damaged_batch_where_the_index_points_is_named_not_walked_around_forever() {
    use corelog::testing::segment::log::index::decode_file;
    let tmp = tempfile::tempdir().unwrap();
    let store = Arc::new(MemoryStore::new());
    let engine = open_tiered(tmp.path(), &store, SEGMENT, log());
    fill(&engine, 7, 0..300);
    assert!(engine.handle().offload_pass().failed.is_empty());
    let logs = log_objects(&store, 7);
    let log_key = &logs[0];
    let (entries, _) = decode_file(&store.get(&log_key.replace(".log", ".index"), None).unwrap());
    let e = entries[2];
    // The base_offset field (byte 8 of the header) of the batch the index
    // names: the header still parses, its offset is wrong.
    assert!(store.damage(log_key, e.position as usize + 8));
    engine.shutdown().unwrap();
    let engine = open_tiered(tmp.path(), &store, SEGMENT, log());
    let (engine, got) = within_20s(engine, move |h| {
        h.poll(7, PollFrom::Offset(u64::from(e.rel_offset)), 1)
            .wait()
    });
    let err = got.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Corrupt, "{err}");
    assert!(err.to_string().contains(log_key.as_str()), "{err}");
    engine.shutdown().unwrap();
}

#[test]
fn a_batch_length_past_the_end_of_memory_in_the_store_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Arc::new(MemoryStore::new());
    let engine = open_tiered(tmp.path(), &store, SEGMENT, log());
    fill(&engine, 8, 0..300);
    assert!(engine.handle().offload_pass().failed.is_empty());
    let logs = log_objects(&store, 8);
    // The fourth batch's batch_length (bytes 32..40 of its header), every
    // bit flipped: about 2^64 minus its length, so that its position plus
    // it wraps around.
    let at: usize = (0..3).map(|seq| batch(8, seq).len()).sum();
    for b in 32..40 {
        assert!(store.damage(&logs[0], at + b));
    }
    engine.shutdown().unwrap();
    let engine = open_tiered(tmp.path(), &store, SEGMENT, log());
    let (engine, got) = within_20s(engine, |h| {
        [PollFrom::Offset(0), PollFrom::First, PollFrom::Timestamp(0)]
            .map(|from| h.poll(8, from, 1 << 20).wait().map(|r| r.len()))
    });
    for r in got {
        let err = r.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Corrupt, "{err}");
        assert!(err.to_string().contains(logs[0].as_str()), "{err}");
    }
    engine.shutdown().unwrap();
}

#[test]
fn another_partitions_object_under_this_ones_key_is_named_not_served() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Arc::new(MemoryStore::new());
    let engine = open_tiered(tmp.path(), &store, SEGMENT, log());
    // Partitions 9 and 10 get batches of the same sizes and offsets (the
    // sizes follow the sequence number), so their objects line up.
    fill(&engine, 9, 0..300);
    fill(&engine, 10, 0..300);
    assert!(engine.handle().offload_pass().failed.is_empty());
    let (nine, ten) = (&log_objects(&store, 9)[0], &log_objects(&store, 10)[0]);
    let theirs = store.get(nine, None).unwrap();
    assert_eq!(theirs.len(), store.get(ten, None).unwrap().len());
    // As a bucket shared by mistake, or a restore into the wrong prefix.
    store.put(ten, &theirs).unwrap();
    engine.shutdown().unwrap();
    let engine = open_tiered(tmp.path(), &store, SEGMENT, log());
    for from in [PollFrom::Offset(0), PollFrom::First, PollFrom::Offset(5)] {
        let err = engine.handle().poll(10, from, 1 << 20).wait().unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Corrupt, "{from:?}: {err}");
        assert!(err.to_string().contains("partition 9"), "{err}");
    }
    // Partition 9's own objects are served as before.
    assert_eq!(read_all(&engine, 9, 1 << 20), expected(9, 300));
    engine.shutdown().unwrap();
}
