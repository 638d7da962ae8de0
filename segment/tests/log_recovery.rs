//! Recovery, one test per row of the table in `log/recovery.rs`: each
//! builds the damaged state around the log's back (std::fs on real files,
//! the fault hooks on the simulated disk), reopens, and checks the
//! `RecoveryReport`, what is read back, and where appends continue.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use corelog_segment::io::{SimStorage, Storage, UringStorage};
use corelog_segment::log::recovery::CutReason;
use corelog_segment::log::ASIDE_DIR;
use corelog_segment::log::{
    index, index_name, log_name, CleanClose, Damage, FsyncPolicy, LogConfig, OpenCheck, OpenError,
    PartitionLog, RecoveryReport, TailCut, CLEAN_RECORD,
};
use corelog_segment::{Batch, BatchError, Limits};
use std::path::{Path, PathBuf};

const P: u64 = 4;
/// One message of 600 bytes (and 3 bytes of user headers): 907 bytes.
const L: u64 = 907;

/// Segments of 5 batches (4 make 3628 bytes, the 5th crosses 4096), an
/// index entry every second batch (positions 0, 1814, 3628).
fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 4096,
        index_interval_bytes: 1024,
        limits: Limits {
            max_batch_bytes: 64 << 10,
        },
        ..LogConfig::default()
    }
}

/// One segment for everything.
fn one_segment() -> LogConfig {
    LogConfig {
        segment_bytes: 1 << 20,
        ..config()
    }
}

/// The seed of this file's simulated disk (see `on_both!`).
const SIM_SEED: u64 = 2;

fn fixed(i: u64) -> Batch {
    let b = batch(i, 1, 600);
    assert_eq!(b.len() as u64, L);
    b
}

/// Appends `n` fixed batches, closes the log, removes its clean-close
/// record and returns what it stored. The damage a test then makes stands
/// for what a crash leaves, and a crash leaves no record (the `clean_close`
/// tests keep it).
async fn build<S: Storage>(
    storage: S,
    dir: &Path,
    config: &LogConfig,
    n: u64,
) -> Vec<(u64, Vec<u8>)> {
    let stored = build_closed(storage.clone(), dir, config, n).await;
    storage.remove_file(&dir.join(CLEAN_RECORD)).unwrap();
    stored
}

/// Appends `n` fixed batches, closes the log cleanly, and returns what it
/// stored.
async fn build_closed<S: Storage>(
    storage: S,
    dir: &Path,
    config: &LogConfig,
    n: u64,
) -> Vec<(u64, Vec<u8>)> {
    let (log, _) = PartitionLog::open(storage, dir, P, config.clone())
        .await
        .unwrap();
    let mut stored = Vec::new();
    for i in 0..n {
        let b = fixed(i);
        let ack = log.append(b.clone()).await.unwrap();
        assert_eq!(ack.base_offset, i);
        stored.push((i, stored_form(&b, P, i, ack.base_timestamp)));
    }
    log.close().await.unwrap();
    stored
}

async fn reopen<S: Storage>(
    storage: S,
    dir: &Path,
    config: &LogConfig,
) -> (PartitionLog<S>, RecoveryReport) {
    match PartitionLog::open(storage, dir, P, config.clone()).await {
        Ok(x) => x,
        Err(e) => panic!("reopen failed: {e}"),
    }
}

/// Appends one more batch and checks it lands at `next` and reads back.
async fn appends_continue_at<S: Storage>(log: &PartitionLog<S>, next: u64) {
    let b = batch(777, 3, 20);
    let ack = log.append(b.clone()).await.unwrap();
    assert_eq!(
        ack.base_offset, next,
        "appends continue at the recovered end"
    );
    let all = read_all(log);
    assert_eq!(
        all.last().unwrap(),
        &(next, stored_form(&b, P, next, ack.base_timestamp))
    );
    assert_eq!(log.next_offset(), next + 3);
}

fn seg(dir: &Path, base: u64) -> PathBuf {
    dir.join(log_name(base))
}

fn idx(dir: &Path, base: u64) -> PathBuf {
    dir.join(index_name(base))
}

/// Every file of the directory and its bytes.
fn snapshot<D: Disk>(disk: &D, dir: &Path) -> Vec<(String, Vec<u8>)> {
    disk.names(dir)
        .into_iter()
        .map(|n| {
            let bytes = disk.read(&dir.join(&n)).unwrap_or_default();
            (n, bytes)
        })
        .collect()
}

// ---- whole tail ---------------------------------------------------------

async fn whole_tail<S: Storage, D: Disk>(storage: impl Fn() -> S, disk: &D, dir: &Path) {
    let stored = build(storage(), dir, &config(), 12).await;
    let before = snapshot(disk, dir);
    let (log, report) = reopen(storage(), dir, &config()).await;
    let mut want = RecoveryReport::default();
    want.segments = 3;
    want.next_offset = 12;
    want.batches_verified = report.batches_verified;
    assert_eq!(report, want, "{report}");
    assert_eq!(snapshot(disk, dir), before, "a whole log is left as it is");
    assert_eq!(read_all(&log), stored);
    appends_continue_at(&log, 12).await;
}
on_both!(whole_tail);

// ---- clean close ----------------------------------------------------------

/// A cleanly closed log reopens from its record: nothing scanned, nothing
/// written; the first append removes the record, the next close writes it
/// again, and a log opened and closed without a change keeps it untouched.
async fn clean_close<S: Storage, D: Disk>(storage: impl Fn() -> S, disk: &D, dir: &Path) {
    let stored = build_closed(storage(), dir, &config(), 12).await;
    assert!(disk.names(dir).contains(&CLEAN_RECORD.to_string()));
    let before = snapshot(disk, dir);
    let (log, report) = reopen(storage(), dir, &config()).await;
    let mut want = RecoveryReport::default();
    want.segments = 3;
    want.next_offset = 12;
    want.clean_close = CleanClose::Trusted;
    assert_eq!(report, want, "{report}");
    assert_eq!(read_all(&log), stored);
    log.close().await.unwrap();
    assert_eq!(
        snapshot(disk, dir),
        before,
        "opening and closing changed nothing"
    );

    let (log, _) = reopen(storage(), dir, &config()).await;
    appends_continue_at(&log, 12).await;
    assert!(
        !disk.names(dir).contains(&CLEAN_RECORD.to_string()),
        "an append removes the record"
    );
    let stored = read_all(&log);
    log.close().await.unwrap();
    let (log, report) = reopen(storage(), dir, &config()).await;
    assert_eq!(report.clean_close, CleanClose::Trusted, "{report}");
    assert_eq!(report.next_offset, 15, "{report}");
    assert_eq!(read_all(&log), stored);
    appends_continue_at(&log, 15).await;
}
on_both!(clean_close);

