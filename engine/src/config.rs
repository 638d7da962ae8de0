//! Engine configuration.

use corelog_segment::log::LogConfig;
use std::path::PathBuf;
use std::time::Duration;

/// How to run an engine.
///
/// ```
/// use corelog::{Config, FsyncPolicy, LogConfig, Retention};
/// use std::time::Duration;
/// let config = Config {
///     shards: Some(4),
///     log: LogConfig {
///         fsync: FsyncPolicy::Batch,          // acknowledge only what is durable
///         segment_bytes: 256 << 20,
///         retention: Retention { max_age: Some(Duration::from_secs(7 * 86_400)), max_bytes: None },
///         ..LogConfig::default()
///     },
///     ..Config::new("/var/lib/mybroker/corelog")
/// };
/// assert_eq!(config.queue_depth, 4096);
/// ```
#[derive(Debug, Clone)]
pub struct Config {
    /// The data directory (created if missing). Partitions live in
    /// `DIR/partitions/<id>/`.
    pub dir: PathBuf,
    /// Shards (one pinned thread each). Default: one per CPU this process
    /// may run on.
    pub shards: Option<usize>,
    /// Pin shard `i` to the `i`-th allowed CPU. Default true.
    pub pin_threads: bool,
    /// Every partition's log configuration.
    pub log: LogConfig,
    /// Requests a shard's queue holds before callers wait for room.
    pub queue_depth: usize,
    /// Submission slots of each shard's storage ring.
    pub ring_entries: u32,
    /// How often shards apply the retention limits (when any is set).
    pub retention_check: Duration,
    /// When existing partitions are opened (recovered). Default
    /// [`OpenPartitions::OnFirstRequest`].
    pub open_partitions: OpenPartitions,
    /// Partitions open at once, over all shards (each shard takes its
    /// share): past it, the least recently used idle partitions are closed,
    /// giving back their descriptor and mappings, and reopened by their
    /// next request. Default 16,384.
    pub max_open_partitions: usize,
}

/// When an engine opens (recovers) the partitions its directory holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenPartitions {
    /// Each on its first request: opening the engine costs a directory
    /// listing, whatever the partition count; what recovery did is logged
    /// (and `Engine::recovery` lists nothing).
    OnFirstRequest,
    /// All of them before `Engine::open` returns, each report in
    /// `Engine::recovery` (for tools and tests that inspect recovery).
    AtOpen,
}

impl Config {
    /// Defaults for a data directory.
    pub fn new(dir: impl Into<PathBuf>) -> Config {
        Config {
            dir: dir.into(),
            shards: None,
            pin_threads: true,
            log: LogConfig::default(),
            queue_depth: 4096,
            ring_entries: 1024,
            retention_check: Duration::from_secs(30),
            open_partitions: OpenPartitions::OnFirstRequest,
            max_open_partitions: 16_384,
        }
    }
}
