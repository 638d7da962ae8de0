//! Retention: `enforce_retention` deletes sealed segments oldest first,
//! never the active one, and a poll reply taken before a deletion still
//! reads its bytes (on real files: a mapping outlives the unlink).
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use corelog_segment::io::{SimStorage, Storage, UringStorage};
use corelog_segment::log::{
    index_name, log_name, FsyncPolicy, LogConfig, PartitionLog, PollFrom, Retention,
};
use corelog_segment::Limits;
use std::path::Path;
use std::time::Duration;

const P: u64 = 8;
/// A fixed batch: one 600-byte message, 907 bytes; 5 per segment.
const L: u64 = 907;

fn config(retention: Retention) -> LogConfig {
    LogConfig {
        segment_bytes: 4096,
        index_interval_bytes: 1024,
        limits: Limits {
            max_batch_bytes: 64 << 10,
        },
        retention,
        ..LogConfig::default()
    }
}

/// The seed of this file's simulated disk (see `on_both!`).
const SIM_SEED: u64 = 3;

/// 23 batches stamped with timestamps 1000 + 10 * i: segments 0, 5, 10,
/// 15 sealed (4535 bytes each), 20 active (3 batches). Closed and reopened,
/// so every sealed segment is confirmed. Returns the stored batches.
async fn build<S: Storage>(
    storage: impl Fn() -> S,
    dir: &Path,
    config: &LogConfig,
) -> (PartitionLog<S>, Vec<(u64, Vec<u8>)>) {
    let (log, _) = PartitionLog::open(storage(), dir, P, config.clone())
        .await
        .unwrap();
    let mut stored = Vec::new();
    for i in 0..23u64 {
        let b = stamped(i, 1, 600, P, i, 1000 + 10 * i);
        assert_eq!(b.len() as u64, L);
        log.append_stamped(b.clone()).await.unwrap();
        stored.push((i, b.as_ref().as_bytes().to_vec()));
    }
    log.close().await.unwrap();
    let (log, _) = PartitionLog::open(storage(), dir, P, config.clone())
        .await
        .unwrap();
    assert_eq!(log.stats().segments, 5);
    (log, stored)
}

fn names_of(bases: &[u64]) -> Vec<String> {
    let mut v: Vec<String> = bases
        .iter()
        .flat_map(|&b| [log_name(b), index_name(b)])
        .collect();
    v.sort();
    v
}

async fn retention_by_size_deletes_the_oldest_sealed_segments<S: Storage, D: Disk>(
    storage: impl Fn() -> S,
    disk: &D,
    dir: &Path,
) {
    // 4 × 4535 + 3 × 907 = 20861 bytes; at most 10000: segments 0, 5 and
    // 10 go (20861 → 16326 → 11791 → 7256).
    let config = config(Retention {
        max_age: None,
        max_bytes: Some(10_000),
    });
    let (log, stored) = build(&storage, dir, &config).await;
    assert_eq!(log.stats().bytes, 20861);
    let deleted = log.enforce_retention(u64::MAX).await.unwrap();
    assert_eq!(deleted, [0, 5, 10].map(|b| dir.join(log_name(b))).to_vec());
    assert_eq!(
        disk.names(dir),
        names_of(&[15, 20]),
        "logs and indexes gone"
    );
    let stats = log.stats();
    assert_eq!(
        (stats.first_offset, stats.segments, stats.bytes),
        (15, 2, 7256)
    );
    assert_eq!(read_all(&log), stored[15..]);
    // An offset retention deleted: the first retained batch.
    let reply = log.poll(PollFrom::Offset(3), 0).unwrap();
    assert_eq!(reply.first_offset(), 15);
    assert_eq!(log.poll(PollFrom::First, 0).unwrap().first_offset(), 15);
    // Nothing more to do; appends go on; a reopen agrees.
    assert!(log.enforce_retention(u64::MAX).await.unwrap().is_empty());
    let ack = log.append(batch(50, 1, 10)).await.unwrap();
    assert_eq!(ack.base_offset, 23);
    log.close().await.unwrap();
    let (log, report) = PartitionLog::open(storage(), dir, P, config).await.unwrap();
    assert_eq!(
        (report.cut.clone(), report.next_offset),
        (None, 24),
        "{report}"
    );
    assert_eq!(read_all(&log)[..8], stored[15..]);
}
on_both!(retention_by_size_deletes_the_oldest_sealed_segments);

