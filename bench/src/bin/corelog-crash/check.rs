//! After a crash: reopen the directory with the engine and check the log
//! against everything sent and acknowledged, append once more, and run
//! `corelog verify`.

use crate::harness::{Harness, Known};
use crate::stream::{decode_id, producer_batch, same_as_produced, MARKER};
use corelog::{Config, Engine, FsyncPolicy, LogConfig, OpenCheck, PollFrom, RequestError};
use std::process::Command;

impl Harness {
    /// Reopens the directory and checks the log against what was sent and
    /// acknowledged; appends one more batch; runs `corelog verify`.
    pub(crate) fn check(&mut self, cycle: u64) -> Result<(), String> {
        self.totals.checks += 1;
        let full = self.rng.bool();
        let engine = Engine::open(Config {
            open_partitions: corelog::OpenPartitions::AtOpen,
            shards: Some(1),
            pin_threads: false,
            log: LogConfig {
                fsync: FsyncPolicy::Batch,
                open_check: if full {
                    OpenCheck::Full
                } else {
                    OpenCheck::Tail
                },
                ..LogConfig::default()
            },
            ..Config::new(&self.dir)
        })
        .map_err(|e| format!("after cycle {cycle}: reopening: {e}"))?;
        let p = self.args.partition;
        for r in engine.recovery() {
            match &r.result {
                Ok(report) => {
                    if report.cut.is_some() {
                        self.totals.cuts += 1;
                    }
                    self.totals.removed_segments += report.removed.len() as u64;
                    if self.args.verbose {
                        println!(
                            "  recovery ({}): {report}",
                            if full { "full" } else { "tail" }
                        );
                    }
                }
                Err(e) => {
                    return Err(format!(
                        "after cycle {cycle}: partition {} cannot be opened: {e}",
                        r.partition
                    ))
                }
            }
        }
        let walked = self.walk(&engine, cycle);
        let next = match walked {
            Ok(next) => next,
            Err(e) => {
                let _ = engine.shutdown();
                return Err(e);
            }
        };
        let marker = producer_batch(cycle, MARKER);
        let ack = engine
            .handle()
            .append(p, marker.clone())
            .wait()
            .map_err(|e| format!("after cycle {cycle}: appending after the reopen: {e}"))?;
        if ack.base_offset != next {
            return Err(format!(
                "after cycle {cycle}: the append after the reopen got offset {}, the log ends at {next}",
                ack.base_offset
            ));
        }
        let reply = pollster_block(engine.handle().poll_verified(
            p,
            PollFrom::Offset(next),
            1 << 20,
        ))
        .map_err(|e| format!("after cycle {cycle}: reading the new batch back: {e}"))?;
        let Some(b) = reply.batches().next() else {
            return Err(format!(
                "after cycle {cycle}: the new batch at {next} is not readable"
            ));
        };
        same_as_produced(b.as_bytes(), &marker, p, next)
            .map_err(|e| format!("after cycle {cycle}: the new batch: {e}"))?;
        self.known.push(Known {
            cycle,
            seq: MARKER,
            base_offset: next,
            base_timestamp: b.base_timestamp(),
        });
        drop(reply);
        engine
            .shutdown()
            .map_err(|e| format!("after cycle {cycle}: closing: {e}"))?;
        let out = Command::new(&self.corelog)
            .arg("verify")
            .arg("--dir")
            .arg(&self.dir)
            .output()
            .map_err(|e| format!("running corelog verify: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "after cycle {cycle}: corelog verify after a clean close: {}\n{}{}",
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(())
    }

    /// Walks the whole log; returns its next offset. Moves the pending
    /// cycles' stored batches into `known`.
    fn walk(&mut self, engine: &Engine, cycle: u64) -> Result<u64, String> {
        let p = self.args.partition;
        let mut next = 0u64;
        let mut last_ts = 0u64;
        let mut index = 0usize; // into known
        let mut pi = 0usize; // into pending
        let mut pseq = 0u64; // next seq expected of pending[pi]
        let mut fresh: Vec<Known> = Vec::new();
        let mut stored_per_pending = vec![0u64; self.pending.len()];
        loop {
            let reply = match pollster_block(engine.handle().poll_verified(
                p,
                PollFrom::Offset(next),
                1 << 20,
            )) {
                Ok(r) => r,
                Err(RequestError::UnknownPartition { .. }) if next == 0 => break,
                Err(e) => return Err(format!("after cycle {cycle}: poll at offset {next}: {e}")),
            };
            if reply.is_empty() {
                break;
            }
            for b in reply.batches() {
                let at = b.base_offset();
                let here = || format!("after cycle {cycle}: the batch at offset {at}");
                if at != next {
                    return Err(format!("{}: offsets jump from {next}", here()));
                }
                if b.base_timestamp() < last_ts {
                    return Err(format!("{}: base_timestamp goes back", here()));
                }
                let (c, seq, _) = b
                    .messages()
                    .next()
                    .map(|m| decode_id(m.id()))
                    .ok_or_else(|| format!("{}: no message", here()))?;
                for (i, m) in b.messages().enumerate() {
                    if decode_id(m.id()) != (c, seq, i as u64) {
                        return Err(format!(
                            "{}: message {i} has a foreign id {:#x}",
                            here(),
                            m.id()
                        ));
                    }
                }
                let produced = producer_batch(c, seq);
                same_as_produced(b.as_bytes(), &produced, p, at)
                    .map_err(|e| format!("{} (cycle {c} batch {seq}): {e}", here()))?;
                let this = Known {
                    cycle: c,
                    seq,
                    base_offset: at,
                    base_timestamp: b.base_timestamp(),
                };
                if index < self.known.len() {
                    if self.known[index] != this {
                        return Err(format!(
                            "{}: expected {:?} (checked before), found {this:?}",
                            here(),
                            self.known[index]
                        ));
                    }
                    index += 1;
                } else {
                    // The next batch of the current pending cycle, or the
                    // first of a later one once this one has every
                    // acknowledged batch.
                    loop {
                        let Some(pc) = self.pending.get(pi) else {
                            return Err(format!(
                                "{}: cycle {c} batch {seq} was never sent, or is out of order or a duplicate",
                                here()
                            ));
                        };
                        if c == pc.cycle && seq == pseq && seq < pc.sent {
                            break;
                        }
                        if pseq < pc.acks.len() as u64 {
                            return Err(format!(
                                "{}: found cycle {c} batch {seq} where acknowledged cycle {} batch {pseq} {:?} belongs: {} acknowledged batches LOST",
                                here(),
                                pc.cycle,
                                pc.acks[pseq as usize],
                                pc.acks.len() as u64 - pseq
                            ));
                        }
                        pi += 1;
                        pseq = 0;
                    }
                    let pc = &self.pending[pi];
                    if let Some(a) = pc.acks.get(seq as usize) {
                        if a.base_offset != at {
                            return Err(format!(
                                "{}: acknowledged as {a:?} but stored at offset {at}",
                                here()
                            ));
                        }
                    }
                    stored_per_pending[pi] += 1;
                    pseq += 1;
                    fresh.push(this);
                }
                last_ts = b.base_timestamp();
                next = b.next_offset();
            }
        }
        if index < self.known.len() {
            let k = self.known[index];
            return Err(format!(
                "after cycle {cycle}: the log ends at offset {next}, before {k:?} (checked before): {} batches LOST",
                self.known.len() - index
            ));
        }
        let mut lost = 0u64;
        let mut detail = String::new();
        for (k, pc) in self.pending.iter().enumerate() {
            let stored = stored_per_pending[k];
            let acked = pc.acks.len() as u64;
            if stored < acked {
                lost += acked - stored;
                detail += &format!(
                    " cycle {}: {acked} acknowledged, {stored} stored (first missing {:?});",
                    pc.cycle, pc.acks[stored as usize]
                );
            }
            self.totals.unacked_kept += stored.saturating_sub(acked);
            self.totals.unacked_gone += pc.sent - stored.max(acked);
        }
        if lost > 0 {
            self.totals.lost += lost;
            return Err(format!(
                "after cycle {cycle}: {lost} acknowledged batches LOST:{detail}"
            ));
        }
        let stats = engine
            .handle()
            .stats(p)
            .wait()
            .map(|s| s.next_offset)
            .or_else(|e| match e {
                RequestError::UnknownPartition { .. } => Ok(0),
                e => Err(e),
            })
            .map_err(|e| format!("after cycle {cycle}: stats: {e}"))?;
        if stats != next {
            return Err(format!(
                "after cycle {cycle}: stats say the log ends at {stats}, polls at {next}"
            ));
        }
        self.known.extend(fresh);
        self.pending.clear();
        Ok(next)
    }
}

/// Runs a future to completion on this thread.
fn pollster_block<F: std::future::Future>(f: F) -> F::Output {
    use std::task::{Context, Poll, Wake, Waker};
    struct Thread(std::thread::Thread);
    impl Wake for Thread {
        fn wake(self: std::sync::Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(std::sync::Arc::new(Thread(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut f = std::pin::pin!(f);
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::park();
    }
}
