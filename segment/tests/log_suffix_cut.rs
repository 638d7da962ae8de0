//! Cutting a replicated log's uncommitted suffix (`PartitionLog::cut_suffix`):
//! everything from the offset on goes, nothing below the commit mark ever
//! does, a refused cut changes nothing, and a power cut at any point of it
//! leaves either the whole log or the log cut exactly there (the `CUT`
//! record's row of the recovery table).
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use corelog_segment::format::layout::batch;
use corelog_segment::io::{SimStorage, Storage, UringStorage};
use corelog_segment::log::recovery::dry_run;
use corelog_segment::log::{CutError, FsyncPolicy, LogConfig, OpenError, PartitionLog, CUT_RECORD};
use std::path::{Path, PathBuf};

const DIR: &str = "/p/1";

/// Segments of about five batches, so a cut crosses files.
fn gated() -> LogConfig {
    LogConfig {
        fsync: FsyncPolicy::Batch,
        segment_bytes: 2048,
        commit_gate: true,
        ..small_config()
    }
}

/// Fifteen batches of two messages (offsets 0, 2, .., 28).
async fn fill<S: Storage>(log: &PartitionLog<S>) {
    for i in 0..15 {
        log.append(batch(i, 2, 40)).await.unwrap();
    }
}

fn bases(disk: &SimStorage) -> Vec<u64> {
    let mut b: Vec<u64> = disk
        .files()
        .iter()
        .filter(|p| p.starts_with(DIR))
        .filter_map(|p| p.file_name()?.to_str()?.strip_suffix(".log")?.parse().ok())
        .collect();
    b.sort_unstable();
    b
}

/// Every batch the log holds, committed or not: the disk as a clean
/// reboot finds it, opened without the gate.
async fn everything(disk: &SimStorage) -> Vec<(u64, Vec<u8>)> {
    let copy = disk.crash();
    let config = LogConfig {
        commit_gate: false,
        ..gated()
    };
    let (log, _) = PartitionLog::open(copy, Path::new(DIR), 1, config)
        .await
        .unwrap();
    read_all(&log)
}

/// Opens partition 1's log in `dir`, [`fill`]s it and closes it.
async fn fill_and_close<S: Storage>(storage: S, dir: &Path, config: &LogConfig) {
    let (log, _) = PartitionLog::open(storage, dir, 1, config.clone())
        .await
        .unwrap();
    fill(&log).await;
    log.close().await.unwrap();
}

/// A log [`fill`]ed and closed on a simulated disk seeded `seed`: the disk,
/// every batch it holds and its segments' bases.
async fn filled_and_closed(
    seed: u64,
    config: &LogConfig,
) -> (SimStorage, Vec<(u64, Vec<u8>)>, Vec<u64>) {
    let disk = sim_for(seed, config);
    fill_and_close(disk.clone(), Path::new(DIR), config).await;
    let all = everything(&disk).await;
    let segs = bases(&disk);
    (disk, all, segs)
}

fn record(partition: u64, from: u64) -> Vec<u8> {
    let mut r = b"CLGCUT01".to_vec();
    r.extend_from_slice(&partition.to_le_bytes());
    r.extend_from_slice(&from.to_le_bytes());
    let sum = xxhash_rust::xxh3::xxh3_64(&r);
    r.extend_from_slice(&sum.to_le_bytes());
    r
}

