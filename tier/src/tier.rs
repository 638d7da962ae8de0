//! A tier: the store, what it holds (the manifests, as last loaded or
//! committed), the chunk cache and the threads that read from it. The
//! engine drives uploads through [`Tier::offload`] on a thread of its own
//! and hands polls below a partition's local log to [`Tier::poll`].

use crate::buffers::ChunkBuffers;
use crate::cache::{CacheStats, ChunkCache};
use crate::error::TierError;
use crate::leadership::Leadership;
use crate::manifest::Manifest;
use crate::read::{IndexCache, Reader};
use crate::store::ObjectStore;
use crate::upload::load_manifest;
use corelog_segment::log::{PollFrom, PollReply};
use corelog_segment::Limits;
use futures_channel::oneshot;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// How a tier runs.
#[derive(Debug, Clone)]
pub struct TierConfig {
    /// The store.
    pub store: Arc<dyn ObjectStore>,
    /// Per partition, the bytes of sealed segments kept on local disk once
    /// the store holds them (the active segment always stays).
    pub local_retention_bytes: u64,
    /// Bytes per ranged GET (and per cached chunk). Larger chunks cost the
    /// store fewer requests: on SeaweedFS, 16 MiB took a third less of its
    /// CPU per GB served than 4 MiB (Redpanda's default is 16 MiB too).
    pub chunk_bytes: u64,
    /// The chunk cache's budget, in bytes.
    pub cache_bytes: u64,
    /// How often the uploader looks for sealed segments.
    pub upload_every: Duration,
    /// Threads serving remote reads.
    pub readers: usize,
    /// In a cluster, who may write the manifests (the leader of each
    /// partition's group) and under which term; `None` on a single node,
    /// which always may, under term 0.
    pub leadership: Option<Arc<dyn Leadership>>,
}

impl TierConfig {
    /// Defaults for a store: 1 GiB kept locally, 16 MiB chunks, a 256 MiB
    /// cache, a look every second, two readers.
    pub fn new(store: Arc<dyn ObjectStore>) -> TierConfig {
        TierConfig {
            store,
            local_retention_bytes: 1 << 30,
            chunk_bytes: 16 << 20,
            cache_bytes: 256 << 20,
            upload_every: Duration::from_secs(1),
            readers: 2,
            leadership: None,
        }
    }
}

/// What a tier has done, for stats.
#[derive(Debug, Default)]
pub struct TierCounters {
    /// Segments copied and committed since start.
    pub uploaded_segments: AtomicU64,
    /// Their bytes.
    pub uploaded_bytes: AtomicU64,
    /// Sealed segments waiting to be copied (at the last pass).
    pub backlog_segments: AtomicU64,
    /// Their bytes.
    pub backlog_bytes: AtomicU64,
    /// Uploads or commits that failed since start.
    pub upload_errors: AtomicU64,
    /// Segments removed from the store by retention.
    pub expired_segments: AtomicU64,
    /// Objects no manifest named, deleted.
    pub strays_deleted: AtomicU64,
    /// Polls served from the store.
    pub remote_polls: AtomicU64,
    /// Their bytes.
    pub remote_poll_bytes: AtomicU64,
}

/// A tier's figures at one moment ([`Tier::figures`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TierFigures {
    /// Segments copied and committed since start, and their bytes.
    pub uploaded: (u64, u64),
    /// Sealed segments waiting to be copied at the last pass, and their bytes.
    pub backlog: (u64, u64),
    /// Uploads or commits that failed since start.
    pub upload_errors: u64,
    /// Segments removed from the store by retention.
    pub expired_segments: u64,
    /// Objects no manifest named, deleted.
    pub strays_deleted: u64,
    /// Polls served from the store, and their bytes.
    pub remote_polls: (u64, u64),
    /// The chunk cache.
    pub cache: CacheStats,
}

