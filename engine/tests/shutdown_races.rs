//! Shutting the shards down while many callers are mid-flight, beyond
//! what `shutdown.rs` covers (appends and polls resolve, acknowledged
//! appends survive, nothing else is stored):
//!
//! * order: appends one thread pipelines to one partition are stored in
//!   the order of its calls (the queue has room), across a shutdown, and
//!   concurrent readers never see a gap, a duplicate or a reordering;
//! * every kind of request (offsets, flushes, stats, listing, retention,
//!   tasks) resolves with an answer or a shutdown refusal, none hangs,
//!   with a queue small enough that callers wait for room; stored
//!   consumer offsets and flushed appends are there after reopening;
//! * async callers on a multi-thread tokio runtime, some of which drop
//!   their replies before they resolve: none hangs, and whatever was
//!   acknowledged is there after reopening, in a log without holes.
#![allow(clippy::unwrap_used)]

mod common;

use common::{batch, decode_id, open, small_segments, Watchdog};
use corelog::{Config, Engine, FsyncPolicy, Handle, LogConfig, PollFrom, RequestError};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

fn refused(e: &RequestError) -> bool {
    matches!(
        e,
        RequestError::ShuttingDown | RequestError::QueueClosed { .. }
    )
}

/// Every batch of every partition: partition -> [(base_offset, tag, seq)],
/// checked continuous and byte for byte against `batch(tag, seq)`.
fn stored(engine: &Engine) -> BTreeMap<u64, Vec<(u64, u64, u64)>> {
    let mut out = BTreeMap::new();
    for p in futures::executor::block_on(engine.handle().partitions()).unwrap() {
        let mut v = Vec::new();
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
                assert_eq!(b.base_offset(), next, "partition {p}: no hole");
                let (tag, seq, _) = decode_id(b.messages().next().unwrap().id());
                assert_eq!(b.blob(), &batch(tag, seq)[256..], "partition {p}");
                v.push((next, tag, seq));
                next = b.next_offset();
            }
        }
        out.insert(p, v);
    }
    out
}

const PARTITIONS: u64 = 12;

/// Reads partition after partition from where it left off, checking that
/// every reply continues the last and that each writer's batches come in
/// its order.
fn follow(h: &Handle, stop: &AtomicBool, id: u64) {
    let mut next: HashMap<u64, u64> = HashMap::new();
    let mut last_seq: HashMap<(u64, u64), u64> = HashMap::new();
    let mut round = id;
    while !stop.load(Ordering::SeqCst) {
        round += 1;
        let p = round % PARTITIONS;
        let from = *next.get(&p).unwrap_or(&0);
        let reply =
            match futures::executor::block_on(h.poll_verified(p, PollFrom::Offset(from), 16 << 10))
            {
                Ok(r) => r,
                Err(RequestError::UnknownPartition { .. }) => continue,
                Err(e) if refused(&e) => return,
                Err(e) => panic!("reader {id}: poll of partition {p} from {from}: {e}"),
            };
        if reply.is_empty() {
            continue;
        }
        assert_eq!(
            reply.first_offset(),
            from,
            "reader {id}: partition {p}: no gap, no repeat"
        );
        for b in reply.batches() {
            let (w, seq, _) = decode_id(b.messages().next().unwrap().id());
            if let Some(&prev) = last_seq.get(&(p, w)) {
                assert!(
                    seq > prev,
                    "reader {id}: partition {p}: writer {w} batch {seq} after {prev}"
                );
            }
            last_seq.insert((p, w), seq);
        }
        next.insert(p, reply.next_offset());
    }
}

