//! Stored consumer offsets: round trip, durability across a reopen and a
//! power cut (`fsync=batch`), what a power cut leaves under `fsync=never`
//! (an offset or none, never an error), a torn offset file read as none and
//! a damaged one refused, `poll_next` continuing after the stored offset,
//! and the bound on the consumers with an offset (`max_consumer_offsets`).
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use corelog_segment::io::{SimFaults, SimStorage, Storage, UringStorage};
use corelog_segment::log::{
    Damage, FsyncPolicy, LogConfig, LogError, PartitionLog, PollFrom, FIRST_RESERVED_CONSUMER,
};
use corelog_segment::Limits;
use std::cell::RefCell;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::rc::Rc;

const P: u64 = 9;

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

/// Stores that are durable when they return (`fsync=batch`).
fn durable_config() -> LogConfig {
    LogConfig {
        fsync: FsyncPolicy::Batch,
        ..config()
    }
}

async fn open_durable<S: Storage>(storage: S, dir: &Path) -> PartitionLog<S> {
    PartitionLog::open(storage, dir, P, durable_config())
        .await
        .unwrap()
        .0
}

/// The seed of this file's simulated disk (see `on_both!`).
const SIM_SEED: u64 = 4;

fn offset_file(dir: &Path, consumer: u64) -> PathBuf {
    dir.join("consumers").join(format!("{consumer:020}.offset"))
}

async fn open<S: Storage>(storage: S, dir: &Path) -> PartitionLog<S> {
    PartitionLog::open(storage, dir, P, config())
        .await
        .unwrap()
        .0
}

async fn offsets_round_trip_and_survive_a_reopen<S: Storage, D: Disk>(
    storage: impl Fn() -> S,
    disk: &D,
    dir: &Path,
) {
    let log = open(storage(), dir).await;
    assert_eq!(
        log.load_offset(1).await.unwrap(),
        None,
        "nothing stored yet"
    );
    log.store_offset(1, 41).await.unwrap();
    log.store_offset(2, 7).await.unwrap();
    log.store_offset(1, 42).await.unwrap();
    assert_eq!(log.load_offset(1).await.unwrap(), Some(42));
    assert_eq!(log.load_offset(2).await.unwrap(), Some(7));
    assert_eq!(log.load_offset(3).await.unwrap(), None);
    log.store_offset(3, u64::MAX).await.unwrap();
    log.close().await.unwrap();
    assert_eq!(
        disk.read(&offset_file(dir, 1)).unwrap().len(),
        32,
        "one 32-byte file per consumer"
    );
    assert!(disk
        .names(&dir.join("consumers"))
        .iter()
        .all(|n| n.ends_with(".offset")));
    let log = open(storage(), dir).await;
    assert_eq!(log.load_offset(1).await.unwrap(), Some(42));
    assert_eq!(log.load_offset(2).await.unwrap(), Some(7));
    assert_eq!(log.load_offset(3).await.unwrap(), Some(u64::MAX));
    assert_eq!(log.load_offset(4).await.unwrap(), None);
}
on_both!(offsets_round_trip_and_survive_a_reopen);

fn expect_corrupt(result: Result<Option<u64>, LogError>, path: &Path) {
    match result {
        Err(LogError::Corrupt {
            path: p,
            position: 0,
            damage: Damage::OffsetFile,
        }) => assert_eq!(p, path),
        other => panic!("expected a corrupt offset file error: {other:?}"),
    }
}

