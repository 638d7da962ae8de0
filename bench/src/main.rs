//! `corelog-bench`: corelog's load generator.
//!
//! Producers append pre-built batches across all shards, then consumers
//! poll everything back verifying every checksum; figures per phase (MB/s,
//! messages/s, batches/s, latency percentiles from hdrhistogram), a JSON
//! report and SVG charts. `--engine pwrite` runs the plain-`pwrite`
//! baseline on the same batches; `scripts/bench.sh` adds fio.

mod args;
mod corelog_run;
#[cfg(feature = "peers")]
mod peers;
mod plot;
mod pwrite;
mod report;
mod tcp;
mod workload;

use args::{Args, EngineKind};
use clap::Parser;
use corelog::{Config, Engine, LogConfig};
use corelog_run::{ConsumerResult, LaneResult, RunCtx};
use indicatif::{ProgressBar, ProgressStyle};
use report::{histogram, print_latency_row, print_table, Phase};
use serde_json::json;
use std::collections::HashMap;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, OnceLock};
use std::time::{Duration, Instant};

/// Microseconds since the Unix epoch.
pub fn now_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

/// Counters the sampler reads while the run goes.
#[derive(Debug, Default)]
pub struct Live {
    pub stop: AtomicBool,
    pub claimed: AtomicU64,
    pub appended: AtomicU64,
    pub polled: AtomicU64,
}

/// Where each partition ends once producers are done.
#[derive(Debug, Default)]
pub struct Totals {
    targets: OnceLock<HashMap<u64, u64>>,
}

impl Totals {
    pub fn target(&self, p: u64) -> Option<u64> {
        self.targets.get().and_then(|t| t.get(&p).copied())
    }
}

/// Throughput samples: (seconds since start, bytes appended, bytes polled).
pub type Series = Vec<(f64, u64, u64)>;

fn main() -> ExitCode {
    let args = Args::parse();
    let result = match (args.target.clone(), args.engine) {
        (Some(target), _) => tcp::run(args, &target),
        (None, engine) => run_engine(args, engine),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("corelog-bench: {e}");
            ExitCode::from(1)
        }
    }
}

fn run_engine(args: Args, engine: EngineKind) -> Result<(), String> {
    match engine {
        EngineKind::Corelog => run_corelog(args),
        EngineKind::Pwrite => pwrite::run(args),
        #[cfg(feature = "peers")]
        EngineKind::Walrus | EngineKind::Commitlog => peers::run(args),
        #[cfg(not(feature = "peers"))]
        EngineKind::Walrus | EngineKind::Commitlog => Err(
            "peer engines are built with `cargo build --release -p corelog-bench --features peers`"
                .into(),
        ),
    }
}

/// How long to append: `--total-bytes`, or `--duration`, or by default
/// 20 seconds. Timed runs also stop at a byte cap (a quarter of the free
/// space where the data goes) so a fast disk cannot fill up.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    /// Bytes to append (a cap for timed runs).
    pub total: Option<u64>,
    /// Seconds to append.
    pub duration: Option<f64>,
}

/// The default append time when neither --total-bytes nor --duration is given.
pub const DEFAULT_DURATION: f64 = 20.0;

pub fn budget(args: &Args, dir: &std::path::Path) -> Result<Budget, String> {
    let free = fs4::available_space(dir).unwrap_or(u64::MAX);
    match (args.total_bytes, args.duration) {
        (Some(t), _) if t.saturating_add(t / 10) > free => Err(format!(
            "--total-bytes {t} does not fit the {free} bytes free in {}",
            dir.display()
        )),
        (Some(t), _) => Ok(Budget {
            total: Some(t),
            duration: None,
        }),
        (None, d) => Ok(Budget {
            total: Some(free / 4),
            duration: Some(d.unwrap_or(DEFAULT_DURATION)),
        }),
    }
}

/// The budget of a run against a remote server, whose disk the bench
/// cannot see: `--total-bytes`, or `--duration` (default 20 s).
pub fn budget_for_remote(args: &Args) -> (Option<u64>, Option<f64>) {
    match args.total_bytes {
        Some(t) => (Some(t), None),
        None => (None, Some(args.duration.unwrap_or(DEFAULT_DURATION))),
    }
}

/// Where the data goes: the given directory (kept) or a temporary one.
pub fn data_dir(args: &Args) -> Result<(std::path::PathBuf, Option<tempfile::TempDir>), String> {
    match &args.data_dir {
        Some(d) => {
            std::fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
            Ok((d.clone(), None))
        }
        None => {
            let t = tempfile::Builder::new()
                .prefix("corelog-bench-")
                .tempdir_in(
                    std::env::var_os("TMPDIR")
                        .map(std::path::PathBuf::from)
                        .unwrap_or_else(|| std::path::PathBuf::from("/var/tmp")),
                )
                .map_err(|e| format!("temporary directory: {e}"))?;
            Ok((t.path().to_path_buf(), Some(t)))
        }
    }
}

