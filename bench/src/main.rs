//! `corelog-bench`: corelog's load generator.
//!
//! Producer threads append pre-built batches across all shards through
//! `Handle` (or, with `--on-shard`, tasks on the shards), then consumer
//! threads poll everything back, verify every checksum, and write every
//! byte to a socket; figures per phase (MB/s, messages/s, batches/s,
//! latency percentiles from hdrhistogram, measured from each batch's
//! scheduled send), a JSON report and SVG charts. `--engine pwrite` runs
//! the plain-`pwrite` baseline on the same batches; `scripts/bench.sh` adds
//! fio and writes the README's tables.

mod args;
mod consumer;
mod lane;
mod on_shard;
#[cfg(feature = "peers")]
mod peers;
mod plot;
mod producer_thread;
mod pwrite;
mod reopen;
mod report;
mod run;
mod schedule;
mod shape;
mod sink;
mod summary;
mod tcp;
mod workload;
mod xxh3;

use args::{Args, EngineKind};
use clap::Parser;
use indicatif::{ProgressBar, ProgressStyle};
use std::collections::HashMap;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::OnceLock;

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
    pub targets: OnceLock<HashMap<u64, u64>>,
}

impl Totals {
    pub fn target(&self, p: u64) -> Option<u64> {
        self.targets.get().and_then(|t| t.get(&p).copied())
    }
}

/// Throughput samples: (seconds since start, bytes appended, bytes polled).
pub type Series = Vec<(f64, u64, u64)>;

fn main() -> ExitCode {
    corelog::cli::init_tracing();
    let args = Args::parse();
    let result = match (args.target.clone(), args.engine) {
        (Some(target), _) => tcp::run(args, &target),
        (None, EngineKind::Corelog) => run::run(args),
        (None, EngineKind::Pwrite) => pwrite::run(args),
        #[cfg(feature = "peers")]
        (None, EngineKind::Walrus | EngineKind::Commitlog) => peers::run(args),
        #[cfg(not(feature = "peers"))]
        (None, EngineKind::Walrus | EngineKind::Commitlog) => Err(
            "peer engines are built with `cargo build --release -p corelog-bench --features peers`"
                .into(),
        ),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("corelog-bench: {e}");
            ExitCode::from(1)
        }
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

pub fn progress(args: &Args, total: Option<u64>, duration: Option<f64>) -> ProgressBar {
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
