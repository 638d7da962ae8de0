//! `check`: recovers a power-cut image's data directory with the engine and
//! checks every partition against the journal, then appends once more.

use crate::args::CheckArgs;
use crate::journal::{self, PartitionJournal};
use crate::raw::{self, RawPartition};
use crate::stream::{decode_id, producer_batch, same_as_produced, MARKER};
use corelog::{Engine, FsyncPolicy, PollFrom, RequestError};
use std::process::ExitCode;
use std::time::Duration;

/// What one partition held.
#[derive(Debug, Default)]
struct Tally {
    /// Acknowledged before the clone.
    acked_before: u64,
    /// Of those, the ones the policy makes durable (must survive).
    required: u64,
    /// Required and missing.
    lost: u64,
    /// Acknowledged before the clone, not required, and missing.
    unrequired_gone: u64,
    /// Batches in the log after recovery.
    stored: u64,
    /// Partitions that refused to open.
    refused: u64,
    /// The first and last lost batch, and how long before the clone each
    /// was acknowledged (ns; negative: after the clone's time stamp).
    lost_span: Option<((u64, i64), (u64, i64))>,
}

impl Tally {
    fn add(&mut self, o: &Tally) {
        self.acked_before += o.acked_before;
        self.required += o.required;
        self.lost += o.lost;
        self.unrequired_gone += o.unrequired_gone;
        self.stored += o.stored;
        self.refused += o.refused;
    }
}

pub(crate) fn run(a: &CheckArgs) -> ExitCode {
    let mut total = Tally::default();
    let result = check(a, &mut total);
    println!(
        "corelog-powercut check {}: fsync={} acked-before-clone={} required={} present-after-recovery={} LOST={} (not required and gone: {}) partitions-refused={}",
        a.label,
        a.common.fsync,
        total.acked_before,
        total.required,
        total.stored,
        total.lost,
        total.unrequired_gone,
        total.refused
    );
    match result {
        Err(e) => {
            eprintln!("corelog-powercut check {}: FAIL: {e}", a.label);
            ExitCode::from(2)
        }
        Ok(()) if total.lost > 0 => ExitCode::from(1),
        Ok(()) => ExitCode::SUCCESS,
    }
}

fn check(a: &CheckArgs, total: &mut Tally) -> Result<(), String> {
    let journal = journal::read(&a.common.journal, a.upto)?;
    // The files as the power cut left them, before recovery changes them:
    // what explains a loss.
    let raws: Vec<RawPartition> = (1..=a.common.partitions)
        .map(|p| raw::read(&a.common.dir, p, 4))
        .collect();
    // Appends after recovery are durable ones whatever the writer used.
    let engine = Engine::open(a.common.config(FsyncPolicy::Batch))
        .map_err(|e| format!("opening {}: {e}", a.common.dir.display()))?;
    let result = check_partitions(a, &engine, &journal, &raws, total);
    let shutdown = engine.shutdown();
    result?;
    shutdown.map_err(|e| format!("closing after the check: {e}"))
}

fn check_partitions(
    a: &CheckArgs,
    engine: &Engine,
    journal: &std::collections::BTreeMap<u64, PartitionJournal>,
    raws: &[RawPartition],
    total: &mut Tally,
) -> Result<(), String> {
    let empty = PartitionJournal::default();
    for p in 1..=a.common.partitions {
        let pj = journal.get(&p).unwrap_or(&empty);
        let refused = engine
            .recovery()
            .iter()
            .find(|r| r.partition == p)
            .and_then(|r| r.result.as_ref().err());
        let mut t = Tally::default();
        if let Some(e) = refused {
            if a.clean || a.common.fsync == FsyncPolicy::Batch {
                return Err(format!("partition {p} refused to open: {e}"));
            }
            // The unsynced control: a refusal loses what it holds.
            eprintln!(
                "corelog-powercut check {}: partition {p} refused to open: {e}",
                a.label
            );
            t.refused = 1;
            tally_losses(a, pj, 0, &mut t);
            total.add(&t);
            continue;
        }
        let next = walk(engine, p, pj, &mut t)?;
        tally_losses(a, pj, t.stored, &mut t);
        // The unsynced control loses by design: only a durable policy's
        // loss needs explaining.
        let durable = a.common.fsync != FsyncPolicy::Never || a.clean;
        if let Some(((first, first_ns), (last, last_ns))) = t.lost_span.filter(|_| durable) {
            // What a loss needs to be explained: where the log ends, what
            // recovery did to it, and when the lost batches were acknowledged.
            let recovery = engine.recovery().iter().find(|r| r.partition == p).map_or(
                "no recovery report".to_string(),
                |r| match &r.result {
                    Ok(report) => report.to_string(),
                    Err(e) => e.to_string(),
                },
            );
            let recovery: String = recovery.chars().take(2000).collect();
            eprintln!(
                "corelog-powercut check {}: partition {p} LOST {} batches, {first}..={last} (acknowledged {:.3} ms and {:.3} ms before the clone); the log holds {} batches; recovery: {recovery}",
                a.label,
                t.lost,
                first_ns as f64 / 1e6,
                last_ns as f64 / 1e6,
                t.stored
            );
            if let Some(raw) = raws.get((p - 1) as usize) {
                eprintln!("    before recovery: {}", raw::listing(raw));
                let seqs: std::collections::BTreeSet<u64> = [first, last]
                    .into_iter()
                    .chain((first + 1..last).take(2))
                    .collect();
                for seq in seqs {
                    eprintln!("    {}", raw::describe(raw, p, seq));
                }
            }
        }
        append_after(engine, p, next)?;
        total.add(&t);
    }
    Ok(())
}

