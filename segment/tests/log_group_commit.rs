//! Fsync policies: group commit under `batch` (few fdatasyncs, and no
//! acknowledgement before one covers the batch), `interval:MS` and `never`
//! as `FsyncPolicy` documents them. On the simulated disk, whose counters
//! count the fdatasyncs and whose `crash()` shows what is durable.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use corelog_segment::io::{SimFaults, SimStorage};
use corelog_segment::log::{log_name, AppendAck, FsyncPolicy, LogConfig, PartitionLog, PollFrom};
use corelog_segment::Batch;
use std::cell::RefCell;
use std::path::Path;
use std::rc::Rc;
use std::time::Duration;

const DIR: &str = "/p/1";

fn config(fsync: FsyncPolicy, segment_bytes: u64) -> LogConfig {
    LogConfig {
        fsync,
        segment_bytes,
        limits: corelog_segment::Limits {
            max_batch_bytes: 64 << 10,
        },
        ..small_config()
    }
}

async fn open(disk: &SimStorage, config: &LogConfig) -> PartitionLog<SimStorage> {
    PartitionLog::open(disk.clone(), Path::new(DIR), 1, config.clone())
        .await
        .unwrap()
        .0
}

/// Whether every one of `copies` power cuts of `disk` keeps the batch
/// `sent` stored at `ack`, byte for byte.
async fn durable_in(
    disk: &SimStorage,
    config: &LogConfig,
    copies: usize,
    sent: &Batch,
    ack: &AppendAck,
) -> Result<(), String> {
    let want = stored_form(sent, 1, ack.base_offset, ack.base_timestamp);
    for copy in 0..copies {
        let cut = disk.crash();
        let (log, report) = PartitionLog::open(cut, Path::new(DIR), 1, config.clone())
            .await
            .map_err(|e| format!("power cut {copy}: reopen failed: {e}"))?;
        let reply = log.poll(PollFrom::Offset(ack.base_offset), 0).unwrap();
        let found = reply.batches().next().map(|b| b.as_bytes().to_vec());
        if found.as_deref() != Some(&want[..]) {
            return Err(format!(
                "power cut {copy} lost batch at offset {} ({report})",
                ack.base_offset
            ));
        }
    }
    Ok(())
}

/// With no interleaving (every simulated operation completes at once), all
/// 500 writes are queued before the first sync round's task, which the
/// first write's completion spawns behind them (monoio runs tasks in FIFO
/// order; a round takes its files and target when its task first runs): so
/// that round finds all 500 written and one fdatasync acknowledges them
/// all, and no later round finds anything to do.
#[test]
fn five_hundred_concurrent_appends_are_acknowledged_by_one_fdatasync() {
    run_sim(async {
        let config = config(FsyncPolicy::Batch, 1 << 20);
        let disk = sim_for(1, &config);
        let log = open(&disk, &config).await;
        let before = disk.counters();
        let futs: Vec<_> = (0..500).map(|i| log.append(batch(i, 1, 40))).collect();
        for (i, f) in futs.into_iter().enumerate() {
            assert_eq!(f.await.unwrap().base_offset, i as u64);
        }
        let syncs = disk.counters().syncs - before.syncs;
        assert_eq!(syncs, 1, "one group commit for 500 appends");
        assert_eq!(log.stats().syncs, 1);
        assert_eq!(log.stats().next_offset, 500);
    });
}