/// Writers pipeline appends (32 in flight each, several to one partition)
/// through a queue that never fills; readers follow; the engine is shut
/// down under them.
fn ordered_through_shutdown(fsync: FsyncPolicy) {
    let _watchdog = Watchdog::arm(
        "ordered appends through a shutdown",
        Duration::from_secs(300),
    );
    let dir = tempfile::tempdir().unwrap();
    let log = LogConfig {
        fsync,
        ..small_segments()
    };
    let engine = Engine::open(Config {
        shards: Some(3),
        pin_threads: false,
        log: log.clone(),
        ..Config::new(dir.path())
    })
    .unwrap();
    const WRITERS: u64 = 6;
    let acked: Mutex<BTreeMap<(u64, u64), (u64, u64)>> = Mutex::new(BTreeMap::new());
    let count = AtomicU64::new(0);
    let stop_readers = AtomicBool::new(false);
    std::thread::scope(|s| {
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                let (h, acked, count) = (engine.handle(), &acked, &count);
                s.spawn(move || {
                    let mut pending = std::collections::VecDeque::new();
                    let mut seq = 0u64;
                    let mut refusals = 0u64;
                    let mut last: HashMap<u64, u64> = HashMap::new();
                    // Whether the append was refused by the shutdown.
                    let mut settle = |(p, seq, r): (u64, u64, corelog::Reply<corelog::AppendAck>),
                                      refusals: u64|
                     -> bool {
                        match r.wait() {
                            Ok(ack) => {
                                assert_eq!(refusals, 0, "writer {w}: nothing acknowledged after a refusal");
                                if let Some(&prev) = last.get(&p) {
                                    assert!(ack.base_offset > prev, "writer {w}: partition {p}: batch {seq} stored before an earlier one");
                                }
                                last.insert(p, ack.base_offset);
                                acked.lock().unwrap().insert((p, ack.base_offset), (w, seq));
                                count.fetch_add(1, Ordering::SeqCst);
                                false
                            }
                            Err(e) if refused(&e) => true,
                            Err(e) => panic!("writer {w}: append {seq} to {p}: {e}"),
                        }
                    };
                    while refusals == 0 {
                        // Runs of four to one partition, so several appends
                        // to it are in flight at once.
                        let p = (w * 5 + seq / 4) % PARTITIONS;
                        pending.push_back((p, seq, h.append(p, batch(w, seq))));
                        seq += 1;
                        if pending.len() >= 32 {
                            refusals += u64::from(settle(pending.pop_front().unwrap(), refusals));
                        }
                    }
                    for x in pending {
                        refusals += u64::from(settle(x, refusals));
                    }
                })
            })
            .collect();
        let readers: Vec<_> = (0..2)
            .map(|id| {
                let (h, stop) = (engine.handle(), &stop_readers);
                s.spawn(move || follow(&h, stop, id))
            })
            .collect();
        while count.load(Ordering::SeqCst) < 400 {
            std::thread::sleep(Duration::from_millis(1));
        }
        engine.shutdown().unwrap();
        for w in writers {
            w.join().unwrap();
        }
        stop_readers.store(true, Ordering::SeqCst);
        for r in readers {
            r.join().unwrap();
        }
    });
    let acked = acked.into_inner().unwrap();
    let reopened = open(dir.path(), 2, log);
    let stored = stored(&reopened);
    let mut n = 0;
    for (p, batches) in &stored {
        let mut last: HashMap<u64, u64> = HashMap::new();
        for &(offset, w, seq) in batches {
            assert_eq!(
                acked.get(&(*p, offset)),
                Some(&(w, seq)),
                "partition {p} offset {offset}: only acknowledged batches, where acknowledged"
            );
            if let Some(&prev) = last.get(&w) {
                assert!(
                    seq > prev,
                    "partition {p}: writer {w}'s batch {seq} stored after its {prev}"
                );
            }
            last.insert(w, seq);
            n += 1;
        }
    }
    assert_eq!(
        n,
        acked.len(),
        "every acknowledged batch is there after the reopen"
    );
    reopened.shutdown().unwrap();
}

#[test]
fn pipelined_appends_keep_each_threads_order_through_a_shutdown() {
    ordered_through_shutdown(FsyncPolicy::Never);
}

#[test]
fn pipelined_appends_keep_each_threads_order_through_a_shutdown_with_fsync_batch() {
    ordered_through_shutdown(FsyncPolicy::Batch);
}

/// What one caller of mixed requests had confirmed when it was refused.
#[derive(Default)]
struct Confirmed {
    /// (partition, base_offset) -> (tag, seq) of acknowledged appends.
    appends: BTreeMap<(u64, u64), (u64, u64)>,
    /// (partition, consumer) -> last offset stored.
    offsets: BTreeMap<(u64, u64), u64>,
    answers: u64,
}

