//! Shutdown under load: every request resolves (stored, or refused with
//! `ShuttingDown` / `QueueClosed`), none hangs; what was acknowledged is
//! there after reopen, and nothing whose append failed is; dropping the
//! engine is a shutdown; a handle outliving its engine refuses everything.
#![allow(clippy::unwrap_used)]

mod common;

use common::{batch, decode_id, open, small_segments, Watchdog};
use corelog::replication::ReplicaLog;
use corelog::{
    AppendAck, Batch, Config, Engine, FsyncPolicy, Handle, LogConfig, PollFrom, Reply, RequestError,
};
use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

const PARTITIONS: u64 = 6;
const WRITERS: u64 = 4;
const WINDOW: usize = 16;

/// Where each acknowledged batch went: (partition, base_offset) → (writer, seq).
type Acked = BTreeMap<(u64, u64), (u64, u64)>;

fn refused_by_shutdown(e: &RequestError) -> bool {
    matches!(
        e,
        RequestError::ShuttingDown | RequestError::QueueClosed { .. }
    )
}

/// Appends until the engine refuses; records what was acknowledged.
fn write_until_refused(h: &Handle, w: u64, acked: &Mutex<Acked>, count: &AtomicU64) -> u64 {
    let mut pending: VecDeque<(u64, u64, Reply<AppendAck>)> = VecDeque::new();
    // Whether the append was refused by the shutdown.
    let settle = |(p, seq, reply): (u64, u64, Reply<AppendAck>)| match reply.wait() {
        Ok(ack) => {
            acked.lock().unwrap().insert((p, ack.base_offset), (w, seq));
            count.fetch_add(1, Ordering::SeqCst);
            false
        }
        Err(e) if refused_by_shutdown(&e) => true,
        Err(e) => panic!("writer {w}: append of batch {seq} to partition {p} failed: {e}"),
    };
    let (mut seq, mut refused) = (0u64, 0u64);
    while refused == 0 {
        let p = (w + seq) % PARTITIONS;
        let reply = if seq.is_multiple_of(5) {
            let admitted = Batch::admit(batch(w, seq), &h.limits()).unwrap();
            h.append_admitted(p, admitted)
        } else {
            h.append(p, batch(w, seq))
        };
        pending.push_back((p, seq, reply));
        seq += 1;
        if pending.len() >= WINDOW {
            refused += u64::from(settle(pending.pop_front().unwrap()));
        }
    }
    refused + pending.into_iter().map(settle).map(u64::from).sum::<u64>()
}

/// Polls until the engine refuses.
fn poll_until_refused(h: &Handle, stop: &AtomicBool) {
    let mut round = 0u64;
    while !stop.load(Ordering::SeqCst) {
        round += 1;
        let p = round % PARTITIONS;
        let result = if round.is_multiple_of(2) {
            h.poll(p, PollFrom::First, 64 << 10).wait()
        } else {
            futures::executor::block_on(h.poll_verified(p, PollFrom::Last, 1 << 20))
        };
        match result {
            Ok(_) | Err(RequestError::UnknownPartition { .. }) => {}
            Err(e) if refused_by_shutdown(&e) => return,
            Err(e) => panic!("poll of partition {p} failed: {e}"),
        }
    }
}

/// Everything stored in `dir`, as (partition, base_offset) → (writer, seq).
fn stored(engine: &Engine) -> Acked {
    let mut out = Acked::new();
    for p in futures::executor::block_on(engine.handle().partitions()).unwrap() {
        let mut next = 0;
        loop {
            let reply = futures::executor::block_on(engine.handle().poll_verified(
                p,
                PollFrom::Offset(next),
                1 << 20,
            ))
            .unwrap();
            if reply.is_empty() {
                break;
            }
            for b in reply.batches() {
                assert_eq!(b.base_offset(), next, "partition {p}: no gap after reopen");
                let (w, seq, _) = decode_id(b.messages().next().unwrap().id());
                assert_eq!(b.blob(), &batch(w, seq)[256..]);
                out.insert((p, b.base_offset()), (w, seq));
                next = b.next_offset();
            }
        }
    }
    out
}

enum Stop {
    Shutdown,
    Drop,
}

/// Writers and pollers hammer the engine (through queues small enough that
/// callers wait for room) while it is stopped.
fn stop_under_load(stop: Stop, fsync: FsyncPolicy) {
    let _watchdog = Watchdog::arm("shutdown under load", Duration::from_secs(300));
    let dir = tempfile::tempdir().unwrap();
    let log = LogConfig {
        fsync,
        ..small_segments()
    };
    let engine = Engine::open(Config {
        open_partitions: corelog::OpenPartitions::AtOpen,
        shards: Some(2),
        pin_threads: false,
        queue_depth: 4,
        log: log.clone(),
        ..Config::new(dir.path())
    })
    .unwrap();
    let acked = Mutex::new(Acked::new());
    let count = AtomicU64::new(0);
    let pollers_stop = AtomicBool::new(false);
    let refused = std::thread::scope(|s| {
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                let (h, acked, count) = (engine.handle(), &acked, &count);
                s.spawn(move || write_until_refused(&h, w, acked, count))
            })
            .collect();
        for _ in 0..2 {
            let (h, stop) = (engine.handle(), &pollers_stop);
            s.spawn(move || poll_until_refused(&h, stop));
        }
        // Under load: some appends acknowledged, many in flight or queued.
        while count.load(Ordering::SeqCst) < 200 {
            std::thread::sleep(Duration::from_millis(1));
        }
        match stop {
            Stop::Shutdown => engine.shutdown().unwrap(),
            Stop::Drop => drop(engine),
        }
        let refused: u64 = writers.into_iter().map(|w| w.join().unwrap()).sum();
        pollers_stop.store(true, Ordering::SeqCst);
        refused
    });
    assert!(refused >= WRITERS, "every writer ran into the shutdown");
    let acked = acked.into_inner().unwrap();
    assert!(acked.len() >= 200);

    let reopened = open(dir.path(), 2, log);
    assert!(reopened.recovery().iter().all(|r| r.result.is_ok()));
    let stored = stored(&reopened);
    for (at, what) in &acked {
        assert_eq!(
            stored.get(at),
            Some(what),
            "acknowledged batch {what:?} at (partition, offset) {at:?} is there after reopen"
        );
    }
    assert_eq!(
        stored.len(),
        acked.len(),
        "nothing is stored whose append reported ShuttingDown/QueueClosed"
    );
    reopened.shutdown().unwrap();
}