/// With interleaving: each write completes within its first `Y + 1` polls
/// (it yields at most `Y` times), and the run queue polls every runnable
/// task once per cycle, so writes complete in at most `Y + 1` cycles. One
/// round task at a time waits to start, and it takes every write completed
/// by then, so rounds start at most once per cycle per slot; with two
/// rounds in flight at once, at most `2 (Y + 2)` fdatasyncs of the one
/// segment file for 400 appends.
#[test]
fn concurrent_appends_share_fdatasyncs_when_operations_interleave() {
    for seed in 0..8 {
        run_sim(async {
            let config = config(FsyncPolicy::Batch, 1 << 20);
            let disk = sim_for(seed, &config);
            let log = open(&disk, &config).await;
            let max_yields = 1 + (seed as u32 % 4);
            disk.set_faults(SimFaults {
                max_yields,
                ..SimFaults::default()
            });
            let before = disk.counters();
            let futs: Vec<_> = (0..400).map(|i| log.append(batch(i, 1, 40))).collect();
            for f in futs {
                f.await.unwrap();
            }
            let syncs = disk.counters().syncs - before.syncs;
            assert!(
                syncs <= 2 * (u64::from(max_yields) + 2),
                "seed {seed}: {syncs} fdatasyncs for 400 appends with max_yields {max_yields}"
            );
            assert_eq!(log.stats().next_offset, 400);
        });
    }
}

/// After each acknowledgement, power cuts of the disk (taken at that very
/// moment) keep the batch: an append is acknowledged only once an fdatasync
/// (and, for a new segment, a directory sync) covers it.
fn acknowledged_means_durable(seed: u64, segment_bytes: u64, flushes: bool) -> Vec<String> {
    run_sim(async move {
        let config = config(FsyncPolicy::Batch, segment_bytes);
        let disk = sim_for(seed, &config);
        let log = open(&disk, &config).await;
        disk.set_faults(SimFaults {
            max_yields: 16,
            ..SimFaults::default()
        });
        let failures = Rc::new(RefCell::new(Vec::<String>::new()));
        let mut tasks = Vec::new();
        for i in 0..60u64 {
            let sent = batch(
                seed * 100 + i,
                1 + (i as usize % 3),
                100 + (i as usize * 37) % 400,
            );
            let fut = log.append(sent.clone());
            let (d, c, f) = (disk.clone(), config.clone(), failures.clone());
            tasks.push(monoio::spawn(async move {
                let ack = fut.await.unwrap();
                if let Err(e) = durable_in(&d, &c, 3, &sent, &ack).await {
                    f.borrow_mut().push(format!("batch {i}: {e}"));
                }
            }));
            if flushes && i % 7 == 3 {
                let (l, d, c, f) = (log.clone(), disk.clone(), config.clone(), failures.clone());
                let upto = log.next_offset();
                tasks.push(monoio::spawn(async move {
                    l.flush().await.unwrap();
                    let cut = d.crash();
                    let (after, _) = PartitionLog::open(cut, Path::new(DIR), 1, c).await.unwrap();
                    if after.stats().next_offset < upto {
                        f.borrow_mut().push(format!(
                            "flush returned with offsets below {upto} not durable: {:?}",
                            after.stats()
                        ));
                    }
                }));
            }
            if i % 5 == 0 {
                yield_to_others().await;
            }
        }
        for t in tasks {
            t.await;
        }
        let failures = failures.borrow().clone();
        failures
    })
}

/// Runs `seeds` cases and fails listing every seed that broke the promise.
fn all_durable(seeds: std::ops::Range<u64>, segment_bytes: u64, flushes: bool) {
    let mut failed = Vec::new();
    for seed in seeds.clone() {
        let failures = acknowledged_means_durable(seed, segment_bytes, flushes);
        if !failures.is_empty() {
            failed.push((seed, failures));
        }
    }
    assert!(
        failed.is_empty(),
        "{} of {} seeds acknowledged before durable: {failed:#?}",
        failed.len(),
        seeds.count()
    );
}

#[test]
fn an_append_is_acknowledged_only_once_durable() {
    all_durable(0..4, 1 << 20, false);
}

#[test]
fn an_append_is_acknowledged_only_once_durable_across_rotations() {
    all_durable(0..4, 2048, false);
}

#[test]
fn an_append_and_a_flush_return_only_once_durable() {
    all_durable(0..4, 1 << 20, true);
}

/// Power cuts of the disk now: does each keep every batch of `sent`?
async fn all_durable_now(
    disk: &SimStorage,
    config: &LogConfig,
    sent: &[(Batch, AppendAck)],
    copies: usize,
) -> Result<(), String> {
    for (b, ack) in sent {
        durable_in(disk, config, copies, b, ack).await?;
    }
    Ok(())
}

