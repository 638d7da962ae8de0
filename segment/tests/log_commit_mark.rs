//! The commit mark (`LogConfig::commit_gate`): a replicated log writes
//! batches before they are committed and serves them only once they are
//! below the mark its owner moves, on every path a reader takes (poll by
//! offset, from the first or last batch, by timestamp, the stats' visible
//! end), across segments and a reopen; while its owner reads back what it
//! wrote, committed or not (`read_written`).
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use corelog_segment::io::SimStorage;
use corelog_segment::log::{CommitMarkError, FsyncPolicy, LogConfig, PartitionLog, PollFrom};
use std::path::Path;

const DIR: &str = "/p/1";

fn gated(fsync: FsyncPolicy, segment_bytes: u64) -> LogConfig {
    LogConfig {
        fsync,
        segment_bytes,
        commit_gate: true,
        ..small_config()
    }
}

async fn open(disk: &SimStorage, config: &LogConfig) -> PartitionLog<SimStorage> {
    PartitionLog::open(disk.clone(), Path::new(DIR), 1, config.clone())
        .await
        .unwrap()
        .0
}

/// The base offsets of every batch a reader can see, from the first.
fn served(log: &PartitionLog<SimStorage>) -> Vec<u64> {
    let reply = log.poll(PollFrom::First, u64::MAX).unwrap();
    reply.batches().map(|b| b.base_offset()).collect()
}

#[test]
fn acknowledged_batches_are_served_only_below_the_commit_mark() {
    for fsync in [FsyncPolicy::Never, FsyncPolicy::Batch] {
        run_sim(async move {
            let config = gated(fsync, 1 << 20);
            let disk = sim_for(1, &config);
            let log = open(&disk, &config).await;
            // Five batches of two messages: offsets 0, 2, 4, 6, 8.
            for i in 0..5 {
                log.append(batch(i, 2, 40)).await.unwrap();
            }
            assert_eq!(log.commit_mark(), Some(0));
            assert!(served(&log).is_empty(), "{fsync}: served before any commit");
            assert_eq!(log.stats().next_offset, 0);
            assert_eq!(log.stats().end_offset, 10);

            log.set_commit_mark(4).unwrap();
            assert_eq!(served(&log), vec![0, 2], "{fsync}");
            assert_eq!(log.stats().next_offset, 4);
            assert!(log.poll(PollFrom::Offset(4), u64::MAX).unwrap().is_empty());
            let last = log.poll(PollFrom::Last, u64::MAX).unwrap();
            assert_eq!(last.first_offset(), 2, "{fsync}: the last committed batch");

            // Inside a batch: only the batches before it.
            log.set_commit_mark(7).unwrap();
            assert_eq!(served(&log), vec![0, 2, 4], "{fsync}");
            // The mark only grows.
            log.set_commit_mark(2).unwrap();
            assert_eq!(log.commit_mark(), Some(7));
            assert_eq!(served(&log), vec![0, 2, 4], "{fsync}");

            // Ahead of the log: later appends are served as they are
            // acknowledged, up to the mark.
            log.set_commit_mark(14).unwrap();
            assert_eq!(served(&log), vec![0, 2, 4, 6, 8]);
            for i in 5..9 {
                log.append(batch(i, 2, 40)).await.unwrap();
            }
            assert_eq!(served(&log), vec![0, 2, 4, 6, 8, 10, 12], "{fsync}");
            assert_eq!(log.stats().next_offset, 14);
        });
    }
}

#[test]
fn the_owner_reads_back_written_batches_past_the_commit_mark_and_serves_none() {
    for fsync in [FsyncPolicy::Never, FsyncPolicy::Batch] {
        run_sim(async move {
            // Small segments: about three batches each.
            let config = gated(fsync, 600);
            let disk = sim_for(3, &config);
            let log = open(&disk, &config).await;
            for i in 0..9 {
                log.append(batch(i, 2, 40)).await.unwrap();
            }
            assert!(log.stats().segments >= 3, "{:?}", log.stats());
            log.set_commit_mark(2).unwrap();
            let back: Vec<Vec<u8>> = (0..9)
                .map(|i| log.read_written(i * 2).unwrap().expect("written").to_vec())
                .collect();
            assert!(log.read_written(1).unwrap().is_none(), "inside a batch");
            assert!(log.read_written(18).unwrap().is_none(), "past the end");
            assert_eq!(
                served(&log),
                vec![0],
                "{fsync}: reading back serves nothing"
            );
            // What was read back is what readers get once it commits.
            log.set_commit_mark(18).unwrap();
            let reply = log.poll(PollFrom::First, u64::MAX).unwrap();
            let polled: Vec<Vec<u8>> = reply.batches().map(|b| b.as_bytes().to_vec()).collect();
            assert_eq!(back, polled, "{fsync}");
        });
    }
}