/// A crash while a close wrote its record leaves `CLEAN.tmp` behind; the
/// next close writes its record over it, and a leftover longer than the
/// record leaves no bytes after it: the record is trusted.
async fn clean_close_over_a_longer_leftover<S: Storage, D: Disk>(
    storage: impl Fn() -> S,
    disk: &D,
    dir: &Path,
) {
    build_closed(storage(), dir, &config(), 12).await;
    let (log, _) = reopen(storage(), dir, &config()).await;
    appends_continue_at(&log, 12).await;
    let leftover = format!("{CLEAN_RECORD}.tmp");
    disk.put(&dir.join(&leftover), &[0x5a; 8192]);
    let stored = read_all(&log);
    log.close().await.unwrap();
    assert!(!disk.names(dir).contains(&leftover));
    let (log, report) = reopen(storage(), dir, &config()).await;
    assert_eq!(report.clean_close, CleanClose::Trusted, "{report}");
    assert_eq!(read_all(&log), stored);
}
on_both!(clean_close_over_a_longer_leftover);

/// A record that no longer describes the files (a crash lost the removal
/// of the record after the log grew) is not trusted: removed, and the log
/// recovered by scanning, which finds the bytes past the recorded end.
async fn clean_close_record_of_a_log_that_grew<S: Storage, D: Disk>(
    storage: impl Fn() -> S,
    disk: &D,
    dir: &Path,
) {
    let mut stored = build_closed(storage(), dir, &one_segment(), 4).await;
    let record = disk.read(&dir.join(CLEAN_RECORD)).unwrap();
    let (log, _) = reopen(storage(), dir, &one_segment()).await;
    let b = fixed(4);
    let ack = log.append(b.clone()).await.unwrap();
    stored.push((4, stored_form(&b, P, 4, ack.base_timestamp)));
    drop(log);
    disk.put(&dir.join(CLEAN_RECORD), &record);
    let (log, report) = reopen(storage(), dir, &one_segment()).await;
    assert_eq!(
        report.clean_close,
        CleanClose::NotTrusted("segment length differs from the record"),
        "{report}"
    );
    assert!(report.batches_verified > 0, "{report}");
    assert!(!disk.names(dir).contains(&CLEAN_RECORD.to_string()));
    assert_eq!(read_all(&log), stored);
    appends_continue_at(&log, 5).await;
}
on_both!(clean_close_record_of_a_log_that_grew);

/// A damaged record, one whose index changed, and one met by a full check
/// are not trusted either; the log is recovered by scanning.
async fn clean_close_record_not_trusted<S: Storage, D: Disk>(
    storage: impl Fn() -> S,
    disk: &D,
    dir: &Path,
) {
    let stored = build_closed(storage(), dir, &config(), 12).await;
    let record = disk.read(&dir.join(CLEAN_RECORD)).unwrap();
    let full = LogConfig {
        open_check: OpenCheck::Full,
        ..config()
    };
    let index5 = disk.read(&idx(dir, 5)).unwrap();
    let mut shorter_index = index5.clone();
    shorter_index.truncate(index::ENTRY_LEN);
    type Case<'a> = (&'static str, Box<dyn Fn() + 'a>, &'a LogConfig);
    let cases: [Case<'_>; 3] = [
        (
            "record checksum mismatch",
            Box::new(|| disk.overwrite(&dir.join(CLEAN_RECORD), 30, &[0xff])),
            &config(),
        ),
        (
            "index differs from the record",
            Box::new(|| disk.put(&idx(dir, 5), &shorter_index)),
            &config(),
        ),
        ("a full check was asked for", Box::new(|| {}), &full),
    ];
    for (why, damage, cfg) in cases {
        disk.put(&dir.join(CLEAN_RECORD), &record);
        disk.put(&idx(dir, 5), &index5);
        damage();
        let (log, report) = reopen(storage(), dir, cfg).await;
        assert_eq!(report.clean_close, CleanClose::NotTrusted(why), "{report}");
        assert!(report.batches_verified > 0, "{why}: {report}");
        assert!(
            !disk.names(dir).contains(&CLEAN_RECORD.to_string()),
            "{why}"
        );
        assert_eq!(read_all(&log), stored, "{why}");
        drop(log);
    }
}
on_both!(clean_close_record_not_trusted);

/// Closing a log opened from its clean-close record and changed since syncs
/// what changed, not every index file it holds: the sealed segments' index
/// files were synced by the close that wrote the record. The syncs of such
/// a close are the same for a log of one segment and of five, and the
/// record it leaves survives a power cut right after it, whether the change
/// stayed in the active segment or sealed it.
#[test]
fn clean_close_syncs_only_what_changed() {
    let sim = SimStorage::new(SIM_SEED, (1 << 20) + (64 << 10));
    run_sim(async {
        let mut syncs = Vec::new();
        for (dir, n) in [(Path::new("/short"), 2), (Path::new("/long"), 22)] {
            build_closed(sim.clone(), dir, &config(), n).await;
            // One small batch in the active segment, then enough to seal
            // the segment the record described as active.
            for seal in [false, true] {
                let (log, report) = reopen(sim.clone(), dir, &config()).await;
                assert_eq!(report.clean_close, CleanClose::Trusted, "{report}");
                let appends = if seal { 5 } else { 1 };
                for i in 0..appends {
                    log.append(fixed(i)).await.unwrap();
                }
                let segments = log.segment_paths().len();
                let end = log.next_offset();
                let before = sim.counters().syncs;
                log.close().await.unwrap();
                syncs.push((seal, sim.counters().syncs - before));
                let (_, report) = reopen(sim.crash(), dir, &config()).await;
                assert_eq!(report.clean_close, CleanClose::Trusted, "{report}");
                assert_eq!((report.segments, report.next_offset), (segments, end));
            }
        }
        assert_eq!(syncs[..2], syncs[2..], "syncs at close: one segment, five");
    });
}

// ---- torn header --------------------------------------------------------

async fn torn_header<S: Storage, D: Disk>(storage: impl Fn() -> S, disk: &D, dir: &Path) {
    let stored = build(storage(), dir, &one_segment(), 8).await;
    let last = 7 * L;
    disk.set_len(&seg(dir, 0), (last + 100) as usize);
    let (log, report) = reopen(storage(), dir, &one_segment()).await;
    assert_eq!(
        report.cut,
        Some(TailCut {
            path: seg(dir, 0),
            position: last,
            dropped: 100,
            reason: CutReason::Damaged(Damage::TornHeader { available: 100 }),
        }),
        "{report}"
    );
    assert!(report.removed.is_empty());
    assert_eq!(report.next_offset, 7);
    assert_eq!(read_all(&log), stored[..7]);
    assert_eq!(disk.read(&seg(dir, 0)).unwrap().len() as u64, last, "cut");
    appends_continue_at(&log, 7).await;
}
on_both!(torn_header);

// ---- torn frame ---------------------------------------------------------