async fn a_torn_offset_file_reads_as_none_and_a_damaged_one_is_refused<S: Storage, D: Disk>(
    storage: impl Fn() -> S,
    disk: &D,
    dir: &Path,
) {
    let log = open(storage(), dir).await;
    log.append(batch(0, 3, 10)).await.unwrap();
    for c in 1..=7 {
        log.store_offset(c, 1000 + c).await.unwrap();
    }
    log.close().await.unwrap();
    // What a power cut under fsync=never leaves when the rename reached the
    // disk before the data: no bytes, some of them, or zeros.
    let empty = offset_file(dir, 1);
    disk.set_len(&empty, 0);
    let short = offset_file(dir, 5);
    disk.set_len(&short, 20);
    let zeros = offset_file(dir, 6);
    disk.put(&zeros, &[0u8; 32]);
    // Damage a power cut does not leave: a flipped bit, and consumer 4's
    // file copied over consumer 3's (a valid file, but not its).
    let flipped = offset_file(dir, 2);
    let byte = disk.read(&flipped).unwrap()[17];
    disk.overwrite(&flipped, 17, &[byte ^ 0x04]);
    let other = disk.read(&offset_file(dir, 4)).unwrap();
    disk.put(&offset_file(dir, 3), &other);
    // A whole, valid record with a byte after it.
    let longer = offset_file(dir, 7);
    let mut bytes = disk.read(&longer).unwrap();
    bytes.push(0);
    disk.put(&longer, &bytes);
    let log = open(storage(), dir).await;
    for (c, torn) in [(1, &empty), (5, &short), (6, &zeros)] {
        let before = disk.read(torn);
        assert_eq!(log.load_offset(c).await.unwrap(), None, "consumer {c}");
        assert_eq!(
            disk.read(torn),
            before,
            "consumer {c}'s torn file left as it was (a read changes nothing)"
        );
        assert_eq!(
            log.load_offset(c).await.unwrap(),
            None,
            "consumer {c}, again"
        );
    }
    expect_corrupt(log.load_offset(2).await, &flipped);
    expect_corrupt(log.load_offset(3).await, &offset_file(dir, 3));
    expect_corrupt(log.load_offset(7).await, &longer);
    let err = log.load_offset(2).await.unwrap_err();
    assert!(
        err.to_string().contains(&format!("{:020}.offset", 2)),
        "{err}"
    );
    assert_eq!(log.load_offset(4).await.unwrap(), Some(1004));
    // poll_next starts a consumer whose file was torn from the first
    // message, and refuses to guess where one with a damaged file is.
    assert_eq!(log.poll_next(5, 0).await.unwrap().first_offset(), 0);
    assert!(log.poll_next(2, 0).await.is_err());
    // Storing again repairs both.
    log.store_offset(1, 5).await.unwrap();
    log.store_offset(2, 6).await.unwrap();
    assert_eq!(log.load_offset(1).await.unwrap(), Some(5));
    let log = open(storage(), dir).await;
    assert_eq!(log.load_offset(1).await.unwrap(), Some(5));
    assert_eq!(log.load_offset(2).await.unwrap(), Some(6));
}
on_both!(a_torn_offset_file_reads_as_none_and_a_damaged_one_is_refused);

/// A consumer polls, processes, stores the last offset it processed, and
/// goes on: it reads every batch exactly once, also across a reopen.
async fn poll_next_continues_after_the_stored_offset<S: Storage, D: Disk>(
    storage: impl Fn() -> S,
    _disk: &D,
    dir: &Path,
) {
    let log = open(storage(), dir).await;
    let sent: Vec<_> = (0..20u64).map(|i| batch(i, 3, 200)).collect();
    let mut stored = Vec::new();
    for b in &sent {
        let ack = log.append(b.clone()).await.unwrap();
        stored.push((
            ack.base_offset,
            stored_form(b, P, ack.base_offset, ack.base_timestamp),
        ));
    }
    assert!(log.stats().segments > 2);
    // Nothing stored: from the first batch.
    let first = log.poll_next(7, 0).await.unwrap();
    assert_eq!(first.first_offset(), 0);
    // Offset 4 processed (the middle of batch 3..6): the batch holding 5.
    log.store_offset(7, 4).await.unwrap();
    let reply = log.poll_next(7, 0).await.unwrap();
    assert_eq!((reply.first_offset(), reply.batch_count()), (3, 1));
    // Offset 5 processed (the end of that batch): the next batch.
    log.store_offset(7, 5).await.unwrap();
    assert_eq!(log.poll_next(7, 0).await.unwrap().first_offset(), 6);
    // A consumer loop, reopening half way.
    let mut seen = Vec::new();
    log.store_offset(8, 2).await.unwrap();
    let mut log = log;
    for round in 0.. {
        if round == 3 {
            log.close().await.unwrap();
            log = open(storage(), dir).await;
        }
        let reply = log.poll_next(8, 2000).await.unwrap();
        if reply.is_empty() {
            assert_eq!(reply.next_offset(), 60);
            break;
        }
        for b in reply.batches() {
            seen.push((b.base_offset(), b.as_bytes().to_vec()));
        }
        log.store_offset(8, reply.next_offset() - 1).await.unwrap();
    }
    assert_eq!(seen, stored[1..], "every batch after offset 2, once");
    assert_eq!(log.load_offset(8).await.unwrap(), Some(59));
    // Past the end: empty, at the end.
    log.store_offset(9, 500).await.unwrap();
    let reply = log.poll_next(9, 0).await.unwrap();
    assert!(reply.is_empty());
    assert_eq!(
        log.poll(PollFrom::Offset(501), 0).unwrap().next_offset(),
        60
    );
}
on_both!(poll_next_continues_after_the_stored_offset);

