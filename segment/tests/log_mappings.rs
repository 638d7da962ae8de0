//! Sealed segments are mapped by the reads that need them and given back
//! when idle: a partition of many segments holds its active segment's
//! mapping and at most `MAPPED_SEALED` others, after an open (clean or
//! recovered) and after reading everything; a poll reply held meanwhile
//! stays valid. Counted in `/proc/self/maps`, on real files.

#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use corelog_segment::io::UringStorage;
use corelog_segment::log::{PartitionLog, PollFrom, CLEAN_RECORD, MAPPED_SEALED};
use std::path::Path;

/// Mappings of the files under `dir` in this process.
fn mappings_of(dir: &Path) -> usize {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let dir = dir.to_str().unwrap();
    maps.lines().filter(|l| l.contains(dir)).count()
}

fn config() -> corelog_segment::log::LogConfig {
    corelog_segment::log::LogConfig {
        segment_bytes: 4096,
        ..small_config()
    }
}

async fn reads_map_a_few_segments_at_a_time(crashed: bool) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    let storage = || UringStorage::new(64).unwrap();
    let (log, _) = PartitionLog::open(storage(), &dir, 3, config())
        .await
        .unwrap();
    for i in 0..48 {
        log.append(batch(i, 2, 700)).await.unwrap();
    }
    let stored = read_all(&log);
    log.close().await.unwrap();
    let segments = log.segment_paths().len();
    drop(log);
    assert!(segments >= 10, "{segments} segments");
    assert_eq!(mappings_of(&dir), 0, "a closed log maps nothing");
    if crashed {
        std::fs::remove_file(dir.join(CLEAN_RECORD)).unwrap();
    }

    let (log, report) = PartitionLog::open(storage(), &dir, 3, config())
        .await
        .unwrap();
    let most = 1 + MAPPED_SEALED;
    let opened = mappings_of(&dir);
    assert!(
        opened <= most,
        "{opened} mappings after the open ({report})"
    );

    // Hold the reply of the first segment while reading all the others.
    let first = log.poll(PollFrom::First, 1).unwrap();
    let first_bytes: Vec<u8> = first.slices().flatten().copied().collect();
    let mut from = PollFrom::Offset(first.next_offset());
    let mut read = first.batches().count();
    loop {
        let reply = log.poll(from, 1).unwrap();
        if reply.is_empty() {
            break;
        }
        read += reply.batches().count();
        from = PollFrom::Offset(reply.next_offset());
        let now = mappings_of(&dir);
        assert!(
            now <= most + 2,
            "{now} mappings while reading (one held, one read)"
        );
    }
    assert_eq!(read, stored.len());
    assert!(
        mappings_of(&dir) <= most + 1,
        "the held reply keeps one more"
    );
    // The first segment's mapping was given back by the partition, not by
    // the reply: its bytes are still the stored ones.
    first.verify(&log.config().limits).unwrap();
    assert_eq!(first_bytes, stored[0].1);
    drop(first);
    assert!(mappings_of(&dir) <= most);
    assert_eq!(
        read_all(&log),
        stored,
        "everything reads back, mapped again"
    );
    log.close().await.unwrap();
}

#[test]
fn a_cleanly_closed_log_maps_sealed_segments_when_read() {
    run(reads_map_a_few_segments_at_a_time(false));
}

#[test]
fn a_recovered_log_gives_back_what_recovery_mapped() {
    run(reads_map_a_few_segments_at_a_time(true));
}