async fn torn_frame<S: Storage, D: Disk>(storage: impl Fn() -> S, disk: &D, dir: &Path) {
    let stored = build(storage(), dir, &one_segment(), 8).await;
    let last = 7 * L;
    disk.set_len(&seg(dir, 0), (last + 256 + 48 + 10) as usize);
    let (log, report) = reopen(storage(), dir, &one_segment()).await;
    assert_eq!(
        report.cut,
        Some(TailCut {
            path: seg(dir, 0),
            position: last,
            dropped: 256 + 48 + 10,
            reason: CutReason::Damaged(Damage::TornBatch {
                declared: L,
                available: 256 + 48 + 10,
            }),
        }),
        "{report}"
    );
    assert_eq!(read_all(&log), stored[..7]);
    appends_continue_at(&log, 7).await;
}
on_both!(torn_frame);

// ---- zero-filled tail ---------------------------------------------------

/// Zeros after the last batch (preallocated or unwritten space).
async fn zero_filled_tail<S: Storage, D: Disk>(storage: impl Fn() -> S, disk: &D, dir: &Path) {
    let stored = build(storage(), dir, &one_segment(), 8).await;
    disk.set_len(&seg(dir, 0), (8 * L + 8192) as usize);
    let (log, report) = reopen(storage(), dir, &one_segment()).await;
    assert_eq!(
        report.cut,
        Some(TailCut {
            path: seg(dir, 0),
            position: 8 * L,
            dropped: 8192,
            reason: CutReason::Zeros,
        }),
        "{report}"
    );
    assert_eq!(read_all(&log), stored);
    appends_continue_at(&log, 8).await;
}
on_both!(zero_filled_tail);

/// The last batch's pages never reached the disk: zeros where it was.
async fn zero_filled_last_batch<S: Storage, D: Disk>(
    storage: impl Fn() -> S,
    disk: &D,
    dir: &Path,
) {
    let stored = build(storage(), dir, &one_segment(), 8).await;
    disk.overwrite(&seg(dir, 0), (7 * L) as usize, &vec![0u8; L as usize]);
    let (log, report) = reopen(storage(), dir, &one_segment()).await;
    assert_eq!(
        report.cut,
        Some(TailCut {
            path: seg(dir, 0),
            position: 7 * L,
            dropped: L,
            reason: CutReason::Zeros,
        }),
        "{report}"
    );
    assert_eq!(read_all(&log), stored[..7]);
    appends_continue_at(&log, 7).await;
}
on_both!(zero_filled_last_batch);

/// A log that was not closed: the active segment's preallocated tail.
async fn zero_filled_tail_after_a_crash<S: Storage, D: Disk>(
    storage: impl Fn() -> S,
    disk: &D,
    dir: &Path,
) {
    let config = LogConfig {
        fsync: FsyncPolicy::Batch,
        ..one_segment()
    };
    let mut stored = Vec::new();
    // Appends preallocate a step ahead of themselves; here the first step
    // (1 MiB) is the whole segment.
    PartitionLog::open(storage(), dir, P, config.clone())
        .await
        .unwrap()
        .0
        .close()
        .await
        .unwrap();
    {
        let (log, _) = PartitionLog::open(storage(), dir, P, config.clone())
            .await
            .unwrap();
        for i in 0..3 {
            let b = fixed(i);
            let ack = log.append(b.clone()).await.unwrap();
            stored.push((i, stored_form(&b, P, i, ack.base_timestamp)));
        }
        // Let the preallocation finish, then drop the log without closing.
        for _ in 0..10 {
            yield_to_others().await;
        }
    }
    let len = disk.read(&seg(dir, 0)).unwrap().len() as u64;
    assert_eq!(len, config.segment_bytes, "preallocated a step ahead");
    let (log, report) = reopen(storage(), dir, &config).await;
    assert_eq!(
        report.cut,
        Some(TailCut {
            path: seg(dir, 0),
            position: 3 * L,
            dropped: len - 3 * L,
            reason: CutReason::Zeros,
        }),
        "{report}"
    );
    assert_eq!(read_all(&log), stored);
    appends_continue_at(&log, 3).await;
}
on_both!(zero_filled_tail_after_a_crash);

// ---- checksum mismatch, recovered segment -------------------------------

/// A flipped payload byte in the last batch of the active segment.
async fn frame_checksum_mismatch_in_the_active_segment<S: Storage, D: Disk>(
    storage: impl Fn() -> S,
    disk: &D,
    dir: &Path,
) {
    let stored = build(storage(), dir, &one_segment(), 8).await;
    let at = (7 * L + 256 + 48 + 5) as usize;
    disk.overwrite(&seg(dir, 0), at, &[stored[7].1[at - 7 * L as usize] ^ 0x20]);
    let (log, report) = reopen(storage(), dir, &one_segment()).await;
    let cut = report.cut.clone().unwrap();
    assert_eq!(
        (cut.path, cut.position, cut.dropped),
        (seg(dir, 0), 7 * L, L),
        "{report}"
    );
    assert!(
        matches!(
            cut.reason,
            CutReason::Damaged(Damage::Batch(BatchError::FrameChecksum { index: 0, .. }))
        ),
        "{report}"
    );
    assert_eq!(read_all(&log), stored[..7]);
    appends_continue_at(&log, 7).await;
}
on_both!(frame_checksum_mismatch_in_the_active_segment);

/// A flipped stamped header field (base_timestamp) of the last batch: the
/// batch checksum no longer matches.
async fn batch_checksum_mismatch_in_the_active_segment<S: Storage, D: Disk>(
    storage: impl Fn() -> S,
    disk: &D,
    dir: &Path,
) {
    let stored = build(storage(), dir, &one_segment(), 8).await;
    let at = (7 * L + 16) as usize;
    disk.overwrite(&seg(dir, 0), at, &[stored[7].1[16] ^ 0x01]);
    let (log, report) = reopen(storage(), dir, &one_segment()).await;
    let cut = report.cut.clone().unwrap();
    assert_eq!((cut.position, cut.dropped), (7 * L, L), "{report}");
    assert!(
        matches!(
            cut.reason,
            CutReason::Damaged(Damage::Batch(BatchError::BatchChecksum { .. }))
        ),
        "{report}"
    );
    assert_eq!(read_all(&log), stored[..7]);
    appends_continue_at(&log, 7).await;
}
on_both!(batch_checksum_mismatch_in_the_active_segment);