/// A log under `config` on a gated simulated disk seeded with `seed`.
async fn open_gated(seed: u64, config: &LogConfig) -> (GatedStorage, PartitionLog<GatedStorage>) {
    let gated = GatedStorage::new(sim_for(seed, config));
    let (log, _) = PartitionLog::open(gated.clone(), Path::new(DIR), 1, config.clone())
        .await
        .unwrap();
    (gated, log)
}

/// Regression: sealing a segment cleared its dirty flag before its own
/// fdatasync had completed, so a group-commit round running meanwhile took
/// the segment's last writes for durable and acknowledged them early.
///
/// Under a durable policy a seal no longer syncs anything itself: it waits
/// for the group commit (a round that syncs the segment and the directory)
/// and only then writes its seal record. The batch X crossing
/// `segment_bytes` and the batch Y after it are reserved together; the next
/// fdatasync of X's segment is held. While it is held, X is not
/// acknowledged and the segment carries no seal record (the record vouches
/// for bytes that are not yet durable); once it completes, both happen and
/// every acknowledged batch survives power cuts.
#[test]
fn regression_a_segments_last_batch_is_not_acknowledged_before_its_seal_sync_completes() {
    run_sim(async {
        let config = config(FsyncPolicy::Batch, 4096);
        let (gated, log) = open_gated(7, &config).await;
        let mut sent = Vec::new();
        for i in 0..4 {
            let b = batch(i, 1, 600);
            let ack = log.append(b.clone()).await.unwrap();
            sent.push((b, ack));
        }
        assert!(log.stats().bytes < 4096);
        let segment = Path::new(DIR).join(log_name(0));
        let index = segment.with_extension("index");
        let sealed = || {
            gated
                .disk
                .file_bytes(&index)
                .is_some_and(|b| corelog_segment::log::index::decode_file(&b).1.is_some())
        };
        gated.hold_next_sync_of(&segment);
        let (syncs_before, dir_syncs_before) = {
            let c = gated.disk.counters();
            (c.syncs, c.dir_syncs)
        };
        let (x, y) = (batch(100, 2, 600), batch(101, 1, 100));
        let (fx, fy) = (log.append(x.clone()), log.append(y.clone()));
        assert_eq!(log.stats().segments, 2, "Y rotated");
        let acked = Rc::new(RefCell::new(None));
        let seen = acked.clone();
        let task = monoio::spawn(async move {
            let ack = fx.await.unwrap();
            *seen.borrow_mut() = Some(ack);
        });
        for _ in 0..50 {
            yield_to_others().await;
        }
        assert_eq!(gated.held(), 1, "a sync of X's segment is held");
        assert!(
            acked.borrow().is_none(),
            "X is acknowledged only once a sync of its file completed"
        );
        assert!(!sealed(), "no seal record before the segment is durable");
        gated.release();
        task.await;
        let ack = acked.borrow().expect("X acknowledged after the sync");
        sent.push((x, ack));
        let ack_y = fy.await.unwrap();
        sent.push((y, ack_y));
        for _ in 0..50 {
            yield_to_others().await;
        }
        assert!(sealed(), "sealed once the group commit covered it");
        all_durable_now(&gated.disk, &config, &sent, 10)
            .await
            .unwrap();
        // The group commit's syncs only: the seal added no fdatasync of
        // the segment and no directory sync of its own (the round syncs the
        // directory for the new name, then the two segments).
        let c = gated.disk.counters();
        assert_eq!(
            (c.syncs - syncs_before, c.dir_syncs - dir_syncs_before),
            (2, 1)
        );
        log.close().await.unwrap();
    });
}