#[test]
fn a_cut_removes_every_message_from_its_offset_and_appends_go_on_there() {
    // Inside a middle segment, at a later segment's base, and the whole log.
    run_sim(async {
        let config = gated();
        let disk = sim_for(3, &config);
        let (log, _) = PartitionLog::open(disk.clone(), Path::new(DIR), 1, config.clone())
            .await
            .unwrap();
        fill(&log).await;
        log.set_commit_mark(6).unwrap();
        let all = everything(&disk).await;
        assert_eq!(all.len(), 15);
        let segs = bases(&disk);
        assert!(segs.len() >= 3, "{segs:?}");
        // A batch inside the second segment, past its base.
        let from = segs[1] + 2;
        assert!(from < segs[2]);

        let (log2, report) = log.cut_suffix(from).await.unwrap().unwrap();
        assert_eq!(report.suffix_cut, Some(from));
        assert!(report.changed_data());
        assert!(
            report.to_string().contains(&format!("from offset {from}")),
            "{report}"
        );
        assert_eq!(log2.stats().end_offset, from);
        assert_eq!(bases(&disk), segs[..2].to_vec(), "later segments removed");
        assert!(!disk.files().iter().any(|p| p.ends_with(CUT_RECORD)));
        // The old handle is closed.
        assert!(log.append(batch(99, 1, 10)).await.is_err());
        // Nothing served until the owner sets the mark again; then the
        // kept batches are the same bytes.
        assert!(read_all(&log2).is_empty());
        log2.set_commit_mark(segs[1]).unwrap();
        let kept: Vec<_> = all.iter().filter(|b| b.0 < segs[1]).cloned().collect();
        assert_eq!(read_all(&log2), kept);
        assert_eq!(
            everything(&disk).await[..(from / 2) as usize],
            all[..(from / 2) as usize]
        );
        let ack = log2.append(batch(20, 2, 40)).await.unwrap();
        assert_eq!(ack.base_offset, from);
        // Appends rotate past the cut segment (it held a seal record from
        // before the cut): a crash then still recovers the log.
        let mut next = from + 2;
        while bases(&disk).len() < 4 {
            assert_eq!(
                log2.append(batch(21, 2, 40)).await.unwrap().base_offset,
                next
            );
            next += 2;
        }
        log2.flush().await.unwrap();
        let (after_crash, _) = PartitionLog::open(disk.crash(), Path::new(DIR), 1, config.clone())
            .await
            .unwrap();
        assert_eq!(after_crash.stats().end_offset, next);
        after_crash.set_commit_mark(u64::MAX).unwrap();
        assert_eq!(read_all(&after_crash).len() as u64, next / 2);
        drop(after_crash);

        // At a segment's base: that segment goes whole.
        let at = segs[1];
        let (log3, report) = log2.cut_suffix(at).await.unwrap().unwrap();
        assert_eq!(report.suffix_cut, Some(at));
        assert_eq!(bases(&disk), vec![0]);
        assert_eq!(log3.stats().end_offset, at);

        // From the log's first offset: empty, continuing there.
        let (log4, _) = log3.cut_suffix(0).await.unwrap().unwrap();
        assert_eq!(log4.stats().end_offset, 0);
        assert_eq!(bases(&disk), vec![0]);
        assert_eq!(log4.append(batch(1, 1, 10)).await.unwrap().base_offset, 0);
    });
}

#[test]
fn a_refused_cut_changes_nothing() {
    run_sim(async {
        let config = gated();
        let disk = sim_for(4, &config);
        let (log, _) = PartitionLog::open(disk.clone(), Path::new(DIR), 1, config.clone())
            .await
            .unwrap();
        fill(&log).await;
        log.set_commit_mark(10).unwrap();
        let before = everything(&disk).await;
        let files = disk.files();

        let err = log.cut_suffix(8).await.unwrap_err();
        assert!(
            matches!(
                err,
                CutError::Committed {
                    from: 8,
                    commit: 10,
                    ..
                }
            ),
            "{err}"
        );
        let err = log.cut_suffix(13).await.unwrap_err();
        assert!(
            matches!(err, CutError::NotABatchStart { from: 13, .. }),
            "{err}"
        );
        // Inside the last batch, where no batch follows to show it.
        let err = log.cut_suffix(29).await.unwrap_err();
        assert!(
            matches!(err, CutError::NotABatchStart { from: 29, .. }),
            "{err}"
        );
        // Nothing at or past the end: nothing to do.
        assert!(log.cut_suffix(30).await.unwrap().is_none());
        assert!(log.cut_suffix(1000).await.unwrap().is_none());

        assert_eq!(disk.files(), files);
        assert_eq!(everything(&disk).await, before);
        // Still open.
        assert_eq!(log.append(batch(50, 2, 40)).await.unwrap().base_offset, 30);

        // A log without the gate has nothing it may cut.
        let plain = LogConfig {
            commit_gate: false,
            ..gated()
        };
        let other = sim_for(5, &plain);
        let (log, _) = PartitionLog::open(other, Path::new(DIR), 1, plain)
            .await
            .unwrap();
        fill(&log).await;
        let err = log.cut_suffix(20).await.unwrap_err();
        assert!(matches!(err, CutError::NotGated { partition: 1 }), "{err}");
        assert_eq!(log.stats().end_offset, 30);
    });
}

