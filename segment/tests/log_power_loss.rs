//! Power loss under `fsync=batch`: whatever a power cut leaves, a reopen
//! finds every acknowledged batch, byte for byte, as a prefix of what was
//! reserved, and appends go on.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use corelog_segment::io::{SimFaults, SimStorage, Storage, StorageFile, WriteBufs};
use std::cell::RefCell;
use std::path::Path;
use std::rc::Rc;

/// The order in which 32 concurrent writes on the simulated disk complete.
fn completion_order(seed: u64, max_yields: u32) -> Vec<u64> {
    run_sim(async move {
        let disk = SimStorage::new(seed, 1 << 16);
        disk.create_dir_all(Path::new("/d")).unwrap();
        let file = disk.open(Path::new("/d/f"), true).unwrap();
        disk.set_faults(SimFaults {
            max_yields,
            ..SimFaults::default()
        });
        let order = Rc::new(RefCell::new(Vec::new()));
        let tasks: Vec<_> = (0..32u64)
            .map(|i| {
                let (file, order) = (file.clone(), order.clone());
                monoio::spawn(async move {
                    let bytes = bytes::Bytes::from(vec![i as u8; 16]);
                    file.write_all_at(i * 16, WriteBufs::one(bytes))
                        .await
                        .unwrap();
                    order.borrow_mut().push(i);
                })
            })
            .collect();
        for t in tasks {
            t.await;
        }
        let order = order.borrow().clone();
        order
    })
}

/// Regression: the simulated disk's yields woke the task from inside its
/// own poll, which monoio answers by running the same task again at once,
/// so no other task ever ran in between: concurrent operations always
/// completed in issue order and the fault tests never saw a reordering.
#[test]
fn sim_yields_let_concurrent_operations_complete_out_of_order() {
    let in_order: Vec<u64> = (0..32).collect();
    assert_eq!(completion_order(1, 0), in_order, "no yields, no reordering");
    for seed in 1..=4 {
        let order = completion_order(seed, 8);
        assert_ne!(order, in_order, "seed {seed}: yields must interleave tasks");
        let mut sorted = order.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, in_order, "seed {seed}: every write completes once");
        assert_eq!(
            completion_order(seed, 8),
            order,
            "seed {seed}: a run is replayable from its seed"
        );
    }
}