impl std::fmt::Display for TierFigures {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "tier: {} segments uploaded ({} B, {} failed), backlog {} segments ({} B), {} expired, {} strays deleted, {} remote polls ({} B), cache {:.0}% hits ({} chunks fetched ahead, {} of {} B)",
            self.uploaded.0,
            self.uploaded.1,
            self.upload_errors,
            self.backlog.0,
            self.backlog.1,
            self.expired_segments,
            self.strays_deleted,
            self.remote_polls.0,
            self.remote_polls.1,
            self.cache.hit_rate() * 100.0,
            self.cache.prefetched,
            self.cache.bytes,
            self.cache.budget,
        )
    }
}

/// What one pass did for one partition.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct OffloadPass {
    /// The end of what the store holds: local segments wholly below it may go.
    pub offloaded_through: u64,
    /// Segments copied and committed.
    pub uploaded: usize,
    /// Sealed segments still waiting, and their bytes.
    pub backlog: (u64, u64),
}

/// Chunks fetched ahead of a consumer reading from the store (at most a
/// quarter of the cache's budget).
pub const READ_AHEAD: u64 = 8;

type PollJob = (
    u64,
    PollFrom,
    u64,
    oneshot::Sender<Result<Option<PollReply>, TierError>>,
);

enum Job {
    Poll(PollJob),
    Prefetch(u64, u64, u64),
    Purge(u64, oneshot::Sender<Result<usize, TierError>>),
}

/// A running tier.
#[derive(Debug)]
pub struct Tier {
    pub(crate) config: TierConfig,
    limits: Limits,
    cache: ChunkCache,
    /// The fetched chunks' buffers, used again once evicted.
    buffers: ChunkBuffers,
    pub(crate) manifests: Mutex<HashMap<u64, Arc<Manifest>>>,
    pub(crate) counters: TierCounters,
    /// Polls for the reader threads, and read-ahead for the threads that
    /// fetch ahead (apart, so a poll never waits behind a read-ahead).
    jobs: Mutex<Option<(mpsc::Sender<Job>, mpsc::Sender<Job>)>>,
    readers: Mutex<Vec<JoinHandle<()>>>,
    indexes: IndexCache,
    /// One upload pass at a time: a manifest has one writer here.
    pub(crate) uploading: Mutex<()>,
    /// Per partition, the term whose strays and older manifests were
    /// cleaned (after that term's first commit, in a cluster), and the
    /// passes since.
    pub(crate) cleaned: Mutex<HashMap<u64, (u64, u32)>>,
    /// Per partition, the term and manifest end last handed to the
    /// cluster to replicate (`Leadership::committed`).
    pub(crate) announced: Mutex<HashMap<u64, (u64, u64)>>,
    /// Set by [`Tier::stop`]: an upload in progress fails at its next read.
    pub(crate) stopping: AtomicBool,
    /// Partitions whose manifest was found to describe their log, this run
    /// (`trust.rs`).
    pub(crate) trusted: Mutex<std::collections::HashSet<u64>>,
}

impl Tier {
    /// Checks the store (it answers, the bucket exists, the credentials
    /// are accepted) and starts the reader threads.
    pub fn start(config: TierConfig, limits: Limits) -> Result<Arc<Tier>, TierError> {
        config.store.check()?;
        let (tx, rx) = mpsc::channel::<Job>();
        let (ahead_tx, ahead_rx) = mpsc::channel::<Job>();
        let tier = Arc::new(Tier {
            cache: ChunkCache::new(config.cache_bytes),
            // At most 1 GiB each (a larger chunk is fetched into memory of
            // its own, `Reader::fetch`).
            buffers: ChunkBuffers::new(
                usize::try_from(config.chunk_bytes.clamp(1, 1 << 30)).unwrap_or(1 << 30),
            ),
            config,
            limits,
            manifests: Mutex::new(HashMap::new()),
            counters: TierCounters::default(),
            jobs: Mutex::new(Some((tx, ahead_tx))),
            readers: Mutex::new(Vec::new()),
            indexes: IndexCache::default(),
            uploading: Mutex::new(()),
            cleaned: Mutex::new(HashMap::new()),
            announced: Mutex::new(HashMap::new()),
            stopping: AtomicBool::new(false),
            trusted: Mutex::new(std::collections::HashSet::new()),
        });
        let mut readers = Vec::new();
        let n = tier.config.readers.max(1);
        // Twice as many fetching ahead: a store answers GETs in parallel.
        for (name, rx, n) in [("read", rx, n), ("ahead", ahead_rx, 2 * n)] {
            let rx = Arc::new(Mutex::new(rx));
            for i in 0..n {
                let (tier, rx) = (Arc::downgrade(&tier), rx.clone());
                let spawned = std::thread::Builder::new()
                    .name(format!("corelog-tier-{name}-{i}"))
                    .spawn(move || read_jobs(tier, rx));
                match spawned {
                    Ok(h) => readers.push(h),
                    Err(e) => tracing::warn!("tier: no {name} thread: {e}"),
                }
            }
        }
        *lock(&tier.readers) = readers;
        Ok(tier)
    }