#[test]
fn a_power_cut_at_any_point_of_a_cut_leaves_the_whole_log_or_the_cut_one() {
    let from = 16;
    let mut outcomes = [0u32; 2];
    for seed in 0..4u64 {
        for n in 1.. {
            let done = run_sim(async {
                let config = gated();
                let gate = GatedStorage::new(sim_for(seed, &config));
                let (log, _) = PartitionLog::open(gate.clone(), Path::new(DIR), 1, config.clone())
                    .await
                    .unwrap();
                fill(&log).await;
                log.set_commit_mark(10).unwrap();
                log.flush().await.unwrap();
                let all = everything(&gate.disk).await;
                gate.cut_power_after(n);
                log.cut_suffix(from).await.unwrap().unwrap();
                let Some(disk) = gate.after_cut() else {
                    return true;
                };
                let (log, report) = PartitionLog::open(disk.clone(), Path::new(DIR), 1, config)
                    .await
                    .unwrap_or_else(|e| panic!("seed {seed}, cut after op {n}: {e}"));
                assert!(
                    !disk.files().iter().any(|p| p.ends_with(CUT_RECORD)),
                    "seed {seed}, op {n}: the record outlived the open"
                );
                log.set_commit_mark(u64::MAX).unwrap();
                let got = read_all(&log);
                let cut: Vec<_> = all.iter().filter(|b| b.0 < from).cloned().collect();
                // Either way, nothing of the log was found out of place:
                // no batch set aside, no segment removed as a leftover.
                assert!(
                    report.set_aside.is_empty() && report.removed.is_empty(),
                    "seed {seed}, power cut after op {n}: {report}"
                );
                if got == all {
                    outcomes[0] += 1;
                    assert_eq!(report.suffix_cut, None, "seed {seed}, op {n}");
                } else {
                    assert_eq!(got, cut, "seed {seed}, power cut after op {n}: {report}");
                    outcomes[1] += 1;
                    assert_eq!(
                        log.append(batch(40, 2, 40)).await.unwrap().base_offset,
                        from
                    );
                }
                false
            });
            if done {
                break;
            }
            assert!(n < 500, "the cut never ended");
        }
    }
    // Both sides of the record's durable point were reached.
    assert!(outcomes[0] > 0 && outcomes[1] > 0, "{outcomes:?}");
}

#[test]
fn a_damaged_record_or_one_inside_a_batch_is_refused_and_changes_nothing() {
    run_sim(async {
        let config = gated();
        let (disk, _, _) = filled_and_closed(6, &config).await;
        let record_path = PathBuf::from(DIR).join(CUT_RECORD);
        let mut damaged = record(1, 16);
        damaged[20] ^= 0x40;
        for (bytes, why) in [
            (damaged, "checksum"),
            (record(2, 16), "another partition"),
            (record(1, 17), "not the first offset of a batch"),
            (b"short".to_vec(), "not a suffix-cut record"),
        ] {
            disk.put_file(&record_path, &bytes).unwrap();
            let snapshot: Vec<_> = disk
                .files()
                .iter()
                .map(|p| (p.clone(), disk.file_bytes(p)))
                .collect();
            let err = PartitionLog::open(disk.clone(), Path::new(DIR), 1, config.clone())
                .await
                .unwrap_err();
            assert!(matches!(err, OpenError::CutRecord { .. }), "{err}");
            assert!(err.to_string().contains(why), "{err}");
            let after: Vec<_> = disk
                .files()
                .iter()
                .map(|p| (p.clone(), disk.file_bytes(p)))
                .collect();
            assert_eq!(after, snapshot, "{why}: a refused open changed files");
        }
        // A valid record over a log with a hole before the offset (a log is
        // durable when its cut is recorded, so this is damage): refused, as
        // the suffix past the hole could not be told from the rest.
        let segs = bases(&disk);
        let holding = *segs.iter().filter(|&&b| b < 16).max().unwrap();
        let seg_path = PathBuf::from(DIR).join(format!("{holding:020}.log"));
        disk.put_file(&record_path, &record(1, 16)).unwrap();
        let original = disk.file_bytes(&seg_path).unwrap();
        assert!(disk.corrupt(&seg_path, 0, &[0u8; 256]));
        let err = PartitionLog::open(disk.clone(), Path::new(DIR), 1, config.clone())
            .await
            .unwrap_err();
        assert!(matches!(err, OpenError::CutRecord { .. }), "{err}");
        assert!(err.to_string().contains("not whole"), "{err}");
        assert!(disk.files().iter().any(|p| p.ends_with(CUT_RECORD)));
        assert!(disk.corrupt(&seg_path, 0, &original[..256]));
        // Moved away, the log opens whole.
        disk.remove_file(&record_path).unwrap();
        let (log, _) = PartitionLog::open(disk.clone(), Path::new(DIR), 1, config)
            .await
            .unwrap();
        assert_eq!(log.stats().end_offset, 30);
    });
}

