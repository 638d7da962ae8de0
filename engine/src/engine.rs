//! The engine (owner of the shards) and its handle (the API).

use crate::config::Config;
use crate::error::{OpenError, RequestError};
use crate::lock::DirLock;
use crate::preallocation;
use crate::queue::{Reply, ShardQueue};
use crate::request::{Request, Respond};
use crate::shard::{self, PartitionRecovery};
use bytes::Bytes;
use corelog_segment::log::{AppendAck, LogStats, RecoveryReport, Retention};
use corelog_segment::{Batch, Limits};
use futures_channel::oneshot;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;

pub(crate) mod offload;
mod poll;
pub(crate) mod replicated;
mod shutdown;
pub(crate) mod try_append;

static ENGINE_IDS: AtomicU64 = AtomicU64::new(1);

/// A running engine: its shards, their threads and the directory lock.
///
/// It owns them; the API is its [`Handle`] ([`Engine::handle`]), which
/// any thread or runtime clones and uses. Dropping the engine shuts it
/// down like [`Engine::shutdown`].
///
/// ```
/// # fn main() -> Result<(), corelog::Error> {
/// use corelog::{Config, Engine, PollFrom};
/// use corelog::{BatchBuilder, MessageSpec};
///
/// let dir = tempfile::tempdir().unwrap();
/// let engine = Engine::open(Config { shards: Some(1), ..Config::new(dir.path()) })?;
/// let h = engine.handle();
///
/// let mut b = BatchBuilder::new();
/// b.push(MessageSpec { id: 1, timestamp: 1_000, payload: b"hello", user_headers: b"" });
/// let ack = h.append(7, b.build().unwrap()).wait()?;
/// assert_eq!(ack.base_offset, 0);
///
/// let reply = h.poll(7, PollFrom::Offset(0), 1 << 20).wait()?;
/// let batch = reply.batches().next().unwrap();
/// assert_eq!(batch.messages().next().unwrap().payload(), b"hello");
/// Ok(engine.shutdown()?)
/// # }
/// ```
#[derive(Debug)]
pub struct Engine {
    handle: Handle,
    threads: Vec<JoinHandle<shard::CloseFailures>>,
    lock: Option<DirLock>,
    recovery: Vec<PartitionRecovery>,
    offloader: Option<crate::offloader::Offloader>,
}

/// The engine's API: `Clone + Send + Sync`, usable from any thread or
/// runtime, including tasks running on a shard. Every call returns a
/// [`Reply`] future that works on any executor.
///
/// From plain threads (`wait()` blocks the calling thread):
///
/// ```
/// # fn main() -> Result<(), corelog::Error> {
/// use corelog::{BatchBuilder, Config, Engine, MessageSpec, PollFrom};
/// let dir = tempfile::tempdir().unwrap();
/// let engine = Engine::open(Config { shards: Some(2), ..Config::new(dir.path()) })?;
/// let h = engine.handle();
/// std::thread::scope(|s| {
///     for t in 0..4u64 {
///         let h = engine.handle();
///         s.spawn(move || {
///             let mut b = BatchBuilder::new();
///             b.push(MessageSpec { id: t.into(), timestamp: 1, payload: b"x", user_headers: b"" });
///             h.append(t % 2, b.build().unwrap()).wait().unwrap();
///         });
///     }
/// });
/// let reply = h.poll(0, PollFrom::First, 1 << 20).wait()?;
/// assert_eq!(reply.batch_count(), 2);
/// reply.verify(&h.limits())?;
/// # Ok(engine.shutdown()?) }
/// ```
///
/// On a shard, where work for its own partitions skips the queue:
///
/// ```
/// # fn main() -> Result<(), corelog::Error> {
/// use corelog::{BatchBuilder, Config, Engine, MessageSpec};
/// let dir = tempfile::tempdir().unwrap();
/// let engine = Engine::open(Config { shards: Some(2), ..Config::new(dir.path()) })?;
/// let (h, (tx, rx)) = (engine.handle(), std::sync::mpsc::channel());
/// let partition = 5;
/// let shard = h.shard_of(partition);
/// engine.handle().spawn_on(shard, move || async move {
///     let mut b = BatchBuilder::new();
///     b.push(MessageSpec { id: 1, timestamp: 1, payload: b"local", user_headers: b"" });
///     let ack = h.append(partition, b.build().unwrap()).await;
///     tx.send(ack.map(|a| a.base_offset)).unwrap();
/// }).wait()?;
/// assert_eq!(rx.recv().unwrap()?, 0);
/// # Ok(engine.shutdown()?) }
/// ```
#[derive(Debug, Clone)]
pub struct Handle {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    id: u64,
    dir: PathBuf,
    queues: Vec<Arc<ShardQueue>>,
    closing: AtomicBool,
    limits: Limits,
    placement: crate::config::Placement,
    tier: Option<Arc<corelog_tier::Tier>>,
}