/// Under `OpenCheck::Full`, a flipped payload byte in the middle of the
/// active segment, with whole batches after it, is damage, not a torn
/// write: the open is refused naming file and byte, and nothing changes.
/// A repair then cuts there and keeps everything after it in `aside/`.
async fn checksum_mismatch_mid_segment_with_full_check<S: Storage, D: Disk>(
    storage: impl Fn() -> S,
    disk: &D,
    dir: &Path,
) {
    let config = LogConfig {
        open_check: OpenCheck::Full,
        ..one_segment()
    };
    let stored = build(storage(), dir, &config, 8).await;
    let at = (2 * L + 256 + 48 + 100) as usize;
    disk.overwrite(&seg(dir, 0), at, &[!stored[2].1[at - 2 * L as usize]]);
    let before = snapshot(disk, dir);
    match PartitionLog::open(storage(), dir, P, config.clone()).await {
        Err(OpenError::DamageBeforeData {
            path,
            position,
            damage: Damage::Batch(BatchError::FrameChecksum { .. }),
            whole_batches,
        }) => assert_eq!((path, position, whole_batches), (seg(dir, 0), 2 * L, 5)),
        Err(other) => panic!("expected DamageBeforeData at batch 2: {other}"),
        Ok((_, report)) => panic!("damage before whole batches was recovered: {report}"),
    }
    assert_eq!(
        snapshot(disk, dir),
        before,
        "a refused open changes nothing"
    );

    let damaged_tail = disk.read(&seg(dir, 0)).unwrap()[(2 * L) as usize..].to_vec();
    let (log, report) = PartitionLog::repair(storage(), dir, P, config.clone())
        .await
        .unwrap();
    let cut = report.cut.clone().unwrap();
    assert_eq!((cut.position, cut.dropped), (2 * L, 6 * L), "{report}");
    assert_eq!(report.set_aside_batches, 5, "{report}");
    assert_eq!(report.set_aside.len(), 1, "{report}");
    assert_eq!(
        disk.read(&report.set_aside[0].to).unwrap(),
        damaged_tail,
        "the tail is kept byte for byte"
    );
    assert_eq!(read_all(&log), stored[..2]);
    appends_continue_at(&log, 2).await;
    // The index holds no entry past the cut: the one at 2L is the new batch.
    log.close().await.unwrap();
    let (entries, _) = index::decode_file(&disk.read(&idx(dir, 0)).unwrap());
    let positions: Vec<u64> = entries.iter().map(|e| u64::from(e.position)).collect();
    assert_eq!(positions, [0, 2 * L]);
}
on_both!(checksum_mismatch_mid_segment_with_full_check);

/// Two repairs of the same damage (the same segment, the same position):
/// the second keeps its tail beside the first's, numbered after it, and
/// never over it. Each file is named by where its bytes came from.
async fn a_second_repair_keeps_what_the_first_set_aside<S: Storage, D: Disk>(
    storage: impl Fn() -> S,
    disk: &D,
    dir: &Path,
) {
    let config = LogConfig {
        open_check: OpenCheck::Full,
        ..one_segment()
    };
    let at = (2 * L + 256 + 48 + 100) as usize;
    let stored = build(storage(), dir, &config, 8).await;
    let mut tails = Vec::new();
    for round in 0..2u64 {
        if round == 1 {
            let (log, _) = reopen(storage(), dir, &config).await;
            for i in 2..8 {
                log.append(fixed(100 + i)).await.unwrap();
            }
            log.close().await.unwrap();
            disk.remove(&dir.join(CLEAN_RECORD));
        }
        let byte = disk.read(&seg(dir, 0)).unwrap()[at];
        disk.overwrite(&seg(dir, 0), at, &[!byte]);
        let tail = disk.read(&seg(dir, 0)).unwrap()[(2 * L) as usize..].to_vec();
        let (log, report) = PartitionLog::repair(storage(), dir, P, config.clone())
            .await
            .unwrap();
        assert_eq!(report.set_aside.len(), 1, "{report}");
        let aside = &report.set_aside[0];
        let want = format!("{:04}-{}.from-{}", round, log_name(0), 2 * L);
        assert_eq!(aside.to, dir.join(ASIDE_DIR).join(want), "{report}");
        assert_eq!(read_all(&log), stored[..2]);
        log.close().await.unwrap();
        tails.push((aside.to.clone(), tail));
    }
    assert_ne!(tails[0].1, tails[1].1, "the two tails differ");
    for (path, bytes) in &tails {
        assert_eq!(&disk.read(path).unwrap(), bytes, "{} kept", path.display());
    }
}
on_both!(a_second_repair_keeps_what_the_first_set_aside);

// ---- checksum mismatch, confirmed segment -------------------------------

/// In a sealed, confirmed segment a mismatch is an error naming the file
/// and the batch's position; nothing is cut or removed.
async fn checksum_mismatch_in_a_confirmed_segment<S: Storage, D: Disk>(
    storage: impl Fn() -> S,
    disk: &D,
    dir: &Path,
) {
    build(storage(), dir, &config(), 12).await;
    assert!(index::decode_file(&disk.read(&idx(dir, 0)).unwrap())
        .1
        .is_some());
    // Batch 4, the last of segment 0 (its verified tail).
    let at = (4 * L + 256 + 48 + 7) as usize;
    let old = disk.read(&seg(dir, 0)).unwrap()[at];
    disk.overwrite(&seg(dir, 0), at, &[old ^ 0x80]);
    let before = snapshot(disk, dir);
    let err = PartitionLog::open(storage(), dir, P, config())
        .await
        .unwrap_err();
    match &err {
        OpenError::Corrupt {
            path,
            position,
            damage: Damage::Batch(BatchError::FrameChecksum { .. }),
        } => assert_eq!((path, *position), (&seg(dir, 0), 4 * L), "{err}"),
        other => panic!("expected a checksum error naming segment 0: {other}"),
    }
    let shown = err.to_string();
    assert!(
        shown.contains(&log_name(0)) && shown.contains(&(4 * L).to_string()),
        "{shown}"
    );
    assert_eq!(snapshot(disk, dir), before, "nothing dropped");
}
on_both!(checksum_mismatch_in_a_confirmed_segment);

/// With `OpenCheck::Full`, also before the segment's last index entry.
async fn checksum_mismatch_in_a_confirmed_segment_with_full_check<S: Storage, D: Disk>(
    storage: impl Fn() -> S,
    disk: &D,
    dir: &Path,
) {
    let config = LogConfig {
        open_check: OpenCheck::Full,
        ..config()
    };
    build(storage(), dir, &config, 12).await;
    let path = seg(dir, 5);
    let at = 256 + 48; // segment 5's first batch, its first payload byte
    let old = disk.read(&path).unwrap()[at];
    disk.overwrite(&path, at, &[old ^ 1]);
    let before = snapshot(disk, dir);
    match PartitionLog::open(storage(), dir, P, config)
        .await
        .unwrap_err()
    {
        OpenError::Corrupt {
            path: p, position, ..
        } => {
            assert_eq!((p, position), (path, 0));
        }
        other => panic!("{other}"),
    }
    assert_eq!(snapshot(disk, dir), before, "nothing dropped");
}
on_both!(checksum_mismatch_in_a_confirmed_segment_with_full_check);

// ---- cut in a segment before the last -----------------------------------