#[test]
fn the_commit_mark_holds_across_segments_and_by_timestamp() {
    run_sim(async {
        // Small segments: about three batches each.
        let config = gated(FsyncPolicy::Batch, 600);
        let disk = sim_for(2, &config);
        let log = open(&disk, &config).await;
        let mut stamps = Vec::new();
        for i in 0..12 {
            stamps.push(log.append(batch(i, 1, 150)).await.unwrap());
        }
        assert!(log.stats().segments >= 3, "{:?}", log.stats());
        assert!(served(&log).is_empty());
        // Committed up to the middle of a later segment.
        log.set_commit_mark(8).unwrap();
        assert_eq!(served(&log), (0..8).collect::<Vec<_>>());
        // A timestamp past the last committed batch finds nothing.
        let after = stamps[8].base_timestamp;
        let by_time = log.poll(PollFrom::Timestamp(after), u64::MAX).unwrap();
        assert!(
            by_time.is_empty(),
            "by timestamp: {:?}",
            by_time.first_offset()
        );
        log.set_commit_mark(12).unwrap();
        assert_eq!(served(&log), (0..12).collect::<Vec<_>>());
    });
}

#[test]
fn a_reopened_gated_log_serves_nothing_until_its_owner_sets_the_mark() {
    run_sim(async {
        let config = gated(FsyncPolicy::Batch, 600);
        let disk = sim_for(3, &config);
        let log = open(&disk, &config).await;
        for i in 0..7 {
            log.append(batch(i, 1, 150)).await.unwrap();
        }
        log.set_commit_mark(7).unwrap();
        log.close().await.unwrap();
        drop(log);
        // Recovered after a crash and reopened cleanly alike.
        for disk in [disk.crash(), disk.clone()] {
            let log = open(&disk, &config).await;
            assert_eq!(log.stats().end_offset, 7);
            assert!(served(&log).is_empty(), "served before the owner said");
            log.set_commit_mark(5).unwrap();
            assert_eq!(served(&log), (0..5).collect::<Vec<_>>());
            log.close().await.unwrap();
        }
    });
}

#[test]
fn an_ungated_log_has_no_commit_mark() {
    run_sim(async {
        let config = small_config();
        let disk = sim_for(4, &config);
        let log = open(&disk, &config).await;
        log.append(batch(0, 1, 40)).await.unwrap();
        assert_eq!(
            log.set_commit_mark(1),
            Err(CommitMarkError::NotGated { partition: 1 })
        );
        assert_eq!(log.commit_mark(), None);
        assert_eq!(served(&log), vec![0]);
    });
}

/// With the index in play (a batch every few hundred bytes, an index entry
/// every KiB, several segments), the owner reads back each batch by its
/// base offset, exactly the bytes a reader is served, and nothing at an
/// offset inside a batch; a `WrittenBatch`'s length, bytes and conversion
/// agree, and a simulated disk names no file.
#[test]
fn the_owner_reads_back_each_batch_through_the_index_hints() {
    run_sim(async move {
        let config = gated(FsyncPolicy::Never, 4 << 10);
        let disk = sim_for(2, &config);
        let log = open(&disk, &config).await;
        let mut end = 0;
        for i in 0..40u64 {
            let ack = log
                .append(batch(i, 1 + (i % 3) as usize, 100))
                .await
                .unwrap();
            end = ack.base_offset + u64::from(ack.message_count);
        }
        assert!(log.stats().segments >= 3, "{:?}", log.stats());
        log.set_commit_mark(end).unwrap();
        let polled = read_all(&log);
        assert_eq!(polled.len(), 40);
        for (n, (base, bytes)) in polled.iter().enumerate() {
            let w = log.written_batch(*base).unwrap().expect("written");
            assert_eq!((w.len(), w.is_empty()), (bytes.len(), false));
            assert_eq!(&w.bytes()[..], &bytes[..], "batch at {base}");
            assert_eq!(&bytes::Bytes::from(w.clone())[..], &bytes[..]);
            assert!(w.file().is_none(), "a simulated disk has no file");
            let next = polled.get(n + 1).map_or(end, |(b, _)| *b);
            for inside in base + 1..next {
                assert!(
                    log.written_batch(inside).unwrap().is_none(),
                    "offset {inside} lies inside the batch at {base}"
                );
            }
        }
        assert!(log.written_batch(end).unwrap().is_none(), "past the end");
    });
}

