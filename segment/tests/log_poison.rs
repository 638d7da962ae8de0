//! A failed write or fdatasync poisons the partition: the append that
//! needed it and every later one fail with `LogError::Poisoned` naming the
//! cause, nothing acknowledged before is lost, and a reopen recovers.
//! A full disk is the same, with an error that says so.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use corelog_segment::io::{SimFaults, SimStorage};
use corelog_segment::log::{
    log_name, AppendError, FsyncPolicy, LogConfig, LogError, PartitionLog, Poison, PollFrom,
};
use corelog_segment::{Batch, Limits};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

const P: u64 = 6;
const DIR: &str = "/p";

fn config(fsync: FsyncPolicy) -> LogConfig {
    LogConfig {
        fsync,
        segment_bytes: 1 << 20,
        index_interval_bytes: 1024,
        limits: Limits {
            max_batch_bytes: 64 << 10,
        },
        ..LogConfig::default()
    }
}

async fn open(disk: &SimStorage, config: &LogConfig) -> PartitionLog<SimStorage> {
    match PartitionLog::open(disk.clone(), Path::new(DIR), P, config.clone()).await {
        Ok((log, _)) => log,
        Err(e) => panic!("open: {e}"),
    }
}

/// The disk's next fdatasync fails (one, counted from now).
fn fail_next_sync(disk: &SimStorage) {
    disk.set_faults(SimFaults {
        fail_sync_at: Some(disk.counters().syncs),
        ..SimFaults::default()
    });
}

fn seg0() -> PathBuf {
    Path::new(DIR).join(log_name(0))
}

/// The cause of a poisoned append.
fn cause(e: &AppendError) -> Arc<Poison> {
    match e {
        AppendError::Log(e) => log_cause(e),
        other => panic!("expected Poisoned, got: {other}"),
    }
}

/// The cause of a poisoned flush (or other request).
fn log_cause(e: &LogError) -> Arc<Poison> {
    match e {
        LogError::Poisoned { partition, cause } => {
            assert_eq!(*partition, P);
            cause.clone()
        }
        other => panic!("expected Poisoned, got: {other}"),
    }
}

/// Appends `n` batches one by one (each acknowledged before the next).
async fn acked(log: &PartitionLog<SimStorage>, tags: std::ops::Range<u64>) -> Vec<(u64, Vec<u8>)> {
    let mut out = Vec::new();
    for t in tags {
        let b = batch(t, 2, 150);
        let ack = log.append(b.clone()).await.unwrap();
        out.push((
            ack.base_offset,
            stored_form(&b, P, ack.base_offset, ack.base_timestamp),
        ));
    }
    out
}

/// Reopens `disk` (a power-cut copy or the same disk) and checks that the
/// log starts with `kept` and that appends continue after what it holds.
async fn reopen_and_continue(disk: &SimStorage, config: &LogConfig, kept: &[(u64, Vec<u8>)]) {
    let log = open(disk, config).await;
    let all = read_all(&log);
    assert!(all.len() >= kept.len(), "{} < {}", all.len(), kept.len());
    assert_eq!(
        all[..kept.len()],
        kept[..],
        "everything acknowledged is still there"
    );
    let next = log.next_offset();
    let b = batch(999, 1, 10);
    let ack = log.append(b.clone()).await.unwrap();
    assert_eq!(ack.base_offset, next, "appends work again");
    let last = log.poll(PollFrom::Last, 0).unwrap();
    assert_eq!(
        last.batches().next().unwrap().as_bytes(),
        &stored_form(&b, P, next, ack.base_timestamp)[..]
    );
    log.close().await.unwrap();
}

