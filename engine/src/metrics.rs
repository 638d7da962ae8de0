//! The engine's metrics, for a broker's dashboards: per shard, requests
//! and bytes appended and polled, failures, how full the queue is, and the
//! time appends take. Each shard counts into atomics only it writes (no
//! lock, no contention: a relaxed add per event); [`crate::Handle::metrics`]
//! reads them from any thread, without a request, so it answers even when
//! a shard cannot.

use crate::health::ShardHealth;
use corelog_segment::io::WriteWay;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Buckets of the append latency histogram: bucket `i` counts appends
/// that took under `2^(i+1)` µs (and at least `2^i` µs, but bucket 0), the
/// last everything slower (over 2^31 µs, about 36 minutes).
pub const LATENCY_BUCKETS: usize = 32;

/// What one shard counts, written by the shard alone.
#[derive(Debug)]
pub(crate) struct ShardCounters {
    appends: AtomicU64,
    appended_bytes: AtomicU64,
    append_errors: AtomicU64,
    appends_in_flight: AtomicU64,
    polls: AtomicU64,
    polled_bytes: AtomicU64,
    poll_errors: AtomicU64,
    append_latency: [AtomicU64; LATENCY_BUCKETS],
    sync_latency: [AtomicU64; LATENCY_BUCKETS],
    writes_inline: AtomicU64,
    writes_inline_slow: AtomicU64,
    writes_by_ring: AtomicU64,
}

impl ShardCounters {
    pub(crate) fn new() -> ShardCounters {
        ShardCounters {
            appends: AtomicU64::new(0),
            appended_bytes: AtomicU64::new(0),
            append_errors: AtomicU64::new(0),
            appends_in_flight: AtomicU64::new(0),
            polls: AtomicU64::new(0),
            polled_bytes: AtomicU64::new(0),
            poll_errors: AtomicU64::new(0),
            append_latency: std::array::from_fn(|_| AtomicU64::new(0)),
            sync_latency: std::array::from_fn(|_| AtomicU64::new(0)),
            writes_inline: AtomicU64::new(0),
            writes_inline_slow: AtomicU64::new(0),
            writes_by_ring: AtomicU64::new(0),
        }
    }

