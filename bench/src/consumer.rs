//! Consumers: OS threads outside the shards, polling through `Handle` the
//! way a server's connection threads do, and serving each reply through a
//! socket (see `sink`). Consumers stay off the shards even with
//! `--on-shard`: a socket write blocks while the client is behind, and a
//! shard must never block.
//!
//! Consumer `c` reads the partitions `p` with `p % consumers == c` from
//! offset 0 until each reaches its target (known once producers are done),
//! verifying every batch first unless `--no-verify`.

use crate::args::Args;
use crate::clock::now_micros;
use crate::live::Live;
use crate::live::Totals;
use crate::report::{histogram, Phase};
use crate::sink::{Moved, Sink};
use corelog::{Handle, PollFrom, PollReply};
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
    let mut next: Vec<u64> = vec![0; partitions.len()];
    let mut done = vec![false; partitions.len()];
    while !done.iter().all(|d| *d) {
        let mut progressed = false;
        for (k, &p) in partitions.iter().enumerate() {
            if done[k] {
                continue;
            }
            let started = Instant::now();
            let reply = match handle
                .poll(p, PollFrom::Offset(next[k]), args.poll_bytes)
                .wait()
            {
                Ok(r) => r,
                Err(corelog::RequestError::UnknownPartition { .. }) if args.tail => continue,
                Err(e) => return Err(format!("poll partition {p}: {e}")),
            };
            let got = Instant::now();
            if reply.is_empty() {
                if totals.target(p).is_some_and(|t| next[k] >= t) {
                    done[k] = true;
                }
                continue;
            }
            progressed = true;
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
            next[k] = reply.next_offset();
        }
        if !progressed {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    Ok(())
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