/// The mark set ahead of the log, then appends acknowledged past it, in
/// one group-commit round or one by one: readers see exactly the batches
/// that end at or below the mark, the one ending on it included, never
/// one it cuts through or one after it.
#[test]
fn appends_acknowledged_past_the_mark_are_served_up_to_it() {
    for (fsync, together) in [
        (FsyncPolicy::Batch, true),
        (FsyncPolicy::Batch, false),
        (FsyncPolicy::Never, false),
    ] {
        for (mark, want) in [(6, vec![0, 2, 4]), (7, vec![0, 2, 4])] {
            run_sim(async move {
                let config = gated(fsync, 1 << 20);
                let disk = sim_for(4, &config);
                let log = open(&disk, &config).await;
                log.set_commit_mark(mark).unwrap();
                // Five batches of two messages: offsets 0, 2, 4, 6, 8.
                if together {
                    let acks: Vec<_> = (0..5).map(|i| log.append(batch(i, 2, 40))).collect();
                    for a in acks {
                        a.await.unwrap();
                    }
                } else {
                    for i in 0..5 {
                        log.append(batch(i, 2, 40)).await.unwrap();
                    }
                }
                assert_eq!(
                    served(&log),
                    want,
                    "{fsync}, together {together}, mark {mark}"
                );
                assert_eq!(log.stats().next_offset, want.last().unwrap() + 2);
            });
        }
    }
}

#[test]
fn a_mark_inside_an_older_segment_serves_its_batches_up_to_the_mark() {
    for fsync in [FsyncPolicy::Never, FsyncPolicy::Batch] {
        run_sim(async move {
            // Three batches of about 900 bytes fill the first segment; a
            // small fourth one starts the second, whose acknowledged end
            // (about 300 bytes in) is far below the first's length.
            let config = gated(fsync, 2000);
            let disk = sim_for(5, &config);
            let log = open(&disk, &config).await;
            for i in 0..3 {
                log.append(batch(i, 1, 600)).await.unwrap();
            }
            log.append(batch(3, 1, 1)).await.unwrap();
            assert_eq!(log.stats().segments, 2, "{fsync}: {:?}", log.stats());
            assert!(served(&log).is_empty());
            // The mark inside the first segment: its batches below it are
            // served, whatever the later segment's length.
            log.set_commit_mark(2).unwrap();
            assert_eq!(served(&log), vec![0, 1], "{fsync}");
            assert_eq!(log.stats().next_offset, 2, "{fsync}");
            log.set_commit_mark(3).unwrap();
            assert_eq!(served(&log), vec![0, 1, 2], "{fsync}");
            log.set_commit_mark(4).unwrap();
            assert_eq!(served(&log), vec![0, 1, 2, 3], "{fsync}");
        });
    }
}

#[test]
fn a_batch_acknowledged_while_the_next_segment_is_being_written_is_served() {
    use corelog_segment::io::SimFaults;
    // The mark far ahead (readers follow the acknowledgements), and
    // exactly at the third batch's end, the second segment's base.
    for mark in [100, 3] {
        run_sim(async move {
            let config = gated(FsyncPolicy::Never, 2000);
            let disk = sim_for(6, &config);
            let log = open(&disk, &config).await;
            log.set_commit_mark(mark).unwrap();
            for i in 0..2 {
                log.append(batch(i, 1, 600)).await.unwrap();
            }
            // The third batch fills the first segment; the fourth starts the
            // second segment and its write fails: it is never acknowledged,
            // and the third must not wait for it.
            let n = disk.counters().writes;
            disk.set_faults(SimFaults {
                fail_write_at: Some(n + 1),
                ..SimFaults::default()
            });
            let third = log.append(batch(2, 1, 600));
            let fourth = log.append(batch(3, 1, 600));
            assert_eq!(log.stats().segments, 2, "{:?}", log.stats());
            third.await.unwrap();
            assert!(fourth.await.is_err(), "its write failed");
            assert_eq!(served(&log), vec![0, 1, 2], "mark {mark}");
        });
    }
}

/// On real files a `WrittenBatch` names its segment file and position:
/// what the replica sends by reference (`sendfile`) is read from there,
/// and those bytes are the batch's.
#[test]
fn a_written_batch_on_real_files_names_its_place_in_the_segment_file() {
    use corelog_segment::io::UringStorage;
    use std::os::unix::fs::FileExt;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    run(async move {
        let config = gated(FsyncPolicy::Never, 4 << 10);
        let log = PartitionLog::open(UringStorage::new(64).unwrap(), &dir, 1, config)
            .await
            .unwrap()
            .0;
        let mut segments = std::collections::BTreeSet::new();
        for i in 0..6u64 {
            let ack = log.append(batch(i, 2, 300)).await.unwrap();
            let w = log
                .written_batch(ack.base_offset)
                .unwrap()
                .expect("written");
            let (fd, at) = w.file().expect("a real segment file");
            assert_eq!((at, w.len() as u64), (ack.position, ack.bytes), "batch {i}");
            segments.insert(ack.segment);
            let mut read = vec![0u8; w.len()];
            std::fs::File::from(fd.try_clone_to_owned().unwrap())
                .read_exact_at(&mut read, at)
                .unwrap();
            assert_eq!(read, w.bytes().to_vec(), "batch {i}: the file's bytes");
        }
        assert!(segments.len() >= 2, "across segments: {segments:?}");
    });
}