#[test]
fn a_failed_fsync_poisons_the_partition_until_it_is_reopened() {
    run_sim(async {
        let config = config(FsyncPolicy::Batch);
        let disk = sim_for(1, &config);
        let log = open(&disk, &config).await;
        let kept = acked(&log, 0..5).await;
        fail_next_sync(&disk);
        // Three appends waiting for the same (failing) group commit.
        let futs: Vec<_> = (10..13).map(|t| log.append(batch(t, 1, 50))).collect();
        for f in futs {
            let err = f.await.unwrap_err();
            let c = cause(&err);
            assert_eq!((c.op, c.path.clone()), ("fdatasync", seg0()), "{err}");
            assert_eq!(c.error.raw_os_error(), Some(libc::EIO));
            let shown = err.to_string();
            assert!(
                shown.contains("poisoned")
                    && shown.contains("fdatasync")
                    && shown.contains(&log_name(0)),
                "{shown}"
            );
        }
        assert!(log.is_poisoned() && log.stats().poisoned);
        // Every later append, and a flush, fail at once with the same cause.
        let first = cause(&log.append(batch(20, 1, 50)).await.unwrap_err());
        assert_eq!(first.op, "fdatasync");
        for t in 21..24 {
            let again = cause(&log.append(batch(t, 1, 50)).await.unwrap_err());
            assert!(Arc::ptr_eq(&first, &again), "the one cause, every time");
        }
        assert_eq!(log_cause(&log.flush().await.unwrap_err()).op, "fdatasync");
        // Its sync rounds all ended, the failed one too: the log is idle, so
        // the shard may close it (and a reopen recovers it).
        for _ in 0..20 {
            yield_to_others().await;
        }
        assert!(
            log.is_idle(),
            "a poisoned log with nothing in flight is idle"
        );
        // What readers see never went past what was acknowledged.
        assert_eq!(read_all(&log), kept);
        // Reopen after a power cut, and on the same disk (a process restart).
        let cut = disk.crash();
        drop(log);
        disk.set_faults(SimFaults::default());
        reopen_and_continue(&cut, &config, &kept).await;
        reopen_and_continue(&disk, &config, &kept).await;
    });
}

#[test]
fn a_failed_fsync_while_sealing_poisons_the_partition() {
    run_sim(async {
        // Under an hour-long interval the only fdatasync is the one of the
        // round that seals segment 0 (under `never`, sealing waits for the
        // kernel's write-back first).
        let config = LogConfig {
            segment_bytes: 2048,
            ..config(FsyncPolicy::Interval(Duration::from_secs(3600)))
        };
        let disk = sim_for(2, &config);
        let log = open(&disk, &config).await;
        fail_next_sync(&disk);
        let kept = acked(&log, 0..4).await;
        // The 5th batch finds segment 0 full: it rotates and is
        // acknowledged once written (the interval's way); the sync round
        // the seal starts fails on segment 0 and poisons the log.
        let fifth = log.append(batch(4, 2, 150));
        assert_eq!(log.stats().segments, 2, "the 5th batch rotated");
        fifth.await.unwrap();
        for _ in 0..50 {
            yield_to_others().await;
        }
        assert!(log.is_poisoned(), "the sealing round's failure poisons");
        let err = log.append(batch(8, 1, 10)).await.unwrap_err();
        let c = cause(&err);
        assert_eq!((c.op, c.path.clone()), ("fdatasync", seg0()), "{err}");
        let index = disk.file_bytes(&seg0().with_extension("index"));
        assert!(
            index.is_none_or(|b| corelog_segment::log::index::decode_file(&b).1.is_none()),
            "no seal record for a segment whose sync failed"
        );
        let later = log.append(batch(9, 1, 10)).await.unwrap_err();
        assert!(Arc::ptr_eq(&cause(&later), &c));
        drop(log);
        disk.set_faults(SimFaults::default());
        reopen_and_continue(&disk, &config, &kept).await;
    });
}

