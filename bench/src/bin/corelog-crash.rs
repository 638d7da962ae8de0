//! `corelog-crash`: kills `corelog append --fsync batch` at random moments
//! and proves that nothing it acknowledged is ever lost.
//!
//! Every cycle starts `corelog append` on the same data directory, feeds it
//! a deterministic stream of producer batches (message ids say cycle,
//! sequence and index, so every stored batch names what it is), reads its
//! JSON acknowledgements and SIGKILLs it at a random moment: while it opens
//! (and recovers) the directory, mid-stream with writes and syncs in
//! flight, or idle. Then (in most cycles; in the others the next child
//! recovers the crashed directory itself) the directory is reopened with
//! [`corelog::Engine`] and checked:
//!
//! * every acknowledged batch is there, at the offset its acknowledgement
//!   gave, byte for byte (the producer's frames and header fields, the
//!   stamped `partition_id`, `base_offset`, and the `base_timestamp` and
//!   checksum seen the first time it was read);
//! * the log is the batches checked before, then a prefix of what each
//!   cycle since sent, in order: nothing reordered, duplicated or never
//!   sent; offsets continuous, timestamps never going back;
//! * appends go on: one more batch takes the next offset;
//! * after that clean close, `corelog verify` finds the directory sound.
//!
//! The seed drives every choice (stream, segment sizes, kill moments) and
//! is printed first; the timing of the kills is the machine's.
//!
//! ```text
//! corelog-crash --cycles 1000 [--seed S] [--dir DIR] [--corelog PATH]
//! ```

use clap::Parser;
use corelog::{
    BatchBuilder, Config, Engine, FsyncPolicy, LogConfig, MessageSpec, PollFrom, RequestError,
};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Parser, Debug)]
#[command(
    name = "corelog-crash",
    about = "SIGKILL `corelog append` at random moments; check nothing acknowledged is lost"
)]
struct Args {
    /// Crash cycles to run.
    #[arg(long, default_value_t = 20)]
    cycles: u64,
    /// Seed of every random choice (default: from the clock; printed).
    #[arg(long)]
    seed: Option<u64>,
    /// Data directory (default: a new temporary one, removed on success).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// The corelog binary (default: next to this one).
    #[arg(long)]
    corelog: Option<PathBuf>,
    /// The partition appended to.
    #[arg(long, default_value_t = 7)]
    partition: u64,
    /// Most batches fed to one child.
    #[arg(long, default_value_t = 200)]
    max_batches: u64,
    /// Print a line per cycle.
    #[arg(long)]
    verbose: bool,
}

/// The sequence number of the batch the checker appends after a reopen.
const MARKER: u64 = u32::MAX as u64;

/// A child that makes no progress this long is hung: a failure.
const STALL: Duration = Duration::from_secs(120);

fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

fn message_id(cycle: u64, seq: u64, index: u64) -> u128 {
    (u128::from(cycle) << 64) | (u128::from(seq) << 32) | u128::from(index)
}

/// `(cycle, seq, index)` from a message id.
fn decode_id(id: u128) -> (u64, u64, u64) {
    (
        (id >> 64) as u64,
        ((id >> 32) & 0xffff_ffff) as u64,
        (id & 0xffff_ffff) as u64,
    )
}

/// Producer batch `seq` of cycle `cycle`: 1 to 4 messages of 0 to 400
/// bytes, every byte a function of `(cycle, seq)`.
fn producer_batch(cycle: u64, seq: u64) -> Vec<u8> {
    let h = mix(cycle.wrapping_mul(1_000_003) ^ mix(seq));
    let count = 1 + h % 4;
    let payloads: Vec<Vec<u8>> = (0..count)
        .map(|i| {
            let hi = mix(h ^ i);
            let len = (hi % 401) as usize;
            (0..len)
                .map(|j| (hi >> (j % 8 * 8)) as u8 ^ j as u8)
                .collect()
        })
        .collect();
    let mut b = BatchBuilder::new();
    for (i, p) in payloads.iter().enumerate() {
        b.push(MessageSpec {
            id: message_id(cycle, seq, i as u64),
            timestamp: 1_700_000_000_000_000 + cycle * 1_000_000 + seq * 10 + i as u64,
            payload: p,
            user_headers: if (h >> 40).is_multiple_of(3) {
                b"crash=1"
            } else {
                b""
            },
        });
    }
    b.build().expect("a valid producer batch")
}