impl Engine {
    /// Locks the data directory, starts the shards and recovers every
    /// partition found in it (see [`Engine::recovery`]).
    pub fn open(config: Config) -> Result<Engine, OpenError> {
        if !corelog_segment::checksum::cpu_supports_build() {
            return Err(OpenError::UnsupportedCpu {
                path: corelog_segment::checksum::simd_path(),
            });
        }
        config
            .log
            .validate()
            .map_err(|reason| OpenError::InvalidConfig { reason })?;
        // Each open partition holds a descriptor (its active segment): let
        // the process use as many as its hard limit allows.
        match rlimit::increase_nofile_limit(u64::MAX) {
            Ok(n) => tracing::debug!("file descriptor limit: {n}"),
            Err(e) => tracing::warn!("cannot raise the file descriptor limit: {e}"),
        }
        let partitions = config.dir.join("partitions");
        std::fs::create_dir_all(&partitions)
            .map_err(|e| OpenError::io("create directory", &partitions, e))?;
        // Make the names of DIR/partitions and of every partition directory
        // in it durable: a run that crashed after creating one, before
        // syncing its parent, could otherwise lose a partition at a later
        // power cut. One fsync each, whatever the partition count.
        for d in [&partitions, &config.dir] {
            std::fs::File::open(d)
                .and_then(|f| f.sync_all())
                .map_err(|e| OpenError::io("directory sync", d.as_path(), e))?;
        }
        let lock = DirLock::acquire(&config.dir)?;
        let tier = match &config.tier {
            Some(t) => Some(
                corelog_tier::Tier::start(t.clone(), config.log.limits)
                    .map_err(|e| OpenError::Tier { error: Arc::new(e) })?,
            ),
            None => None,
        };
        let allowed: Vec<usize> = core_affinity::get_core_ids()
            .unwrap_or_default()
            .into_iter()
            .map(|c| c.id)
            .collect();
        let cpus = match &config.cpus {
            Some(chosen) if chosen.is_empty() => {
                return Err(OpenError::InvalidConfig {
                    reason: "Config::cpus is empty: name at least one CPU, or leave it unset",
                });
            }
            Some(chosen) => {
                if let Some(&cpu) = chosen.iter().find(|c| !allowed.contains(c)) {
                    return Err(OpenError::CpuNotAllowed { cpu, allowed });
                }
                chosen.clone()
            }
            None => allowed,
        };
        let shards = config.shards.unwrap_or(cpus.len().max(1)).max(1);
        let mut config = config;
        preallocation::fit(&mut config.log, &config.dir, shards);
        let id = ENGINE_IDS.fetch_add(1, Ordering::Relaxed);
        let queues: Vec<Arc<ShardQueue>> = (0..shards)
            .map(|i| Arc::new(ShardQueue::new(i, config.queue_depth)))
            .collect();
        let shared = Arc::new(Shared {
            id,
            dir: config.dir.clone(),
            queues: queues.clone(),
            closing: AtomicBool::new(false),
            limits: config.log.limits,
            placement: config.placement.clone(),
            tier,
        });
        let mut engine = Engine {
            handle: Handle { shared },
            threads: Vec::new(),
            lock: Some(lock),
            recovery: Vec::new(),
            offloader: None,
        };
        let config = Arc::new(config);
        let (tx, rx) = mpsc::channel();
        for (i, q) in queues.iter().enumerate() {
            let cpu = if config.pin_threads && !cpus.is_empty() {
                Some(cpus[i % cpus.len()])
            } else {
                None
            };
            let t = shard::start(i, shards, id, config.clone(), q.clone(), cpu, tx.clone())
                .map_err(|e| OpenError::io("start shard thread", &config.dir, e))?;
            engine.threads.push(t);
        }
        drop(tx);
        let mut failure = None;
        for _ in 0..shards {
            match rx.recv() {
                Ok(Ok(started)) => engine.recovery.extend(started.recovery),
                Ok(Err(e)) => failure = failure.or(Some(e)),
                Err(_) => failure = failure.or(Some(OpenError::ShardStopped)),
            }
        }
        if let Some(e) = failure {
            let _ = engine.stop(None);
            return Err(e);
        }
        engine.recovery.sort_by_key(|r| r.partition);
        if let Some(t) = &config.tier {
            let h = engine.handle();
            let offloader =
                crate::offloader::Offloader::start(move || h.offload_pass(), t.upload_every)
                    .map_err(|e| OpenError::io("start the offload thread", &config.dir, e))?;
            engine.offloader = Some(offloader);
        }
        Ok(engine)
    }

