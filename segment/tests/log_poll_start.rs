//! A poll from an offset inside a batch serves the whole stored batch (the
//! wire and disk layout), and its messages start at the offset asked for:
//! callers never trim the earlier messages themselves.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use corelog_segment::io::UringStorage;
use corelog_segment::log::{PartitionLog, PollFrom};

#[test]
fn messages_start_at_the_offset_asked_for_inside_a_batch() {
    let dir = tempfile::tempdir().unwrap();
    let pdir = dir.path().join("partitions/5");
    run(async {
        let storage = UringStorage::new(64).unwrap();
        let (log, _) = PartitionLog::open(storage, &pdir, 5, small_config())
            .await
            .unwrap();
        // Three batches of 4 messages: offsets 0-3, 4-7, 8-11.
        for tag in 0..3 {
            log.append(batch(tag, 4, 50)).await.unwrap();
        }
        for from in 0..12u64 {
            let reply = log.poll(PollFrom::Offset(from), 1 << 20).unwrap();
            // Whole batches: the first is the one holding `from`.
            assert_eq!(reply.first_offset(), from / 4 * 4, "from {from}");
            assert_eq!(reply.start_offset(), from, "from {from}");
            let offsets: Vec<u64> = reply.messages().map(|m| m.offset()).collect();
            assert_eq!(offsets, (from..12).collect::<Vec<_>>(), "from {from}");
            // The bytes served are still whole stored batches.
            let batch_starts: Vec<u64> = reply.batches().map(|b| b.base_offset()).collect();
            assert_eq!(batch_starts.first(), Some(&(from / 4 * 4)));
            assert_eq!(reply.len(), reply.slices().map(|s| s.len() as u64).sum());
        }
        // Polls not by offset start at their first batch.
        let first = log.poll(PollFrom::First, 1 << 20).unwrap();
        assert_eq!(first.start_offset(), 0);
        assert_eq!(first.messages().count(), 12);
        let last = log.poll(PollFrom::Last, 1 << 20).unwrap();
        assert_eq!(
            last.messages().map(|m| m.offset()).collect::<Vec<_>>(),
            vec![8, 9, 10, 11]
        );
        // Trimming a reply further, and past its end.
        let r = log
            .poll(PollFrom::Offset(2), 1 << 20)
            .unwrap()
            .starting_at(9);
        assert_eq!(
            r.messages().map(|m| m.offset()).collect::<Vec<_>>(),
            vec![9, 10, 11]
        );
        let r = log
            .poll(PollFrom::Offset(2), 1 << 20)
            .unwrap()
            .starting_at(40);
        assert_eq!((r.start_offset(), r.messages().count()), (12, 0));
        // Below the reply's first offset: the first.
        let r = log
            .poll(PollFrom::Offset(6), 1 << 20)
            .unwrap()
            .starting_at(0);
        assert_eq!(r.start_offset(), 4);
        // Past the end: empty, starting at the end.
        let r = log.poll(PollFrom::Offset(30), 1 << 20).unwrap();
        assert!(r.is_empty());
        assert_eq!((r.start_offset(), r.messages().count()), (12, 0));
        log.close().await.unwrap();
    });
}
