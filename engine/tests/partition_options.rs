//! Partitions with options of their own (issue 33): segment size, fsync
//! policy and retention given at creation are kept in the partition's
//! directory and hold after a restart, beside partitions on the engine's
//! settings; a retention set while running is kept too; a damaged options
//! file leaves the partition unopenable, naming the file, with nothing of
//! its data touched.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use corelog::{Engine, FsyncPolicy, LogConfig, PartitionOptions, RequestError, Retention};

/// The engine's settings: large segments, no fsync.
fn engine_log() -> LogConfig {
    LogConfig {
        segment_bytes: 1 << 30,
        fsync: FsyncPolicy::Never,
        index_interval_bytes: 1024,
        ..LogConfig::default()
    }
}

fn reopen(dir: &std::path::Path) -> Engine {
    open(dir, 2, engine_log())
}

fn fill(engine: &Engine, p: u64, from: u64, n: u64) {
    for seq in from..from + n {
        engine.handle().append(p, batch(p, seq)).wait().unwrap();
    }
}

#[test]
fn options_given_at_creation_hold_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let engine = reopen(dir.path());
    let own = PartitionOptions::new()
        .segment_bytes(8 << 10)
        .fsync(FsyncPolicy::Batch);
    engine
        .handle()
        .create_partition_with(1, own.clone())
        .wait()
        .unwrap();
    engine.handle().create_partition(2).wait().unwrap();
    fill(&engine, 1, 0, 40);
    fill(&engine, 2, 0, 40);
    let small = engine.handle().stats(1).wait().unwrap();
    assert!(small.segments > 3, "8 KiB segments: {small:?}");
    assert!(small.syncs > 0, "fsync=batch syncs: {small:?}");
    let plain = engine.handle().stats(2).wait().unwrap();
    assert_eq!(plain.segments, 1, "the engine's 1 GiB segments: {plain:?}");
    assert_eq!(plain.syncs, 0, "the engine's fsync=never: {plain:?}");
    engine.shutdown().unwrap();

    let engine = reopen(dir.path());
    assert_eq!(engine.handle().partition_options(1).wait().unwrap(), own);
    assert_eq!(
        engine.handle().partition_options(2).wait().unwrap(),
        PartitionOptions::new()
    );
    let before = engine.handle().stats(1).wait().unwrap();
    fill(&engine, 1, 40, 40);
    let after = engine.handle().stats(1).wait().unwrap();
    assert!(
        after.segments >= before.segments + 3,
        "still 8 KiB segments after the restart: {before:?} then {after:?}"
    );
    assert!(
        after.syncs > 0,
        "still fsync=batch after the restart: {after:?}"
    );
    engine.shutdown().unwrap();
}

#[test]
fn a_retention_set_while_running_holds_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let engine = reopen(dir.path());
    engine
        .handle()
        .create_partition_with(1, PartitionOptions::new().segment_bytes(8 << 10))
        .wait()
        .unwrap();
    fill(&engine, 1, 0, 60);
    let full = engine.handle().stats(1).wait().unwrap();
    let keep = Retention {
        max_age: None,
        max_bytes: Some(20 << 10),
    };
    engine.handle().set_retention(1, keep).wait().unwrap();
    engine.shutdown().unwrap();

    // Set once, before the restart: enforced after it.
    let engine = reopen(dir.path());
    assert_eq!(
        engine
            .handle()
            .partition_options(1)
            .wait()
            .unwrap()
            .retention,
        Some(keep)
    );
    let deleted = engine.handle().enforce_retention().wait().unwrap();
    let left = engine.handle().stats(1).wait().unwrap();
    assert!(
        !deleted.is_empty(),
        "nothing deleted: {full:?} then {left:?}"
    );
    assert!(left.bytes <= (20 << 10) + (8 << 10), "{left:?}");
    assert!(left.segments < full.segments);
    engine.shutdown().unwrap();
}

#[test]
fn a_damaged_options_file_is_named_and_the_data_is_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let engine = reopen(dir.path());
    engine
        .handle()
        .create_partition_with(4, PartitionOptions::new().fsync(FsyncPolicy::Batch))
        .wait()
        .unwrap();
    fill(&engine, 4, 0, 5);
    engine.shutdown().unwrap();
    let pdir = dir.path().join("partitions").join("4");
    let pdir = if pdir.exists() {
        pdir
    } else {
        dir.path().join("4")
    };
    let options = pdir.join("options.json");
    assert!(options.exists(), "kept in the partition's directory");
    std::fs::write(&options, b"{\"version\":1,\"fsync\":\"sometimes\"}").unwrap();
    let listing = |d: &std::path::Path| {
        let mut v: Vec<_> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                (e.file_name(), e.metadata().unwrap().len())
            })
            .collect();
        v.sort();
        v
    };
    let before = listing(&pdir);

    let engine = reopen(dir.path());
    let err = engine.handle().append(4, batch(4, 5)).wait().unwrap_err();
    assert!(matches!(err, RequestError::Unopenable { .. }), "{err}");
    let text = err.to_string();
    assert!(
        text.contains("options.json") && text.contains("fsync"),
        "{text}"
    );
    engine.shutdown().unwrap();
    assert_eq!(listing(&pdir), before, "nothing of the partition changed");
}
