//! Bugs the fuzzers found, kept as named regression tests.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use corelog_segment::log::{Damage, LogConfig, LogError, OpenCheck, PartitionLog, PollFrom};
use std::path::Path;

/// fuzz/recovery crash-79b7d306: under `OpenCheck::Tail`, a batch before
/// the active segment's last index entry had its `base_offset` damaged.
/// Recovery does not look there, and a poll for that offset walked past
/// the damaged header (its offsets no longer held the one asked for) and
/// served the next batch: offsets skipped without an error. Every batch a
/// walk meets must now continue the one before.
#[test]
fn a_poll_never_skips_a_batch_whose_header_is_damaged() {
    run_sim(async {
        let config = LogConfig {
            index_interval_bytes: 1,
            open_check: OpenCheck::Tail,
            ..small_config()
        };
        let dir = Path::new("/p");
        let disk = sim_for(7, &config);
        let (log, _) = PartitionLog::open(disk.clone(), dir, 1, config.clone())
            .await
            .unwrap();
        for i in 0..6 {
            log.append(batch(i, 2, 100)).await.unwrap();
        }
        log.close().await.unwrap();
        drop(log);
        // Batch 2 (offsets 4..6) starts at byte 2 * len; flip its base_offset.
        let seg = dir.join("00000000000000000000.log");
        let bytes = disk.file_bytes(&seg).unwrap();
        let len = corelog_segment::check(&bytes[..bytes.len() / 6], &config.limits)
            .unwrap()
            .len();
        let at = 2 * len + 8;
        disk.corrupt(&seg, at, &[bytes[at] ^ 0x01]);
        let (log, _) = PartitionLog::open(disk.clone(), dir, 1, config.clone())
            .await
            .unwrap();
        match log.poll(PollFrom::Offset(4), 1 << 20) {
            Err(LogError::Corrupt {
                path,
                position,
                damage: Damage::OffsetGap { expected: 4, .. },
            }) => {
                assert_eq!(path, seg);
                assert_eq!(position, 2 * len as u64);
            }
            other => panic!("expected the damage to be named, got {other:?}"),
        }
        // A poll from the start serves the two batches before it, then stops.
        let reply = log.poll(PollFrom::First, 1 << 20).unwrap();
        assert_eq!((reply.first_offset(), reply.next_offset()), (0, 4));
    });
}