fn progress(args: &Args, total: Option<u64>, duration: Option<f64>) -> ProgressBar {
    if args.quiet {
        return ProgressBar::hidden();
    }
    match (total, duration) {
        (Some(t), None) => {
            let pb = ProgressBar::new(t);
            pb.set_style(
                ProgressStyle::with_template(
                    "{msg:8} [{bar:40}] {bytes}/{total_bytes} {binary_bytes_per_sec} eta {eta}",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
            );
            pb
        }
        _ => {
            let pb = ProgressBar::new((duration.unwrap_or(0.0) * 10.0) as u64);
            pb.set_style(
                ProgressStyle::with_template("{msg:8} [{bar:40}] {elapsed}")
                    .unwrap_or_else(|_| ProgressStyle::default_bar())
                    .progress_chars("=> "),
            );
            pb
        }
    }
}

fn run_corelog(args: Args) -> Result<(), String> {
    let args = Arc::new(args);
    let (dir, _tmp) = data_dir(&args)?;
    let Budget { total, duration } = budget(&args, &dir)?;
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let shards = args.shards.unwrap_or(cores).max(1);
    let partitions = args.partitions.unwrap_or(2 * shards as u64).max(1);
    let producers = args.producers.unwrap_or(shards).max(1);
    let consumers = args.consumers.unwrap_or(shards).max(1);
    let inflight = args.inflight.max(1);
    let largest = (args.message_size.max + 48) * args.messages_per_batch + 256;
    let mut log = LogConfig {
        segment_bytes: args.segment_bytes,
        fsync: args.fsync,
        preallocate: !args.no_preallocate,
        ..LogConfig::default()
    };
    log.limits.max_batch_bytes = log.limits.max_batch_bytes.max(largest as u64);
    let engine = Engine::open(Config {
        shards: Some(shards),
        log,
        ..Config::new(&dir)
    })
    .map_err(|e| e.to_string())?;
    for p in 0..partitions {
        engine
            .create_partition(p)
            .wait()
            .map_err(|e| e.to_string())?;
    }
    println!(
        "corelog-bench: {shards} shards, {partitions} partitions, {producers} producers x {inflight} in flight, {consumers} consumers, {}..{} B messages x {} per batch, fsync {}, checksums {} ({})",
        args.message_size.min,
        args.message_size.max,
        args.messages_per_batch,
        args.fsync,
        corelog::segment::checksum::simd_path(),
        dir.display()
    );

    let live = Arc::new(Live::default());
    let totals = Arc::new(Totals::default());
    let go_at = Instant::now() + Duration::from_millis(300);
    let measure_from = go_at + Duration::from_secs_f64(args.warmup.max(0.0));
    let ctx = Arc::new(RunCtx {
        live: live.clone(),
        go_at,
        measure_from,
        total,
        per_producer_rate: args.rate.map(|mbps| mbps * 1e6 / producers as f64),
        retime: !args.no_poll && consumers > 0,
    });
    let handle = engine.handle();
    let (ptx, prx) = mpsc::channel::<LaneResult>();
    let (ctx_tx, crx) = mpsc::channel::<ConsumerResult>();
    let start_consumers = |h: &corelog::Handle| -> Result<(), String> {
        for c in 0..consumers {
            let parts: Vec<u64> = (0..partitions)
                .filter(|p| (*p as usize) % consumers == c)
                .collect();
            if parts.is_empty() {
                continue;
            }
            let shard = h.shard_of(parts[0]);
            let (h2, a2, l2, t2, tx) = (
                h.clone(),
                args.clone(),
                live.clone(),
                totals.clone(),
                ctx_tx.clone(),
            );
            h.spawn_on(shard, move || {
                corelog_run::consumer(h2, parts, a2, l2, t2, tx)
            })
            .wait()
            .map_err(|e| e.to_string())?;
        }
        Ok(())
    };
    for i in 0..producers {
        let mut parts: Vec<u64> = (0..partitions)
            .filter(|p| (*p as usize) % producers == i)
            .collect();
        if parts.is_empty() {
            parts.push(i as u64 % partitions);
        }
        let shard = handle.shard_of(parts[0]);
        let pools: Vec<_> = (0..inflight)
            .map(|lane| {
                workload::build_batches(
                    ((i * inflight + lane) as u64) << 8,
                    args.message_size,
                    args.messages_per_batch,
                    2,
                )
            })
            .collect();
        let (h, c, tx) = (handle.clone(), ctx.clone(), ptx.clone());
        handle
            .spawn_on(shard, move || corelog_run::producer(c, h, parts, pools, tx))
            .wait()
            .map_err(|e| e.to_string())?;
    }
    drop(ptx);
    let started = Instant::now();
    if args.tail && !args.no_poll {
        start_consumers(&handle)?;
    }

    // Sample throughput, drive the progress bar, stop a timed run.
    let pb = progress(&args, total, duration);
    pb.set_message("append");
    let sampler_stop = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (live, stop, pb) = (live.clone(), sampler_stop.clone(), pb.clone());
        std::thread::spawn(move || {
            let mut series: Series = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(100));
                let now = Instant::now();
                series.push((
                    (now - started).as_secs_f64(),
                    live.appended.load(Ordering::Relaxed),
                    live.polled.load(Ordering::Relaxed),
                ));
                match duration {
                    Some(d) => {
                        let t = now.saturating_duration_since(measure_from).as_secs_f64();
                        pb.set_position((t * 10.0) as u64);
                        if t >= d {
                            live.stop.store(true, Ordering::Relaxed);
                        }
                    }
                    None => pb.set_position(live.claimed.load(Ordering::Relaxed)),
                }
            }
            series
        })
    };

    let mut append = Phase::new("append");
    let mut last_ack = measure_from;
    let mut errors = Vec::new();
    for r in prx {
        append.merge(&r.phase);
        if let Some(t) = r.last_ack {
            last_ack = last_ack.max(t);
        }
        errors.extend(r.error);
    }
    append.seconds = (last_ack - measure_from).as_secs_f64();
    let mut targets = HashMap::new();
    for p in 0..partitions {
        let s = engine.stats(p).wait().map_err(|e| e.to_string())?;
        targets.insert(p, s.next_offset);
    }
    let stored: u64 = (0..partitions)
        .map(|p| engine.stats(p).wait().map(|s| s.bytes).unwrap_or(0))
        .sum();
    let _ = totals.targets.set(targets);

    let mut poll = Phase::new("poll");
    let mut e2e = histogram();
    let mut xxh3_all = 0.0;
    let verify_cores = consumers.min(shards).min(cores);
    if !args.no_poll {
        pb.set_message("poll");
        let poll_start = Instant::now();
        if !args.tail {
            start_consumers(&handle)?;
        }
        drop(ctx_tx);
        for r in crx {
            poll.merge(&r.phase);
            let _ = e2e.add(&r.end_to_end);
            errors.extend(r.error);
        }
        poll.seconds = if args.tail {
            (Instant::now() - measure_from).as_secs_f64()
        } else {
            (Instant::now() - poll_start).as_secs_f64()
        };
        if poll.bytes != stored && errors.is_empty() {
            errors.push(format!(
                "consumers read {} bytes but the partitions hold {stored}",
                poll.bytes
            ));
        }
        xxh3_all = corelog_run::xxh3_rate(verify_cores, 1.0);
    }
    sampler_stop.store(true, Ordering::Relaxed);
    let series = sampler.join().unwrap_or_default();
    pb.finish_and_clear();
    engine.shutdown().map_err(|e| e.to_string())?;

    println!();
    let mut phases = vec![&append];
    if !args.no_poll {
        phases.push(&poll);
    }
    print_table(&phases);
    if !args.no_poll {
        print_latency_row("end-to-end", &e2e);
        if !args.no_verify {
            println!(
                "poll with verification: {:.2} GB/s; raw XXH3 in this build over memory, {verify_cores} cores at once: {:.2} GB/s; ratio {:.2}",
                poll.mb_per_s() / 1000.0,
                xxh3_all / 1e9,
                poll.mb_per_s() * 1e6 / xxh3_all
            );
        }
        if !args.tail {
            println!("(end-to-end latency counts from each batch's send to its poll after the append phase; --tail measures it live)");
        }
    }
    let result = json!({
        "config": {
            "engine": "corelog",
            "shards": shards,
            "partitions": partitions,
            "producers": producers,
            "inflight": inflight,
            "consumers": consumers,
            "message_size": args.message_size,
            "messages_per_batch": args.messages_per_batch,
            "total_bytes": total,
            "duration": duration,
            "fsync": args.fsync.to_string(),
            "segment_bytes": args.segment_bytes,
            "rate_mb_per_s": args.rate,
            "warmup": args.warmup,
            "verify": !args.no_verify,
            "tail": args.tail,
            "checksum_simd": corelog::segment::checksum::simd_path(),
        },
        "append": append.json(),
        "poll": if args.no_poll { serde_json::Value::Null } else { poll.json() },
        "end_to_end": { "latency_us": report::latency_json(&e2e) },
        "xxh3_gb_per_s": xxh3_all / 1e9,
        "xxh3_cores": verify_cores,
        "errors": errors,
    });
    if let Some(path) = &args.json {
        std::fs::write(
            path,
            serde_json::to_string_pretty(&result).unwrap_or_default(),
        )
        .map_err(|e| format!("{}: {e}", path.display()))?;
    }
    if let Some(dir) = &args.plot {
        plot::write(dir, &series, &phases)
            .map_err(|e| format!("plots in {}: {e}", dir.display()))?;
    }
    if !errors.is_empty() {
        return Err(errors.join("; "));
    }
    Ok(())
}