#[test]
fn shutdown_under_load_resolves_every_request_and_keeps_every_ack() {
    stop_under_load(Stop::Shutdown, FsyncPolicy::Never);
}

#[test]
fn shutdown_under_load_with_fsync_batch() {
    stop_under_load(Stop::Shutdown, FsyncPolicy::Batch);
}

#[test]
fn dropping_the_engine_under_load_is_a_shutdown() {
    stop_under_load(Stop::Drop, FsyncPolicy::Never);
}

#[test]
fn a_handle_outliving_its_engine_refuses_every_request() {
    let _watchdog = Watchdog::arm("handle after shutdown", Duration::from_secs(120));
    let dir = tempfile::tempdir().unwrap();
    let engine = open(dir.path(), 2, LogConfig::default());
    let h = engine.handle();
    h.append(1, batch(0, 0)).wait().unwrap();
    engine.shutdown().unwrap();

    let shutting = |r: Result<(), RequestError>, what: &str| {
        assert!(
            matches!(r, Err(RequestError::ShuttingDown)),
            "{what} after shutdown: {r:?}"
        )
    };
    let admitted = Batch::admit(batch(0, 1), &h.limits()).unwrap();
    shutting(h.append(1, batch(0, 1)).wait().map(drop), "append");
    shutting(
        h.append_admitted(1, admitted).wait().map(drop),
        "append_admitted",
    );
    shutting(
        h.append_stamped(1, batch(0, 1)).wait().map(drop),
        "append_stamped",
    );
    shutting(h.poll(1, PollFrom::First, 1).wait().map(drop), "poll");
    shutting(
        futures::executor::block_on(h.poll_verified(1, PollFrom::First, 1)).map(drop),
        "poll_verified",
    );
    shutting(h.poll_next(1, 9, 1).wait().map(drop), "poll_next");
    shutting(h.store_offset(1, 9, 0).wait(), "store_offset");
    shutting(h.load_offset(1, 9).wait().map(drop), "load_offset");
    shutting(h.flush(1).wait(), "flush");
    shutting(futures::executor::block_on(h.flush_all()), "flush_all");
    shutting(h.stats(1).wait().map(drop), "stats");
    shutting(h.create_partition(2).wait(), "create_partition");
    shutting(
        futures::executor::block_on(h.partitions()).map(drop),
        "partitions",
    );
    shutting(
        futures::executor::block_on(h.enforce_retention()).map(drop),
        "enforce_retention",
    );
    shutting(h.spawn_on(0, || async {}).wait(), "spawn_on");
    // And its health says why: every shard stopped, none failed.
    let health = h.health();
    assert!(
        health
            .shards
            .iter()
            .all(|s| s.state == corelog::ShardState::Stopped),
        "{health:?}"
    );

    // The directory is free again, and the acknowledged batch is there.
    let engine = open(dir.path(), 1, LogConfig::default());
    assert_eq!(engine.handle().stats(1).wait().unwrap().next_offset, 1);
    engine.shutdown().unwrap();
}

#[test]
fn shutdown_completes_while_a_task_on_a_shard_keeps_appending() {
    let _watchdog = Watchdog::arm("shutdown with a shard task", Duration::from_secs(120));
    let dir = tempfile::tempdir().unwrap();
    let engine = open(dir.path(), 2, LogConfig::default());
    let acked = std::sync::Arc::new(AtomicU64::new(0));
    let (tx, rx) = std::sync::mpsc::channel::<Result<u64, RequestError>>();
    let (h, a) = (engine.handle(), acked.clone());
    // Partition 1 lives on shard 1: the task's appends skip the queue.
    engine
        .handle()
        .spawn_on(1, move || async move {
            let mut seq = 0;
            let outcome: Result<(), RequestError> = loop {
                match h.append(1, batch(9, seq)).await {
                    Ok(_) => {
                        seq += 1;
                        a.fetch_add(1, Ordering::SeqCst);
                    }
                    Err(e) => break Err(e),
                }
            };
            let _ = tx.send(outcome.map(|()| seq));
        })
        .wait()
        .unwrap();
    while acked.load(Ordering::SeqCst) < 50 {
        std::thread::sleep(Duration::from_millis(1));
    }
    engine.shutdown().unwrap();
    // The task either saw the refusal or was dropped with its runtime.
    if let Ok(outcome) = rx.recv() {
        assert!(
            matches!(outcome, Err(ref e) if refused_by_shutdown(e)),
            "{outcome:?}"
        );
    }
    let acked = acked.load(Ordering::SeqCst);
    let engine = open(dir.path(), 2, LogConfig::default());
    let stats = engine.handle().stats(1).wait().unwrap();
    // Every acknowledged append survived; at most the one in flight when
    // the task stopped joined them.
    assert!(
        [acked, acked + 1]
            .map(common::base_offset_of)
            .contains(&stats.next_offset),
        "{stats:?}, {acked} acked"
    );
    engine.shutdown().unwrap();
}
