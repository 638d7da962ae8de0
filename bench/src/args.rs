//! Command-line flags (exact names: scripts depend on them).

use clap::{Parser, ValueEnum};
use corelog::cli::parse_size;
use corelog::FsyncPolicy;
use std::path::PathBuf;

/// `--syncs`: see `corelog::SyncIssue`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Syncs {
    Together,
    OneAtATime,
}

impl From<Syncs> for corelog::SyncIssue {
    fn from(s: Syncs) -> Self {
        match s {
            Syncs::Together => corelog::SyncIssue::Together,
            Syncs::OneAtATime => corelog::SyncIssue::OneAtATime,
        }
    }
}

/// What stores the data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EngineKind {
    /// corelog: shards, admission, io_uring, mmap polls.
    Corelog,
    /// Baseline: one thread, one file, a plain pwrite loop of the same
    /// pre-built batches (no checksums, no shards); under --rate on the
    /// producers' schedule, latency from each slot.
    Pwrite,
    /// Peer: walrus-rust, one topic per partition (build with `--features peers`).
    Walrus,
    /// Peer: the commitlog crate, one log per partition (build with `--features peers`).
    Commitlog,
}

/// Message sizes: one size or a range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct SizeRange {
    /// smallest
    pub min: usize,
    /// largest
    pub max: usize,
}

fn parse_range(s: &str) -> Result<SizeRange, String> {
    let size = |t: &str| parse_size(t).map(|v| v as usize);
    match s.split_once("..") {
        Some((a, b)) => {
            let (min, max) = (size(a)?, size(b)?);
            if min > max {
                return Err(format!("invalid range {s:?}: {min} > {max}"));
            }
            Ok(SizeRange { min, max })
        }
        None => {
            let v = size(s)?;
            Ok(SizeRange { min: v, max: v })
        }
    }
}

