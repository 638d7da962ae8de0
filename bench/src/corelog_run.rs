//! The corelog workload: producers and consumers as tasks on the shards.
//!
//! Producer `i` runs on shard `i % shards` and appends to the partitions
//! `p` with `p % producers == i` (owned by the same shard when producers is
//! a multiple of shards), with `--inflight` lanes each keeping one append
//! in flight. A lane reuses its pre-built buffers: it stamps a buffer's
//! `origin_timestamp` with the send time (only the header and the frame
//! checksums are rehashed), hands it to `append` (which admits it, every
//! checksum verified, on the shard) and takes the buffer back once the
//! write released it. Consumers work the same way with polls.

use crate::args::Args;
use crate::report::{histogram, Phase};
use crate::{now_us, Live, Totals};
use bytes::BytesMut;
use corelog::{Handle, PollFrom};
use hdrhistogram::Histogram;
use std::cell::Cell;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What a producer lane measured.
pub struct LaneResult {
    pub phase: Phase,
    pub last_ack: Option<Instant>,
    pub error: Option<String>,
}

/// Shared run state, read by lanes on every batch.
pub struct RunCtx {
    pub live: Arc<Live>,
    pub go_at: Instant,
    pub measure_from: Instant,
    pub total: Option<u64>,
    /// Bytes per second each producer sends (open loop), if limited.
    pub per_producer_rate: Option<f64>,
    /// Whether consumers will read `origin_timestamp` (end-to-end latency):
    /// only then is each pre-built batch re-timed at its send. A producer
    /// stamps its own batches on its own machine; re-timing here walks every
    /// frame on the shard's core, which with 100-byte messages costs the
    /// engine under test about 5% of its CPU.
    pub retime: bool,
}

/// One producer: a task on its shard whose `--inflight` lanes each keep one
/// append in flight. With `--rate`, the lanes share one send schedule, so
/// sends are spaced evenly (paced on the kernel's high-resolution timer:
/// monoio's timers tick in milliseconds and would send in bursts).
pub async fn producer(
    ctx: Arc<RunCtx>,
    handle: Handle,
    partitions: Vec<u64>,
    pools: Vec<Vec<BytesMut>>,
    out: mpsc::Sender<LaneResult>,
) {
    let pacer = ctx.per_producer_rate.map(|rate| {
        Rc::new(Pacer {
            rate,
            next: Cell::new(ctx.go_at),
            timer: corelog::testing::segment::io::Ring::new(64).ok(),
        })
    });
    let lanes: Vec<_> = pools
        .into_iter()
        .enumerate()
        .map(|(i, pool)| {
            // Lanes start on different partitions.
            let mut parts = partitions.clone();
            parts.rotate_left(i % partitions.len().max(1));
            monoio::spawn(producer_lane(
                ctx.clone(),
                handle.clone(),
                parts,
                pool,
                pacer.clone(),
                out.clone(),
            ))
        })
        .collect();
    for lane in lanes {
        lane.await;
    }
}

/// The open-loop schedule shared by a producer's lanes.
pub struct Pacer {
    rate: f64,
    next: Cell<Instant>,
    timer: Option<corelog::testing::segment::io::Ring>,
}

impl Pacer {
    /// Waits for the next send slot of `len` bytes.
    async fn wait(&self, len: u64) {
        let due = self.next.get();
        self.next
            .set(due + Duration::from_secs_f64(len as f64 / self.rate));
        let now = Instant::now();
        if due > now {
            match &self.timer {
                Some(t) => t.sleep(due - now).await,
                None => monoio::time::sleep(due - now).await,
            }
        }
    }
}

