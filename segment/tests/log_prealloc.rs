//! Preallocation ahead of the write position: in steps that grow with the
//! write rate, never a whole segment at once, within a shard's budget, and
//! nothing for partitions that only open.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use corelog_segment::io::UringStorage;
use corelog_segment::log::{
    log_name, preallocated_ahead, FsyncPolicy, LogConfig, PartitionLog, Preallocation,
};

fn config(budget: u64) -> LogConfig {
    LogConfig {
        segment_bytes: 64 << 20,
        fsync: FsyncPolicy::Never,
        preallocation: Preallocation {
            step_min: 1 << 20,
            step_max: 8 << 20,
            budget,
        },
        ..LogConfig::default()
    }
}

fn file_len(path: &std::path::Path) -> u64 {
    std::fs::metadata(path).unwrap().len()
}

/// Waits until the steps in flight on the ring have landed.
async fn settle() {
    for _ in 0..50 {
        yield_to_others().await;
    }
    monoio::time::sleep(std::time::Duration::from_millis(20)).await;
}

#[test]
fn a_busy_partition_grows_its_step_and_never_preallocates_a_whole_segment() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("1");
    run(async {
        let config = config(1 << 30);
        let (log, _) = PartitionLog::open(UringStorage::new(64).unwrap(), &dir, 1, config.clone())
            .await
            .unwrap();
        let seg = dir.join(log_name(0));
        assert_eq!(file_len(&seg), 0, "opening preallocates nothing");
        let mut written = 0u64;
        let mut ahead_seen = Vec::new();
        for i in 0..200 {
            let ack = log.append(batch(i, 4, 30_000)).await.unwrap();
            written = ack.position + ack.bytes;
            settle().await;
            let len = file_len(&seg);
            assert!(len >= written, "the file holds what was written");
            let ahead = len - written;
            assert!(
                ahead <= 8 << 20,
                "never more than the largest step ahead: {ahead}"
            );
            ahead_seen.push(ahead);
        }
        assert!(written > 20 << 20, "{written}");
        assert!(
            ahead_seen.iter().any(|&a| a > 2 << 20),
            "the step grew past its start for a busy partition: {ahead_seen:?}"
        );
        assert!(file_len(&seg) < config.segment_bytes, "not a whole segment");
        log.close().await.unwrap();
        assert_eq!(file_len(&seg), written, "a clean close trims the step");
        assert_eq!(preallocated_ahead(), 0, "nothing left ahead after close");
    });
}

#[test]
fn a_shard_budget_bounds_what_many_partitions_preallocate() {
    let tmp = tempfile::tempdir().unwrap();
    run(async {
        let budget = 4u64 << 20;
        let config = config(budget);
        let storage = UringStorage::new(256).unwrap();
        let mut logs = Vec::new();
        for p in 0..40u64 {
            let (log, _) = PartitionLog::open(
                storage.clone(),
                tmp.path().join(p.to_string()),
                p,
                config.clone(),
            )
            .await
            .unwrap();
            logs.push(log);
        }
        for round in 0..3u64 {
            for log in &logs {
                log.append(batch(round, 1, 1000)).await.unwrap();
                assert!(preallocated_ahead() <= budget, "{}", preallocated_ahead());
            }
        }
        settle().await;
        let mut over = 0u64;
        for (p, log) in logs.iter().enumerate() {
            let len = file_len(&tmp.path().join(p.to_string()).join(log_name(0)));
            over += len - log.stats().bytes;
        }
        assert!(
            over <= budget,
            "preallocated past the data: {over} > budget {budget}"
        );
        assert!(over > 0, "some partitions got a step");
        for log in &logs {
            log.close().await.unwrap();
        }
        assert_eq!(preallocated_ahead(), 0);
    });
}