/// The open that finishes a recorded cut makes it durable before it
/// returns: the record's removal and the later segments' with it. Appends
/// acknowledged (`fsync=batch`) after that open, in the cut segment (no
/// new name, so no directory sync of their own), survive any power cut;
/// a record that came back would cut them again.
#[test]
fn appends_acknowledged_after_an_open_that_finished_a_cut_survive_a_power_cut() {
    run_sim(async {
        let config = gated();
        let (disk, all, segs) = filled_and_closed(8, &config).await;
        let from = segs[1] + 2;
        assert!(from + 4 < segs[2]);
        disk.put_file(&PathBuf::from(DIR).join(CUT_RECORD), &record(1, from))
            .unwrap();
        let (log, report) = PartitionLog::open(disk.clone(), Path::new(DIR), 1, config.clone())
            .await
            .unwrap();
        assert_eq!(report.suffix_cut, Some(from));
        let mut want: Vec<_> = all.iter().filter(|b| b.0 < from).cloned().collect();
        for i in 0..2 {
            let b = batch(50 + i, 2, 40);
            let ack = log.append(b.clone()).await.unwrap();
            assert_eq!(ack.base_offset, from + 2 * i);
            want.push((
                ack.base_offset,
                stored_form(&b, 1, ack.base_offset, ack.base_timestamp),
            ));
        }
        assert_eq!(bases(&disk), segs[..2].to_vec(), "no new segment");
        for k in 0..8 {
            let got = everything(&disk).await;
            assert_eq!(got, want, "power cut {k} after the acknowledged appends");
        }
    });
}

#[test]
fn a_truncation_at_the_cut_that_a_power_cut_interrupted_is_finished() {
    // What the xfs power-cut run's clone held: the open finishing a
    // recorded cut truncated the segment at the cut's batch, and its
    // fdatasync wrote the block holding that position back (zeroed past
    // it) before xfs committed the new length. The file keeps its old
    // length: zeros from the cut's batch to the block's end, then the old
    // bytes. The next open finishes the cut; it is not damage before the
    // offset.
    run_sim(async {
        let config = gated();
        let (disk, all, segs) = filled_and_closed(7, &config).await;
        let from = segs[1] + 2;
        assert!(from < segs[2]);
        let seg_path = PathBuf::from(DIR).join(format!("{:020}.log", segs[1]));
        let bytes = disk.file_bytes(&seg_path).unwrap();
        // The cut batch's position: the end of the batch before it.
        let u64_at = |at: usize, field: std::ops::Range<usize>| {
            u64::from_le_bytes(bytes[at + field.start..at + field.end].try_into().unwrap())
        };
        let pos = u64_at(0, batch::BATCH_LENGTH) as usize;
        assert_eq!(u64_at(pos, batch::BASE_OFFSET), from);
        for zeros in [bytes.len() - pos - 1, 100, 300] {
            let disk = disk.crash();
            disk.put_file(&PathBuf::from(DIR).join(CUT_RECORD), &record(1, from))
                .unwrap();
            assert!(disk.corrupt(&seg_path, pos, &vec![0u8; zeros]));
            let (log, report) = PartitionLog::open(disk.clone(), Path::new(DIR), 1, config.clone())
                .await
                .unwrap_or_else(|e| panic!("{zeros} zeros at the cut: {e}"));
            assert_eq!(report.suffix_cut, Some(from));
            assert_eq!(log.stats().end_offset, from);
            assert!(!disk.files().iter().any(|p| p.ends_with(CUT_RECORD)));
            assert_eq!(disk.file_bytes(&seg_path).unwrap().len(), pos);
            log.set_commit_mark(u64::MAX).unwrap();
            let kept: Vec<_> = all.iter().filter(|b| b.0 < from).cloned().collect();
            assert_eq!(read_all(&log), kept);
            assert_eq!(
                log.append(batch(40, 2, 40)).await.unwrap().base_offset,
                from
            );
        }
    });
}