async fn producer_lane(
    ctx: Arc<RunCtx>,
    handle: Handle,
    partitions: Vec<u64>,
    mut pool: Vec<BytesMut>,
    pacer: Option<Rc<Pacer>>,
    out: mpsc::Sender<LaneResult>,
) {
    let mut phase = Phase::new("append");
    let mut last_ack = None;
    let mut error = None;
    let mut next = 0usize;
    let mut part = 0usize;
    while Instant::now() < ctx.go_at {
        monoio::time::sleep(Duration::from_millis(1)).await;
    }
    loop {
        if ctx.live.stop.load(Ordering::Relaxed) {
            break;
        }
        let i = next % pool.len();
        next += 1;
        let mut buf = std::mem::take(&mut pool[i]);
        let len = buf.len() as u64;
        let now = Instant::now();
        let measured = now >= ctx.measure_from;
        if measured {
            if let Some(total) = ctx.total {
                if ctx.live.claimed.fetch_add(len, Ordering::Relaxed) >= total {
                    break;
                }
            }
        }
        if let Some(p) = &pacer {
            p.wait(len).await;
        }
        if ctx.retime {
            let _ = corelog::testing::segment::set_origin_timestamp(&mut buf, now_us());
        }
        let bytes = buf.freeze();
        let keep = bytes.clone();
        let p = partitions[part % partitions.len()];
        part += 1;
        let started = Instant::now();
        let result = handle.append(p, bytes).await;
        let ended = Instant::now();
        match result {
            Ok(ack) => {
                if measured {
                    let _ = phase.latency.record((ended - started).as_nanos() as u64);
                    phase.bytes += ack.bytes;
                    phase.messages += u64::from(ack.message_count);
                    phase.batches += 1;
                    last_ack = Some(ended);
                }
                ctx.live.appended.fetch_add(ack.bytes, Ordering::Relaxed);
            }
            Err(e) => {
                error = Some(format!("append to partition {p}: {e}"));
                ctx.live.stop.store(true, Ordering::Relaxed);
                break;
            }
        }
        // The write is done with the buffer: take it back without a copy.
        pool[i] = keep
            .try_into_mut()
            .unwrap_or_else(|shared| BytesMut::from(&shared[..]));
    }
    let _ = out.send(LaneResult {
        phase,
        last_ack,
        error,
    });
}

/// What a consumer measured.
pub struct ConsumerResult {
    pub phase: Phase,
    pub end_to_end: Histogram<u64>,
    pub error: Option<String>,
}

/// Polls `partitions` from offset 0 until each reaches its target (read
/// from `targets` once producers are done), verifying every batch unless
/// `verify` is off.
pub async fn consumer(
    handle: Handle,
    partitions: Vec<u64>,
    args: Arc<Args>,
    live: Arc<Live>,
    totals: Arc<Totals>,
    out: mpsc::Sender<ConsumerResult>,
) {
    let mut phase = Phase::new("poll");
    let mut e2e = histogram();
    let mut error = None;
    let limits = handle.limits();
    let mut next: Vec<u64> = vec![0; partitions.len()];
    let mut done = vec![false; partitions.len()];
    'outer: while !done.iter().all(|d| *d) {
        let mut progressed = false;
        for (k, &p) in partitions.iter().enumerate() {
            if done[k] {
                continue;
            }
            let started = Instant::now();
            let reply = match handle
                .poll(p, PollFrom::Offset(next[k]), args.poll_bytes)
                .await
            {
                Ok(r) => r,
                Err(corelog::RequestError::UnknownPartition { .. }) if args.tail => continue,
                Err(e) => {
                    error = Some(format!("poll partition {p}: {e}"));
                    break 'outer;
                }
            };
            let got = Instant::now();
            if reply.is_empty() {
                if let Some(target) = totals.target(p) {
                    if next[k] >= target {
                        done[k] = true;
                    }
                }
                continue;
            }
            progressed = true;
            if !args.no_verify {
                if let Err(e) = reply.verify(&limits) {
                    error = Some(format!("verify partition {p}: {e}"));
                    break 'outer;
                }
            }
            let now = now_us();
            let mut messages = 0u64;
            for b in reply.batches() {
                messages += u64::from(b.message_count());
                let _ = e2e.record(now.saturating_sub(b.origin_timestamp()).max(1) * 1000);
            }
            let _ = phase.latency.record((got - started).as_nanos() as u64);
            phase.bytes += reply.len();
            phase.messages += messages;
            phase.batches += reply.batch_count() as u64;
            live.polled.fetch_add(reply.len(), Ordering::Relaxed);
            next[k] = reply.next_offset();
        }
        if !progressed {
            monoio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    let _ = out.send(ConsumerResult {
        phase,
        end_to_end: e2e,
        error,
    });
}

/// Raw XXH3 throughput of this build on `threads` cores at once, for
/// `secs`, each thread hashing its own 256 MiB buffer: from memory, like the
/// page-cache bytes a poll verifies, and sharing the memory bandwidth the
/// way concurrent consumers do (an in-cache buffer on one idle core hashes
/// about three times faster on these machines). Returns bytes per second
/// for all threads together.
pub fn xxh3_rate(threads: usize, secs: f64) -> f64 {
    let total: f64 = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads.max(1))
            .map(|t| {
                s.spawn(move || {
                    let buf: Vec<u8> = (0..256usize << 20).map(|i| (i * 131 + t) as u8).collect();
                    let start = Instant::now();
                    let mut n = 0u64;
                    let mut acc = 0u64;
                    while start.elapsed().as_secs_f64() < secs {
                        acc ^= xxhash_rust::xxh3::xxh3_64(std::hint::black_box(&buf));
                        n += 1;
                    }
                    std::hint::black_box(acc);
                    (n * buf.len() as u64) as f64 / start.elapsed().as_secs_f64()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or(0.0)).sum()
    });
    total
}