/// Counts the acknowledgements before the clone that are missing when the
/// log holds the first `stored` batches.
fn tally_losses(a: &CheckArgs, pj: &PartitionJournal, stored: u64, t: &mut Tally) {
    let required_before = match a.common.fsync {
        _ if a.clean => u64::MAX,
        FsyncPolicy::Batch | FsyncPolicy::Never => u64::MAX,
        FsyncPolicy::Interval(ms) => {
            let grace = (ms + Duration::from_millis(a.slack_ms)).as_nanos() as u64;
            a.clone_ns.saturating_sub(grace)
        }
    };
    for ack in pj.acks.values().filter(|k| k.before_clone || a.clean) {
        t.acked_before += 1;
        let required = ack.at_ns <= required_before;
        t.required += u64::from(required);
        if ack.seq >= stored {
            if required {
                t.lost += 1;
                let at = (ack.seq, a.clone_ns as i64 - ack.at_ns as i64);
                t.lost_span = Some(t.lost_span.map_or((at, at), |(first, _)| (first, at)));
            } else {
                t.unrequired_gone += 1;
            }
        }
    }
}

/// Walks partition `p`'s log: batch `i` must be producer batch `(p, i)`
/// stamped at the next offset, and where it was acknowledged, at the offset
/// and with the digest the journal gives. Returns the log's next offset.
fn walk(engine: &Engine, p: u64, pj: &PartitionJournal, t: &mut Tally) -> Result<u64, String> {
    let mut next = 0u64;
    let mut seq = 0u64;
    loop {
        let reply = match engine
            .handle()
            .poll_verified(p, PollFrom::Offset(next), 1 << 20)
            .wait()
        {
            Ok(r) => r,
            Err(RequestError::UnknownPartition { .. }) if next == 0 => break,
            Err(e) => return Err(format!("partition {p}: poll at offset {next}: {e}")),
        };
        if reply.is_empty() {
            break;
        }
        for b in reply.batches() {
            let here = format!("partition {p}: the batch at offset {}", b.base_offset());
            if b.base_offset() != next {
                return Err(format!("{here}: offsets jump from {next}"));
            }
            for (i, m) in b.messages().enumerate() {
                if decode_id(m.id()) != (p, seq, i as u64) {
                    return Err(format!(
                        "{here}: message {i} is {:?}, expected (partition, batch, index) = {:?}: not a prefix of what was sent",
                        decode_id(m.id()),
                        (p, seq, i)
                    ));
                }
            }
            let produced = producer_batch(p, seq);
            same_as_produced(b.as_bytes(), &produced, p, next)
                .map_err(|e| format!("{here} (batch {seq}): {e}"))?;
            if let Some(ack) = pj.acks.get(&seq) {
                let digest = xxhash_rust::xxh3::xxh3_64(&produced);
                if ack.base_offset != next || ack.digest != digest {
                    return Err(format!(
                        "{here} (batch {seq}): acknowledged at offset {} with digest {:016x}, stored at {next} with {digest:016x}",
                        ack.base_offset, ack.digest
                    ));
                }
            }
            next = b.next_offset();
            seq += 1;
        }
    }
    if let Some(sent) = pj.sent {
        if seq > sent {
            return Err(format!("partition {p}: {seq} batches stored, {sent} sent"));
        }
    }
    let stats = match engine.handle().stats(p).wait() {
        Ok(s) => s.next_offset,
        Err(RequestError::UnknownPartition { .. }) => 0,
        Err(e) => return Err(format!("partition {p}: stats: {e}")),
    };
    if stats != next {
        return Err(format!(
            "partition {p}: stats say the log ends at {stats}, polls at {next}"
        ));
    }
    t.stored = seq;
    Ok(next)
}

/// Appends one more batch to `p`: it takes offset `next` and reads back
/// byte-exact.
fn append_after(engine: &Engine, p: u64, next: u64) -> Result<(), String> {
    let marker = producer_batch(p, MARKER);
    let ack = engine
        .handle()
        .append(p, marker.clone())
        .wait()
        .map_err(|e| format!("partition {p}: appending after recovery: {e}"))?;
    if ack.base_offset != next {
        return Err(format!(
            "partition {p}: the append after recovery got offset {}, the log ends at {next}",
            ack.base_offset
        ));
    }
    let reply = engine
        .handle()
        .poll_verified(p, PollFrom::Offset(next), 1 << 20)
        .wait()
        .map_err(|e| format!("partition {p}: reading the new batch back: {e}"))?;
    let b = reply
        .batches()
        .next()
        .ok_or_else(|| format!("partition {p}: the new batch at {next} is not readable"))?;
    same_as_produced(b.as_bytes(), &marker, p, next)
        .map_err(|e| format!("partition {p}: the new batch: {e}"))
}
