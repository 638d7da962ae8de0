//! Consumers: OS threads outside the shards, polling through `Handle` the
//! way a server's connection threads do, and serving each reply through a
//! socket (see `sink`). Consumers stay off the shards even with
//! `--on-shard`: a socket write blocks while the client is behind, and a
//! shard must never block.
//!
//! Consumer `c` reads the partitions `p` with `p % consumers == c` from
//! offset 0 until each reaches its target (known once producers are done),
//! verifying every batch first unless `--no-verify`: a consumer stream
//! (`Handle::consume`) per partition, the thread's streams driven together.
//! A poll's latency is from asking for the next reply to having it: with
//! `--tail` (every partition's stream waiting at once), the wait for data
//! and the other partitions' replies handled meanwhile included.

use crate::args::Args;
use crate::clock::now_micros;
use crate::live::Live;
use crate::live::Totals;
use crate::report::{histogram, Phase};
use crate::sink::{Moved, Sink};
use corelog::{Handle, PollReply};
use futures::StreamExt;
use hdrhistogram::Histogram;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What a consumer measured.
#[derive(Debug)]
pub struct ConsumerResult {
    pub phase: Phase,
    pub end_to_end: Histogram<u64>,
    /// Bytes through its socket, if it served polls.
    pub moved: Option<Moved>,
    pub error: Option<String>,
}

/// Polls `partitions` to their ends on the calling thread.
pub fn run(
    handle: Handle,
    partitions: Vec<u64>,
    args: Arc<Args>,
    live: Arc<Live>,
    totals: Arc<Totals>,
) -> ConsumerResult {
    let mut out = ConsumerResult {
        phase: Phase::new("poll"),
        end_to_end: histogram(),
        moved: None,
        error: None,
    };
    let mut sink = match Sink::open(args.serve, args.drain) {
        Ok(s) => s,
        Err(e) => {
            out.error = Some(format!("open a {} to serve polls: {e}", args.serve));
            return out;
        }
    };
    if let Err(e) = poll_all(
        &handle,
        &partitions,
        &args,
        &live,
        &totals,
        &mut sink,
        &mut out,
    ) {
        out.error = Some(e);
    }
    if let Some(s) = sink {
        match s.close() {
            Ok(m) => out.moved = Some(m),
            Err(e) => out.error = out.error.take().or(Some(format!("serving polls: {e}"))),
        }
    }
    out
}

/// How long a consumer's poll waits on its shard for data before it
/// checks whether its partitions are done.
const MAX_WAIT: Duration = Duration::from_millis(10);

/// Reads every partition of `partitions` to its target through a consumer
/// stream each (`Handle::consume`: long polls, so a caught-up partition
/// waits on its shard instead of being polled in a loop), driven on this
/// thread.
fn poll_all(
    handle: &Handle,
    partitions: &[u64],
    args: &Args,
    live: &Live,
    totals: &Totals,
    sink: &mut Option<Sink>,
    out: &mut ConsumerResult,
) -> Result<(), String> {
    let limits = handle.limits();
    let streams = partitions.iter().map(|&p| {
        let consumer = handle
            .consume(p, 0, args.poll_bytes)
            .max_wait(MAX_WAIT)
            .yield_empty();
        // Ends once the partition's target (known when the producers are
        // done) is read.
        futures::stream::unfold(consumer, move |mut c| async move {
            if totals.target(p).is_some_and(|t| c.next_offset() >= t) {
                return None;
            }
            let started = Instant::now();
            let item = c.next().await?;
            Some(((p, started, item), c))
        })
        .boxed()
    });
    // Tailing, every partition's stream waits at once and replies are
    // handled as they land; reading back what was appended, one partition
    // after another, one poll in flight (a poll's latency is then its own).
    let mut all = if args.tail {
        futures::stream::select_all(streams).boxed()
    } else {
        futures::stream::iter(streams).flatten().boxed()
    };
    futures::executor::block_on(async {
        while let Some((p, started, item)) = all.next().await {
            let reply = item.map_err(|e| format!("poll partition {p}: {e}"))?;
            let got = Instant::now();
            if reply.is_empty() {
                continue;
            }
            if !args.no_verify {
                reply
                    .verify(&limits)
                    .map_err(|e| format!("verify partition {p}: {e}"))?;
            }
            if let Some(s) = sink.as_mut() {
                s.send(&mut reply.io_slices())
                    .map_err(|e| format!("serve partition {p}: {e}"))?;
            }
            record(out, &reply, got - started);
            live.polled.fetch_add(reply.len(), Ordering::Relaxed);
        }
        Ok(())
    })
}

fn record(out: &mut ConsumerResult, reply: &PollReply, waited: Duration) {
    let now = now_micros();
    let mut messages = 0u64;
    for b in reply.batches() {
        messages += u64::from(b.message_count());
        let _ = out
            .end_to_end
            .record(now.saturating_sub(b.origin_timestamp()).max(1) * 1000);
    }
    let _ = out.phase.latency.record(waited.as_nanos() as u64);
    out.phase.bytes += reply.len();
    out.phase.messages += messages;
    out.phase.batches += reply.batch_count() as u64;
}