/// Segment 0 lost its seal (its sealing never finished) and a payload
/// byte of its last batch (after its last index entry, so in the part
/// recovery verifies) flipped. Segments 5 and 10 hold whole batches after
/// it: recovery refuses rather than drop them; a repair cuts segment 0 and
/// moves 5 and 10 aside, whole.
async fn cut_in_an_unconfirmed_segment_before_the_last<S: Storage, D: Disk>(
    storage: impl Fn() -> S,
    disk: &D,
    dir: &Path,
) {
    let stored = build(storage(), dir, &config(), 12).await;
    let (entries, seal) = index::decode_file(&disk.read(&idx(dir, 0)).unwrap());
    assert!(seal.is_some());
    disk.put(&idx(dir, 0), &index::encode_all(&entries));
    let at = (4 * L + 256 + 48 + 1) as usize;
    disk.overwrite(&seg(dir, 0), at, &[!stored[4].1[at - 4 * L as usize]]);
    let before = snapshot(disk, dir);
    match PartitionLog::open(storage(), dir, P, config()).await {
        Err(OpenError::DamageBeforeData {
            path,
            position,
            whole_batches,
            ..
        }) => assert_eq!((path, position, whole_batches), (seg(dir, 0), 4 * L, 7)),
        Err(other) => panic!("expected DamageBeforeData: {other}"),
        Ok((_, report)) => panic!("later whole batches were dropped: {report}"),
    }
    assert_eq!(
        snapshot(disk, dir),
        before,
        "a refused open changes nothing"
    );

    let later = [
        disk.read(&seg(dir, 5)).unwrap(),
        disk.read(&seg(dir, 10)).unwrap(),
    ];
    let (log, report) = PartitionLog::repair(storage(), dir, P, config())
        .await
        .unwrap();
    let cut = report.cut.clone().expect("a cut");
    assert_eq!(
        (cut.path, cut.position, cut.dropped),
        (seg(dir, 0), 4 * L, L),
        "{report}"
    );
    assert!(matches!(cut.reason, CutReason::Damaged(Damage::Batch(_))));
    assert!(report.removed.is_empty(), "{report}");
    let moved: Vec<_> = report.set_aside.iter().map(|s| s.from.clone()).collect();
    assert_eq!(moved, vec![seg(dir, 5), seg(dir, 10)], "{report}");
    for (s, bytes) in report.set_aside.iter().zip(&later) {
        assert_eq!(
            &disk.read(&s.to).unwrap(),
            bytes,
            "{} kept whole",
            s.to.display()
        );
    }
    assert_eq!(report.set_aside_batches, 7, "{report}");
    assert_eq!(report.segments, 1);
    assert_eq!(
        disk.names(dir),
        vec![index_name(0), log_name(0), ASIDE_DIR.to_string()],
        "the later segments left the log, their indexes are gone"
    );
    assert_eq!(read_all(&log), stored[..4]);
    appends_continue_at(&log, 4).await;
    assert_eq!(log.stats().segments, 1, "appended into segment 0");
}
on_both!(cut_in_an_unconfirmed_segment_before_the_last);

/// The power-cut shape of the case above: segment 0's last batch is torn
/// (its second half never reached the disk and reads as zeros) while
/// segments 5 and 10 did. Nothing after a torn write was acknowledged, so
/// recovery opens the log: it cuts segment 0 and moves 5 and 10 aside
/// itself, deleting nothing, and says so.
async fn a_torn_tail_before_later_segments_sets_them_aside<S: Storage, D: Disk>(
    storage: impl Fn() -> S,
    disk: &D,
    dir: &Path,
) {
    let stored = build(storage(), dir, &config(), 12).await;
    let (entries, _) = index::decode_file(&disk.read(&idx(dir, 0)).unwrap());
    disk.put(&idx(dir, 0), &index::encode_all(&entries));
    let half = (L / 2) as usize;
    disk.overwrite(
        &seg(dir, 0),
        (4 * L) as usize + half,
        &vec![0u8; L as usize - half],
    );
    let (log, report) = reopen(storage(), dir, &config()).await;
    let cut = report.cut.clone().expect("a cut");
    assert_eq!((cut.path, cut.position), (seg(dir, 0), 4 * L), "{report}");
    let moved: Vec<_> = report.set_aside.iter().map(|s| s.from.clone()).collect();
    assert_eq!(moved, vec![seg(dir, 5), seg(dir, 10)], "{report}");
    assert_eq!(report.set_aside_batches, 7, "{report}");
    let shown = report.to_string();
    assert!(shown.contains("set aside 7 whole batches"), "{shown}");
    assert_eq!(read_all(&log), stored[..4]);
    appends_continue_at(&log, 4).await;
}
on_both!(a_torn_tail_before_later_segments_sets_them_aside);

/// Segment 0 is unconfirmed and whole but ends early (its last batch never
/// reached the disk, at a batch boundary): the offsets of segment 5 do not
/// follow, so it is the end of the log; the later segments, which hold
/// whole batches, are set aside.
async fn an_unconfirmed_segment_that_ends_early_ends_the_log<S: Storage, D: Disk>(
    storage: impl Fn() -> S,
    disk: &D,
    dir: &Path,
) {
    let stored = build(storage(), dir, &config(), 12).await;
    disk.remove(&idx(dir, 0));
    disk.set_len(&seg(dir, 0), (4 * L) as usize);
    let (log, report) = reopen(storage(), dir, &config()).await;
    assert_eq!(
        report.cut,
        Some(TailCut {
            path: seg(dir, 0),
            position: 4 * L,
            dropped: 0,
            reason: CutReason::Damaged(Damage::EndsShort { ends: 4, next: 5 }),
        }),
        "{report}"
    );
    assert!(
        report.to_string().contains(
            "the segment's batches end at offset 4 but the next segment starts at offset 5"
        ),
        "the cut is told as it is: {report}"
    );
    assert!(report.removed.is_empty(), "{report}");
    let moved: Vec<_> = report.set_aside.iter().map(|s| s.from.clone()).collect();
    assert_eq!(moved, vec![seg(dir, 5), seg(dir, 10)], "{report}");
    assert_eq!(read_all(&log), stored[..4]);
    appends_continue_at(&log, 4).await;
}
on_both!(an_unconfirmed_segment_that_ends_early_ends_the_log);

/// Segment 0's sealing was interrupted after its data was complete (no
/// seal record): it is verified whole, made durable and sealed now.
async fn an_interrupted_seal_is_finished<S: Storage, D: Disk>(
    storage: impl Fn() -> S,
    disk: &D,
    dir: &Path,
) {
    let stored = build(storage(), dir, &config(), 12).await;
    let sealed_index = disk.read(&idx(dir, 0)).unwrap();
    let (entries, seal) = index::decode_file(&sealed_index);
    disk.put(&idx(dir, 0), &index::encode_all(&entries));
    let (log, report) = reopen(storage(), dir, &config()).await;
    assert_eq!(report.sealed, vec![seg(dir, 0)], "{report}");
    assert_eq!((report.cut.clone(), report.removed.len()), (None, 0));
    assert_eq!(
        index::decode_file(&disk.read(&idx(dir, 0)).unwrap()),
        (entries, seal)
    );
    assert_eq!(read_all(&log), stored);
    appends_continue_at(&log, 12).await;
}
on_both!(an_interrupted_seal_is_finished);

// ---- index past the end -------------------------------------------------