    /// One of the shard's writes was made `way`.
    pub(crate) fn wrote(&self, way: WriteWay) {
        let counter = match way {
            WriteWay::Inline => &self.writes_inline,
            WriteWay::InlineSlow => &self.writes_inline_slow,
            WriteWay::Ring => &self.writes_by_ring,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// One of the shard's file `fdatasync`s took `took`.
    pub(crate) fn sync_done(&self, took: Duration) {
        self.sync_latency[bucket_of(took)].fetch_add(1, Ordering::Relaxed);
    }

    /// The shard took an append; its answer is to come
    /// ([`ShardCounters::append_done`]).
    pub(crate) fn append_taken(&self) {
        self.appends_in_flight.fetch_add(1, Ordering::Relaxed);
    }

    /// An append the shard took at `started` has its answer: `Some(bytes)`
    /// stored, `None` refused or failed.
    pub(crate) fn append_done(&self, started: Instant, stored: Option<u64>) {
        self.appends_in_flight.fetch_sub(1, Ordering::Relaxed);
        match stored {
            Some(bytes) => {
                self.appends.fetch_add(1, Ordering::Relaxed);
                self.appended_bytes.fetch_add(bytes, Ordering::Relaxed);
                let bucket = bucket_of(started.elapsed());
                self.append_latency[bucket].fetch_add(1, Ordering::Relaxed);
            }
            None => {
                self.append_errors.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// A poll was answered: `Some(bytes)` served, `None` failed.
    pub(crate) fn poll_done(&self, served: Option<u64>) {
        match served {
            Some(bytes) => {
                self.polls.fetch_add(1, Ordering::Relaxed);
                self.polled_bytes.fetch_add(bytes, Ordering::Relaxed);
            }
            None => {
                self.poll_errors.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    pub(crate) fn read(&self, health: ShardHealth) -> ShardMetrics {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        ShardMetrics {
            health,
            appends: get(&self.appends),
            appended_bytes: get(&self.appended_bytes),
            append_errors: get(&self.append_errors),
            appends_in_flight: get(&self.appends_in_flight),
            polls: get(&self.polls),
            polled_bytes: get(&self.polled_bytes),
            poll_errors: get(&self.poll_errors),
            append_latency: LatencyHistogram {
                buckets: std::array::from_fn(|i| get(&self.append_latency[i])),
            },
            sync_latency: LatencyHistogram {
                buckets: std::array::from_fn(|i| get(&self.sync_latency[i])),
            },
            writes_inline: get(&self.writes_inline) + get(&self.writes_inline_slow),
            writes_inline_slow: get(&self.writes_inline_slow),
            writes_by_ring: get(&self.writes_by_ring),
        }
    }
}

fn bucket_of(took: Duration) -> usize {
    let us = u64::try_from(took.as_micros()).unwrap_or(u64::MAX).max(1);
    (us.ilog2() as usize).min(LATENCY_BUCKETS - 1)
}

/// One shard's metrics: counts since the engine opened.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ShardMetrics {
    /// Its state and how full its queue is, as [`crate::Handle::health`].
    pub health: ShardHealth,
    /// Appends stored.
    pub appends: u64,
    /// Bytes of the batches stored.
    pub appended_bytes: u64,
    /// Appends refused or failed (the caller had an error).
    pub append_errors: u64,
    /// Appends the shard has taken and not yet answered (being written,
    /// or waiting for their fsync).
    pub appends_in_flight: u64,
    /// Polls answered (waiting polls once, when answered).
    pub polls: u64,
    /// Bytes the polls served (by reference: nothing was copied).
    pub polled_bytes: u64,
    /// Polls that failed.
    pub poll_errors: u64,
    /// How long stored appends took, from the shard taking the request to
    /// its answer (the write and the wait for the fsync policy; not the
    /// time in the queue).
    pub append_latency: LatencyHistogram,
    /// How long the shard's `fdatasync`s of its files took (group commit,
    /// sealing, indexes, recovery; its count is how many there were).
    pub sync_latency: LatencyHistogram,
    /// Writes the shard made on its own thread (`Config::inline_writes`).
    pub writes_inline: u64,
    /// Of those, the slow ones: each sent the next writes to the ring for a
    /// while.
    pub writes_inline_slow: u64,
    /// Writes handed to the storage ring (io_uring's workers, on a
    /// filesystem that cannot take them without blocking).
    pub writes_by_ring: u64,
}

/// The engine's metrics: each shard's, and their sums.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Metrics {
    /// Every shard, by number.
    pub shards: Vec<ShardMetrics>,
    /// The tier's figures (uploads, backlog, remote polls, cache), with
    /// `Config::tier`.
    pub tier: Option<corelog_tier::TierFigures>,
}

impl Metrics {
    /// Appends stored by every shard.
    pub fn appends(&self) -> u64 {
        self.shards.iter().map(|s| s.appends).sum()
    }

    /// Bytes stored by every shard.
    pub fn appended_bytes(&self) -> u64 {
        self.shards.iter().map(|s| s.appended_bytes).sum()
    }

    /// Writes every shard made on its own thread (slow ones included).
    pub fn writes_inline(&self) -> u64 {
        self.shards.iter().map(|s| s.writes_inline).sum()
    }

    /// Of those, the slow ones, over every shard.
    pub fn writes_inline_slow(&self) -> u64 {
        self.shards.iter().map(|s| s.writes_inline_slow).sum()
    }

    /// Writes every shard handed to its storage ring.
    pub fn writes_by_ring(&self) -> u64 {
        self.shards.iter().map(|s| s.writes_by_ring).sum()
    }

    /// Requests waiting in every shard's queue.
    pub fn queued(&self) -> usize {
        self.shards.iter().map(|s| s.health.queued).sum()
    }

    /// Every shard's append latencies together.
    pub fn append_latency(&self) -> LatencyHistogram {
        LatencyHistogram::sum(self.shards.iter().map(|s| &s.append_latency))
    }

    /// Every shard's `fdatasync` latencies together.
    pub fn sync_latency(&self) -> LatencyHistogram {
        LatencyHistogram::sum(self.shards.iter().map(|s| &s.sync_latency))
    }
}

/// One line per shard: `shard 0: 12 appends (3400000 B, 0 refused, 0 in
/// flight, p50 <= 64µs, p99 <= 512µs), 3 fdatasyncs (p50 <= 2ms, p99 <=
/// 4ms), 12 writes inline (0 slow), 0 by the ring, 7 polls (3400000 B, 0
/// failed), 0 of 4096 queued, Running`.
impl std::fmt::Display for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, s) in self.shards.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            let q = |h: &LatencyHistogram, at| match h.quantile_at_most(at) {
                Some(d) => format!("{d:?}"),
                None => "-".into(),
            };
            let (a, y) = (&s.append_latency, &s.sync_latency);
            write!(
                f,
                "shard {}: {} appends ({} B, {} refused, {} in flight, p50 <= {}, p99 <= {}), {} fdatasyncs (p50 <= {}, p99 <= {}), {} writes inline ({} slow), {} by the ring, {} polls ({} B, {} failed), {} of {} queued, {:?}",
                s.health.shard,
                s.appends,
                s.appended_bytes,
                s.append_errors,
                s.appends_in_flight,
                q(a, 0.5),
                q(a, 0.99),
                y.count(),
                q(y, 0.5),
                q(y, 0.99),
                s.writes_inline,
                s.writes_inline_slow,
                s.writes_by_ring,
                s.polls,
                s.polled_bytes,
                s.poll_errors,
                s.health.queued,
                s.health.capacity,
                s.health.state,
            )?;
        }
        if let Some(t) = &self.tier {
            write!(f, "; {t}")?;
        }
        Ok(())
    }
}

/// A histogram of durations in power-of-two buckets of microseconds (see
/// [`LATENCY_BUCKETS`]): cheap enough to count every append, within a
/// factor of two.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LatencyHistogram {
    buckets: [u64; LATENCY_BUCKETS],
}

impl LatencyHistogram {
    fn sum<'a>(all: impl Iterator<Item = &'a LatencyHistogram>) -> LatencyHistogram {
        let mut sum = LatencyHistogram::default();
        for h in all {
            for (a, b) in sum.buckets.iter_mut().zip(h.buckets) {
                *a += b;
            }
        }
        sum
    }