/// A log of exactly its size limit is within it: with 11791 bytes allowed,
/// segments 0 and 5 go (20861 → 16326 → 11791) and 10 stays.
async fn retention_by_size_keeps_a_log_of_exactly_its_limit<S: Storage, D: Disk>(
    storage: impl Fn() -> S,
    disk: &D,
    dir: &Path,
) {
    let config = config(Retention {
        max_age: None,
        max_bytes: Some(11_791),
    });
    let (log, _) = build(&storage, dir, &config).await;
    let deleted = log.enforce_retention(u64::MAX).await.unwrap();
    assert_eq!(deleted, [0, 5].map(|b| dir.join(log_name(b))).to_vec());
    assert_eq!(log.stats().bytes, 11_791);
    assert_eq!(disk.names(dir), names_of(&[10, 15, 20]));
}
on_both!(retention_by_size_keeps_a_log_of_exactly_its_limit);

async fn retention_never_deletes_the_active_segment<S: Storage, D: Disk>(
    storage: impl Fn() -> S,
    disk: &D,
    dir: &Path,
) {
    let config = config(Retention {
        max_age: Some(Duration::from_micros(1)),
        max_bytes: Some(0),
    });
    let (log, stored) = build(&storage, dir, &config).await;
    let deleted = log.enforce_retention(u64::MAX).await.unwrap();
    assert_eq!(deleted.len(), 4);
    assert_eq!(disk.names(dir), names_of(&[20]));
    assert_eq!(read_all(&log), stored[20..]);
    assert!(
        log.enforce_retention(u64::MAX).await.unwrap().is_empty(),
        "the active one stays"
    );
    assert_eq!(log.stats().segments, 1);
}
on_both!(retention_never_deletes_the_active_segment);

/// Segment 5's newest batch has timestamp 1090, segment 10's 1140: with a
/// maximum age of 100 µs at time 1191, segments 0 and 5 are too old
/// (1040 + 100 and 1090 + 100 are before 1191), 10 is not, so 15 stays too
/// even when old (oldest first).
async fn retention_by_age_deletes_segments_whose_newest_batch_is_too_old<S: Storage, D: Disk>(
    storage: impl Fn() -> S,
    disk: &D,
    dir: &Path,
) {
    let config = config(Retention {
        max_age: Some(Duration::from_micros(100)),
        max_bytes: None,
    });
    let (log, stored) = build(&storage, dir, &config).await;
    assert!(
        log.enforce_retention(1140).await.unwrap().is_empty(),
        "segment 0's newest is 1040"
    );
    assert_eq!(
        log.enforce_retention(1191).await.unwrap(),
        [0, 5].map(|b| dir.join(log_name(b))).to_vec()
    );
    assert_eq!(disk.names(dir), names_of(&[10, 15, 20]));
    assert_eq!(read_all(&log), stored[10..]);
    assert_eq!(
        log.enforce_retention(1240).await.unwrap().len(),
        0,
        "1140 + 100 is not before 1240"
    );
    assert_eq!(log.enforce_retention(1241).await.unwrap().len(), 1);
}
on_both!(retention_by_age_deletes_segments_whose_newest_batch_is_too_old);

/// A reply taken before the deletion keeps its segments mapped: it still
/// reads every byte after the files are unlinked, and after the log is
/// gone.
async fn a_poll_reply_outlives_the_deletion_of_its_segments<S: Storage, D: Disk>(
    storage: impl Fn() -> S,
    disk: &D,
    dir: &Path,
) {
    let config = config(Retention {
        max_age: None,
        max_bytes: Some(0),
    });
    let (log, stored) = build(&storage, dir, &config).await;
    let reply = log.poll(PollFrom::First, 17 * L).unwrap();
    assert_eq!((reply.batch_count(), reply.slices().count()), (17, 4));
    let want: Vec<u8> = stored[..17].iter().flat_map(|(_, b)| b.clone()).collect();
    assert_eq!(log.enforce_retention(u64::MAX).await.unwrap().len(), 4);
    for b in [0, 5, 10, 15] {
        assert!(
            disk.read(&dir.join(log_name(b))).is_none(),
            "segment {b} unlinked"
        );
    }
    drop(log);
    let bytes: Vec<u8> = reply.slices().flatten().copied().collect();
    assert_eq!(bytes, want, "the reply reads its bytes after the unlink");
    reply.verify(&Limits::default()).unwrap();
    let offsets: Vec<u64> = reply.batches().map(|b| b.base_offset()).collect();
    assert_eq!(offsets, (0..17).collect::<Vec<_>>());
    let mut out = Vec::new();
    reply.write_to(&mut out).unwrap();
    assert_eq!(out, want);
}
on_both!(a_poll_reply_outlives_the_deletion_of_its_segments);