/// A round that syncs the directory syncs alone. A segment is created and
/// its round's directory sync held; a write meanwhile gets a round whose
/// fdatasync waits; then another segment is created, and the round for it
/// waits too instead of syncing the directory beside the first (on btrfs a
/// directory sync and an fdatasync of a file beside another fdatasync of
/// it lost data; see `sync.rs`). Once released, everything is
/// acknowledged and durable.
#[test]
fn a_round_that_syncs_the_directory_syncs_alone() {
    run_sim(async {
        let config = config(FsyncPolicy::Batch, 4096);
        let (gated, log) = open_gated(11, &config).await;
        let mut sent = Vec::new();
        for i in 0..6 {
            let b = batch(i, 1, 600);
            let ack = log.append(b.clone()).await.unwrap();
            sent.push((b, ack));
        }
        gated.hold_dir_syncs();
        let dir_syncs = gated.disk.counters().dir_syncs;
        let segments = log.stats().segments;
        // A new segment, and the round that syncs its name (held).
        let mut pending = Vec::new();
        let mut i = 100;
        while log.stats().segments < segments + 1 {
            let b = batch(i, 1, 600);
            pending.push((b.clone(), log.append(b)));
            i += 1;
        }
        for _ in 0..50 {
            yield_to_others().await;
        }
        assert_eq!(gated.held(), 1, "the first round's directory sync is held");
        // A write while that round syncs: its round syncs no file beside a
        // round that syncs the directory.
        let syncs = gated.disk.counters().syncs;
        let b = batch(i, 1, 100);
        pending.push((b.clone(), log.append(b)));
        i += 1;
        for _ in 0..50 {
            yield_to_others().await;
        }
        assert_eq!(
            gated.disk.counters().syncs,
            syncs,
            "no fdatasync beside a round that syncs the directory"
        );
        // Another segment while that round is in flight: a round for the
        // writes since, with a name to sync.
        while log.stats().segments < segments + 2 {
            let b = batch(i, 1, 600);
            pending.push((b.clone(), log.append(b)));
            i += 1;
        }
        for _ in 0..50 {
            yield_to_others().await;
        }
        assert_eq!(
            gated.held(),
            1,
            "the second round waits for the first instead of syncing the directory beside it"
        );
        gated.release();
        for (b, f) in pending {
            let ack = f.await.unwrap();
            sent.push((b, ack));
        }
        assert!(gated.disk.counters().dir_syncs >= dir_syncs + 2);
        all_durable_now(&gated.disk, &config, &sent, 5)
            .await
            .unwrap();
        log.close().await.unwrap();
    });
}

/// The other way round: a round that must sync the directory waits for
/// the rounds already syncing files. A round's fdatasync of segment 0 is
/// held; then the log rolls into a new segment, and the round for that
/// name issues no directory sync until the held fdatasync ends.
#[test]
fn a_round_that_syncs_the_directory_waits_for_the_fdatasyncs_in_flight() {
    run_sim(async {
        let config = config(FsyncPolicy::Batch, 4096);
        let (gated, log) = open_gated(12, &config).await;
        let first = batch(0, 1, 600);
        let ack = log.append(first.clone()).await.unwrap();
        let mut sent = vec![(first, ack)];
        gated.hold_next_sync_of(&Path::new(DIR).join(log_name(0)));
        let mut pending = Vec::new();
        let b = batch(1, 1, 600);
        pending.push((b.clone(), log.append(b)));
        for _ in 0..50 {
            yield_to_others().await;
        }
        assert_eq!(gated.held(), 1, "the first round's fdatasync is held");
        let (syncs, dir_syncs) = {
            let c = gated.disk.counters();
            (c.syncs, c.dir_syncs)
        };
        // Into a new segment: the next round has a name to sync.
        let mut i = 2;
        while log.stats().segments < 2 {
            let b = batch(i, 1, 600);
            pending.push((b.clone(), log.append(b)));
            i += 1;
        }
        for _ in 0..50 {
            yield_to_others().await;
        }
        let c = gated.disk.counters();
        assert_eq!(
            (c.dir_syncs, c.syncs),
            (dir_syncs, syncs),
            "a round with a name to sync waits for the fdatasync in flight"
        );
        gated.release();
        for (b, f) in pending {
            let ack = f.await.unwrap();
            sent.push((b, ack));
        }
        assert!(gated.disk.counters().dir_syncs > dir_syncs);
        all_durable_now(&gated.disk, &config, &sent, 5)
            .await
            .unwrap();
        log.close().await.unwrap();
    });
}