/// Under `fsync=batch` a stored offset survives a power cut; a power cut
/// during a store leaves the old or the new offset, never a damaged file.
#[test]
fn a_power_cut_keeps_the_old_or_the_new_offset() {
    run_sim(async {
        let config = durable_config();
        let disk = sim_for(5, &config);
        let dir = Path::new("/p");
        let log = open_durable(disk.clone(), dir).await;
        log.store_offset(1, 100).await.unwrap();
        let after = open_durable(disk.crash(), dir).await;
        assert_eq!(
            after.load_offset(1).await.unwrap(),
            Some(100),
            "durable once stored"
        );
        disk.set_faults(SimFaults {
            max_yields: 3,
            ..SimFaults::default()
        });
        let mut seen = [0usize; 2];
        let mut cuts_with_tmp = 0;
        for step in 0..40 {
            let (l, new) = (log.clone(), 200 + step);
            let done = Rc::new(RefCell::new(false));
            let d = done.clone();
            monoio::spawn(async move {
                l.store_offset(1, new).await.unwrap();
                *d.borrow_mut() = true;
            });
            let old = if step == 0 { 100 } else { 200 + step - 1 };
            for cut_at in 0..12 {
                let cut = disk.crash();
                let tmp = |d: &SimStorage| {
                    d.list_dir(&dir.join("consumers"))
                        .map(|n| n.iter().any(|n| n.ends_with(".tmp")))
                        .unwrap_or(false)
                };
                cuts_with_tmp += usize::from(tmp(&cut));
                let after = open_durable(cut.clone(), dir).await;
                if let Ok(names) = cut.list_dir(&dir.join("consumers")) {
                    assert!(
                        names.iter().all(|n| !n.ends_with(".tmp")),
                        "reopening removes temporary files a cut left: {names:?}"
                    );
                }
                match after.load_offset(1).await {
                    Ok(Some(o)) if o == old => seen[0] += 1,
                    Ok(Some(o)) if o == new => seen[1] += 1,
                    other => panic!("step {step}, cut {cut_at}: {other:?} (old {old}, new {new})"),
                }
                if *done.borrow() {
                    break;
                }
                yield_to_others().await;
            }
            while !*done.borrow() {
                yield_to_others().await;
            }
            let after = open_durable(disk.crash(), dir).await;
            assert_eq!(
                after.load_offset(1).await.unwrap(),
                Some(new),
                "step {step}: stored"
            );
        }
        assert!(
            seen[0] > 0 && seen[1] > 0,
            "cuts landed both before and after: {seen:?}"
        );
        assert!(
            cuts_with_tmp > 0,
            "some cuts left a temporary file to remove"
        );
    });
}

