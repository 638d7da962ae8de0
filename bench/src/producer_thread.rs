//! Producers outside the shards (the default): one OS thread per producer,
//! calling `Handle::append` the way an embedding broker's threads do, so
//! every append crosses the shard's queue, wakes the shard, and its reply
//! wakes the thread back.
//!
//! The thread keeps `--inflight` appends in flight (one per lane) with a
//! small event loop: send into every free lane whose batch is due, poll the
//! pending replies, then park until a reply wakes it or the next batch is
//! due (timer slack set to 1 ns, see `schedule::precise_sleeps`).

use crate::lane::{reclaim, LaneResult, RunCtx};
use crate::schedule::Schedule;
use bytes::{Bytes, BytesMut};
use corelog::{AppendAck, Handle, Reply};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::Thread;
use std::time::Instant;

/// Wakes the producer thread when a reply arrives.
struct Unpark(Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// An append in flight.
struct Pending {
    reply: Reply<AppendAck>,
    partition: u64,
    due: Instant,
    /// When `append` was called (its admission included).
    sent: Instant,
    measured: bool,
    /// The sent buffer, taken back once the write released it.
    keep: Bytes,
    buf: usize,
}

/// One lane: its pre-built buffers and the append it has in flight.
struct Lane {
    pool: Vec<BytesMut>,
    next: usize,
    partitions: Vec<u64>,
    pending: Option<Pending>,
}

/// Runs one producer on the calling thread until the budget is spent or the
/// run stops.
pub fn run(
    ctx: Arc<RunCtx>,
    handle: Handle,
    partitions: Vec<u64>,
    pools: Vec<Vec<BytesMut>>,
) -> LaneResult {
    let _ = crate::schedule::precise_sleeps();
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut lanes: Vec<Lane> = pools
        .into_iter()
        .enumerate()
        .map(|(i, pool)| {
            let mut parts = partitions.clone();
            parts.rotate_left(i % partitions.len().max(1));
            Lane {
                pool,
                next: 0,
                partitions: parts,
                pending: None,
            }
        })
        .collect();
    let mut schedule = Schedule::new(ctx.per_producer_rate, ctx.go_at);
    let mut result = LaneResult::new();
    let mut sending = true;
    while Instant::now() < ctx.go_at {
        std::thread::park_timeout(ctx.go_at - Instant::now());
    }
    loop {
        if sending {
            sending = send_due(&ctx, &handle, &mut lanes, &mut schedule);
        }
        let progressed = poll_pending(&ctx, &mut lanes, &mut cx, &mut result);
        if result.error.is_some() {
            sending = false;
        }
        let in_flight = lanes.iter().any(|l| l.pending.is_some());
        if !sending && !in_flight {
            break;
        }
        if progressed {
            continue;
        }
        let now = Instant::now();
        let due = schedule.peek(now);
        let free_lane = lanes.iter().any(|l| l.pending.is_none());
        let spin = ctx.spin;
        if sending && free_lane && due > now {
            if due - now <= spin {
                std::hint::spin_loop();
            } else {
                std::thread::park_timeout(due - now - spin);
            }
        } else if in_flight {
            if spin.is_zero() {
                std::thread::park();
            } else {
                std::thread::yield_now();
            }
        }
    }
    result
}

/// Sends a batch on every free lane whose slot is due. Returns false once
/// the budget is spent or the run stopped.
fn send_due(ctx: &RunCtx, handle: &Handle, lanes: &mut [Lane], schedule: &mut Schedule) -> bool {
    for lane in lanes.iter_mut().filter(|l| l.pending.is_none()) {
        let now = Instant::now();
        if schedule.peek(now) > now {
            return true;
        }
        let i = lane.next % lane.pool.len();
        let len = lane.pool[i].len() as u64;
        let Some(measured) = ctx.claim(len, now) else {
            return false;
        };
        let due = schedule.take(len, now);
        let bytes = ctx.prepare(std::mem::take(&mut lane.pool[i]));
        let partition = lane.partitions[lane.next % lane.partitions.len()];
        lane.next += 1;
        let sent = Instant::now();
        lane.pending = Some(Pending {
            reply: handle.append(partition, bytes.clone()),
            partition,
            due,
            sent,
            measured,
            keep: bytes,
            buf: i,
        });
    }
    true
}

/// Polls every pending append once; returns whether any completed.
fn poll_pending(
    ctx: &RunCtx,
    lanes: &mut [Lane],
    cx: &mut Context<'_>,
    result: &mut LaneResult,
) -> bool {
    let mut progressed = false;
    for lane in lanes.iter_mut() {
        let Some(p) = lane.pending.as_mut() else {
            continue;
        };
        let Poll::Ready(r) = Pin::new(&mut p.reply).poll(cx) else {
            continue;
        };
        let acked = Instant::now();
        progressed = true;
        let Some(p) = lane.pending.take() else {
            continue;
        };
        match r {
            Ok(ack) => result.acked(ctx, &ack, p.due, p.sent, acked, p.measured),
            Err(e) => result.failed(ctx, p.partition, e),
        }
        // The reply is dropped: the write is done with the buffer.
        drop(p.reply);
        lane.pool[p.buf] = reclaim(p.keep);
    }
    progressed
}