/// Prints the seed of a case that panics, whatever panicked.
struct SeedGuard(u64, &'static str);

impl Drop for SeedGuard {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "power-loss case failed: {} seed {} (replay: CORELOG_POWER_SEED={})",
                self.1, self.0, self.0
            );
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Variant {
    name: &'static str,
    /// Tiny segments, so crashes land mid-rotation and mid-seal.
    rotate: bool,
    /// Concurrent `flush` calls, each a durability promise of its own.
    flushes: bool,
    /// First the process dies (its tasks stop, the page cache stays) and
    /// the log is reopened on the same disk, then the power is cut.
    process_crash_first: bool,
    /// First the log is closed cleanly and the power cut right after; the
    /// reopen trusts the clean-close record, then the power is cut while
    /// appends run (the record's removal may or may not have landed).
    clean_close_first: bool,
}

/// What the appends of one phase saw.
#[derive(Default)]
struct Seen {
    /// Index into the reserved batches -> the acknowledgement.
    acks: Vec<(usize, AppendAck)>,
    /// Reserved batch count at each flush call that returned Ok.
    flushed: Vec<usize>,
    errors: Vec<String>,
}

use corelog_segment::log::{
    AppendAck, CleanClose, FsyncPolicy, LogConfig, OpenCheck, PartitionLog, PollFrom,
};
use corelog_segment::{Batch, Limits};

const PARTITION: u64 = 11;
const DIR: &str = "/data/partitions/11";

fn case_config(rng: &mut fastrand::Rng, v: Variant) -> LogConfig {
    LogConfig {
        segment_bytes: if v.rotate {
            rng.u64(512..4096)
        } else {
            1 << 20
        },
        index_interval_bytes: rng.u64(128..2048),
        fsync: FsyncPolicy::Batch,
        preallocate: rng.bool(),
        limits: Limits {
            max_batch_bytes: 64 << 10,
        },
        open_check: if rng.bool() {
            OpenCheck::Tail
        } else {
            OpenCheck::Full
        },
        ..LogConfig::default()
    }
}

/// Reserves waves of appends (and flushes) of random sizes, each awaited by
/// its own task, yielding a random number of times between waves and after
/// the last; returns what was acknowledged by then. `reserved` holds the
/// batches reserved before (their indexes continue).
async fn drive(
    seed: u64,
    log: &PartitionLog<SimStorage>,
    rng: &mut fastrand::Rng,
    v: Variant,
    reserved: &mut Vec<Batch>,
) -> Rc<RefCell<Seen>> {
    let seen = Rc::new(RefCell::new(Seen::default()));
    for _wave in 0..rng.u32(1..=4) {
        for _ in 0..rng.usize(1..=24) {
            let b = batch(
                seed.wrapping_mul(1000) + reserved.len() as u64,
                rng.usize(1..=4),
                rng.usize(0..=300),
            );
            let idx = reserved.len();
            reserved.push(b.clone());
            let fut = log.append(b);
            let seen_by_task = seen.clone();
            monoio::spawn(async move {
                match fut.await {
                    Ok(ack) => seen_by_task.borrow_mut().acks.push((idx, ack)),
                    Err(e) => seen_by_task.borrow_mut().errors.push(e.to_string()),
                }
            });
            if v.flushes && rng.u32(0..8) == 0 {
                let (log, seen, upto) = (log.clone(), seen.clone(), reserved.len());
                monoio::spawn(async move {
                    match log.flush().await {
                        Ok(()) => seen.borrow_mut().flushed.push(upto),
                        Err(e) => seen.borrow_mut().errors.push(e.to_string()),
                    }
                });
            }
        }
        for _ in 0..rng.u32(0..=12) {
            yield_to_others().await;
        }
    }
    for _ in 0..rng.u32(0..=40) {
        yield_to_others().await;
    }
    seen
}

/// One seeded case: concurrent appends (and flushes), a power cut at a
/// random moment, a reopen of what the cut left, then the checks.
fn power_case(seed: u64, v: Variant) {
    let _guard = SeedGuard(seed, v.name);
    let mut rng = fastrand::Rng::with_seed(seed);
    let config = case_config(&mut rng, v);
    let dir = Path::new(DIR);
    let mut disk = sim_for(seed, &config);
    let mut reserved: Vec<Batch> = Vec::new();
    let mut acks: Vec<(usize, AppendAck)> = Vec::new();
    let mut flushed: Vec<usize> = Vec::new();
    let mut expect_trusted = false;
    if v.clean_close_first {
        let seen = run_sim(async {
            let (log, _) = PartitionLog::open(disk.clone(), dir, PARTITION, config.clone())
                .await
                .unwrap();
            disk.set_faults(SimFaults {
                max_yields: rng.u32(1..=6),
                ..SimFaults::default()
            });
            let seen = drive(seed, &log, &mut rng, v, &mut reserved).await;
            log.close()
                .await
                .unwrap_or_else(|e| panic!("seed {seed}: clean close: {e}"));
            seen
        });
        let seen = std::mem::take(&mut *seen.borrow_mut());
        assert!(seen.errors.is_empty(), "seed {seed}: {:?}", seen.errors);
        disk.set_faults(SimFaults::default());
        acks = seen.acks;
        flushed = seen.flushed;
        // A clean close makes everything reserved before it durable.
        flushed.push(reserved.len());
        disk = disk.crash();
        expect_trusted = config.open_check == OpenCheck::Tail;
    }
    if v.process_crash_first {
        // The process dies: leaving the runtime drops every task mid-way;
        // the simulated page cache keeps whatever their writes reached.
        let seen = run_sim(async {
            let (log, _) = PartitionLog::open(disk.clone(), dir, PARTITION, config.clone())
                .await
                .unwrap();
            disk.set_faults(SimFaults {
                max_yields: rng.u32(1..=6),
                ..SimFaults::default()
            });
            drive(seed, &log, &mut rng, v, &mut reserved).await
        });
        let seen = Rc::try_unwrap(seen)
            .map(RefCell::into_inner)
            .unwrap_or_else(|rc| std::mem::take(&mut *rc.borrow_mut()));
        assert!(seen.errors.is_empty(), "seed {seed}: {:?}", seen.errors);
        disk.set_faults(SimFaults::default());
        let kept = run_sim(async {
            let (log, report) = PartitionLog::open(disk.clone(), dir, PARTITION, config.clone())
                .await
                .unwrap_or_else(|e| panic!("seed {seed}: reopening after the process died: {e}"));
            let stored = check_prefix(seed, &log, &config, &reserved, &seen.acks, &seen.flushed);
            assert_eq!(report.next_offset, next_of(&stored, &config), "seed {seed}");
            // What the reopened log serves was recovered from the page cache;
            // recovery must have made it durable, names included, before
            // serving it.
            let cut = disk.crash();
            let (after_cut, report) = PartitionLog::open(cut, dir, PARTITION, config.clone())
                .await
                .unwrap_or_else(|e| {
                    panic!("seed {seed}: power cut right after recovery: reopen failed: {e}")
                });
            assert_eq!(
                read_all(&after_cut),
                stored,
                "seed {seed}: a power cut right after recovery lost what it served: {report}"
            );
            log.close().await.unwrap();
            stored.len()
        });
        reserved.truncate(kept);
        acks = seen.acks;
        flushed = seen.flushed;
    }
    run_sim(async move {
        let (log, report) = PartitionLog::open(disk.clone(), dir, PARTITION, config.clone())
            .await
            .unwrap();
        if expect_trusted {
            assert_eq!(
                report.clean_close,
                CleanClose::Trusted,
                "seed {seed}: a power cut right after a clean close: {report}"
            );
            check_prefix(seed, &log, &config, &reserved, &acks, &flushed);
        }
        disk.set_faults(SimFaults {
            max_yields: rng.u32(1..=6),
            ..SimFaults::default()
        });
        let seen = drive(seed, &log, &mut rng, v, &mut reserved).await;
        let crashed = disk.crash();
        {
            let s = seen.borrow();
            acks.extend(s.acks.iter().copied());
            flushed.extend(s.flushed.iter().copied());
            assert!(
                s.errors.is_empty(),
                "seed {seed}: no fault was injected, yet: {:?}",
                s.errors
            );
        }
        drop(log);
        check_after_cut(seed, &crashed, dir, &config, &reserved, &acks, &flushed).await;
    });
}

/// The offset after the last of `stored`.
fn next_of(stored: &[(u64, Vec<u8>)], config: &LogConfig) -> u64 {
    stored
        .last()
        .map(|(o, b)| {
            o + u64::from(
                corelog_segment::check(b, &config.limits)
                    .unwrap()
                    .message_count(),
            )
        })
        .unwrap_or(0)
}

/// Reads the log back and checks it is a prefix of `reserved`, byte exact,
/// holding every acknowledged and every flushed batch.
fn check_prefix(
    seed: u64,
    log: &PartitionLog<SimStorage>,
    config: &LogConfig,
    reserved: &[Batch],
    acks: &[(usize, AppendAck)],
    flushed: &[usize],
) -> Vec<(u64, Vec<u8>)> {
    let offsets = base_offsets(reserved, 0);
    for (idx, ack) in acks {
        assert_eq!(
            (ack.base_offset, u64::from(ack.message_count)),
            (offsets[*idx], count_of(&reserved[*idx])),
            "seed {seed}: ack of batch {idx}"
        );
    }
    let stored = read_all(log);
    assert!(
        stored.len() <= reserved.len(),
        "seed {seed}: {} batches stored, {} reserved",
        stored.len(),
        reserved.len()
    );
    for (i, (off, bytes)) in stored.iter().enumerate() {
        assert_eq!(*off, offsets[i], "seed {seed}: batch {i} offset");
        let view = corelog_segment::check(bytes, &config.limits).unwrap();
        assert_eq!(
            *bytes,
            stored_form(&reserved[i], PARTITION, offsets[i], view.base_timestamp()),
            "seed {seed}: batch {i} is not the batch reserved at offset {off}"
        );
    }
    for (idx, ack) in acks {
        assert!(
            *idx < stored.len(),
            "seed {seed}: acknowledged batch {idx} (offset {}) lost; {} of {} reserved survived",
            ack.base_offset,
            stored.len(),
            reserved.len()
        );
        assert_eq!(
            stored[*idx].1,
            stored_form(
                &reserved[*idx],
                PARTITION,
                ack.base_offset,
                ack.base_timestamp
            ),
            "seed {seed}: acknowledged batch {idx} differs from its acknowledged stamp"
        );
    }
    for upto in flushed {
        assert!(
            *upto <= stored.len(),
            "seed {seed}: a flush returned after {upto} appends, but only {} survived",
            stored.len()
        );
    }
    stored
}

async fn check_after_cut(
    seed: u64,
    crashed: &SimStorage,
    dir: &Path,
    config: &LogConfig,
    reserved: &[Batch],
    acks: &[(usize, AppendAck)],
    flushed: &[usize],
) {
    let (log, report) =
        match PartitionLog::open(crashed.clone(), dir, PARTITION, config.clone()).await {
            Ok(x) => x,
            Err(e) => panic!(
                "seed {seed}: reopening after the power cut failed: {e}; files {:?}",
                crashed.files()
            ),
        };
    let stored = check_prefix(seed, &log, config, reserved, acks, flushed);
    let next = next_of(&stored, config);
    assert_eq!(report.next_offset, next, "seed {seed}: report {report}");
    // Appends go on from the recovered end, and what they acknowledge
    // survives the next power cut too.
    let extra = batch(seed ^ 0xabc, 2, 50);
    let ack = log.append(extra.clone()).await.unwrap();
    assert_eq!(ack.base_offset, next, "seed {seed}: append after recovery");
    let last = log.poll(PollFrom::Last, 0).unwrap();
    assert_eq!(last.first_offset(), next, "seed {seed}");
    let again = crashed.crash();
    drop(log);
    let (log, report) = PartitionLog::open(again, dir, PARTITION, config.clone())
        .await
        .unwrap();
    let after = read_all(&log);
    assert_eq!(
        after.len(),
        stored.len() + 1,
        "seed {seed}: second cut: {report}"
    );
    assert_eq!(after[..stored.len()], stored[..], "seed {seed}: second cut");
    assert_eq!(
        after[stored.len()].1,
        stored_form(&extra, PARTITION, next, ack.base_timestamp),
        "seed {seed}: the append after recovery"
    );
}

fn cases() -> u64 {
    std::env::var("CORELOG_POWER_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(150)
}

/// Runs the cases (or the one in `CORELOG_POWER_SEED`), all of them even
/// when some fail, and fails naming how many lost data and their seeds.
fn run_cases(v: Variant, salt: u64) {
    if let Some(seed) = std::env::var("CORELOG_POWER_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        power_case(seed, v);
        return;
    }
    let n = cases();
    let mut failed = Vec::new();
    for i in 0..n {
        let seed = salt.wrapping_add(i);
        if std::panic::catch_unwind(|| power_case(seed, v)).is_err() {
            failed.push(seed);
        }
    }
    eprintln!("{}: {n} power-loss cases, {} failed", v.name, failed.len());
    assert!(
        failed.is_empty(),
        "{}: {} of {n} power-loss cases failed; seeds {:?}",
        v.name,
        failed.len(),
        &failed[..failed.len().min(20)]
    );
}

#[test]
fn acknowledged_batches_survive_a_power_cut() {
    run_cases(
        Variant {
            name: "one segment",
            rotate: false,
            flushes: false,
            process_crash_first: false,
            clean_close_first: false,
        },
        1_000_000,
    );
}

#[test]
fn acknowledged_batches_survive_a_power_cut_mid_rotation() {
    run_cases(
        Variant {
            name: "rotation",
            rotate: true,
            flushes: false,
            process_crash_first: false,
            clean_close_first: false,
        },
        2_000_000,
    );
}

#[test]
fn flushed_batches_survive_a_power_cut() {
    run_cases(
        Variant {
            name: "rotation and flushes",
            rotate: true,
            flushes: true,
            process_crash_first: false,
            clean_close_first: false,
        },
        3_000_000,
    );
}

#[test]
fn acknowledged_batches_survive_a_process_crash_then_a_power_cut() {
    run_cases(
        Variant {
            name: "process crash, then power cut",
            rotate: true,
            flushes: true,
            process_crash_first: true,
            clean_close_first: false,
        },
        4_000_000,
    );
}

#[test]
fn acknowledged_batches_survive_a_clean_close_then_a_power_cut() {
    run_cases(
        Variant {
            name: "clean close, then power cut",
            rotate: true,
            flushes: true,
            process_crash_first: false,
            clean_close_first: true,
        },
        5_000_000,
    );
}