    /// Stops the reader threads (waiting reads answer [`TierError::Stopped`])
    /// and fails an upload in progress (it is redone at the next start).
    pub fn stop(&self) {
        self.stopping.store(true, Ordering::SeqCst);
        lock(&self.jobs).take();
        for h in std::mem::take(&mut *lock(&self.readers)) {
            let _ = h.join();
        }
    }

    /// The configuration.
    pub fn config(&self) -> &TierConfig {
        &self.config
    }

    /// What the tier has done.
    pub fn counters(&self) -> &TierCounters {
        &self.counters
    }

    /// The tier's figures now.
    pub fn figures(&self) -> TierFigures {
        let c = &self.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        TierFigures {
            uploaded: (get(&c.uploaded_segments), get(&c.uploaded_bytes)),
            backlog: (get(&c.backlog_segments), get(&c.backlog_bytes)),
            upload_errors: get(&c.upload_errors),
            expired_segments: get(&c.expired_segments),
            strays_deleted: get(&c.strays_deleted),
            remote_polls: (get(&c.remote_polls), get(&c.remote_poll_bytes)),
            cache: self.cache.stats(),
        }
    }

    /// The chunk cache's figures.
    pub fn cache_stats(&self) -> CacheStats {
        self.cache.stats()
    }

    /// The partition's manifest as last loaded or committed (loaded from
    /// the store the first time).
    pub fn manifest(&self, partition: u64) -> Result<Arc<Manifest>, TierError> {
        if let Some(m) = lock(&self.manifests).get(&partition) {
            return Ok(m.clone());
        }
        let m = Arc::new(load_manifest(self.config.store.as_ref(), partition)?);
        lock(&self.manifests).insert(partition, m.clone());
        Ok(m)
    }

    /// Whether the store may hold batches before `offset` (a poll there
    /// that the local log could not serve goes to the store).
    pub fn holds_before(&self, partition: u64, offset: u64) -> bool {
        match lock(&self.manifests).get(&partition) {
            Some(m) => m.start_offset().is_some_and(|s| s < offset),
            // Not loaded yet: ask the store.
            None => true,
        }
    }

    pub(crate) fn publish(&self, m: &Manifest) {
        lock(&self.manifests).insert(m.partition, Arc::new(m.clone()));
    }

    /// Serves a poll from the store (blocking): `None` when it holds
    /// nothing there.
    pub fn poll(
        &self,
        partition: u64,
        from: PollFrom,
        max_bytes: u64,
    ) -> Result<Option<PollReply>, TierError> {
        let m = self.manifest(partition)?;
        let Some((reply, base, end)) = self.reader().poll(&m, from, max_bytes)? else {
            return Ok(None);
        };
        self.counters.remote_polls.fetch_add(1, Ordering::Relaxed);
        self.counters
            .remote_poll_bytes
            .fetch_add(reply.len(), Ordering::Relaxed);
        self.read_ahead(&m, base, end);
        Ok(Some(reply))
    }