/// Group commit runs two rounds at once: a write that completes while a
/// round's fdatasync is in flight gets a round of its own at once (so it
/// waits for one sync, not for the rest of another and then its own). The
/// second round may end first; it publishes only after the first.
///
/// Segment 0's next fdatasync (the round that covers A, which crosses the
/// segment's size) is held. B rolls into segment 1, so the second round
/// syncs segment 1 and the directory, not segment 0: had it published when
/// its own syncs ended, A and B would be acknowledged while only the held
/// sync covers A.
#[test]
fn a_second_round_runs_while_the_first_syncs_and_publishes_after_it() {
    run_sim(async {
        let config = config(FsyncPolicy::Batch, 4096);
        let (gated, log) = open_gated(11, &config).await;
        let first = batch(0, 1, 600);
        let ack = log.append(first.clone()).await.unwrap();
        let mut sent = vec![(first, ack)];
        gated.hold_next_sync_of(&Path::new(DIR).join(log_name(0)));
        let (a, b) = (batch(1, 4, 900), batch(2, 1, 100));
        let acked = Rc::new(RefCell::new(Vec::new()));
        let fa = log.append(a.clone());
        let seen = acked.clone();
        let task_a = monoio::spawn(async move {
            let ack = fa.await.unwrap();
            seen.borrow_mut().push("A");
            ack
        });
        for _ in 0..20 {
            yield_to_others().await;
        }
        assert_eq!(gated.held(), 1, "the first round's fdatasync is held");
        let fb = log.append(b.clone());
        assert_eq!(log.stats().segments, 2, "B rolled into segment 1");
        let seen = acked.clone();
        let task_b = monoio::spawn(async move {
            let ack = fb.await.unwrap();
            seen.borrow_mut().push("B");
            ack
        });
        for _ in 0..50 {
            yield_to_others().await;
        }
        // Only a second round syncs B's bytes in segment 1 (the seal syncs
        // segment 0; preallocation makes the file long, of zeros).
        let cut = gated.disk.crash();
        let seg1 = cut.file_bytes(&Path::new(DIR).join(log_name(5)));
        assert!(
            seg1.is_some_and(
                |bytes| bytes.len() >= b.len() && bytes[..b.len()] != vec![0; b.len()][..]
            ),
            "no second round synced segment 1 while the first was held"
        );
        assert!(
            acked.borrow().is_empty(),
            "acknowledged {:?} while the round covering A is held",
            acked.borrow()
        );
        gated.release();
        sent.push((a, task_a.await));
        sent.push((b, task_b.await));
        all_durable_now(&gated.disk, &config, &sent, 3)
            .await
            .unwrap();
        log.close().await.unwrap();
    });
}

/// Regression: a `flush` while a group-commit round's fdatasync was in
/// flight found the file already marked clean, moved the durable mark
/// without syncing and so acknowledged the round's appends (and returned)
/// before any fdatasync covered them.
#[test]
fn regression_a_flush_during_a_group_commit_round_waits_for_its_fdatasync() {
    run_sim(async {
        let config = config(FsyncPolicy::Batch, 1 << 20);
        let (gated, log) = open_gated(8, &config).await;
        gated.hold_next_sync_of(&Path::new(DIR).join(log_name(0)));
        let acked = Rc::new(RefCell::new(0usize));
        let mut tasks = Vec::new();
        for i in 0..20 {
            let fut = log.append(batch(i, 1, 200));
            let acked = acked.clone();
            tasks.push(monoio::spawn(async move {
                fut.await.unwrap();
                *acked.borrow_mut() += 1;
            }));
        }
        for _ in 0..10 {
            yield_to_others().await;
        }
        assert_eq!(gated.held(), 1, "the group commit's fdatasync is held");
        let flushed = Rc::new(RefCell::new(false));
        let (l, f) = (log.clone(), flushed.clone());
        let flush = monoio::spawn(async move {
            l.flush().await.unwrap();
            *f.borrow_mut() = true;
        });
        for _ in 0..50 {
            yield_to_others().await;
        }
        assert_eq!(
            (*acked.borrow(), *flushed.borrow()),
            (0, false),
            "nothing may be acknowledged, no flush may return, while the only fdatasync is held"
        );
        gated.release();
        flush.await;
        for t in tasks {
            t.await;
        }
        assert_eq!(*acked.borrow(), 20);
        let (after, _) = PartitionLog::open(gated.disk.crash(), Path::new(DIR), 1, config)
            .await
            .unwrap();
        assert_eq!(after.stats().next_offset, 20);
    });
}