/// The active segment lost its last three batches at a batch boundary (a
/// truncation behind the log's back); its index still has an entry for
/// one of them. The entry is dropped and the index rewritten.
async fn index_past_the_end<S: Storage, D: Disk>(storage: impl Fn() -> S, disk: &D, dir: &Path) {
    let stored = build(storage(), dir, &one_segment(), 8).await;
    let (entries, _) = index::decode_file(&disk.read(&idx(dir, 0)).unwrap());
    assert_eq!(
        entries
            .iter()
            .map(|e| u64::from(e.position))
            .collect::<Vec<_>>(),
        [0, 2 * L, 4 * L, 6 * L]
    );
    disk.set_len(&seg(dir, 0), (5 * L) as usize);
    let (log, report) = reopen(storage(), dir, &one_segment()).await;
    assert_eq!(
        report.cut, None,
        "the data ends at a batch boundary: {report}"
    );
    assert_eq!(report.rebuilt_indexes, vec![idx(dir, 0)], "{report}");
    let (now, _) = index::decode_file(&disk.read(&idx(dir, 0)).unwrap());
    assert_eq!(now, entries[..3], "the entry past the end is gone");
    assert_eq!(read_all(&log), stored[..5]);
    appends_continue_at(&log, 5).await;
}
on_both!(index_past_the_end);

/// An entry of a confirmed segment (seal record intact) names a position
/// inside a batch: it is dropped, the index rewritten with its seal.
async fn index_entry_not_naming_its_batch<S: Storage, D: Disk>(
    storage: impl Fn() -> S,
    disk: &D,
    dir: &Path,
) {
    let stored = build(storage(), dir, &config(), 12).await;
    let (entries, seal) = index::decode_file(&disk.read(&idx(dir, 0)).unwrap());
    let seal = seal.unwrap();
    assert_eq!(entries.len(), 3);
    let mut bad = entries.clone();
    bad[2].position += 100;
    disk.put(&idx(dir, 0), &index::encode_sealed(&bad, seal));
    let (log, report) = reopen(storage(), dir, &config()).await;
    assert_eq!(report.rebuilt_indexes, vec![idx(dir, 0)], "{report}");
    assert_eq!(
        (report.cut.clone(), report.sealed.len()),
        (None, 0),
        "{report}"
    );
    assert_eq!(
        index::decode_file(&disk.read(&idx(dir, 0)).unwrap()),
        (entries, Some(seal)),
        "rewritten from the data, still sealed"
    );
    assert_eq!(read_all(&log), stored);
    appends_continue_at(&log, 12).await;
}
on_both!(index_entry_not_naming_its_batch);

// ---- missing index ------------------------------------------------------

async fn missing_index<S: Storage, D: Disk>(storage: impl Fn() -> S, disk: &D, dir: &Path) {
    let stored = build(storage(), dir, &config(), 14).await;
    let originals: Vec<_> = [0, 5, 10]
        .iter()
        .map(|&b| disk.read(&idx(dir, b)).unwrap())
        .collect();
    disk.remove(&idx(dir, 5));
    disk.remove(&idx(dir, 10));
    let (log, report) = reopen(storage(), dir, &config()).await;
    assert_eq!(
        report.rebuilt_indexes,
        vec![idx(dir, 5), idx(dir, 10)],
        "{report}"
    );
    assert_eq!(report.sealed, vec![seg(dir, 5)], "{report}");
    assert_eq!(report.cut, None, "{report}");
    for (k, b) in [0, 5, 10].into_iter().enumerate() {
        assert_eq!(
            disk.read(&idx(dir, b)).unwrap(),
            originals[k],
            "index {b} rebuilt as it was"
        );
    }
    assert_eq!(read_all(&log), stored);
    appends_continue_at(&log, 14).await;
}
on_both!(missing_index);

/// An index file that exists but cannot be opened (here a directory in its
/// place) is an error naming it, not a missing index to rebuild over: the
/// open is refused and nothing changes. Real files only (the simulated disk
/// has no such file).
#[test]
fn an_index_that_cannot_be_opened_refuses_the_open() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    run(async {
        let storage = || UringStorage::new(64).unwrap();
        build(storage(), &dir, &config(), 12).await;
        std::fs::remove_file(idx(&dir, 5)).unwrap();
        std::fs::create_dir(idx(&dir, 5)).unwrap();
        let before = snapshot(&RealDisk, &dir);
        match PartitionLog::open(storage(), &dir, P, config()).await {
            Err(OpenError::Io { op, path, .. }) => {
                assert_eq!((op, path), ("open index", idx(&dir, 5)));
            }
            Err(other) => panic!("expected the index's open to fail: {other}"),
            Ok((_, report)) => panic!("an unopenable index was taken as missing: {report}"),
        }
        assert_eq!(
            snapshot(&RealDisk, &dir),
            before,
            "a refused open changes nothing"
        );
        assert!(std::fs::metadata(idx(&dir, 5)).unwrap().is_dir());
    });
}

// ---- leftovers ----------------------------------------------------------

/// What an interrupted removal or write leaves (an index whose segment is
/// gone, temporary files in the partition's and its consumers' directories)
/// is cleared at open; nothing else changes. An orphan index must not be
/// there when a segment of its base is created again.
async fn leftovers_are_cleared_at_open<S: Storage, D: Disk>(
    storage: impl Fn() -> S,
    disk: &D,
    dir: &Path,
) {
    let stored = build(storage(), dir, &config(), 12).await;
    let names = disk.names(dir);
    let consumers = dir.join("consumers");
    storage().create_dir_all(&consumers).unwrap();
    let consumer_names = disk.names(&consumers);
    disk.put(&idx(dir, 15), &disk.read(&idx(dir, 5)).unwrap());
    disk.put(&dir.join(format!("{}.tmp", index_name(15))), b"half");
    disk.put(&consumers.join("7.tmp"), b"half");
    let (log, report) = reopen(storage(), dir, &config()).await;
    assert_eq!(report.cut, None, "{report}");
    let mut want = names.clone();
    want.push("consumers".to_string());
    want.sort();
    assert_eq!(
        disk.names(dir),
        want,
        "the orphan index and the temporary file are gone"
    );
    assert_eq!(
        disk.names(&consumers),
        consumer_names,
        "the consumers' temporary file is gone"
    );
    assert_eq!(read_all(&log), stored);
    // Segment 15 is created again: it starts with an index of its own.
    let mut all = stored;
    for i in 12..17 {
        let b = fixed(i);
        let ack = log.append(b.clone()).await.unwrap();
        all.push((i, stored_form(&b, P, i, ack.base_timestamp)));
    }
    log.close().await.unwrap();
    let (entries, _) = index::decode_file(&disk.read(&idx(dir, 15)).unwrap());
    let positions: Vec<u64> = entries.iter().map(|e| u64::from(e.position)).collect();
    assert_eq!(positions, [0], "segment 15's own entry (its two batches)");
    let (log, _) = reopen(storage(), dir, &config()).await;
    assert_eq!(read_all(&log), all);
}
on_both!(leftovers_are_cleared_at_open);