/// Two stores for one consumer at once: the later call wins, whichever
/// finishes first (and, under `fsync=batch`, across a power cut).
#[test]
fn the_later_of_two_concurrent_stores_wins() {
    for seed in 0..10 {
        run_sim(async move {
            let config = durable_config();
            let disk = sim_for(seed, &config);
            let dir = Path::new("/p");
            let log = open_durable(disk.clone(), dir).await;
            disk.set_faults(SimFaults {
                max_yields: 4,
                ..SimFaults::default()
            });
            let (a, b) = (log.clone(), log.clone());
            let first = monoio::spawn(async move { a.store_offset(1, 10).await });
            let second = monoio::spawn(async move { b.store_offset(1, 20).await });
            first.await.unwrap();
            second.await.unwrap();
            assert_eq!(log.load_offset(1).await.unwrap(), Some(20), "seed {seed}");
            for _ in 0..5 {
                let after = open_durable(disk.crash(), dir).await;
                assert_eq!(after.load_offset(1).await.unwrap(), Some(20), "seed {seed}");
            }
        });
    }
}

/// A deleted offset is gone, and stays gone across a reopen and a power
/// cut; other consumers' offsets stay; deleting what is not there says so.
async fn a_deleted_offset_is_gone<S: Storage, D: Disk>(
    storage: impl Fn() -> S,
    disk: &D,
    dir: &Path,
) {
    let log = open(storage(), dir).await;
    log.store_offset(1, 10).await.unwrap();
    log.store_offset(2, 20).await.unwrap();
    assert!(log.delete_offset(1).await.unwrap(), "there was one");
    assert_eq!(log.load_offset(1).await.unwrap(), None);
    assert!(
        !log.delete_offset(1).await.unwrap(),
        "nothing left to delete"
    );
    assert!(!log.delete_offset(3).await.unwrap(), "never stored");
    assert_eq!(log.load_offset(2).await.unwrap(), Some(20));
    assert!(
        disk.read(&offset_file(dir, 1)).is_none(),
        "its file is gone"
    );
    // poll_next starts over for it.
    log.append(batch(0, 2, 10)).await.unwrap();
    assert_eq!(log.poll_next(1, 0).await.unwrap().first_offset(), 0);
    log.close().await.unwrap();
    let log = open(storage(), dir).await;
    assert_eq!(log.load_offset(1).await.unwrap(), None);
    assert_eq!(log.load_offset(2).await.unwrap(), Some(20));
    // Stored again after the delete: back.
    log.store_offset(1, 11).await.unwrap();
    assert_eq!(log.load_offset(1).await.unwrap(), Some(11));
}
on_both!(a_deleted_offset_is_gone);