    /// The consumer reads on from byte `end` of segment `base`: the next
    /// [`READ_AHEAD`] chunks (into the next segment past this one's end)
    /// are fetched before it gets there, by the read-ahead threads.
    fn read_ahead(&self, m: &Manifest, base: u64, end: u64) {
        let c = self.config.chunk_bytes.max(1);
        // Never more than a quarter of the cache ahead.
        let window = READ_AHEAD.min(self.config.cache_bytes / c / 4).max(1);
        let Some(i) = m.segments.iter().position(|s| s.base_offset == base) else {
            return;
        };
        let jobs = lock(&self.jobs);
        let Some((_, ahead)) = jobs.as_ref() else {
            return;
        };
        // From the chunk after the one holding byte `end`: the poll read
        // the header there (to find where its reply ends), so it is held.
        let (mut seg, mut n) = (i, end / c + 1);
        let mut asked = 0;
        while asked < window {
            let Some(s) = m.segments.get(seg) else {
                return;
            };
            if n >= s.bytes.div_ceil(c) {
                // On into the next segment: no chunk of the window spent.
                (seg, n) = (seg + 1, 0);
                continue;
            }
            let _ = ahead.send(Job::Prefetch(m.partition, s.base_offset, n));
            (n, asked) = (n + 1, asked + 1);
        }
    }

    /// Deletes everything the store holds for a deleted partition: its
    /// manifests first (so none names a missing object), then its objects;
    /// forgets what this tier knew of it. Returns the objects deleted.
    pub fn purge(&self, partition: u64) -> Result<usize, TierError> {
        let _one_writer = lock(&self.uploading);
        let store = self.config.store.as_ref();
        let mut objects = store.list(&crate::manifest::partition_prefix(partition))?;
        // Manifests first.
        objects.sort_by_key(|o| Manifest::term_of_key(partition, &o.key).is_none());
        for o in &objects {
            store.delete(&o.key)?;
        }
        lock(&self.manifests).remove(&partition);
        lock(&self.cleaned).remove(&partition);
        lock(&self.announced).remove(&partition);
        lock(&self.trusted).remove(&partition);
        self.indexes.forget_partition(partition);
        Ok(objects.len())
    }

    /// [`Tier::purge`] on a reader thread, answered on the channel.
    pub fn purge_on_reader(&self, partition: u64) -> oneshot::Receiver<Result<usize, TierError>> {
        let (tx, rx) = oneshot::channel();
        if let Some(jobs) = lock(&self.jobs).as_ref() {
            let _ = jobs.0.send(Job::Purge(partition, tx));
        }
        rx
    }

    /// [`Tier::poll`] on a reader thread, answered on the channel.
    pub fn poll_on_reader(
        &self,
        partition: u64,
        from: PollFrom,
        max_bytes: u64,
    ) -> oneshot::Receiver<Result<Option<PollReply>, TierError>> {
        let (tx, rx) = oneshot::channel();
        if let Some(jobs) = lock(&self.jobs).as_ref() {
            // A stopped tier drops the sender: the receiver sees it.
            let _ = jobs.0.send(Job::Poll((partition, from, max_bytes, tx)));
        }
        rx
    }

    fn reader(&self) -> Reader<'_> {
        Reader {
            store: self.config.store.as_ref(),
            cache: &self.cache,
            indexes: &self.indexes,
            chunk_bytes: self.config.chunk_bytes,
            buffers: &self.buffers,
            limits: self.limits,
        }
    }
}

fn read_jobs(tier: std::sync::Weak<Tier>, rx: Arc<Mutex<mpsc::Receiver<Job>>>) {
    loop {
        let job = lock(&rx).recv();
        let (Ok(job), Some(tier)) = (job, tier.upgrade()) else {
            return;
        };
        match job {
            Job::Poll((p, from, max, tx)) => {
                let _ = tx.send(tier.poll(p, from, max));
            }
            Job::Purge(p, tx) => {
                let _ = tx.send(tier.purge(p));
            }
            Job::Prefetch(p, base, n) => {
                if let Ok(m) = tier.manifest(p) {
                    if let Some(seg) = m.segments.iter().find(|s| s.base_offset == base) {
                        tier.reader().prefetch(p, seg, n);
                    }
                }
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