/// A directory that does not exist yet opens as a new, empty log: one
/// segment at offset 0, reported as such, nothing cut.
async fn a_new_directory_opens_an_empty_log<S: Storage, D: Disk>(
    storage: impl Fn() -> S,
    disk: &D,
    dir: &Path,
) {
    let (log, report) = reopen(storage(), dir, &config()).await;
    assert_eq!((report.segments, report.next_offset), (1, 0), "{report}");
    assert_eq!(
        (report.cut.clone(), report.removed.len()),
        (None, 0),
        "{report}"
    );
    assert_eq!(disk.names(dir), vec![log_name(0)]);
    assert!(read_all(&log).is_empty());
    appends_continue_at(&log, 0).await;
}
on_both!(a_new_directory_opens_an_empty_log);

// ---- empty segment ------------------------------------------------------

/// A directory holding one empty segment file: an empty log continuing at
/// its base offset.
async fn empty_segment<S: Storage, D: Disk>(storage: impl Fn() -> S, disk: &D, dir: &Path) {
    storage().create_dir_all(dir).unwrap();
    disk.put(&seg(dir, 500), b"");
    let (log, report) = reopen(storage(), dir, &config()).await;
    assert_eq!((report.segments, report.next_offset), (1, 500), "{report}");
    assert_eq!(report.cut, None);
    assert!(read_all(&log).is_empty());
    let ack = log.append(fixed(1)).await.unwrap();
    assert_eq!((ack.base_offset, ack.segment, ack.position), (500, 500, 0));
    assert_eq!(read_all(&log).len(), 1);
}
on_both!(empty_segment);

/// A rotation created the next segment, then the process died before any
/// byte reached it: the log continues in it, at its base offset.
async fn empty_last_segment_after_a_rotation<S: Storage, D: Disk>(
    storage: impl Fn() -> S,
    disk: &D,
    dir: &Path,
) {
    let stored = build(storage(), dir, &config(), 10).await;
    assert_eq!(disk.names(dir).len(), 4, "segments 0 and 5");
    disk.put(&seg(dir, 10), b"");
    let (log, report) = reopen(storage(), dir, &config()).await;
    assert_eq!((report.segments, report.next_offset), (3, 10), "{report}");
    assert_eq!(report.cut, None, "{report}");
    assert_eq!(read_all(&log), stored);
    let ack = log.append(fixed(10)).await.unwrap();
    assert_eq!((ack.base_offset, ack.segment, ack.position), (10, 10, 0));
    appends_continue_at(&log, 11).await;
}
on_both!(empty_last_segment_after_a_rotation);

// ---- offset gap between segments ----------------------------------------

async fn offset_gap_between_confirmed_segments<S: Storage, D: Disk>(
    storage: impl Fn() -> S,
    disk: &D,
    dir: &Path,
) {
    build(storage(), dir, &config(), 17).await;
    disk.remove(&seg(dir, 5));
    disk.remove(&idx(dir, 5));
    let before = snapshot(disk, dir);
    let err = PartitionLog::open(storage(), dir, P, config())
        .await
        .unwrap_err();
    match &err {
        OpenError::Corrupt {
            path,
            position: 0,
            damage:
                Damage::SegmentGap {
                    expected: 5,
                    found: 10,
                },
        } => assert_eq!(path, &seg(dir, 10)),
        other => panic!("expected a gap naming segment 10: {other}"),
    }
    assert!(err.to_string().contains(&log_name(10)), "{err}");
    assert_eq!(snapshot(disk, dir), before, "nothing dropped");
}
on_both!(offset_gap_between_confirmed_segments);

// ---- where the scan starts ------------------------------------------------

/// After a crash the open verifies the active segment from its last index
/// entry that names the batch at its position (offset and timestamp), not
/// from the segment's start; an entry that names another offset or
/// timestamp is passed over for the one before it. Whatever the start,
/// the log reads back whole.
async fn the_scan_starts_at_the_last_entry_naming_its_batch<S: Storage, D: Disk>(
    storage: impl Fn() -> S,
    disk: &D,
    dir: &Path,
) {
    let stored = build(storage(), dir, &one_segment(), 8).await;
    let entries = index::decode_all(&disk.read(&idx(dir, 0)).unwrap());
    let at: Vec<u64> = entries.iter().map(|e| u64::from(e.position)).collect();
    assert_eq!(at, [0, 2 * L, 4 * L, 6 * L]);
    let last = entries.len() - 1;
    let off = |e: &mut index::IndexEntry| e.rel_offset += 1;
    let ts = |e: &mut index::IndexEntry| e.timestamp += 1;
    let keep = |_: &mut index::IndexEntry| {};
    for (what, change, verified) in [
        (
            "the entry at batch 6 names it",
            &keep as &dyn Fn(&mut index::IndexEntry),
            2,
        ),
        ("it names offset 7", &off, 4),
        ("it names another timestamp", &ts, 4),
    ] {
        let mut e = entries.clone();
        change(&mut e[last]);
        disk.put(&idx(dir, 0), &index::encode_all(&e));
        let (log, report) = reopen(storage(), dir, &one_segment()).await;
        assert_eq!(report.batches_verified, verified, "{what}: {report}");
        assert_eq!(read_all(&log), stored, "{what}");
        drop(log);
    }
}
on_both!(the_scan_starts_at_the_last_entry_naming_its_batch);

// ---- a confirmed segment against its seal --------------------------------

/// A confirmed segment whose batches end short of its seal record (its
/// last batch gone at a batch boundary, so the scan ends cleanly), or
/// whose seal names another end offset than its batches reach, is refused
/// naming the segment, the position and both offsets; nothing changes.
async fn a_confirmed_segment_that_disagrees_with_its_seal<S: Storage, D: Disk>(
    storage: impl Fn() -> S,
    disk: &D,
    dir: &Path,
) {
    build(storage(), dir, &config(), 12).await;
    let data = disk.read(&seg(dir, 0)).unwrap();
    assert_eq!(data.len() as u64, 5 * L);
    let (entries, seal) = index::decode_file(&disk.read(&idx(dir, 0)).unwrap());
    let seal = seal.expect("segment 0 is confirmed");
    assert_eq!((seal.data_len, seal.next_offset), (5 * L, 5));
    let wrong_seal = index::encode_sealed(
        &entries,
        index::Seal {
            next_offset: 6,
            ..seal
        },
    );
    // want: (position, the seal's bytes and offset, the batches' end
    // offset), then how the error tells it.
    for (what, bytes, index_file, want, told) in [
        (
            "cut short",
            &data[..(4 * L) as usize],
            None,
            (4 * L, 5 * L, 5, 4),
            format!("at byte {}: the seal record says {} bytes up to offset 5, but the whole batches end here, at offset 4", 4 * L, 5 * L),
        ),
        (
            "its seal names offset 6",
            &data[..],
            Some(wrong_seal),
            (5 * L, 5 * L, 6, 5),
            format!("at byte {}: the seal record says {} bytes up to offset 6, but the whole batches end here, at offset 5", 5 * L, 5 * L),
        ),
    ] {
        disk.put(&seg(dir, 0), bytes);
        if let Some(i) = &index_file {
            disk.put(&idx(dir, 0), i);
        }
        let before = snapshot(disk, dir);
        match PartitionLog::open(storage(), dir, P, config()).await {
            Err(
                e @ OpenError::Corrupt {
                    damage:
                        Damage::SealMismatch {
                            sealed_len,
                            sealed_next,
                            next,
                        },
                    ..
                },
            ) => {
                let OpenError::Corrupt { path, position, .. } = &e else {
                    unreachable!()
                };
                assert_eq!(
                    (path.clone(), (*position, sealed_len, sealed_next, next)),
                    (seg(dir, 0), want),
                    "{what}"
                );
                assert!(e.to_string().contains(&told), "{what}: {e}");
            }
            Err(other) => panic!("{what}: expected a seal mismatch naming segment 0: {other}"),
            Ok((_, report)) => panic!("{what}: trusted: {report}"),
        }
        assert_eq!(snapshot(disk, dir), before, "{what}: nothing changed");
    }
}
on_both!(a_confirmed_segment_that_disagrees_with_its_seal);