/// At most `max_consumer_offsets` consumers have an offset file: a store
/// for one more is refused, naming the partition, the consumer and the
/// limit, and stores nothing; those with one still store; a delete makes
/// room; the files of an earlier run count; an owner's reserved keys are
/// not counted.
async fn the_consumers_with_an_offset_are_bounded<S: Storage, D: Disk>(
    storage: impl Fn() -> S,
    disk: &D,
    dir: &Path,
) {
    let capped = || LogConfig {
        max_consumer_offsets: 3,
        ..config()
    };
    let open_capped = |s: S| async { PartitionLog::open(s, dir, P, capped()).await.unwrap().0 };
    let log = open_capped(storage()).await;
    for c in 1..=3 {
        log.store_offset(c, c * 10).await.unwrap();
    }
    let refused = log.store_offset(4, 40).await.unwrap_err();
    assert!(
        matches!(
            refused,
            LogError::TooManyConsumers {
                partition: P,
                consumer: 4,
                max: 3
            }
        ),
        "{refused:?}"
    );
    let said = refused.to_string();
    assert!(
        said.contains("partition 9") && said.contains("consumer 4") && said.contains("3 consumers"),
        "{said}"
    );
    assert_eq!(log.load_offset(4).await.unwrap(), None, "nothing stored");
    assert!(disk.read(&offset_file(dir, 4)).is_none(), "no file");
    // Consumers with an offset store on; the owner's keys are not counted.
    log.store_offset(2, 21).await.unwrap();
    log.store_offset(u64::MAX, 7).await.unwrap();
    log.store_offset(FIRST_RESERVED_CONSUMER, 8).await.unwrap();
    assert_eq!(log.load_offset(2).await.unwrap(), Some(21));
    // A delete makes room for one.
    assert!(log.delete_offset(1).await.unwrap());
    log.store_offset(4, 40).await.unwrap();
    assert!(log.store_offset(5, 50).await.is_err(), "full again");
    log.close().await.unwrap();
    // The next run counts the files it finds.
    let log = open_capped(storage()).await;
    for c in [1, 5] {
        let refused = log.store_offset(c, 1).await.unwrap_err();
        assert!(
            matches!(refused, LogError::TooManyConsumers { .. }),
            "consumer {c} after a reopen: {refused:?}"
        );
    }
    log.store_offset(3, 31).await.unwrap();
    assert_eq!(log.load_offset(3).await.unwrap(), Some(31));
    assert_eq!(log.load_offset(4).await.unwrap(), Some(40));
    assert_eq!(log.load_offset(u64::MAX).await.unwrap(), Some(7));
    // Stores of new consumers side by side (as a replica applies entries)
    // cannot pass the limit together: the first to start are admitted.
    assert!(log.delete_offset(2).await.unwrap());
    assert!(log.delete_offset(3).await.unwrap());
    let tasks: Vec<_> = (10..14)
        .map(|c| {
            let log = log.clone();
            monoio::spawn(async move { log.store_offset(c, c).await })
        })
        .collect();
    let mut admitted = Vec::new();
    for (c, task) in (10..14).zip(tasks) {
        match task.await {
            Ok(()) => admitted.push(c),
            Err(LogError::TooManyConsumers { .. }) => {}
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(
        admitted,
        [10, 11],
        "in the order they started, up to 3 with 4"
    );
    for c in [12, 13] {
        assert_eq!(log.load_offset(c).await.unwrap(), None);
    }
}
on_both!(the_consumers_with_an_offset_are_bounded);

/// The delete is durable when it returns: a power cut right after it
/// cannot bring the offset back.
#[test]
fn a_power_cut_after_a_delete_keeps_it_deleted() {
    run_sim(async {
        let config = durable_config();
        let disk = sim_for(6, &config);
        let dir = Path::new("/p");
        let log = open_durable(disk.clone(), dir).await;
        log.store_offset(1, 100).await.unwrap();
        log.store_offset(2, 200).await.unwrap();
        assert!(log.delete_offset(1).await.unwrap());
        for copy in 0..20 {
            let after = open_durable(disk.crash(), dir).await;
            assert_eq!(
                after.load_offset(1).await.unwrap(),
                None,
                "power cut {copy}"
            );
            assert_eq!(
                after.load_offset(2).await.unwrap(),
                Some(200),
                "power cut {copy}"
            );
        }
    });
}

/// Under `fsync=never` a store syncs nothing (past the partition
/// directory's name, once per run); under `fsync=batch` each store syncs its
/// file and the directory.
#[test]
fn only_durable_policies_sync_a_stored_offset() {
    run_sim(async {
        for (policy, file_syncs, dir_syncs) in
            [(FsyncPolicy::Never, 0, 1), (FsyncPolicy::Batch, 10, 11)]
        {
            let config = LogConfig {
                fsync: policy,
                ..config()
            };
            let disk = sim_for(8, &config);
            let dir = Path::new("/p");
            let log = PartitionLog::open(disk.clone(), dir, P, config)
                .await
                .unwrap()
                .0;
            let before = disk.counters();
            for o in 0..10 {
                log.store_offset(1, o).await.unwrap();
            }
            let after = disk.counters();
            assert_eq!(after.syncs - before.syncs, file_syncs, "{policy:?}");
            assert_eq!(after.dir_syncs - before.dir_syncs, dir_syncs, "{policy:?}");
            assert_eq!(log.load_offset(1).await.unwrap(), Some(9), "{policy:?}");
        }
    });
}

/// Under `fsync=never` a power cut during or after stores leaves, for the
/// consumer, one of the offsets it stored or none (a torn file among them:
/// the rename reached the disk, the data did not), never an error.
#[test]
fn under_fsync_never_a_power_cut_leaves_an_offset_or_none() {
    run_sim(async {
        let config = config();
        assert_eq!(config.fsync, FsyncPolicy::Never);
        let disk = sim_for(7, &config);
        let dir = Path::new("/p");
        let log = open(disk.clone(), dir).await;
        disk.set_faults(SimFaults {
            max_yields: 3,
            ..SimFaults::default()
        });
        let (mut stored, mut none, mut torn) = (0usize, 0usize, 0usize);
        for step in 0..40u64 {
            let new = 100 + step;
            let l = log.clone();
            let store = monoio::spawn(async move { l.store_offset(1, new).await });
            for cut_at in 0..4 {
                let cut = disk.crash();
                let bytes = cut.file_bytes(&offset_file(dir, 1));
                torn += usize::from(
                    bytes
                        .as_ref()
                        .is_some_and(|b| b.len() < 32 || b.iter().all(|&x| x == 0)),
                );
                let after = open(cut.clone(), dir).await;
                match after.load_offset(1).await {
                    Ok(Some(o)) if (100..=new).contains(&o) => stored += 1,
                    Ok(None) => none += 1,
                    other => panic!("step {step}, cut {cut_at}: {other:?} (stored up to {new})"),
                }
                yield_to_others().await;
            }
            store.await.unwrap();
        }
        assert!(torn > 0, "some cuts left a torn offset file");
        assert!(stored > 0 && none > 0, "stored {stored}, none {none}");
    });
}

/// A simulated disk (of `seed`) holding a log at `/p` where consumer 1
/// stored offset 5.
async fn offset_5_on_sim(seed: u64) -> (SimStorage, PartitionLog<SimStorage>) {
    let disk = sim_for(seed, &config());
    let log = open(disk.clone(), Path::new("/p")).await;
    log.store_offset(1, 5).await.unwrap();
    (disk, log)
}

/// Spawns `first`, lets it begin (1 to 8 turns of the simulated disk's
/// interleavings, by `seed`), deletes consumer 1's offset, and returns
/// what `first` returned.
async fn delete_during<T: 'static>(
    seed: u64,
    disk: &SimStorage,
    log: &PartitionLog<SimStorage>,
    first: impl Future<Output = T> + 'static,
) -> T {
    disk.set_faults(SimFaults {
        max_yields: 4,
        ..SimFaults::default()
    });
    let task = monoio::spawn(first);
    for _ in 0..=seed % 8 {
        yield_to_others().await;
    }
    assert!(log.delete_offset(1).await.unwrap(), "seed {seed}");
    task.await
}

/// A delete called while a store of the same consumer is still running
/// (its rename on the ring, under the simulated disk's interleavings) wins:
/// the offset is gone and its file with it, whenever the store lands; a
/// store called after the delete lands.
#[test]
fn a_delete_supersedes_a_store_still_in_flight() {
    for seed in 0..24u64 {
        run_sim(async move {
            let dir = Path::new("/p");
            let (disk, log) = offset_5_on_sim(seed).await;
            let l = log.clone();
            let stored = delete_during(
                seed,
                &disk,
                &log,
                async move { l.store_offset(1, 10).await },
            );
            stored.await.unwrap();
            assert_eq!(log.load_offset(1).await.unwrap(), None, "seed {seed}");
            assert!(
                disk.file_bytes(&offset_file(dir, 1)).is_none(),
                "seed {seed}: the store in flight did not bring the file back"
            );
            let reopened = open(disk.clone(), dir).await;
            assert_eq!(reopened.load_offset(1).await.unwrap(), None, "seed {seed}");
            log.store_offset(1, 11).await.unwrap();
            assert_eq!(log.load_offset(1).await.unwrap(), Some(11), "seed {seed}");
        });
    }
}

/// A delete that begins while a read of the same consumer's file is in
/// flight (its read on the ring, under the simulated disk's interleavings)
/// is not undone by that read: the read may return the offset it found,
/// but nothing read before the delete is remembered after it.
#[test]
fn a_read_in_flight_when_a_delete_begins_does_not_bring_the_offset_back() {
    for seed in 0..24u64 {
        run_sim(async move {
            let dir = Path::new("/p");
            let (disk, log) = offset_5_on_sim(seed).await;
            log.close().await.unwrap();
            // Reopened: nothing remembered, so the read goes to the file.
            let log = open(disk.clone(), dir).await;
            let l = log.clone();
            let read = delete_during(seed, &disk, &log, async move { l.load_offset(1).await });
            assert!(
                matches!(read.await, Ok(None | Some(5))),
                "seed {seed}: the read returns what was there when it began, or nothing"
            );
            assert_eq!(log.load_offset(1).await.unwrap(), None, "seed {seed}");
            let reopened = open(disk.clone(), dir).await;
            assert_eq!(reopened.load_offset(1).await.unwrap(), None, "seed {seed}");
        });
    }
}

/// An offset file that cannot be opened or removed (here a directory
/// where the file should be) is an error naming the operation and the
/// file, never taken as no offset; the other consumers' offsets stay.
#[test]
fn an_offset_file_that_cannot_be_opened_or_removed_is_an_error_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    run(async {
        let storage = || UringStorage::new(64).unwrap();
        let log = open_durable(storage(), &dir).await;
        log.store_offset(1, 10).await.unwrap();
        log.store_offset(2, 20).await.unwrap();
        log.close().await.unwrap();
        let path = offset_file(&dir, 1);
        std::fs::remove_file(&path).unwrap();
        std::fs::create_dir(&path).unwrap();
        let log = open_durable(storage(), &dir).await;
        let expect_io = |result: Result<_, LogError>, what: &str| match result {
            Err(LogError::Io { op, path: p, .. }) => assert_eq!((op, p), (what, path.clone())),
            other => panic!("expected {what} of {} to fail: {other:?}", path.display()),
        };
        expect_io(log.load_offset(1).await.map(|_| ()), "open");
        expect_io(log.poll_next(1, 0).await.map(|_| ()), "open");
        expect_io(log.delete_offset(1).await.map(|_| ()), "remove");
        assert!(std::fs::metadata(&path).unwrap().is_dir(), "left as it was");
        assert_eq!(log.load_offset(2).await.unwrap(), Some(20));
    });
}

