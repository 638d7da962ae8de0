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
mod clock;
mod consumer;
mod lane;
mod live;
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
mod setup;
mod shape;
mod sink;
mod summary;
mod tcp;
mod workload;
mod xxh3;

use args::{Args, EngineKind};
use clap::Parser;
use std::process::ExitCode;

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