/// One caller issuing every kind of request, each waited for, until the
/// engine refuses; any error but a refusal fails the test.
fn mixed_caller(h: &Handle, t: u64, answered: &AtomicU64) -> Confirmed {
    let mut c = Confirmed::default();
    let mut seq = 0u64;
    let mut i = 0u64;
    loop {
        i += 1;
        let p = (t * 7 + i) % PARTITIONS;
        let consumer = 100 + t;
        let result: Result<(), RequestError> = match i % 13 {
            0..=3 => h.append(p, batch(t, seq)).wait().map(|ack| {
                c.appends.insert((p, ack.base_offset), (t, seq));
                seq += 1;
            }),
            4 => h.poll(p, PollFrom::First, 4096).wait().map(|r| {
                r.verify(&h.limits()).unwrap();
            }),
            5 => futures::executor::block_on(h.poll_verified(p, PollFrom::Last, 4096)).map(drop),
            6 => h.poll_next(p, consumer, 4096).wait().map(|r| {
                r.verify(&h.limits()).unwrap();
            }),
            7 => {
                let v = i;
                h.store_offset(p, consumer, v).wait().map(|()| {
                    c.offsets.insert((p, consumer), v);
                })
            }
            8 => h.load_offset(p, consumer).wait().map(|got| {
                assert_eq!(
                    got,
                    c.offsets.get(&(p, consumer)).copied(),
                    "caller {t}: reads its own stored offset"
                );
            }),
            9 => {
                if i.is_multiple_of(2) {
                    h.flush(p).wait()
                } else {
                    futures::executor::block_on(h.flush_all())
                }
            }
            10 => h.stats(p).wait().map(|s| assert!(!s.poisoned)),
            11 => match i % 3 {
                0 => h.create_partition(p).wait(),
                1 => futures::executor::block_on(h.partitions())
                    .map(|ps| assert!(ps.len() as u64 <= PARTITIONS)),
                _ => futures::executor::block_on(h.enforce_retention())
                    .map(|d| assert!(d.is_empty())),
            },
            _ => h
                .spawn_on((t + i) as usize % h.shards(), || async {})
                .wait(),
        };
        match result {
            Ok(()) => {
                c.answers += 1;
                answered.fetch_add(1, Ordering::SeqCst);
            }
            Err(e) if refused(&e) => return c,
            Err(e) => panic!(
                "caller {t}: request {i} (kind {}) to partition {p}: {e}",
                i % 13
            ),
        }
    }
}

#[test]
fn every_kind_of_request_resolves_across_a_shutdown_and_what_it_confirmed_stays() {
    for after in [1, 600] {
        mixed_through_shutdown(after);
    }
}

/// Eight callers of mixed requests; the engine is shut down once `after`
/// of them were answered.
fn mixed_through_shutdown(after: u64) {
    let _watchdog = Watchdog::arm(
        "mixed requests through a shutdown",
        Duration::from_secs(300),
    );
    let dir = tempfile::tempdir().unwrap();
    let log = small_segments();
    let engine = Engine::open(Config {
        shards: Some(3),
        pin_threads: false,
        queue_depth: 2,
        log: log.clone(),
        ..Config::new(dir.path())
    })
    .unwrap();
    for p in 0..PARTITIONS {
        engine.handle().create_partition(p).wait().unwrap();
    }
    let answered = AtomicU64::new(0);
    let confirmed: Vec<Confirmed> = std::thread::scope(|s| {
        let callers: Vec<_> = (0..8)
            .map(|t| {
                let (h, answered) = (engine.handle(), &answered);
                s.spawn(move || mixed_caller(&h, t, answered))
            })
            .collect();
        while answered.load(Ordering::SeqCst) < after {
            std::thread::sleep(Duration::from_millis(1));
        }
        engine.shutdown().unwrap();
        callers.into_iter().map(|c| c.join().unwrap()).collect()
    });
    assert!(confirmed.iter().map(|c| c.answers).sum::<u64>() >= after);

    let reopened = open(dir.path(), 2, log);
    let stored = stored(&reopened);
    let mut appends = 0;
    for c in &confirmed {
        for (&(p, offset), &(t, seq)) in &c.appends {
            let at = stored[&p]
                .binary_search_by_key(&offset, |x| x.0)
                .unwrap_or_else(|_| {
                    panic!("acknowledged append ({t}, {seq}) at {p}/{offset} lost")
                });
            assert_eq!((stored[&p][at].1, stored[&p][at].2), (t, seq));
            appends += 1;
        }
        for (&(p, consumer), &v) in &c.offsets {
            assert_eq!(
                reopened.handle().load_offset(p, consumer).wait().unwrap(),
                Some(v),
                "consumer {consumer}'s offset in partition {p}"
            );
        }
    }
    let total: usize = stored.values().map(Vec::len).sum();
    assert_eq!(total, appends, "nothing stored that was not acknowledged");
    reopened.shutdown().unwrap();
}

