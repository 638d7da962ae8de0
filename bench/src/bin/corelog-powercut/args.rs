//! The arguments of both halves, and the engine configuration they share.

use clap::Args;
use corelog::{Config, FsyncPolicy, LogConfig, OpenCheck};
use std::path::PathBuf;

/// What both modes must agree on.
#[derive(Args, Debug, Clone)]
pub(crate) struct Common {
    /// The data directory (on the filesystem under test, or its clone).
    #[arg(long)]
    pub(crate) dir: PathBuf,
    /// The acknowledgement journal (outside the filesystem under test).
    #[arg(long)]
    pub(crate) journal: PathBuf,
    /// The policy the writer used: batch, interval:MS or never.
    #[arg(long)]
    pub(crate) fsync: FsyncPolicy,
    /// Partitions 1..=N.
    #[arg(long, default_value_t = 4)]
    pub(crate) partitions: u64,
    /// Segment size (small, so rotations happen).
    #[arg(long, default_value_t = 256 << 10)]
    pub(crate) segment_bytes: u64,
    /// Shards of the engine.
    #[arg(long, default_value_t = 2)]
    pub(crate) shards: usize,
}

#[derive(Args, Debug)]
pub(crate) struct WriteArgs {
    #[command(flatten)]
    pub(crate) common: Common,
    /// How long to append.
    #[arg(long, default_value_t = 10.0)]
    pub(crate) seconds: f64,
    /// Appends in flight per partition.
    #[arg(long, default_value_t = 4)]
    pub(crate) window: usize,
    /// Most batches per second per partition (0: unpaced). Keeps the
    /// unsynced policies from filling the filesystem.
    #[arg(long, default_value_t = 1500)]
    pub(crate) rate: u64,
}

#[derive(Args, Debug)]
pub(crate) struct CheckArgs {
    #[command(flatten)]
    pub(crate) common: Common,
    /// Journal bytes written before the clone started (whole lines below
    /// it are the acknowledgements that preceded the clone).
    #[arg(long)]
    pub(crate) upto: u64,
    /// Wall-clock time (ns since the epoch) just before the clone started.
    #[arg(long)]
    pub(crate) clone_ns: u64,
    /// Under `interval:MS`: acknowledgements older than MS plus this at
    /// the clone must survive (the policy's bound is MS plus the sync's
    /// own time, which a stalled filesystem stretches).
    #[arg(long, default_value_t = 3000)]
    pub(crate) slack_ms: u64,
    /// The image was taken after a clean shutdown: everything acknowledged
    /// must be there whatever the policy.
    #[arg(long)]
    pub(crate) clean: bool,
    /// A name for this check in the summary line.
    #[arg(long, default_value = "clone")]
    pub(crate) label: String,
}

impl Common {
    pub(crate) fn config(&self, fsync: FsyncPolicy) -> Config {
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
