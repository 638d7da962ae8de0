//! Producers as tasks on the shards (`--on-shard`): the fast path of a
//! thread-per-core program whose own per-core work runs on corelog's
//! shards. Producer `i` runs on the shard owning its first partition; its
//! appends to that shard's partitions skip the queue and the wake-up.
//!
//! Each of the `--inflight` lanes keeps one append in flight. A lane reuses
//! its pre-built buffers (see `lane`). With `--rate` the lanes share one
//! open-loop schedule (see `schedule`), paced on the kernel's
//! high-resolution timer: monoio's timers tick in milliseconds and would
//! send in bursts.

use crate::lane::{reclaim, LaneResult, RunCtx};
use crate::schedule::Schedule;
use bytes::BytesMut;
use corelog::testing::segment::io::Ring;
use corelog::Handle;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One producer: a task on its shard running `pools.len()` lanes.
pub async fn producer(
    ctx: Arc<RunCtx>,
    handle: Handle,
    partitions: Vec<u64>,
    pools: Vec<Vec<BytesMut>>,
    out: mpsc::Sender<LaneResult>,
) {
    let pacer = Rc::new(Pacer {
        schedule: RefCell::new(Schedule::new(ctx.per_producer_rate, ctx.go_at)),
        timer: ctx.per_producer_rate.and_then(|_| Ring::new(64).ok()),
    });
    let lanes: Vec<_> = pools
        .into_iter()
        .enumerate()
        .map(|(i, pool)| {
            // Lanes start on different partitions.
            let mut parts = partitions.clone();
            parts.rotate_left(i % partitions.len().max(1));
            monoio::spawn(lane(
                ctx.clone(),
                handle.clone(),
                parts,
                pool,
                pacer.clone(),
            ))
        })
        .collect();
    let mut result = LaneResult::new();
    for l in lanes {
        result.merge(l.await);
    }
    let _ = out.send(result);
}

/// The schedule a producer's lanes share, and the timer that paces them.
struct Pacer {
    schedule: RefCell<Schedule>,
    timer: Option<Ring>,
}

impl Pacer {
    /// Takes the next slot of `len` bytes and waits for it: returns its due
    /// time.
    async fn wait(&self, len: u64) -> Instant {
        let now = Instant::now();
        let due = self.schedule.borrow_mut().take(len, now);
        if due > now {
            match &self.timer {
                Some(t) => t.sleep(due - now).await,
                None => monoio::time::sleep(due - now).await,
            }
        }
        due
    }
}

async fn lane(
    ctx: Arc<RunCtx>,
    handle: Handle,
    partitions: Vec<u64>,
    mut pool: Vec<BytesMut>,
    pacer: Rc<Pacer>,
) -> LaneResult {
    let mut result = LaneResult::new();
    let mut next = 0usize;
    while Instant::now() < ctx.go_at {
        monoio::time::sleep(Duration::from_millis(1)).await;
    }
    loop {
        let i = next % pool.len();
        let len = pool[i].len() as u64;
        let Some(measured) = ctx.claim(len, Instant::now()) else {
            break;
        };
        let due = pacer.wait(len).await;
        let sent = Instant::now();
        let bytes = ctx.prepare(std::mem::take(&mut pool[i]));
        let keep = bytes.clone();
        let p = partitions[next % partitions.len()];
        next += 1;
        match handle.append(p, bytes).await {
            Ok(ack) => result.acked(&ctx, &ack, due, sent, Instant::now(), measured),
            Err(e) => {
                result.failed(&ctx, p, e);
                break;
            }
        }
        pool[i] = reclaim(keep);
    }
    result
}
