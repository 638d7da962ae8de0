//! An active segment's index file while the segment grows: its durable
//! entries are written to the file in runs (every few hundred), each entry
//! once, in place, so a crash finds them there and recovery scans only the
//! log past the last one.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use corelog_segment::log::index::{decode_all, ENTRY_LEN};
use corelog_segment::log::{index_name, FsyncPolicy, LogConfig, PartitionLog};
use std::path::Path;

#[test]
fn an_active_segments_durable_entries_reach_its_index_file_each_once() {
    run_sim(async {
        let config = LogConfig {
            fsync: FsyncPolicy::Batch,
            segment_bytes: 4 << 20,
            // An entry for every batch.
            index_interval_bytes: 1,
            ..small_config()
        };
        let disk = sim_for(9, &config);
        let dir = Path::new("/p/9");
        let log = PartitionLog::open(disk.clone(), dir, 9, config)
            .await
            .unwrap()
            .0;
        let mut acks = Vec::new();
        for i in 0..1_000u64 {
            acks.push(log.append(batch(i, 1, 10)).await.unwrap());
        }
        // The runs' writes are tasks of their own: let them land.
        for _ in 0..100 {
            monoio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
        let entries = decode_all(&disk.file_bytes(&dir.join(index_name(0))).unwrap());
        // At least three runs of 256 reached the file, and each entry
        // names its batch.
        assert!(
            entries.len() >= 768,
            "{} entries in the file",
            entries.len()
        );
        for (e, ack) in entries.iter().zip(&acks) {
            assert_eq!(
                (u64::from(e.rel_offset), u64::from(e.position)),
                (ack.base_offset, ack.position),
            );
            assert_eq!(e.timestamp, ack.base_timestamp);
        }
        // Each entry written once: the disk took the log's data and the
        // index file's entries, nothing more (preallocation writes none).
        let last = acks.last().unwrap();
        let log_len = (last.position + last.bytes) as usize;
        let written = disk.counters().bytes_written as usize;
        assert_eq!(
            written,
            log_len + entries.len() * ENTRY_LEN,
            "bytes written: the log {log_len}, {} entries",
            entries.len()
        );
    });
}
