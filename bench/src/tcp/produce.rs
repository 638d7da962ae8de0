//! Producer lanes of a TCP run: one thread and one connection each, one
//! request in flight (as Iggy's SDK sends).
//!
//! Closed loop (no `--rate`): a lane sends when its previous send is
//! acknowledged, and latency counts from the send. Open loop (`--rate`):
//! every lane has its own schedule at an equal share of the rate, the
//! lanes' first slots staggered over one interval so that sends across
//! lanes are spaced evenly; a lane sleeps until its next batch is due, and
//! latency counts from that due time, so a batch a slow reply held back is
//! charged its wait (no coordinated omission).

use super::client::Client;
use super::shared::{named, Shared, STREAM, TOPIC};
use crate::report::Phase;
use crate::schedule::Schedule;
use bytes::BytesMut;
use iggy_binary_protocol::codec::WireEncode;
use iggy_binary_protocol::codes::SEND_MESSAGES_CODE;
use iggy_binary_protocol::requests::messages::SendMessagesHeader;
use iggy_binary_protocol::WirePartitioning;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// One lane's part of the run.
pub struct Lane {
    /// Its connection, signed in before the run's clock starts.
    pub client: Client,
    /// The partitions it sends to, round robin.
    pub parts: Vec<u32>,
    /// Its pre-built batches.
    pub pool: Vec<BytesMut>,
    pub per_batch: u32,
    /// Bytes per second and the first due time, if open loop.
    pub pace: Option<(f64, Instant)>,
}

/// What a lane measured.
#[derive(Debug)]
pub struct Produced {
    pub phase: Phase,
    pub last_ack: Option<Instant>,
    /// The furthest a measured send started behind its due time.
    pub max_lag: Duration,
}

/// The rate of each of `lanes` lanes sharing `mb_per_s` (10^6 bytes/s),
/// and lane `i`'s first due time: `go_at` plus its share of one interval
/// between its batches of `batch_len` bytes.
pub fn pace(
    mb_per_s: f64,
    lanes: usize,
    i: usize,
    batch_len: u64,
    go_at: Instant,
) -> (f64, Instant) {
    let lanes = lanes.max(1);
    let rate = mb_per_s * 1e6 / lanes as f64;
    let interval = batch_len as f64 / rate;
    let offset = interval * i as f64 / lanes as f64;
    (rate, go_at + Duration::from_secs_f64(offset.max(0.0)))
}

/// The SEND_MESSAGES prefix for `partition`: `[metadata_length]` + metadata.
fn send_prefix(partition: u32, messages: u32) -> Result<Vec<u8>, String> {
    let header = SendMessagesHeader {
        stream_id: named(STREAM)?,
        topic_id: named(TOPIC)?,
        partitioning: WirePartitioning::PartitionId(partition),
        messages_count: messages,
    };
    let meta = header.to_bytes();
    let mut out = (meta.len() as u32).to_le_bytes().to_vec();
    out.extend_from_slice(&meta);
    Ok(out)
}

/// Sleeps until `at` (or the run stops); returns whether it stopped.
fn wait_until(s: &Shared, at: Instant) -> bool {
    loop {
        if s.live.stop.load(Ordering::Relaxed) {
            return true;
        }
        let now = Instant::now();
        if now >= at {
            return false;
        }
        // In steps, so a stop is seen within 50 ms whatever the rate.
        std::thread::sleep((at - now).min(Duration::from_millis(50)));
    }
}

/// Runs one lane: sends its pool's batches round robin over its partitions
/// until the budget is spent or the run stops.
pub fn produce(s: &Shared, lane: Lane) -> Result<Produced, String> {
    let _ = crate::schedule::precise_sleeps();
    let mut client = lane.client;
    let prefixes: Vec<Vec<u8>> = lane
        .parts
        .iter()
        .map(|p| send_prefix(*p, lane.per_batch))
        .collect::<Result<_, _>>()?;
    let mut out = Produced {
        phase: Phase::new("append"),
        last_ack: None,
        max_lag: Duration::ZERO,
    };
    let (rate, first) = match lane.pace {
        Some((rate, first)) => (Some(rate), first),
        None => (None, s.go_at),
    };
    let mut schedule = Schedule::new(rate, first);
    if wait_until(s, s.go_at) {
        return Ok(out);
    }
    for n in 0usize.. {
        let batch = &lane.pool[n % lane.pool.len()];
        let len = batch.len() as u64;
        if wait_until(s, schedule.peek(Instant::now())) {
            break;
        }
        let started = Instant::now();
        let due = schedule.take(len, started);
        // A batch belongs to the measured window by when it was due.
        let measured = due >= s.measure_from;
        if measured {
            if let Some(total) = s.total {
                if s.live.claimed.fetch_add(len, Ordering::Relaxed) >= total {
                    break;
                }
            }
        }
        let k = n % lane.parts.len();
        client
            .call(SEND_MESSAGES_CODE, &[&prefixes[k], batch])
            .map_err(|e| {
                s.live.stop.store(true, Ordering::Relaxed);
                format!("send to partition {}: {e}", lane.parts[k])
            })?;
        let acked = Instant::now();
        s.sent[lane.parts[k] as usize].fetch_add(u64::from(lane.per_batch), Ordering::Relaxed);
        s.live.appended.fetch_add(len, Ordering::Relaxed);
        if measured {
            let phase = &mut out.phase;
            let _ = phase
                .latency
                .record(acked.saturating_duration_since(due).as_nanos().max(1) as u64);
            phase.bytes += len;
            phase.messages += u64::from(lane.per_batch);
            phase.batches += 1;
            out.last_ack = Some(acked);
            out.max_lag = out.max_lag.max(started.saturating_duration_since(due));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lanes_share_the_rate_and_stagger_over_one_interval() {
        let t0 = Instant::now();
        // 4 lanes at 4 MB/s: 1 MB/s each; 1000-byte batches every 1 ms,
        // lane i starting i/4 ms in.
        let (rate, first) = pace(4.0, 4, 0, 1000, t0);
        assert_eq!(rate, 1e6);
        assert_eq!(first, t0);
        let (_, third) = pace(4.0, 4, 2, 1000, t0);
        assert_eq!(third - t0, Duration::from_micros(500));
    }
}