    /// The engine's API: a handle any thread or runtime clones and uses.
    pub fn handle(&self) -> Handle {
        self.handle.clone()
    }

    /// What opening each existing partition found, by partition.
    pub fn recovery(&self) -> &[PartitionRecovery] {
        &self.recovery
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        if let Err(e) = self.stop(None) {
            tracing::error!("engine shutdown: {e}");
        }
    }
}

impl Handle {
    /// The number of shards.
    pub fn shards(&self) -> usize {
        self.shared.queues.len()
    }

    /// The shard that owns `partition` (`partition % shards`).
    pub fn shard_of(&self, partition: u64) -> usize {
        self.shared.placement.shard_of(partition, self.shards())
    }

    /// The data directory.
    pub fn dir(&self) -> &Path {
        &self.shared.dir
    }

    /// The batch limits appends are checked against.
    pub fn limits(&self) -> Limits {
        self.shared.limits
    }

    fn send<T>(&self, shard: usize, make: impl FnOnce(Respond<T>) -> Request) -> Reply<T> {
        if self.shared.closing.load(Ordering::SeqCst) {
            return Reply::failed(RequestError::ShuttingDown);
        }
        let Some(queue) = self.shared.queues.get(shard) else {
            return Reply::failed(RequestError::NoSuchShard {
                shard,
                shards: self.shards(),
            });
        };
        let (tx, rx) = oneshot::channel();
        let req = make(tx);
        if let Some(local) = shard::local(self.shared.id, shard) {
            // Already on the owning shard: no queue, no wake-up.
            local.handle(req);
            return Reply::waiting(rx, queue.clone());
        }
        Reply::send(queue, req, rx)
    }

    /// Admits a producer batch (checks its layout and checksums on the
    /// calling thread), then appends it to `partition` (created if new).
    /// Resolves once stored under the partition's fsync policy. Appends to
    /// one partition are stored in the order they reach its shard; from
    /// one thread, that is the order of the calls while the shard's queue
    /// has room (a call that finds it full parks its batch in the
    /// [`Reply`], and a later call may pass it). A [`crate::Producer`]
    /// keeps call order through a full queue.
    pub fn append(&self, partition: u64, batch: impl Into<Bytes>) -> Reply<AppendAck> {
        match Batch::admit(batch, &self.shared.limits) {
            Ok(batch) => self.send(self.shard_of(partition), |reply| Request::Append {
                partition,
                batch,
                stamped: false,
                reply,
            }),
            Err(error) => Reply::failed(RequestError::Admission { partition, error }),
        }
    }

    /// Appends a batch the caller already admitted (with [`Batch::admit`]),
    /// without checking its checksums again. It must fit this engine's
    /// batch size limit.
    pub fn append_admitted(&self, partition: u64, batch: Batch) -> Reply<AppendAck> {
        self.append_checked(partition, batch, false)
    }

    /// An admitted batch to its shard, if it fits the size limit.
    fn append_checked(&self, partition: u64, batch: Batch, stamped: bool) -> Reply<AppendAck> {
        let declared = batch.len() as u64;
        if declared > self.shared.limits.max_batch_bytes {
            return Reply::failed(RequestError::Admission {
                partition,
                error: corelog_segment::BatchError::TooLarge {
                    declared,
                    max: self.shared.limits.max_batch_bytes,
                },
            });
        }
        self.send(self.shard_of(partition), |reply| Request::Append {
            partition,
            batch,
            stamped,
            reply,
        })
    }

    /// Durably stores `consumer`'s offset in `partition`.
    pub fn store_offset(&self, partition: u64, consumer: u64, offset: u64) -> Reply<()> {
        self.send(self.shard_of(partition), |reply| Request::StoreOffset {
            partition,
            consumer,
            offset,
            reply,
        })
    }