/// A store of one consumer more than `max_consumer_offsets`, run side by
/// side with others under the simulated disk's interleavings (as a
/// replica applies a batch of entries): the consumers admitted are the
/// first to start, every time, so nodes applying the same entries refuse
/// the same ones; and a store that fails gives its slot back.
#[test]
fn stores_side_by_side_are_admitted_in_order_and_a_failed_one_gives_its_slot_back() {
    let capped = LogConfig {
        max_consumer_offsets: 2,
        ..config()
    };
    for seed in 0..16u64 {
        let capped = capped.clone();
        run_sim(async move {
            let dir = Path::new("/p");
            let disk = sim_for(seed, &capped);
            let log = PartitionLog::open(disk.clone(), dir, P, capped.clone())
                .await
                .unwrap()
                .0;
            disk.set_faults(SimFaults {
                max_yields: 4,
                ..SimFaults::default()
            });
            let tasks: Vec<_> = (1..=5u64)
                .map(|c| {
                    let log = log.clone();
                    monoio::spawn(async move { (c, log.store_offset(c, c).await) })
                })
                .collect();
            let mut admitted = Vec::new();
            for task in tasks {
                match task.await {
                    (c, Ok(())) => admitted.push(c),
                    (_, Err(LogError::TooManyConsumers { .. })) => {}
                    (c, Err(e)) => panic!("seed {seed}: consumer {c}: {e}"),
                }
            }
            assert_eq!(admitted, [1, 2], "seed {seed}");
            for c in 1..=5 {
                assert_eq!(
                    disk.file_bytes(&offset_file(dir, c)).is_some(),
                    c <= 2,
                    "seed {seed}: consumer {c}'s file"
                );
            }
            // A store whose write fails frees the slot it was counted in.
            assert!(log.delete_offset(2).await.unwrap());
            let writes = disk.counters().writes;
            disk.set_faults(SimFaults {
                fail_write_at: Some(writes),
                ..SimFaults::default()
            });
            let failed = log.store_offset(6, 6).await.unwrap_err();
            assert!(
                matches!(failed, LogError::Io { .. }),
                "seed {seed}: {failed:?}"
            );
            disk.set_faults(SimFaults::default());
            log.store_offset(7, 7)
                .await
                .unwrap_or_else(|e| panic!("seed {seed}: the failed store's slot: {e}"));
        });
    }
}