/// Regression, the same race under `never`: of two flushes at once, the
/// second found the file marked clean by the first (whose fdatasync was
/// still in flight) and returned before anything was durable.
#[test]
fn regression_concurrent_flushes_each_wait_for_durability() {
    run_sim(async {
        let config = config(FsyncPolicy::Never, 1 << 20);
        let (gated, log) = open_gated(9, &config).await;
        let futs: Vec<_> = (0..30).map(|i| log.append(batch(i, 2, 200))).collect();
        for f in futs {
            f.await.unwrap();
        }
        gated.hold_next_sync_of(&Path::new(DIR).join(log_name(0)));
        let done = Rc::new(RefCell::new(Vec::new()));
        let flushes: Vec<_> = (0..2)
            .map(|i| {
                let (l, d) = (log.clone(), done.clone());
                monoio::spawn(async move {
                    l.flush().await.unwrap();
                    d.borrow_mut().push(i);
                })
            })
            .collect();
        for _ in 0..50 {
            yield_to_others().await;
        }
        assert_eq!(gated.held(), 1);
        assert!(
            done.borrow().is_empty(),
            "flushes {:?} returned while the only fdatasync is held",
            done.borrow()
        );
        gated.release();
        for f in flushes {
            f.await;
        }
        for _ in 0..3 {
            let (after, _) =
                PartitionLog::open(gated.disk.crash(), Path::new(DIR), 1, config.clone())
                    .await
                    .unwrap();
            assert_eq!(after.stats().next_offset, 60);
        }
    });
}

#[test]
fn never_acknowledges_on_write_and_syncs_only_on_flush() {
    run_sim(async {
        let config = config(FsyncPolicy::Never, 1 << 20);
        let disk = sim_for(3, &config);
        let log = open(&disk, &config).await;
        disk.set_faults(SimFaults {
            max_yields: 3,
            ..SimFaults::default()
        });
        let before = disk.counters();
        let sent: Vec<_> = (0..50).map(|i| batch(i, 2, 100)).collect();
        let futs: Vec<_> = sent.iter().map(|b| log.append(b.clone())).collect();
        for (f, b) in futs.into_iter().zip(&sent) {
            let ack = f.await.unwrap();
            // Readers see a batch as soon as it is written.
            let reply = log.poll(PollFrom::Offset(ack.base_offset), 0).unwrap();
            assert_eq!(
                reply.batches().next().unwrap().as_bytes(),
                &stored_form(b, 1, ack.base_offset, ack.base_timestamp)[..]
            );
        }
        assert_eq!(
            disk.counters().syncs,
            before.syncs,
            "never: no fdatasync for appends"
        );
        assert_eq!(log.stats().syncs, 0);
        // Whatever a power cut keeps now is a clean prefix.
        let cut = disk.crash();
        let (after, _) = PartitionLog::open(cut, Path::new(DIR), 1, config.clone())
            .await
            .unwrap();
        let kept = read_all(&after);
        assert!(kept.len() <= 50);
        for (i, (off, _)) in kept.iter().enumerate() {
            assert_eq!(*off, 2 * i as u64);
        }
        // A flush makes everything durable.
        log.flush().await.unwrap();
        assert!(disk.counters().syncs > before.syncs);
        for _ in 0..3 {
            let (after, _) = PartitionLog::open(disk.crash(), Path::new(DIR), 1, config.clone())
                .await
                .unwrap();
            assert_eq!(read_all(&after), read_all(&log));
        }
    });
}