    /// `consumer`'s stored offset in `partition`.
    pub fn load_offset(&self, partition: u64, consumer: u64) -> Reply<Option<u64>> {
        self.send(self.shard_of(partition), |reply| Request::LoadOffset {
            partition,
            consumer,
            reply,
        })
    }

    /// Durably forgets `consumer`'s stored offset in `partition`; resolves
    /// to whether there was one.
    pub fn delete_offset(&self, partition: u64, consumer: u64) -> Reply<bool> {
        self.send(self.shard_of(partition), |reply| Request::DeleteOffset {
            partition,
            consumer,
            reply,
        })
    }

    /// Deletes the oldest `count` sealed segments of `partition` (fewer
    /// when fewer are sealed; never the active one), as retention would;
    /// resolves to the deleted segment files.
    pub fn delete_segments(&self, partition: u64, count: usize) -> Reply<Vec<PathBuf>> {
        self.send(self.shard_of(partition), |reply| Request::DeleteSegments {
            partition,
            count,
            reply,
        })
    }

    /// Sets `partition`'s retention limits in place of the configuration's
    /// (`LogConfig::retention`): the shards' periodic check
    /// (`Config::retention_check`) and [`Handle::enforce_retention`] apply
    /// them. Kept in the partition's options (see
    /// [`Handle::create_partition_with`]), so they hold after a restart;
    /// for a partition that does not exist yet, until the engine stops.
    pub fn set_retention(&self, partition: u64, retention: Retention) -> Reply<()> {
        self.send(self.shard_of(partition), |reply| Request::SetRetention {
            partition,
            retention,
            reply,
        })
    }

    /// Makes everything appended to `partition` so far durable.
    pub fn flush(&self, partition: u64) -> Reply<()> {
        self.send(self.shard_of(partition), |reply| Request::Flush {
            partition: Some(partition),
            reply,
        })
    }

    /// Makes everything appended to every partition so far durable.
    pub fn flush_all(&self) -> Reply<()> {
        let replies: Vec<Reply<()>> = (0..self.shards())
            .map(|s| {
                self.send(s, |reply| Request::Flush {
                    partition: None,
                    reply,
                })
            })
            .collect();
        Reply::joined(async move {
            for r in replies {
                r.await?;
            }
            Ok(())
        })
    }

    /// A fault for tests (feature `testing`): shard `shard` panics in its
    /// own loop, as a bug in it would, once it takes this from its queue.
    #[cfg(feature = "testing")]
    pub fn inject_shard_panic(&self, shard: usize) {
        if let Some(q) = self.shared.queues.get(shard) {
            let _ = q.try_push(Request::Panic);
        }
    }

    /// Each shard's state and queue, read at once (no request: it answers
    /// even when a shard cannot).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let engine = corelog::Engine::open(corelog::Config::new(dir.path()))?;
    /// let h = engine.handle();
    /// let health = h.health();
    /// assert!(health.is_healthy());
    /// assert_eq!(health.shards.len(), h.shards());
    /// engine.shutdown()?;
    /// # Ok::<(), corelog::Error>(())
    /// ```
    pub fn health(&self) -> crate::Health {
        crate::Health {
            shards: self.shared.queues.iter().map(|q| q.health()).collect(),
        }
    }