    /// How many durations were counted.
    pub fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }

    /// The counts, bucket by bucket.
    pub fn buckets(&self) -> &[u64; LATENCY_BUCKETS] {
        &self.buckets
    }

    /// An upper bound of quantile `q` (0.0 to 1.0): the top of the bucket
    /// that holds it, so within twice the true value. `None` when empty.
    pub fn quantile_at_most(&self, q: f64) -> Option<Duration> {
        let count = self.count();
        if count == 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * count as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= rank {
                if i == LATENCY_BUCKETS - 1 {
                    return Some(Duration::MAX);
                }
                return Some(Duration::from_micros(2u64 << i));
            }
        }
        Some(Duration::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_powers_of_two_of_microseconds() {
        let us = Duration::from_micros;
        assert_eq!(bucket_of(Duration::ZERO), 0);
        assert_eq!(bucket_of(us(1)), 0);
        assert_eq!(bucket_of(us(2)), 1);
        assert_eq!(bucket_of(us(3)), 1);
        assert_eq!(bucket_of(us(1000)), 9);
        assert_eq!(bucket_of(Duration::from_secs(86_400)), LATENCY_BUCKETS - 1);
    }

    #[test]
    fn a_quantile_is_the_top_of_the_bucket_holding_it() {
        let mut h = LatencyHistogram::default();
        assert_eq!(h.quantile_at_most(0.5), None);
        h.buckets[3] = 99; // 8-15 µs
        h.buckets[10] = 1; // 1024-2047 µs
        assert_eq!(h.count(), 100);
        assert_eq!(h.quantile_at_most(0.5), Some(Duration::from_micros(16)));
        assert_eq!(h.quantile_at_most(0.99), Some(Duration::from_micros(16)));
        assert_eq!(h.quantile_at_most(1.0), Some(Duration::from_micros(2048)));
        h.buckets[LATENCY_BUCKETS - 1] = 1;
        assert_eq!(h.quantile_at_most(1.0), Some(Duration::MAX));
    }

    #[test]
    fn metrics_print_a_line_per_shard() {
        let c = ShardCounters::new();
        c.append_taken();
        c.append_taken();
        c.append_taken();
        c.append_done(Instant::now(), Some(100));
        c.append_done(Instant::now(), None);
        c.poll_done(Some(100));
        c.sync_done(Duration::from_micros(300));
        c.wrote(WriteWay::Inline);
        c.wrote(WriteWay::InlineSlow);
        c.wrote(WriteWay::Ring);
        c.wrote(WriteWay::Ring);
        c.wrote(WriteWay::Ring);
        let health = ShardHealth {
            shard: 0,
            state: crate::health::ShardState::Running,
            queued: 1,
            capacity: 8,
        };
        let m = Metrics {
            shards: vec![c.read(health)],
            tier: None,
        };
        assert_eq!(m.shards[0].appends_in_flight, 1);
        let text = m.to_string();
        assert!(
            text.starts_with("shard 0: 1 appends (100 B, 1 refused, 1 in flight, p50 <= "),
            "{text}"
        );
        assert!(
            text.ends_with(
                "1 fdatasyncs (p50 <= 512µs, p99 <= 512µs), 2 writes inline (1 slow), 3 by the ring, 1 polls (100 B, 0 failed), 1 of 8 queued, Running"
            ),
            "{text}"
        );
    }
}