#[test]
fn async_callers_dropping_replies_mid_flight_never_hang_and_lose_nothing_acknowledged() {
    // Right away (partitions are still being created), and under load.
    for after in [0, 300] {
        async_through_shutdown(after);
    }
}

/// 24 tokio tasks appending (a third of them dropping some replies); the
/// engine is shut down once `after` appends were acknowledged.
fn async_through_shutdown(after: u64) {
    let _watchdog = Watchdog::arm("async callers through a shutdown", Duration::from_secs(300));
    let dir = tempfile::tempdir().unwrap();
    let log = LogConfig {
        fsync: FsyncPolicy::Batch,
        ..small_segments()
    };
    let engine = Engine::open(Config {
        shards: Some(2),
        pin_threads: false,
        queue_depth: 8,
        log: log.clone(),
        ..Config::new(dir.path())
    })
    .unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(3)
        .enable_time()
        .build()
        .unwrap();
    let acked = std::sync::Arc::new(Mutex::new(BTreeMap::<(u64, u64), (u64, u64)>::new()));
    let count = std::sync::Arc::new(AtomicU64::new(0));
    let tasks: Vec<_> = (0..24u64)
        .map(|t| {
            let (h, acked, count) = (engine.handle(), acked.clone(), count.clone());
            rt.spawn(async move {
                let mut seq = 0u64;
                loop {
                    let p = (t + seq) % PARTITIONS;
                    let reply = h.append(p, batch(t, seq));
                    seq += 1;
                    // A third of the callers give up on some replies: the
                    // append may still be stored, or not.
                    let outcome = if t.is_multiple_of(3) && seq.is_multiple_of(2) {
                        match tokio::time::timeout(Duration::from_micros(50), reply).await {
                            Ok(r) => r,
                            Err(_) => continue,
                        }
                    } else {
                        reply.await
                    };
                    match outcome {
                        Ok(ack) => {
                            acked
                                .lock()
                                .unwrap()
                                .insert((p, ack.base_offset), (t, seq - 1));
                            count.fetch_add(1, Ordering::SeqCst);
                        }
                        Err(e) if refused(&e) => return,
                        Err(e) => panic!("task {t}: {e}"),
                    }
                    if seq.is_multiple_of(5) {
                        match h.poll_verified(p, PollFrom::Last, 4096).await {
                            Ok(_) | Err(RequestError::UnknownPartition { .. }) => {}
                            Err(e) if refused(&e) => return,
                            Err(e) => panic!("task {t}: poll: {e}"),
                        }
                    }
                }
            })
        })
        .collect();
    while count.load(Ordering::SeqCst) < after {
        std::thread::sleep(Duration::from_millis(1));
    }
    engine.shutdown().unwrap();
    rt.block_on(async {
        for t in tasks {
            t.await.unwrap();
        }
    });
    drop(rt);
    let acked = std::mem::take(&mut *acked.lock().unwrap());
    let reopened = open(dir.path(), 2, log);
    let stored = stored(&reopened);
    for (&(p, offset), &(t, seq)) in &acked {
        let batches = &stored[&p];
        let at = batches
            .binary_search_by_key(&offset, |x| x.0)
            .unwrap_or_else(|_| panic!("acknowledged ({t}, {seq}) at {p}/{offset} lost"));
        assert_eq!((batches[at].1, batches[at].2), (t, seq));
    }
    reopened.shutdown().unwrap();
}