    /// Each shard's counts since the engine opened (appends, polls, bytes,
    /// failures, append latencies) with its health: read from any thread
    /// without a request, so it answers even when a shard cannot.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// use corelog::{BatchBuilder, Config, Engine, MessageSpec};
    /// let engine = Engine::open(Config::new(dir.path()))?;
    /// let h = engine.handle();
    /// let mut b = BatchBuilder::new();
    /// b.push(MessageSpec { id: 1, timestamp: 1, payload: b"m", user_headers: b"" });
    /// h.append(1, b.build()?).wait()?;
    /// let m = h.metrics();
    /// assert_eq!(m.appends(), 1);
    /// assert!(m.append_latency().quantile_at_most(0.99).is_some());
    /// engine.shutdown()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn metrics(&self) -> crate::Metrics {
        crate::Metrics {
            shards: (self.shared.queues.iter())
                .map(|q| q.counters.read(q.health()))
                .collect(),
            tier: self.shared.tier.as_ref().map(|t| t.figures()),
        }
    }

    /// Sizes and offsets of `partition`.
    pub fn stats(&self, partition: u64) -> Reply<LogStats> {
        self.send(self.shard_of(partition), |reply| Request::Stats {
            partition,
            reply,
        })
    }

    /// Closes `partition`'s log and opens it again, recovering it from what
    /// is on disk (as [`Engine::open`] does) and answering what the
    /// recovery found and did: the way on for a partition that a failed
    /// write or sync poisoned (it refuses appends until reopened), once the
    /// cause is gone (space freed, say), or one that could not be opened.
    /// Requests sent meanwhile wait for the reopened log. Refused
    /// ([`RequestError::Replicated`]) for a replicated partition, whose
    /// commit mark only its Raft group sets.
    ///
    /// ```no_run
    /// # fn main() -> Result<(), corelog::Error> {
    /// let engine = corelog::Engine::open(corelog::Config::new("/var/lib/mybroker"))?;
    /// let h = engine.handle();
    /// if h.stats(7).wait()?.poisoned {
    ///     // ... free space, then:
    ///     let report = h.reopen_partition(7).wait()?;
    ///     println!("partition 7 reopened: {report}");
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn reopen_partition(&self, partition: u64) -> Reply<RecoveryReport> {
        self.send(self.shard_of(partition), |reply| Request::Reopen {
            partition,
            reply,
        })
    }

    /// Creates `partition` if it does not exist.
    pub fn create_partition(&self, partition: u64) -> Reply<()> {
        self.send(self.shard_of(partition), |reply| Request::Create {
            partition,
            options: None,
            reply,
        })
    }

    /// Creates `partition` with its own `options` over the engine's log
    /// settings, kept in its directory and read back whenever it opens (a
    /// restart included). For a partition that exists, its options are
    /// replaced: retention at once, segment size and fsync policy when it
    /// next opens ([`Handle::reopen_partition`] opens it again now).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// use corelog::{Config, Engine, FsyncPolicy, PartitionOptions};
    /// let engine = Engine::open(Config::new(dir.path()))?;
    /// let h = engine.handle();
    /// let options = PartitionOptions::new().fsync(FsyncPolicy::Batch).segment_bytes(16 << 20);
    /// h.create_partition_with(3, options.clone()).wait()?;
    /// assert_eq!(h.partition_options(3).wait()?, options);
    /// engine.shutdown()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn create_partition_with(
        &self,
        partition: u64,
        options: crate::PartitionOptions,
    ) -> Reply<()> {
        self.send(self.shard_of(partition), |reply| Request::Create {
            partition,
            options: Some(options),
            reply,
        })
    }

    /// The options `partition` keeps in its directory (none set if it was
    /// created without: it follows the engine's settings).
    pub fn partition_options(&self, partition: u64) -> Reply<crate::PartitionOptions> {
        self.send(self.shard_of(partition), |reply| Request::Options {
            partition,
            reply,
        })
    }

    /// Every open partition, sorted.
    pub fn partitions(&self) -> Reply<Vec<u64>> {
        let replies: Vec<Reply<Vec<u64>>> = (0..self.shards())
            .map(|s| self.send(s, |reply| Request::List { reply }))
            .collect();
        Reply::joined(async move {
            let mut all = Vec::new();
            for r in replies {
                all.extend(r.await?);
            }
            all.sort_unstable();
            Ok(all)
        })
    }

    /// Applies the retention limits now; returns the deleted segment files.
    pub fn enforce_retention(&self) -> Reply<Vec<PathBuf>> {
        let replies: Vec<Reply<Vec<PathBuf>>> = (0..self.shards())
            .map(|s| self.send(s, |reply| Request::Retention { reply }))
            .collect();
        Reply::joined(async move {
            let mut all = Vec::new();
            for r in replies {
                all.extend(r.await?);
            }
            Ok(all)
        })
    }

    /// Runs `f()` as a task on `shard`'s runtime (a thread-per-core program
    /// puts its per-core work there: appends from it to partitions of the
    /// same shard skip the queue). Resolves once the task is started. A
    /// panic in the task ends that task only (it is logged); the shard and
    /// its partitions carry on.
    pub fn spawn_on<F, Fut>(&self, shard: usize, f: F) -> Reply<()>
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = ()> + 'static,
    {
        self.send(shard, move |reply| {
            Request::Spawn(Box::new(move || {
                let _ = reply.send(Ok(()));
                Box::pin(f())
            }))
        })
    }
}