/// Zeros after a confirmed segment's batches are damage, not a torn
/// append (its file was trimmed to its batches before the seal was
/// written): refused, naming how many bytes follow the last batch.
async fn zeros_after_a_confirmed_segment<S: Storage, D: Disk>(
    storage: impl Fn() -> S,
    disk: &D,
    dir: &Path,
) {
    build(storage(), dir, &config(), 12).await;
    let mut data = disk.read(&seg(dir, 0)).unwrap();
    data.extend_from_slice(&[0u8; 100]);
    disk.put(&seg(dir, 0), &data);
    let before = snapshot(disk, dir);
    match PartitionLog::open(storage(), dir, P, config()).await {
        Err(OpenError::Corrupt {
            path,
            position,
            damage: Damage::TornHeader { available },
        }) => assert_eq!((path, position, available), (seg(dir, 0), 5 * L, 100)),
        Err(other) => panic!("expected zeros named in segment 0: {other}"),
        Ok((_, report)) => panic!("zeros after a confirmed segment were trusted: {report}"),
    }
    assert_eq!(snapshot(disk, dir), before, "nothing changed");
}
on_both!(zeros_after_a_confirmed_segment);

// ---- torn or damaged, before whole batches --------------------------------

/// Under `OpenCheck::Full`, a batch mid-segment holding a whole aligned
/// sector of zeros (pages a power cut never wrote) is a torn write, even
/// with whole batches after it: the open cuts there and sets the later
/// batches aside, whole, instead of refusing.
async fn a_zero_filled_sector_mid_segment_is_torn<S: Storage, D: Disk>(
    storage: impl Fn() -> S,
    disk: &D,
    dir: &Path,
) {
    let config = LogConfig {
        open_check: OpenCheck::Full,
        ..one_segment()
    };
    let stored = build(storage(), dir, &config, 8).await;
    // Batch 3 spans [3L, 4L) = [2721, 3628), its payload from 3025: the
    // sector [3072, 3584) lies inside it.
    disk.overwrite(&seg(dir, 0), 3072, &[0u8; 512]);
    let (log, report) = reopen(storage(), dir, &config).await;
    let cut = report.cut.clone().expect("a cut");
    assert_eq!((cut.position, cut.dropped), (3 * L, 5 * L), "{report}");
    assert_eq!(report.set_aside_batches, 4, "{report}");
    assert_eq!(read_all(&log), stored[..3]);
}
on_both!(a_zero_filled_sector_mid_segment_is_torn);

/// One message of `fill` bytes, 2,000 of them, without user headers.
fn filled(fill: u8) -> Batch {
    let payload = vec![fill; 2000];
    let mut b = corelog_segment::BatchBuilder::new();
    b.push(corelog_segment::MessageSpec {
        id: u128::from(fill),
        timestamp: 1_700_000_000_000_000,
        payload: &payload,
        user_headers: &[],
    });
    Batch::admit(b.build().unwrap(), &Limits::default()).unwrap()
}

/// A flipped byte in a batch with no zero byte in it, after a batch whose
/// payload is all zeros and before whole batches, is damage, not a torn
/// write: no sector of the damaged batch is zero-filled (the zeros of the
/// batch before it do not count). Refused, naming it.
async fn a_flipped_byte_between_whole_batches_is_damage<S: Storage, D: Disk>(
    storage: impl Fn() -> S,
    disk: &D,
    dir: &Path,
) {
    let config = LogConfig {
        open_check: OpenCheck::Full,
        ..one_segment()
    };
    let (log, _) = PartitionLog::open(storage(), dir, P, config.clone())
        .await
        .unwrap();
    let zeros = filled(0);
    for b in [zeros.clone(), filled(0xAA), fixed(2), fixed(3)] {
        log.append(b).await.unwrap();
    }
    log.close().await.unwrap();
    drop(log);
    storage().remove_file(&dir.join(CLEAN_RECORD)).unwrap();
    let at = zeros.len() as u64;
    disk.overwrite(&seg(dir, 0), (at + 256 + 48 + 1000) as usize, &[0xAB]);
    let before = snapshot(disk, dir);
    match PartitionLog::open(storage(), dir, P, config).await {
        Err(OpenError::DamageBeforeData {
            path,
            position,
            whole_batches,
            ..
        }) => assert_eq!((path, position, whole_batches), (seg(dir, 0), at, 2)),
        Err(other) => panic!("expected DamageBeforeData: {other}"),
        Ok((_, report)) => panic!("damage before whole batches was taken for torn: {report}"),
    }
    assert_eq!(
        snapshot(disk, dir),
        before,
        "a refused open changes nothing"
    );
}
on_both!(a_flipped_byte_between_whole_batches_is_damage);

// ---- after recovery -----------------------------------------------------

/// Regression: recovery served, and sealed, segments whose names only the
/// page cache held (the process had died before any directory sync), and
/// made their data durable but never the directory: a power cut after the
/// reopen could take segments, and batches readers had been served, away
/// again (or leave a seal record vouching for a lost name).
#[test]
fn regression_what_a_reopened_log_serves_survives_a_power_cut() {
    let config = LogConfig {
        fsync: FsyncPolicy::Never,
        ..config()
    };
    let disk = sim_for(3, &config);
    let dir = Path::new("/p");
    // The first process: no directory sync after the first segment's ever
    // completes; then it dies (its runtime, and every task, is dropped).
    run_sim(async {
        let gated = GatedStorage::new(disk.clone());
        let (log, _) = PartitionLog::open(gated.clone(), dir, P, config.clone())
            .await
            .unwrap();
        gated.hold_dir_syncs();
        for i in 0..14 {
            log.append(fixed(i)).await.unwrap();
        }
        for _ in 0..20 {
            yield_to_others().await;
        }
        assert_eq!(log.stats().segments, 3);
    });
    run_sim(async {
        let (log, report) = reopen(disk.clone(), dir, &config).await;
        let served = read_all(&log);
        assert_eq!(served.len(), 14, "{report}");
        for copy in 0..50 {
            let (after, report) = reopen(disk.crash(), dir, &config).await;
            assert_eq!(
                read_all(&after),
                served,
                "power cut {copy} after the reopen: {report}"
            );
        }
    });
}