#[test]
fn verify_says_what_the_open_finishing_a_recorded_cut_does() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("1");
    run(async {
        let config = gated();
        let storage = UringStorage::new(64).unwrap();
        fill_and_close(storage.clone(), &dir, &config).await;
        // As a crash right after the record was made durable leaves it.
        std::fs::write(dir.join(CUT_RECORD), record(1, 16)).unwrap();
        let listing = |d: &Path| {
            let mut v: Vec<_> = std::fs::read_dir(d)
                .unwrap()
                .map(|e| {
                    let p = e.unwrap().path();
                    let bytes = std::fs::read(&p).unwrap_or_default();
                    (p, bytes)
                })
                .collect();
            v.sort();
            v
        };
        let before = listing(&dir);
        let dry = dry_run(&dir, 1, &config).unwrap();
        assert_eq!(listing(&dir), before, "verify changed the directory");
        let (log, report) = PartitionLog::open(storage, &dir, 1, config).await.unwrap();
        assert_eq!(dry.report, report);
        assert_eq!(report.suffix_cut, Some(16));
        assert_eq!(log.stats().end_offset, 16);
    });
}

/// A file the open finishing a recorded cut cannot remove (here a later
/// segment's index is a directory) fails the open naming it, and the
/// record stays: the cut is not called finished with a leftover the next
/// segment of that base would trip on. Once the obstacle is gone, the
/// next open finishes it. Real files only.
#[test]
fn a_removal_that_fails_while_finishing_a_cut_refuses_the_open() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("1");
    run(async {
        let config = gated();
        let storage = UringStorage::new(64).unwrap();
        fill_and_close(storage.clone(), &dir, &config).await;
        let mut bases: Vec<u64> = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| {
                let name = e.unwrap().file_name().into_string().ok()?;
                name.strip_suffix(".log")?.parse().ok()
            })
            .collect();
        bases.sort_unstable();
        let last = *bases.last().unwrap();
        assert!(last > 16, "{bases:?}");
        let index = dir.join(format!("{last:020}.index"));
        std::fs::remove_file(&index).unwrap();
        std::fs::create_dir(&index).unwrap();
        std::fs::write(dir.join(CUT_RECORD), record(1, 16)).unwrap();
        match PartitionLog::open(storage.clone(), &dir, 1, config.clone()).await {
            Err(OpenError::Io { op, path, .. }) => {
                assert_eq!((op, path), ("remove", index.clone()))
            }
            Err(other) => panic!("expected the removal to fail: {other}"),
            Ok((_, report)) => panic!("the cut was called finished: {report}"),
        }
        assert!(dir.join(CUT_RECORD).exists(), "the record stays");
        std::fs::remove_dir(&index).unwrap();
        let (log, report) = PartitionLog::open(storage, &dir, 1, config).await.unwrap();
        assert_eq!(report.suffix_cut, Some(16));
        assert_eq!(log.stats().end_offset, 16);
        assert!(!dir.join(CUT_RECORD).exists());
    });
}

#[test]
fn a_cut_segment_that_appends_rotate_past_is_recovered_after_a_power_cut() {
    // Under `fsync=never` the cut segment's new seal waits; a seal record
    // from before the cut must not vouch for it meanwhile.
    for seed in 0..8u64 {
        run_sim(async move {
            let config = LogConfig {
                fsync: FsyncPolicy::Never,
                ..gated()
            };
            let disk = sim_for(seed, &config);
            let (log, _) = PartitionLog::open(disk.clone(), Path::new(DIR), 1, config.clone())
                .await
                .unwrap();
            fill(&log).await;
            log.close().await.unwrap();
            drop(log);
            // Reopened: every segment but the last sealed, durable.
            let (log, _) = PartitionLog::open(disk.clone(), Path::new(DIR), 1, config.clone())
                .await
                .unwrap();
            let segs = bases(&disk);
            let from = segs[1] + 2;
            let (log, _) = log.cut_suffix(from).await.unwrap().unwrap();
            let mut next = from;
            while bases(&disk).len() < 4 {
                assert_eq!(
                    log.append(batch(30, 2, 40)).await.unwrap().base_offset,
                    next
                );
                next += 2;
            }
            let after = disk.crash();
            let (log, report) = PartitionLog::open(after, Path::new(DIR), 1, config.clone())
                .await
                .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
            let end = log.stats().end_offset;
            assert!(
                (from..=next).contains(&end),
                "seed {seed}: end {end}: {report}"
            );
        });
    }
}
