//! Engine configuration.

use corelog_segment::io::InlineWrites;
use corelog_segment::log::{FsyncPolicy, LogConfig};
use std::path::PathBuf;
use std::sync::Arc;
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
    /// Pin shard `i` to the `i`-th allowed CPU (of [`Config::cpus`] when
    /// set). Default true.
    pub pin_threads: bool,
    /// The CPUs the shards are pinned to, shard `i` to `cpus[i % len]`:
    /// an embedder keeps its own runtime's cores apart. Default: every CPU
    /// this process may run on.
    pub cpus: Option<Vec<usize>>,
    /// Which shard owns a partition. Default [`Placement::modulo`].
    pub placement: Placement,
    /// Every partition's log configuration.
    pub log: LogConfig,
    /// Requests a shard's queue holds before callers wait for room.
    pub queue_depth: usize,
    /// Submission slots of each shard's storage ring.
    pub ring_entries: u32,
    /// Which of its writes (appends, indexes, offsets) a shard makes on its
    /// own thread instead of handing them to io_uring's workers (see
    /// [`InlineWrites`]). Default: writes of up to 64 KiB
    /// ([`DEFAULT_INLINE_WRITE_MAX`]).
    pub inline_writes: InlineWrites,
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
    /// An object store behind the log (tiered storage): sealed segments are
    /// copied there, local copies past its `local_retention_bytes` removed
    /// once the store holds them, and polls below a partition's local
    /// start served from it. Default none.
    pub tier: Option<corelog_tier::TierConfig>,
}

/// The largest write a shard makes on its own thread by default. Measured
/// on ext4 (docs/bench/profiles.md, section 5): at 10 KB and 61 KB batches
/// a shard writing inline is as fast or faster than one handing each write
/// to an io-wq worker, with a shorter call-to-ack; at 1 MB it is slower
/// (4.1-5.9 GB/s against 4.8-6.7: the worker's copy runs beside the shard).
pub const DEFAULT_INLINE_WRITE_MAX: usize = 64 * 1024;

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
            cpus: None,
            placement: Placement::modulo(),
            log: LogConfig::default(),
            queue_depth: 4096,
            ring_entries: 1024,
            inline_writes: InlineWrites::up_to(DEFAULT_INLINE_WRITE_MAX),
            retention_check: Duration::from_secs(30),
            open_partitions: OpenPartitions::OnFirstRequest,
            max_open_partitions: 16_384,
            tier: None,
        }
    }
}

/// Builder methods: `Config::new(dir).shards(4).fsync(FsyncPolicy::Batch)`,
/// the same settings as the fields (the struct-update form works too).
///
/// ```
/// use corelog::{Config, FsyncPolicy, Placement};
/// let config = Config::new("/var/lib/mybroker/corelog")
///     .shards(2)
///     .cpus(vec![2, 3])
///     .fsync(FsyncPolicy::Batch)
///     .placement(Placement::new(|partition, shards| (partition / 100) as usize % shards));
/// assert_eq!(config.placement.shard_of(250, 2), 0);
/// ```
impl Config {
    /// Sets [`Config::shards`].
    pub fn shards(mut self, shards: usize) -> Config {
        self.shards = Some(shards);
        self
    }

    /// Sets [`Config::pin_threads`].
    pub fn pin_threads(mut self, pin: bool) -> Config {
        self.pin_threads = pin;
        self
    }

    /// Sets [`Config::cpus`] (and pins the shards to them).
    pub fn cpus(mut self, cpus: Vec<usize>) -> Config {
        self.cpus = Some(cpus);
        self.pin_threads = true;
        self
    }

    /// Sets [`Config::placement`].
    pub fn placement(mut self, placement: Placement) -> Config {
        self.placement = placement;
        self
    }

    /// Sets [`Config::log`].
    pub fn log(mut self, log: LogConfig) -> Config {
        self.log = log;
        self
    }

    /// Sets the fsync policy of [`Config::log`].
    pub fn fsync(mut self, policy: FsyncPolicy) -> Config {
        self.log.fsync = policy;
        self
    }

    /// Sets [`Config::queue_depth`].
    pub fn queue_depth(mut self, depth: usize) -> Config {
        self.queue_depth = depth;
        self
    }

    /// Sets [`Config::inline_writes`] (`InlineWrites::OFF`: every write
    /// through the ring).
    pub fn inline_writes(mut self, policy: InlineWrites) -> Config {
        self.inline_writes = policy;
        self
    }

    /// Sets [`Config::open_partitions`].
    pub fn open_partitions(mut self, when: OpenPartitions) -> Config {
        self.open_partitions = when;
        self
    }

    /// Sets [`Config::tier`].
    pub fn tier(mut self, tier: corelog_tier::TierConfig) -> Config {
        self.tier = Some(tier);
        self
    }

    /// Sets [`Config::max_open_partitions`].
    pub fn max_open_partitions(mut self, n: usize) -> Config {
        self.max_open_partitions = n;
        self
    }
}

/// Which shard owns a partition: a function of the partition and the
/// shard count, the same for the life of the engine (a result past the
/// last shard wraps around). It may differ between runs: each run's shards
/// open the partitions it gives them.
#[derive(Clone)]
pub struct Placement(Arc<dyn Fn(u64, usize) -> usize + Send + Sync>);

impl Placement {
    /// `partition % shards`: consecutive partitions on consecutive shards.
    pub fn modulo() -> Placement {
        Placement::new(|partition, shards| (partition % shards as u64) as usize)
    }

    /// Placement by `f(partition, shards)`.
    pub fn new(f: impl Fn(u64, usize) -> usize + Send + Sync + 'static) -> Placement {
        Placement(Arc::new(f))
    }

    /// The shard of `partition` among `shards`.
    pub fn shard_of(&self, partition: u64, shards: usize) -> usize {
        let shards = shards.max(1);
        (self.0)(partition, shards) % shards
    }
}

impl std::fmt::Debug for Placement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Placement(..)")
    }
}