#[test]
fn a_failed_interval_fsync_poisons_the_partition() {
    run_sim(async {
        let config = config(FsyncPolicy::Interval(Duration::from_millis(10)));
        let disk = sim_for(3, &config);
        let log = open(&disk, &config).await;
        fail_next_sync(&disk);
        let kept = acked(&log, 0..3).await;
        // Generous: wait up to 20 s for the background sync to fail.
        for _ in 0..2000 {
            if log.is_poisoned() {
                break;
            }
            monoio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(log.is_poisoned(), "the interval sync failed");
        assert_eq!(
            cause(&log.append(batch(5, 1, 5)).await.unwrap_err()).op,
            "fdatasync"
        );
        drop(log);
        disk.set_faults(SimFaults::default());
        reopen_and_continue(&disk, &config, &kept).await;
    });
}

/// A failed write under each policy: the append whose write failed, the
/// ones reserved after it, and every later one fail; the log ends before
/// the failed write's batch.
#[test]
fn a_failed_write_poisons_the_partition_until_it_is_reopened() {
    for fsync in [FsyncPolicy::Never, FsyncPolicy::Batch] {
        run_sim(async {
            let config = config(fsync);
            let disk = sim_for(4, &config);
            let log = open(&disk, &config).await;
            let kept = acked(&log, 0..5).await;
            disk.set_faults(SimFaults {
                fail_write_at: Some(disk.counters().writes),
                ..SimFaults::default()
            });
            let futs: Vec<_> = (10..14).map(|t| log.append(batch(t, 1, 50))).collect();
            for f in futs {
                let err = f.await.unwrap_err();
                let c = cause(&err);
                assert_eq!((c.op, c.path.clone()), ("write", seg0()), "{fsync}: {err}");
                assert_eq!(c.error.raw_os_error(), Some(libc::EIO));
            }
            assert_eq!(
                cause(&log.append(batch(20, 1, 5)).await.unwrap_err()).op,
                "write"
            );
            assert_eq!(
                read_all(&log),
                kept,
                "{fsync}: readers see nothing past the failure"
            );
            let cut = disk.crash();
            drop(log);
            disk.set_faults(SimFaults::default());
            // The batches written after the failed one follow a hole: the
            // log must end before it (offset 10), after a power cut or not.
            for d in [&cut, &disk] {
                let log = open(d, &config).await;
                if fsync == FsyncPolicy::Batch {
                    assert_eq!(read_all(&log), kept, "{fsync}");
                } else {
                    assert!(read_all(&log).len() <= kept.len(), "{fsync}");
                }
                drop(log);
            }
            reopen_and_continue(&disk, &config, &kept).await;
        });
    }
}

/// Appends until an append fails; returns what was acknowledged and the
/// error.
async fn fill_until_full(log: &PartitionLog<SimStorage>) -> (Vec<(u64, Vec<u8>)>, AppendError) {
    let mut kept = Vec::new();
    for t in 0..1000 {
        let b: Batch = batch(t, 2, 150);
        match log.append(b.clone()).await {
            Ok(ack) => kept.push((
                ack.base_offset,
                stored_form(&b, P, ack.base_offset, ack.base_timestamp),
            )),
            Err(e) => return (kept, e),
        }
    }
    panic!("1000 appends and the disk is still not full")
}

#[test]
fn a_full_disk_is_a_clear_error_and_loses_nothing_acknowledged() {
    for fsync in [FsyncPolicy::Batch, FsyncPolicy::Never] {
        run_sim(async {
            let config = LogConfig {
                preallocate: false,
                ..config(fsync)
            };
            let disk = sim_for(5, &config);
            let log = open(&disk, &config).await;
            disk.set_faults(SimFaults {
                space_limit: Some(5000),
                ..SimFaults::default()
            });
            let (kept, err) = fill_until_full(&log).await;
            assert!(
                !kept.is_empty() && kept.len() < 20,
                "{fsync}: {}",
                kept.len()
            );
            assert!(err.is_no_space(), "{fsync}: a full disk says so: {err}");
            let c = cause(&err);
            assert_eq!(c.error.raw_os_error(), Some(libc::ENOSPC));
            let shown = err.to_string();
            assert!(shown.contains("No space left on device"), "{shown}");
            let later = log.append(batch(100, 1, 1)).await.unwrap_err();
            assert!(later.is_no_space(), "{later}");
            assert_eq!(read_all(&log), kept);
            let cut = disk.crash();
            drop(log);
            // Still full: a reopen either works or says the disk is full.
            match PartitionLog::open(disk.clone(), Path::new(DIR), P, config.clone()).await {
                Ok((log, _)) => assert_eq!(read_all(&log)[..kept.len()], kept[..]),
                Err(e) => assert!(e.is_no_space(), "{e}"),
            }
            // Space freed: reopen and go on, after a power cut or not.
            disk.set_faults(SimFaults::default());
            if fsync == FsyncPolicy::Batch {
                reopen_and_continue(&cut, &config, &kept).await;
            }
            reopen_and_continue(&disk, &config, &kept).await;
        });
    }
}

/// After a failed fdatasync the page cache may still hold the bytes it
/// failed to write (Linux marks the pages clean after a writeback error;
/// the simulator models the worst case: what a power cut keeps lacks
/// them). A reopen in the same boot reads those bytes back, recovery's own
/// fdatasync succeeds without writing them, and the log serves as durable a
/// batch that a power cut then takes away: under `fsync=batch` a reader
/// saw something that vanished.
///
/// Regression: the poisoned log now leaves a `POISONED` marker and the next
/// open rewrites what it recovers past the durable point before syncing.
#[test]
fn batches_a_failed_fsync_lost_are_not_served_after_a_reopen() {
    run_sim(async {
        let config = config(FsyncPolicy::Batch);
        let disk = sim_for(6, &config);
        let log = open(&disk, &config).await;
        let kept = acked(&log, 0..3).await;
        fail_next_sync(&disk);
        assert!(log.append(batch(10, 1, 50)).await.is_err());
        drop(log);
        disk.set_faults(SimFaults::default());
        let reopened = open(&disk, &config).await;
        let served = read_all(&reopened);
        assert!(served.len() >= kept.len());
        for copy in 0..20 {
            let after = open(&disk.crash(), &config).await;
            assert_eq!(
                read_all(&after),
                served,
                "power cut {copy}: what the reopened log served is gone"
            );
        }
    });
}

/// Closing a poisoned log fails with its cause and leaves no clean-close
/// record: the next open must not trust what the log last described, so it
/// recovers by scanning, and what was acknowledged is there.
#[test]
fn a_poisoned_log_closes_with_its_cause_and_no_clean_close_record() {
    use corelog_segment::log::{CleanClose, CLEAN_RECORD};
    run_sim(async {
        let config = config(FsyncPolicy::Batch);
        let disk = sim_for(3, &config);
        let log = open(&disk, &config).await;
        let kept = acked(&log, 0..5).await;
        fail_next_sync(&disk);
        assert!(log.append(batch(10, 1, 50)).await.is_err());
        assert!(log.is_poisoned());
        for _ in 0..20 {
            yield_to_others().await;
        }
        let err = log.close().await.unwrap_err();
        assert_eq!(log_cause(&err).op, "fdatasync", "{err}");
        assert!(
            disk.file_bytes(&Path::new(DIR).join(CLEAN_RECORD))
                .is_none(),
            "a poisoned log wrote a clean-close record"
        );
        drop(log);
        disk.set_faults(SimFaults::default());
        let (reopened, report) =
            PartitionLog::open(disk.clone(), Path::new(DIR), P, config.clone())
                .await
                .unwrap();
        assert_eq!(
            report.clean_close,
            CleanClose::NotFound,
            "recovered by scanning: {report:?}"
        );
        drop(reopened);
        reopen_and_continue(&disk, &config, &kept).await;
    });
}
