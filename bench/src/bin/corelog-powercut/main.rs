//! `corelog-powercut`: the two halves of the power-cut suite on real
//! filesystems (`scripts/powercut-test.sh` is the orchestrator).
//!
//! * `write` opens a [`corelog::Engine`] on a filesystem under test and
//!   appends a deterministic stream to several partitions (every byte of
//!   batch `seq` of partition `p` is a function of `(p, seq)`, see
//!   `corelog-crash/stream.rs`), recording every acknowledgement (partition,
//!   sequence, base offset, digest, time) as one line of a journal that
//!   lives OUTSIDE the filesystem under test. Meanwhile the orchestrator
//!   clones the filesystem's image (`cp --reflink=always`: atomic, it holds
//!   what the device had received, so the page cache is lost as in a power
//!   cut), noting the journal's length and the time just before each clone.
//! * `check` opens an engine on a mounted clone (recovery runs) and checks
//!   it against the journal: every acknowledgement the policy makes durable
//!   and that was journaled before the clone is there, byte-exact, at its
//!   offset; each partition's log is a prefix of what was sent (offsets
//!   continuous, no foreign bytes); appends resume.
//!
//! ```text
//! corelog-powercut write --dir D --journal J --fsync batch --seconds 10
//! corelog-powercut check --dir D --journal J --fsync batch --upto BYTES --clone-ns T
//! ```
//!
//! `check` exits 0 when nothing required is lost, 1 when acknowledged
//! batches are lost (the expected outcome of the `fsync=never` control),
//! 2 on any other failure (a log that is not a prefix of what was sent, an
//! append that fails after recovery, a bad journal).

mod check;
mod journal;
#[allow(dead_code)] // shared with corelog-crash, which uses all of it
#[path = "../corelog-crash/stream.rs"]
mod stream;
mod write;

use clap::{Args, Parser, Subcommand};
use corelog::{Config, FsyncPolicy, LogConfig, OpenCheck};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser, Debug)]
#[command(
    name = "corelog-powercut",
    about = "Append and journal acknowledgements, or check a power-cut image against the journal"
)]
struct Cli {
    #[command(subcommand)]
    mode: Mode,
}

#[derive(Subcommand, Debug)]
enum Mode {
    /// Append to several partitions, journaling every acknowledgement.
    Write(WriteArgs),
    /// Recover a cloned image's data directory and check it.
    Check(CheckArgs),
}

/// What both modes must agree on.
#[derive(Args, Debug, Clone)]
struct Common {
    /// The data directory (on the filesystem under test, or its clone).
    #[arg(long)]
    dir: PathBuf,
    /// The acknowledgement journal (outside the filesystem under test).
    #[arg(long)]
    journal: PathBuf,
    /// The policy the writer used: batch, interval:MS or never.
    #[arg(long)]
    fsync: FsyncPolicy,
    /// Partitions 1..=N.
    #[arg(long, default_value_t = 4)]
    partitions: u64,
    /// Segment size (small, so rotations happen).
    #[arg(long, default_value_t = 256 << 10)]
    segment_bytes: u64,
    /// Shards of the engine.
    #[arg(long, default_value_t = 2)]
    shards: usize,
}

#[derive(Args, Debug)]
struct WriteArgs {
    #[command(flatten)]
    common: Common,
    /// How long to append.
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,
    /// Appends in flight per partition.
    #[arg(long, default_value_t = 4)]
    window: usize,
    /// Most batches per second per partition (0: unpaced). Keeps the
    /// unsynced policies from filling the filesystem.
    #[arg(long, default_value_t = 1500)]
    rate: u64,
}

#[derive(Args, Debug)]
struct CheckArgs {
    #[command(flatten)]
    common: Common,
    /// Journal bytes written before the clone started (whole lines below
    /// it are the acknowledgements that preceded the clone).
    #[arg(long)]
    upto: u64,
    /// Wall-clock time (ns since the epoch) just before the clone started.
    #[arg(long)]
    clone_ns: u64,
    /// Under `interval:MS`: acknowledgements older than MS plus this at
    /// the clone must survive (the policy's bound is MS plus the sync's
    /// own time, which a stalled filesystem stretches).
    #[arg(long, default_value_t = 3000)]
    slack_ms: u64,
    /// The image was taken after a clean shutdown: everything acknowledged
    /// must be there whatever the policy.
    #[arg(long)]
    clean: bool,
    /// A name for this check in the summary line.
    #[arg(long, default_value = "clone")]
    label: String,
}

impl Common {
    fn config(&self, fsync: FsyncPolicy) -> Config {
        Config {
            shards: Some(self.shards),
            pin_threads: false,
            // The checker reads every partition's recovery report.
            open_partitions: corelog::OpenPartitions::AtOpen,
            log: LogConfig {
                segment_bytes: self.segment_bytes,
                index_interval_bytes: 4 << 10,
                fsync,
                open_check: OpenCheck::Full,
                ..LogConfig::default()
            },
            ..Config::new(&self.dir)
        }
    }
}

fn main() -> ExitCode {
    match Cli::parse().mode {
        Mode::Write(a) => match write::run(&a) {
            Ok(summary) => {
                println!("{summary}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("corelog-powercut write: FAIL: {e}");
                ExitCode::from(2)
            }
        },
        Mode::Check(a) => check::run(&a),
    }
}