/// Under `never` nothing is synced while appending, not even at a
/// rotation: a sealed segment is confirmed (fdatasync, then the seal record)
/// only after the kernel's write-back delay, or when the log is closed.
#[test]
fn never_syncs_nothing_while_appending_and_confirms_sealed_segments_at_close() {
    run_sim(async {
        let config = config(FsyncPolicy::Never, 4096);
        let disk = sim_for(4, &config);
        let log = open(&disk, &config).await;
        let futs: Vec<_> = (0..40).map(|i| log.append(batch(i, 1, 400))).collect();
        for f in futs {
            f.await.unwrap();
        }
        let segments = log.stats().segments;
        assert!(segments >= 4, "{:?}", log.stats());
        for _ in 0..20 {
            yield_to_others().await;
        }
        assert_eq!(
            disk.counters().syncs,
            0,
            "never: no fdatasync per append or per rotation"
        );
        let paths = log.segment_paths();
        log.close().await.unwrap();
        for p in &paths[..paths.len() - 1] {
            let index = p.with_extension("index");
            let (_, seal) =
                corelog_segment::log::index::decode_file(&disk.file_bytes(&index).unwrap());
            assert!(seal.is_some(), "{} is confirmed after close", p.display());
        }
        assert!(
            disk.counters().syncs >= segments as u64 - 1,
            "each sealed segment was synced"
        );
    });
}

#[test]
fn interval_acknowledges_before_any_fdatasync() {
    run_sim(async {
        let config = config(FsyncPolicy::Interval(Duration::from_secs(3600)), 1 << 20);
        let disk = sim_for(5, &config);
        let log = open(&disk, &config).await;
        let before = disk.counters();
        let futs: Vec<_> = (0..50).map(|i| log.append(batch(i, 1, 100))).collect();
        for f in futs {
            f.await.unwrap();
        }
        assert_eq!(
            disk.counters().syncs,
            before.syncs,
            "interval: acknowledged on write, the sync comes later"
        );
        assert_eq!(log.poll(PollFrom::Last, 0).unwrap().first_offset(), 49);
    });
}

#[test]
fn interval_syncs_unsynced_writes_in_the_background_and_stops_when_closed() {
    run_sim(async {
        let config = config(FsyncPolicy::Interval(Duration::from_millis(20)), 1 << 20);
        let disk = sim_for(6, &config);
        let log = open(&disk, &config).await;
        let futs: Vec<_> = (0..50).map(|i| log.append(batch(i, 1, 100))).collect();
        for f in futs {
            f.await.unwrap();
        }
        // Generous: the background sync is due after 20 ms; allow 20 s on a
        // loaded machine. Assert the state it leaves, not the time it took.
        let mut durable = false;
        for _ in 0..2000 {
            monoio::time::sleep(Duration::from_millis(10)).await;
            if disk.counters().syncs > 0 {
                let (after, _) =
                    PartitionLog::open(disk.crash(), Path::new(DIR), 1, config.clone())
                        .await
                        .unwrap();
                if after.stats().next_offset == 50 {
                    durable = true;
                    break;
                }
            }
        }
        assert!(durable, "the interval sync never made the appends durable");
        for _ in 0..3 {
            let (after, _) = PartitionLog::open(disk.crash(), Path::new(DIR), 1, config.clone())
                .await
                .unwrap();
            assert_eq!(read_all(&after), read_all(&log));
        }
        // Nothing unsynced: no more fdatasyncs.
        let idle = disk.counters().syncs;
        monoio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(disk.counters().syncs, idle, "no unsynced writes, no sync");
        // Closed: the background loop ends.
        log.close().await.unwrap();
        let closed = disk.counters().syncs;
        monoio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(disk.counters().syncs, closed, "no sync after close");
    });
}