/// A power cut after retention: the removals since the last directory sync
/// may each land or not. Whatever lands, the log must open, and hold a
/// suffix of what it held, from a segment boundary.
///
/// Regression: removals used to share one directory sync at the end, so a
/// power cut could keep an older segment's name and lose a newer one's: a
/// gap that refused to open. Each removal is now made durable in order.
#[test]
fn a_power_cut_after_retention_leaves_a_log_that_opens() {
    run_sim(async {
        let config = LogConfig {
            fsync: FsyncPolicy::Batch,
            ..config(Retention {
                max_age: None,
                max_bytes: Some(10_000),
            })
        };
        let sim = sim_for(4, &config);
        let dir = Path::new("/p");
        let (log, stored) = build(|| sim.clone(), dir, &config).await;
        assert_eq!(log.enforce_retention(u64::MAX).await.unwrap().len(), 3);
        for copy in 0..40 {
            let cut = sim.crash();
            match PartitionLog::open(cut.clone(), dir, P, config.clone()).await {
                Ok((after, _)) => {
                    let all = read_all(&after);
                    let first = all[0].0;
                    assert!([0, 5, 10, 15].contains(&first), "power cut {copy}");
                    assert_eq!(all, stored[first as usize..], "power cut {copy}");
                }
                Err(e) => panic!(
                    "power cut {copy} after retention: the log does not open: {e}; files {:?}",
                    cut.files()
                ),
            }
        }
    });
}

/// `delete_oldest_segments(n)` removes the n oldest sealed segments, and
/// never the active one however many are asked for.
async fn deleting_the_oldest_segments_by_count<S: Storage, D: Disk>(
    storage: impl Fn() -> S,
    disk: &D,
    dir: &Path,
) {
    let (log, stored) = build(&storage, dir, &config(Retention::default())).await;
    assert!(log.delete_oldest_segments(0).await.unwrap().is_empty());
    assert_eq!(
        log.delete_oldest_segments(2).await.unwrap(),
        [0, 5].map(|b| dir.join(log_name(b))).to_vec()
    );
    assert_eq!(disk.names(dir), names_of(&[10, 15, 20]));
    assert_eq!(read_all(&log), stored[10..]);
    assert_eq!(
        log.delete_oldest_segments(100).await.unwrap(),
        [10, 15].map(|b| dir.join(log_name(b))).to_vec(),
        "the active segment stays"
    );
    assert_eq!(disk.names(dir), names_of(&[20]));
    assert_eq!(log.stats().first_offset, 20);
}
on_both!(deleting_the_oldest_segments_by_count);

/// Limits set on an open log replace its configuration's: none configured,
/// a size limit set, the next enforcement applies it.
async fn retention_set_on_an_open_log_applies<S: Storage, D: Disk>(
    storage: impl Fn() -> S,
    disk: &D,
    dir: &Path,
) {
    let (log, stored) = build(&storage, dir, &config(Retention::default())).await;
    assert!(log.enforce_retention(u64::MAX).await.unwrap().is_empty());
    let limits = Retention {
        max_age: None,
        max_bytes: Some(10_000),
    };
    log.set_retention(limits);
    assert_eq!(log.retention(), limits);
    assert_eq!(log.enforce_retention(u64::MAX).await.unwrap().len(), 3);
    assert_eq!(disk.names(dir), names_of(&[15, 20]));
    assert_eq!(read_all(&log), stored[15..]);
}
on_both!(retention_set_on_an_open_log_applies);