/// One acknowledgement line of `corelog append`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Ack {
    base_offset: u64,
    messages: u64,
    bytes: u64,
}

fn parse_ack(line: &str, partition: u64) -> Result<Ack, String> {
    let v: serde_json::Value =
        serde_json::from_str(line).map_err(|e| format!("ack line {line:?}: {e}"))?;
    let o = v
        .as_object()
        .ok_or_else(|| format!("ack line {line:?} is not an object"))?;
    let field = |k: &str| {
        o.get(k)
            .and_then(|x| x.as_u64())
            .ok_or_else(|| format!("ack line {line:?} lacks {k}"))
    };
    if o.len() != 4 || field("partition")? != partition {
        return Err(format!(
            "ack line {line:?} is not for partition {partition}"
        ));
    }
    Ok(Ack {
        base_offset: field("base_offset")?,
        messages: field("messages")?,
        bytes: field("bytes")?,
    })
}

/// A batch already checked in the log: it must stay exactly so.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Known {
    cycle: u64,
    seq: u64,
    base_offset: u64,
    base_timestamp: u64,
}

/// A cycle whose child ran since the last check.
#[derive(Debug)]
struct Pending {
    cycle: u64,
    /// Batches written whole to the child's stdin (at most these can be
    /// stored).
    sent: u64,
    acks: Vec<Ack>,
}

#[derive(Debug, Default)]
struct Totals {
    cycles: u64,
    kills_early: u64,
    kills_mid: u64,
    clean_exits: u64,
    sent: u64,
    acked: u64,
    unacked_kept: u64,
    unacked_gone: u64,
    lost: u64,
    checks: u64,
    cuts: u64,
    removed_segments: u64,
}

/// How a cycle's child ends.
#[derive(Debug, Clone, Copy)]
enum End {
    /// SIGKILL this long after it started, whatever it did.
    Early(Duration),
    /// SIGKILL once it acknowledged this many batches, then a short while.
    AfterAcks(u64, Duration),
    /// Close its stdin and let it finish.
    Clean,
}

struct Harness {
    args: Args,
    corelog: PathBuf,
    dir: PathBuf,
    rng: fastrand::Rng,
    known: Vec<Known>,
    pending: Vec<Pending>,
    totals: Totals,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1)
    });
    println!("corelog-crash: seed {seed} (replay the choices with --seed {seed})");
    let corelog = match &args.corelog {
        Some(p) => p.clone(),
        None => match std::env::current_exe() {
            Ok(exe) => exe.with_file_name("corelog"),
            Err(e) => {
                eprintln!("corelog-crash: cannot find my own path: {e}");
                return ExitCode::FAILURE;
            }
        },
    };
    if !corelog.is_file() {
        eprintln!(
            "corelog-crash: no corelog binary at {} (build it: cargo build -p corelog --bin corelog, or pass --corelog)",
            corelog.display()
        );
        return ExitCode::FAILURE;
    }
    let (tmp, dir) = match &args.dir {
        Some(d) => (None, d.clone()),
        None => match tempfile::Builder::new().prefix("corelog-crash.").tempdir() {
            Ok(t) => {
                let p = t.path().to_path_buf();
                (Some(t), p)
            }
            Err(e) => {
                eprintln!("corelog-crash: cannot make a temporary directory: {e}");
                return ExitCode::FAILURE;
            }
        },
    };
    println!(
        "corelog-crash: {} cycles on {} with {}",
        args.cycles,
        dir.display(),
        corelog.display()
    );
    let mut h = Harness {
        rng: fastrand::Rng::with_seed(seed),
        corelog,
        dir,
        args,
        known: Vec::new(),
        pending: Vec::new(),
        totals: Totals::default(),
    };
    let started = Instant::now();
    let result = h.run();
    let t = &h.totals;
    println!(
        "corelog-crash: {} cycles ({} killed while starting, {} killed mid-stream, {} clean exits), {} checks ({} tail cuts, {} segments removed); batches: {} sent, {} acknowledged, {} unacknowledged kept, {} unacknowledged gone, {} LOST; {:.1} s; seed {seed}",
        t.cycles,
        t.kills_early,
        t.kills_mid,
        t.clean_exits,
        t.checks,
        t.cuts,
        t.removed_segments,
        t.sent,
        t.acked,
        t.unacked_kept,
        t.unacked_gone,
        t.lost,
        started.elapsed().as_secs_f64()
    );
    match result {
        Ok(()) => {
            drop(tmp);
            println!("corelog-crash: PASS: nothing acknowledged was lost");
            ExitCode::SUCCESS
        }
        Err(e) => {
            if let Some(t) = tmp {
                // Keep the evidence.
                let kept = t.keep();
                eprintln!("corelog-crash: data directory kept at {}", kept.display());
            }
            eprintln!("corelog-crash: FAIL (seed {seed}): {e}");
            ExitCode::FAILURE
        }
    }
}

