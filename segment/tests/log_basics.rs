//! The partition log end to end on real files through io_uring.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use corelog_segment::io::UringStorage;
use corelog_segment::log::{FsyncPolicy, LogConfig, PartitionLog, PollFrom};

#[test]
fn appends_poll_back_byte_exact_and_survive_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let pdir = dir.path().join("partitions/3");
    let config = small_config();
    let sent: Vec<_> = (0..40)
        .map(|i| batch(i, 1 + (i as usize % 5), 300))
        .collect();
    let stored = run(async {
        let storage = UringStorage::new(64).unwrap();
        let (log, report) = PartitionLog::open(storage, &pdir, 3, config.clone())
            .await
            .unwrap();
        assert_eq!(report.next_offset, 0);
        let mut futs = Vec::new();
        for b in &sent {
            futs.push(log.append(b.clone()));
        }
        let mut expected = 0;
        for (f, b) in futs.into_iter().zip(&sent) {
            let ack = f.await.unwrap();
            assert_eq!(ack.base_offset, expected);
            expected += u64::from(b.as_ref().message_count());
        }
        assert!(
            log.stats().segments > 2,
            "16 KiB segments should rotate: {:?}",
            log.stats()
        );
        let all = read_all(&log);
        log.close().await.unwrap();
        all
    });
    assert_eq!(stored.len(), sent.len());
    for ((off, bytes), b) in stored.iter().zip(&sent) {
        let view = corelog_segment::check(bytes, &config.limits).unwrap();
        assert_eq!(view.base_offset(), *off);
        assert_eq!(view.partition_id(), 3);
        assert_eq!(
            view.blob(),
            b.as_ref().blob(),
            "frames are stored untouched"
        );
    }
    run(async {
        let storage = UringStorage::new(64).unwrap();
        let (log, report) = PartitionLog::open(storage, &pdir, 3, config.clone())
            .await
            .unwrap();
        assert_eq!(
            report.cut, None,
            "a clean close leaves nothing to cut: {report}"
        );
        assert_eq!(read_all(&log), stored);
        let ack = log.append(batch(99, 2, 10)).await.unwrap();
        assert_eq!(
            ack.base_offset,
            stored
                .last()
                .map(|(o, b)| o + u64::from(
                    corelog_segment::check(b, &config.limits)
                        .unwrap()
                        .message_count()
                ))
                .unwrap()
        );
        log.close().await.unwrap();
    });
}

#[test]
fn batch_policy_group_commits() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        fsync: FsyncPolicy::Batch,
        ..small_config()
    };
    run(async {
        let storage = UringStorage::new(256).unwrap();
        let (log, _) = PartitionLog::open(storage, dir.path(), 1, config)
            .await
            .unwrap();
        let futs: Vec<_> = (0..100).map(|i| log.append(batch(i, 1, 40))).collect();
        for f in futs {
            f.await.unwrap();
        }
        let stats = log.stats();
        assert_eq!(stats.next_offset, 100);
        assert!(
            stats.syncs < 100,
            "100 concurrent appends should share syncs: {stats:?}"
        );
        let last = log.poll(PollFrom::Last, 0).unwrap();
        assert_eq!(last.first_offset(), 99);
    });
}

/// The log's own bound on a batch (its segments are mapped with room for
/// one): a batch of exactly `max_batch_bytes` is stored, one byte larger
/// is refused naming both sizes, and nothing of it is stored.
#[test]
fn a_batch_of_exactly_max_batch_bytes_is_stored_and_a_larger_one_refused() {
    use corelog_segment::log::AppendError;
    use corelog_segment::{BatchError, Limits};
    let fits = batch(1, 1, 300);
    let over = batch(2, 1, 301);
    let max = fits.len() as u64;
    assert_eq!(over.len() as u64, max + 1);
    let config = LogConfig {
        limits: Limits {
            max_batch_bytes: max,
        },
        ..small_config()
    };
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let storage = UringStorage::new(64).unwrap();
        let (log, _) = PartitionLog::open(storage, dir.path(), 3, config)
            .await
            .unwrap();
        let ack = log.append(fits.clone()).await.unwrap();
        assert_eq!(ack.base_offset, 0);
        match log.append(over).await {
            Err(AppendError::TooLarge(BatchError::TooLarge { declared, max: m })) => {
                assert_eq!((declared, m), (max + 1, max));
            }
            other => panic!("expected TooLarge, got {other:?}"),
        }
        assert_eq!(
            read_all(&log).len(),
            1,
            "nothing of the refused batch stored"
        );
        assert_eq!(log.append(fits).await.unwrap().base_offset, 1);
        let stats = log.stats();
        assert_eq!(
            (stats.appends, stats.end_offset),
            (2, 2),
            "the refused one not counted"
        );
        log.close().await.unwrap();
    });
}