/// corelog's load generator. With no flags it runs a meaningful workload on
/// a temporary data directory: producer threads append across all shards
/// with durable acknowledgements (group commit), then consumer threads poll
/// everything back, verifying every checksum and writing every byte to a
/// loopback TCP socket.
#[derive(Debug, Clone, Parser, serde::Serialize)]
#[command(name = "corelog-bench", version)]
pub struct Args {
    /// Storage under test.
    #[arg(long, value_enum, default_value = "corelog")]
    pub engine: EngineKind,
    /// Shards (default: one per CPU).
    #[arg(long)]
    pub shards: Option<usize>,
    /// Partitions, spread over the shards (default: 2 per shard).
    #[arg(long)]
    pub partitions: Option<u64>,
    /// Producers (default: one per shard). Each is an OS thread calling
    /// `Handle::append` through the shards' queues, as an embedder's
    /// threads do (see --on-shard).
    #[arg(long)]
    pub producers: Option<usize>,
    /// Run producers as tasks on the shard owning their partitions
    /// instead (the thread-per-core fast path: no queue, no wake-up).
    #[arg(long)]
    pub on_shard: bool,
    /// Appends in flight per producer.
    #[arg(long, default_value_t = 4)]
    pub inflight: usize,
    /// Consumers (default: one per shard): OS threads that poll through
    /// `Handle` and serve every reply through a socket (see --serve).
    #[arg(long)]
    pub consumers: Option<usize>,
    /// Message payload size in bytes, or a range like 200..2000.
    #[arg(long, value_parser = parse_range, default_value = "1000")]
    pub message_size: SizeRange,
    /// Messages per batch.
    #[arg(long, default_value_t = 1000)]
    pub messages_per_batch: usize,
    /// Bytes to append (e.g. 2GB, 512MiB). Without it (and without
    /// --duration) producers append for 20 seconds, stopping early at a
    /// quarter of the free disk space.
    #[arg(long, value_parser = parse_size, conflicts_with = "duration")]
    pub total_bytes: Option<u64>,
    /// Append for this many seconds instead of a byte count.
    #[arg(long)]
    pub duration: Option<f64>,
    /// never | batch | interval:MS.
    #[arg(long, default_value = "batch")]
    #[serde(serialize_with = "display")]
    pub fsync: FsyncPolicy,
    /// Segment size.
    #[arg(long, value_parser = parse_size, default_value = "1GiB")]
    pub segment_bytes: u64,
    /// Open-loop append rate limit in MB/s (10^6 bytes) across producers,
    /// for latency at a fixed load.
    #[arg(long)]
    pub rate: Option<f64>,
    /// Seconds of load before measuring.
    #[arg(long, default_value_t = 1.0)]
    pub warmup: f64,
    /// Data directory (kept). Default: a temporary one, removed afterwards.
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// Write the results as JSON.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write SVG charts (throughput over time, latency percentiles).
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// Largest poll reply, bytes.
    #[arg(long, value_parser = parse_size, default_value = "4MiB")]
    pub poll_bytes: u64,
    /// The socket consumers write each poll reply to (its `IoSlice`s),
    /// drained and counted by a reader thread.
    #[arg(long, value_enum, default_value = "tcp")]
    pub serve: crate::sink::Serve,
    /// What the socket's reader thread does with served bytes: count them
    /// without copying (TCP `MSG_TRUNC`, as the wire carries them off), or
    /// copy them into a buffer, as a client on this machine would.
    #[arg(long, value_enum, default_value = "discard")]
    pub drain: crate::sink::Drain,
    /// Consumers skip checksum verification (they still walk every batch
    /// header, and serve every byte unless --serve none).
    #[arg(long)]
    pub no_verify: bool,
    /// Producer threads wait by spinning instead of sleeping when their
    /// next send is due within this many µs, and while an append they
    /// wait for is in flight: a busy thread's latency (no wake-up), for a
    /// core each. 0 (default): they sleep.
    #[arg(long, default_value_t = 0)]
    pub spin_us: u64,
    /// Consumers tail the partitions while producers append (end-to-end
    /// latency is then live) instead of reading everything afterwards.
    #[arg(long)]
    pub tail: bool,
    /// Appends' writes of at most this many bytes are made on the shard's
    /// own thread instead of by io_uring's workers (0: none; default the
    /// engine's, 64 KiB; see its `Config::inline_writes`).
    #[arg(long, value_parser = parse_size)]
    pub inline_write_max: Option<u64>,
    /// Do not preallocate segment files (fallocate).
    #[arg(long)]
    pub no_preallocate: bool,
    /// Preallocation's first step ahead of the write position.
    #[arg(long, value_parser = parse_size, default_value = "1MiB")]
    pub prealloc_step_min: u64,
    /// Preallocation's largest step.
    #[arg(long, value_parser = parse_size, default_value = "64MiB")]
    pub prealloc_step_max: u64,
    /// Preallocated but unwritten bytes a shard may hold.
    #[arg(long, value_parser = parse_size, default_value = "1GiB")]
    pub prealloc_budget: u64,
    /// Skip the poll phase.
    #[arg(long)]
    pub no_poll: bool,
    /// Before the poll phase, flush every partition (`Handle::flush_all`)
    /// and wait: the page cache's write-back of what was appended is then
    /// over, not running on the cores the consumers use.
    #[arg(long)]
    pub settle: bool,
    /// After the run, time opening the data directory with every partition
    /// recovered before `Engine::open` returns: as the clean shutdown left
    /// it, then with the clean-close records removed (as after a crash).
    #[arg(long)]
    pub reopen: bool,
    /// How a shard's fdatasyncs meet the ring: side by side (the default)
    /// or one at a time.
    #[arg(long, value_enum, default_value_t = Syncs::Together)]
    pub syncs: Syncs,
    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
    /// Drive a server over Iggy's TCP protocol instead of an embedded
    /// engine: `tcp://HOST:PORT` (corelog-server or an Iggy server).
    #[arg(long)]
    pub target: Option<String>,
    /// User to sign in as with --target.
    #[arg(long, default_value = "iggy")]
    pub username: String,
    /// Its password.
    #[arg(long, default_value = "iggy")]
    #[serde(skip_serializing)]
    pub password: String,
}

fn display<S: serde::Serializer>(v: &FsyncPolicy, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&v.to_string())
}