impl Harness {
    fn run(&mut self) -> Result<(), String> {
        for cycle in 0..self.args.cycles {
            self.cycle(cycle)?;
            self.totals.cycles += 1;
            let last = cycle + 1 == self.args.cycles;
            if last || self.rng.u32(0..4) != 0 {
                self.check(cycle)?;
            }
            if !self.args.verbose && (cycle + 1) % 100 == 0 {
                println!(
                    "corelog-crash: {} cycles, {} batches in the log, {} acknowledged, 0 lost",
                    cycle + 1,
                    self.known.len(),
                    self.totals.acked
                );
            }
        }
        Ok(())
    }

    /// Runs one child and ends it; records what it acknowledged.
    fn cycle(&mut self, cycle: u64) -> Result<(), String> {
        let n = self.rng.u64(1..=self.args.max_batches);
        let segment_bytes = match self.rng.u32(0..6) {
            0..=2 => None,
            3 => Some(4096),
            4 => Some(16 << 10),
            _ => Some(self.rng.u64(2048..=65536)),
        };
        let end = match self.rng.u32(0..20) {
            0..=1 => End::Early(Duration::from_micros(self.rng.u64(0..30_000))),
            2 => End::Clean,
            _ => End::AfterAcks(
                self.rng.u64(0..=n),
                Duration::from_micros(self.rng.u64(0..3_000)),
            ),
        };
        let bursts = self.rng.u64(1..=16);
        let pause = Duration::from_micros(self.rng.u64(0..=500));

        let mut cmd = Command::new(&self.corelog);
        cmd.arg("append")
            .arg("--dir")
            .arg(&self.dir)
            .arg("--partition")
            .arg(self.args.partition.to_string())
            .arg("--fsync")
            .arg("batch");
        if let Some(s) = segment_bytes {
            cmd.arg("--segment-bytes").arg(s.to_string());
        }
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| {
                format!(
                    "cycle {cycle}: cannot start {}: {e}",
                    self.corelog.display()
                )
            })?;
        let started = Instant::now();
        let (stdin, stdout, stderr) =
            match (child.stdin.take(), child.stdout.take(), child.stderr.take()) {
                (Some(i), Some(o), Some(e)) => (i, o, e),
                _ => return Err(format!("cycle {cycle}: child without pipes")),
            };
        let close_stdin = matches!(end, End::Clean);
        let stop = Arc::new(AtomicBool::new(false));
        let writer = {
            let stop = stop.clone();
            std::thread::spawn(move || feed(stdin, cycle, n, bursts, pause, close_stdin, stop))
        };
        let (tx, rx) = mpsc::channel::<Result<Ack, String>>();
        let partition = self.args.partition;
        let reader = std::thread::spawn(move || read_acks(stdout, partition, tx));
        let errors = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = BufReader::new(stderr).read_to_string(&mut s);
            s
        });

        let mut acks: Vec<Ack> = Vec::new();
        let mut failure: Option<String> = None;
        let mut exited = None;
        match end {
            End::Early(after) => {
                std::thread::sleep(after);
                self.totals.kills_early += 1;
            }
            End::AfterAcks(k, after) => {
                let mut last = Instant::now();
                while (acks.len() as u64) < k {
                    match rx.recv_timeout(Duration::from_millis(100)) {
                        Ok(Ok(a)) => {
                            acks.push(a);
                            last = Instant::now();
                        }
                        Ok(Err(e)) => {
                            failure = Some(e);
                            break;
                        }
                        Err(mpsc::RecvTimeoutError::Timeout) => {
                            if let Ok(Some(status)) = child.try_wait() {
                                exited = Some(status);
                                break;
                            }
                            if last.elapsed() > STALL {
                                failure = Some(format!(
                                    "cycle {cycle}: no acknowledgement for {STALL:?} after {} of {n}: the child hangs",
                                    acks.len()
                                ));
                                break;
                            }
                        }
                        Err(mpsc::RecvTimeoutError::Disconnected) => break,
                    }
                }
                spin(after);
                self.totals.kills_mid += 1;
            }
            End::Clean => {}
        }
        let status = match end {
            End::Clean => {
                wait_with_deadline(&mut child, STALL).map_err(|e| format!("cycle {cycle}: {e}"))?
            }
            _ => {
                let _ = child.kill();
                child
                    .wait()
                    .map_err(|e| format!("cycle {cycle}: waiting for the child: {e}"))?
            }
        };
        stop.store(true, Ordering::SeqCst);
        let sent = writer.join().unwrap_or(0);
        let _ = reader.join();
        let stderr = errors.join().unwrap_or_default();
        for a in rx.try_iter() {
            match a {
                Ok(a) => acks.push(a),
                Err(e) => {
                    failure.get_or_insert(e);
                }
            }
        }
        if let Some(e) = failure {
            return Err(format!("{e}\nchild stderr:\n{stderr}"));
        }
        if let Some(status) = exited {
            return Err(format!(
                "cycle {cycle}: the child exited by itself ({status}) before it was killed; stderr:\n{stderr}"
            ));
        }
        if matches!(end, End::Clean) {
            self.totals.clean_exits += 1;
            if !status.success() || acks.len() as u64 != n {
                return Err(format!(
                    "cycle {cycle}: a clean run of {n} batches ended {status} with {} acknowledgements; stderr:\n{stderr}",
                    acks.len()
                ));
            }
        }
        if acks.len() as u64 > sent {
            return Err(format!(
                "cycle {cycle}: {} acknowledgements for {sent} batches sent",
                acks.len()
            ));
        }
        for (seq, a) in acks.iter().enumerate() {
            let b = producer_batch(cycle, seq as u64);
            let count = u64::from(u32::from_le_bytes([b[48], b[49], b[50], b[51]]));
            if a.messages != count || a.bytes != b.len() as u64 {
                return Err(format!(
                    "cycle {cycle}: acknowledgement {seq} {a:?} does not describe batch {seq} ({count} messages, {} bytes)",
                    b.len()
                ));
            }
            if seq > 0 && a.base_offset != acks[seq - 1].base_offset + acks[seq - 1].messages {
                return Err(format!(
                    "cycle {cycle}: acknowledgement {seq} {a:?} does not follow {:?}",
                    acks[seq - 1]
                ));
            }
        }
        if self.args.verbose {
            println!(
                "cycle {cycle}: {end:?}, segments {segment_bytes:?}, {sent} of {n} batches sent, {} acknowledged, {:.0} ms",
                acks.len(),
                started.elapsed().as_secs_f64() * 1000.0
            );
        }
        self.totals.sent += sent;
        self.totals.acked += acks.len() as u64;
        self.pending.push(Pending { cycle, sent, acks });
        Ok(())
    }

    /// Reopens the directory and checks the log against what was sent and
    /// acknowledged; appends one more batch; runs `corelog verify`.
    fn check(&mut self, cycle: u64) -> Result<(), String> {
        self.totals.checks += 1;
        let full = self.rng.bool();
        let engine = Engine::open(Config {
            shards: Some(1),
            pin_threads: false,
            log: LogConfig {
                fsync: FsyncPolicy::Batch,
                open_check: if full {
                    corelog::testing::segment::log::OpenCheck::Full
                } else {
                    corelog::testing::segment::log::OpenCheck::Tail
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
            .append(p, marker.clone())
            .wait()
            .map_err(|e| format!("after cycle {cycle}: appending after the reopen: {e}"))?;
        if ack.base_offset != next {
            return Err(format!(
                "after cycle {cycle}: the append after the reopen got offset {}, the log ends at {next}",
                ack.base_offset
            ));
        }
        let reply = pollster_block(engine.poll_verified(p, PollFrom::Offset(next), 1 << 20))
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
            let reply =
                match pollster_block(engine.poll_verified(p, PollFrom::Offset(next), 1 << 20)) {
                    Ok(r) => r,
                    Err(RequestError::UnknownPartition { .. }) if next == 0 => break,
                    Err(e) => {
                        return Err(format!("after cycle {cycle}: poll at offset {next}: {e}"))
                    }
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

/// Checks that `stored` is `produced` stamped into partition `p` at
/// `base_offset`: the producer's frames and header fields untouched.
fn same_as_produced(
    stored: &[u8],
    produced: &[u8],
    p: u64,
    base_offset: u64,
) -> Result<(), String> {
    let u64_at = |b: &[u8], at: usize| {
        let mut x = [0u8; 8];
        x.copy_from_slice(&b[at..at + 8]);
        u64::from_le_bytes(x)
    };
    if stored.len() != produced.len() {
        return Err(format!(
            "{} bytes stored, {} sent",
            stored.len(),
            produced.len()
        ));
    }
    if u64_at(stored, 0) != p || u64_at(stored, 8) != base_offset {
        return Err(format!(
            "stamped partition {} offset {}, expected {p} and {base_offset}",
            u64_at(stored, 0),
            u64_at(stored, 8)
        ));
    }
    if stored[24..40] != produced[24..40] || stored[48..256] != produced[48..256] {
        return Err("producer header fields changed".into());
    }
    if stored[256..] != produced[256..] {
        return Err("frames differ from what was sent".into());
    }
    Ok(())
}

/// Writes batches `0..n` of `cycle` in `bursts` bursts; returns how many
/// were written whole. Then closes stdin when `close`, or holds it open
/// (the child waits for more input) until `stop` is set.
fn feed(
    mut stdin: std::process::ChildStdin,
    cycle: u64,
    n: u64,
    bursts: u64,
    pause: Duration,
    close: bool,
    stop: Arc<AtomicBool>,
) -> u64 {
    let per = n.div_ceil(bursts).max(1);
    let mut written = 0;
    for seq in 0..n {
        if stop.load(Ordering::SeqCst) || stdin.write_all(&producer_batch(cycle, seq)).is_err() {
            return written;
        }
        written += 1;
        if (seq + 1) % per == 0 {
            std::thread::sleep(pause);
        }
    }
    if !close {
        while !stop.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    written
}

/// Sends every whole acknowledgement line; a partial last line (the child
/// died writing it) acknowledges nothing.
fn read_acks(
    stdout: std::process::ChildStdout,
    partition: u64,
    tx: mpsc::Sender<Result<Ack, String>>,
) {
    let mut r = BufReader::new(stdout);
    let mut line = Vec::new();
    loop {
        line.clear();
        match r.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) if line.last() != Some(&b'\n') => return,
            Ok(_) => {
                let text = String::from_utf8_lossy(&line[..line.len() - 1]).into_owned();
                if tx.send(parse_ack(&text, partition)).is_err() {
                    return;
                }
            }
        }
    }
}

fn wait_with_deadline(
    child: &mut Child,
    limit: Duration,
) -> Result<std::process::ExitStatus, String> {
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(s)) => return Ok(s),
            Ok(None) if start.elapsed() > limit => {
                let _ = child.kill();
                return Err(format!(
                    "the child did not finish within {limit:?}: it hangs"
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(2)),
            Err(e) => return Err(format!("waiting for the child: {e}")),
        }
    }
}

/// Waits `d` without giving the CPU away (a kill a few microseconds after
/// an acknowledgement lands mid-write more often than one after a sleep).
fn spin(d: Duration) {
    let start = Instant::now();
    while start.elapsed() < d {
        std::hint::spin_loop();
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
