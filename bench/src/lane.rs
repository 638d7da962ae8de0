//! What producers share, wherever they run: the run's state, the byte
//! budget, and the per-lane results.

use crate::live::Live;
use crate::report::{histogram, Phase};
use bytes::{Bytes, BytesMut};
use corelog::AppendAck;
use hdrhistogram::Histogram;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

/// Shared run state, read by lanes on every batch.
#[derive(Debug)]
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
    /// frame, which with 100-byte messages costs about 5% of a core.
    pub retime: bool,
    /// `--spin-us`: how close a due send is waited for by spinning.
    pub spin: std::time::Duration,
}

impl RunCtx {
    /// Claims `len` bytes of the budget for a batch sent at `now`: `None`
    /// once the budget is spent or the run stopped, else whether the batch
    /// is measured (sent after the warm-up).
    pub fn claim(&self, len: u64, now: Instant) -> Option<bool> {
        if self.live.stop.load(Ordering::Relaxed) {
            return None;
        }
        let measured = now >= self.measure_from;
        if measured {
            if let Some(total) = self.total {
                if self.live.claimed.fetch_add(len, Ordering::Relaxed) >= total {
                    return None;
                }
            }
        }
        Some(measured)
    }

    /// Turns a pooled buffer into the batch to send, re-timed if consumers
    /// will measure end-to-end latency.
    pub fn prepare(&self, mut buf: BytesMut) -> Bytes {
        if self.retime {
            let _ = corelog::testing::segment::set_origin_timestamp(
                &mut buf,
                crate::clock::now_micros(),
            );
        }
        buf.freeze()
    }
}

/// Takes a sent buffer back once the write released it, without a copy.
pub fn reclaim(keep: Bytes) -> BytesMut {
    keep.try_into_mut()
        .unwrap_or_else(|shared| BytesMut::from(&shared[..]))
}

/// What a producer (all its lanes) measured.
#[derive(Debug)]
pub struct LaneResult {
    pub phase: Phase,
    /// Of the append latency: how late each batch was sent after it was
    /// due (the producer's own wake-up and pacing), ns.
    pub late: Histogram<u64>,
    /// The rest: from the append call to its acknowledgement in hand, ns.
    pub service: Histogram<u64>,
    pub last_ack: Option<Instant>,
    pub error: Option<String>,
}

impl LaneResult {
    pub fn new() -> LaneResult {
        LaneResult {
            phase: Phase::new("append"),
            late: histogram(),
            service: histogram(),
            last_ack: None,
            error: None,
        }
    }

    /// Records an acknowledged append that was due at `due` (see
    /// `schedule`), sent at `sent` and acknowledged at `acked`.
    pub fn acked(
        &mut self,
        ctx: &RunCtx,
        ack: &AppendAck,
        due: Instant,
        sent: Instant,
        acked: Instant,
        measured: bool,
    ) {
        if measured {
            let ns = |from: Instant, to: Instant| {
                to.saturating_duration_since(from).as_nanos().max(1) as u64
            };
            let _ = self.phase.latency.record(ns(due, acked));
            let _ = self.late.record(ns(due, sent));
            let _ = self.service.record(ns(sent, acked));
            self.phase.bytes += ack.bytes;
            self.phase.messages += u64::from(ack.message_count);
            self.phase.batches += 1;
            self.last_ack = Some(acked);
        }
        ctx.live.appended.fetch_add(ack.bytes, Ordering::Relaxed);
    }

    /// Records a failed append and stops the run.
    pub fn failed(&mut self, ctx: &RunCtx, partition: u64, e: impl std::fmt::Display) {
        self.error = Some(format!("append to partition {partition}: {e}"));
        ctx.live.stop.store(true, Ordering::Relaxed);
    }

    pub fn merge(&mut self, other: LaneResult) {
        self.phase.merge(&other.phase);
        let _ = self.late.add(&other.late);
        let _ = self.service.add(&other.service);
        self.last_ack = self.last_ack.max(other.last_ack);
        if self.error.is_none() {
            self.error = other.error;
        }
    }
}
