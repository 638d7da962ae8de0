//! A shard: one OS thread pinned to one CPU, running a monoio runtime on
//! the io_uring driver, owning the partitions placed on it and the storage
//! ring their files are written through. Nothing in it is shared with
//! other shards; work for its partitions arrives through its queue (or
//! directly, from a task already running on it).

mod cut;
mod dispatch;
mod open;
mod options;
mod reopen;

use crate::config::{Config, OpenPartitions};
use crate::error::{OpenError, RequestError};
use crate::partitions::{refused_by_a_new_partition, remove_partition_dir, Log, Lru, Slot};
use crate::queue::ShardQueue;
use crate::request::{Request, Task};
use crate::task::{Contained, YieldNow};
use crate::thread;
use corelog_segment::io::UringStorage;
use corelog_segment::log::{
    LogConfig, LogError, OpenError as LogOpenError, RecoveryReport, Retention,
};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::mpsc;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

/// How one partition fared when its shard opened it. New fields may be
/// added.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct PartitionRecovery {
    /// The partition.
    pub partition: u64,
    /// The shard that owns it.
    pub shard: usize,
    /// What recovery did, or why the partition could not be opened (it then
    /// answers every request with this error).
    pub result: Result<RecoveryReport, LogOpenError>,
}

pub(crate) struct Shard {
    index: usize,
    engine: u64,
    dir: PathBuf,
    config: LogConfig,
    placement: crate::config::Placement,
    storage: UringStorage,
    queue: Arc<ShardQueue>,
    partitions: RefCell<HashMap<u64, Slot>>,
    /// Retention limits set per partition (`Handle::set_retention`),
    /// applied whenever the partition is opened.
    retention: RefCell<HashMap<u64, Retention>>,
    /// Open partitions by last use, and how many may be open at once.
    lru: RefCell<Lru>,
    open_cap: usize,
    closing: Cell<bool>,
    /// The shard panicked: what reaches it now is refused `ShardFailed`.
    failed: Cell<bool>,
    tasks: Cell<usize>,
    idle: RefCell<Option<Waker>>,
}

thread_local! {
    static CURRENT: RefCell<Option<Rc<Shard>>> = const { RefCell::new(None) };
}

/// The shard running on this thread, if it is shard `index` of `engine`.
pub(crate) fn local(engine: u64, index: usize) -> Option<Rc<Shard>> {
    CURRENT.with(|c| {
        c.borrow()
            .as_ref()
            .filter(|s| s.engine == engine && s.index == index)
            .cloned()
    })
}

pub(crate) struct Started {
    pub recovery: Vec<PartitionRecovery>,
}

/// Starts shard `index` on its own thread; it reports on `ready` once its
/// partitions are recovered (or why it could not start).
pub(crate) fn start(
    index: usize,
    shards: usize,
    engine: u64,
    config: Arc<Config>,
    queue: Arc<ShardQueue>,
    cpu: Option<usize>,
    ready: mpsc::Sender<Result<Started, OpenError>>,
) -> std::io::Result<std::thread::JoinHandle<CloseFailures>> {
    std::thread::Builder::new()
        .name(format!("corelog-shard-{index}"))
        .spawn(move || {
            if let Some(cpu) = cpu {
                if let Err(e) = monoio::utils::bind_to_cpu_set([cpu]) {
                    tracing::warn!("shard {index}: cannot pin to CPU {cpu}: {e}");
                }
            }
            let runtime = monoio::RuntimeBuilder::<monoio::IoUringDriver>::new()
                .with_entries(256)
                .enable_timer()
                .build();
            let mut runtime = match runtime {
                Ok(r) => r,
                Err(e) => {
                    let _ = ready.send(Err(OpenError::IoUringUnavailable {
                        reason: Arc::new(e),
                    }));
                    queue.close();
                    return Vec::new();
                }
            };
            let watched = queue.clone();
            // A panic in the shard's own work (its loop, a request it runs
            // inline, a task of its own) would end the thread with requests
            // still queued, and their callers would wait forever: it fails
            // the shard's queue instead, so every caller hears of it.
            let run = std::panic::catch_unwind(AssertUnwindSafe(|| {
                runtime.block_on(async move {
                    let storage = match UringStorage::new(config.ring_entries) {
                        Ok(s) => s
                            .observe(Arc::new(IoCounts(queue.clone())))
                            .inline_writes(config.inline_writes),
                        Err(e) => {
                            let _ = ready.send(Err(OpenError::IoUringUnavailable {
                                reason: Arc::new(e),
                            }));
                            queue.close();
                            return Vec::new();
                        }
                    };
                    let shard = Rc::new(Shard {
                        index,
                        engine,
                        dir: config.dir.join("partitions"),
                        config: config.log.clone(),
                        placement: config.placement.clone(),
                        storage,
                        queue,
                        partitions: RefCell::new(HashMap::new()),
                        retention: RefCell::new(HashMap::new()),
                        lru: RefCell::new(Lru::default()),
                        open_cap: (config.max_open_partitions / shards).max(1),
                        closing: Cell::new(false),
                        failed: Cell::new(false),
                        tasks: Cell::new(0),
                        idle: RefCell::new(None),
                    });
                    CURRENT.with(|c| *c.borrow_mut() = Some(shard.clone()));
                    thread::set_on_shard_thread(true);
                    let recovery = shard.recover(shards, config.open_partitions).await;
                    let _ = ready.send(Ok(Started { recovery }));
                    // Always: limits may be set per partition at any time.
                    {
                        let weak = Rc::downgrade(&shard);
                        let every = config.retention_check;
                        monoio::spawn(async move {
                            loop {
                                monoio::time::sleep(every).await;
                                let Some(shard) = weak.upgrade() else { return };
                                if shard.closing.get() {
                                    return;
                                }
                                let work = shard.enforce_retention();
                                drop(shard);
                                if let Err(e) = work.await {
                                    tracing::warn!("retention: {e}");
                                }
                            }
                        });
                    }
                    let failures = shard.run().await;
                    CURRENT.with(|c| *c.borrow_mut() = None);
                    thread::set_on_shard_thread(false);
                    failures
                })
            }));
            match run {
                Ok(failures) => failures,
                Err(panic) => {
                    fail(index, panic.as_ref(), &watched, &mut runtime);
                    Vec::new()
                }
            }
        })
}

/// Where a shard's storage tells how long each `fdatasync` took and how
/// each write was made: its metrics.
struct IoCounts(Arc<ShardQueue>);

impl std::fmt::Debug for IoCounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "IoCounts(shard {})", self.0.index)
    }
}

impl corelog_segment::io::IoObserver for IoCounts {
    fn synced(&self, took: std::time::Duration) {
        self.0.counters.sync_done(took);
    }

    fn wrote(&self, way: corelog_segment::io::WriteWay) {
        self.0.counters.wrote(way);
    }
}

/// After a panic in shard `index`'s own work: logs it, fails its queue
/// (queued and later requests are refused `ShardFailed`), and gives the
/// work it had taken a bounded time on its runtime: writes in flight
/// complete and answer, waiting polls are woken and refused.
fn fail(
    index: usize,
    panic: &(dyn std::any::Any + Send),
    queue: &ShardQueue,
    runtime: &mut monoio::Runtime<monoio::time::TimeDriver<monoio::IoUringDriver>>,
) {
    let what = panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".to_string());
    tracing::error!(
        "shard {index} failed: {what}; its partitions answer ShardFailed until the engine is reopened"
    );
    queue.fail();
    if let Some(shard) = CURRENT.with(|c| c.borrow_mut().take()) {
        shard.failed.set(true);
        let _ = std::panic::catch_unwind(AssertUnwindSafe(|| {
            runtime.block_on(async {
                // Woken on the runtime: a waker needs it.
                for log in shard.open_logs() {
                    log.interrupt_waiters();
                }
                let idle = Idle {
                    shard: shard.clone(),
                };
                monoio::time::timeout(FAILED_DRAIN, idle).await
            })
        }));
    }
    thread::set_on_shard_thread(false);
}

/// How long a failed shard lets the work it had taken finish.
const FAILED_DRAIN: std::time::Duration = std::time::Duration::from_secs(5);

/// The partitions whose final flush or close failed at shutdown, and why.
pub(crate) type CloseFailures = Vec<(u64, LogError)>;

impl Shard {
    /// Opens every existing partition this shard owns.
    async fn recover(
        self: &Rc<Self>,
        shards: usize,
        when: OpenPartitions,
    ) -> Vec<PartitionRecovery> {
        let mut ids: Vec<u64> = match std::fs::read_dir(&self.dir) {
            Ok(rd) => rd
                .filter_map(|e| e.ok())
                .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse().ok()))
                .filter(|id| self.placement.shard_of(*id, shards) == self.index)
                .collect(),
            Err(_) => Vec::new(),
        };
        ids.sort_unstable();
        let mut out = Vec::new();
        if when == OpenPartitions::OnFirstRequest {
            let mut parts = self.partitions.borrow_mut();
            for id in ids {
                parts.insert(id, Slot::OnDisk);
            }
            return out;
        }
        for id in ids {
            let (result, _) = self.open_with_options(id).await;
            let (slot, result) = match result {
                Ok((log, report)) => {
                    if report.changed_data() {
                        tracing::warn!("partition {id} recovered: {report}");
                    }
                    self.lru.borrow_mut().touch(id);
                    (Slot::Open(log), Ok(report))
                }
                Err(e) => {
                    tracing::error!("partition {id} cannot be opened: {e}");
                    (Slot::Failed(e.clone()), Err(e))
                }
            };
            self.partitions.borrow_mut().insert(id, slot);
            out.push(PartitionRecovery {
                partition: id,
                shard: self.index,
                result,
            });
            self.close_over_cap(id);
        }
        out
    }

    async fn run(self: Rc<Self>) -> CloseFailures {
        const BURST: usize = 256;
        loop {
            let mut n = 0;
            let mut stop = false;
            while n < BURST {
                let Some(req) = self.queue.pop() else { break };
                n += 1;
                if let Request::Shutdown = req {
                    stop = true;
                    break;
                }
                self.handle(req);
            }
            self.queue.freed(n);
            if stop {
                break;
            }
            if n == BURST {
                // Let the tasks the burst spawned make progress.
                YieldNow(false).await;
                continue;
            }
            self.queue.ready().await;
        }
        self.shutdown().await
    }

    /// Flushes and closes every partition; returns the ones that failed.
    async fn shutdown(self: &Rc<Self>) -> CloseFailures {
        self.closing.set(true);
        // Long polls answer now (ShuttingDown), so that they do not hold
        // the shutdown for the rest of their wait.
        for log in self.open_logs() {
            log.interrupt_waiters();
        }
        Idle {
            shard: self.clone(),
        }
        .await;
        // Closed together: each close ends in syncs (the flush, the
        // clean-close record), which the ring then runs side by side.
        let closing: Vec<_> = self
            .open_logs()
            .into_iter()
            .map(|log| monoio::spawn(async move { (log.partition(), log.close().await) }))
            .collect();
        let mut failures = Vec::new();
        for task in closing {
            if let (partition, Err(e)) = task.await {
                tracing::error!("closing partition {partition}: {e}");
                failures.push((partition, e));
            }
        }
        self.partitions.borrow_mut().clear();
        self.queue.close();
        failures
    }

    /// Applies the retention limits to every open partition; the first
    /// error stops it (and is returned), deletions so far stand.
    fn enforce_retention(
        &self,
    ) -> impl Future<Output = Result<Vec<PathBuf>, RequestError>> + 'static {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_micros() as u64)
            .unwrap_or(0);
        let logs = self.open_logs();
        async move {
            let mut deleted = Vec::new();
            for log in logs {
                deleted.extend(log.enforce_retention(now).await?);
            }
            Ok(deleted)
        }
    }

    /// Every partition log that is open.
    fn open_logs(&self) -> Vec<Log> {
        self.partitions
            .borrow()
            .values()
            .filter_map(|s| match s {
                Slot::Open(l) => Some(l.clone()),
                _ => None,
            })
            .collect()
    }

    fn spawn_tracked(self: &Rc<Self>, fut: impl Future<Output = ()> + 'static) {
        self.tasks.set(self.tasks.get() + 1);
        let shard = self.clone();
        monoio::spawn(async move {
            fut.await;
            shard.tasks.set(shard.tasks.get() - 1);
            if shard.tasks.get() == 0 {
                if let Some(w) = shard.idle.borrow_mut().take() {
                    w.wake();
                }
            }
        });
    }

    /// Takes a request: from the queue, or directly from a task on this
    /// thread.
    pub(crate) fn handle(self: &Rc<Self>, req: Request) {
        if self.failed.get() {
            req.fail(RequestError::ShardFailed { shard: self.index });
            return;
        }
        if self.closing.get() {
            req.fail(RequestError::ShuttingDown);
            return;
        }
        match req {
            Request::Spawn(task) => self.spawn_task(task),
            #[cfg(feature = "testing")]
            Request::Panic => panic!("a panic injected into shard {}", self.index),
            Request::Shutdown => {}
            Request::List { reply } => {
                let mut ids: Vec<u64> = self
                    .partitions
                    .borrow()
                    .iter()
                    .filter(|(_, s)| matches!(s, Slot::Open(_) | Slot::OnDisk | Slot::Closing(_)))
                    .map(|(id, _)| *id)
                    .collect();
                ids.sort_unstable();
                let _ = reply.send(Ok(ids));
            }
            Request::SetRetention {
                partition,
                retention,
                reply,
            } => {
                self.retention.borrow_mut().insert(partition, retention);
                if let Some(Slot::Open(log)) = self.partitions.borrow().get(&partition) {
                    log.set_retention(retention);
                }
                self.keep_retention(partition, retention, reply);
            }
            Request::Retention { reply } => {
                let work = self.enforce_retention();
                self.spawn_tracked(async move {
                    let _ = reply.send(work.await);
                });
            }
            Request::Flush {
                partition: None,
                reply,
            } => {
                let logs = self.open_logs();
                self.spawn_tracked(async move {
                    let mut result = Ok(());
                    for log in logs {
                        if let Err(e) = log.flush().await {
                            result = Err(RequestError::from(e));
                        }
                    }
                    let _ = reply.send(result);
                });
            }
            req => {
                let Some(p) = req.partition() else {
                    unreachable!("every request without a partition is matched above");
                };
                let mut parts = self.partitions.borrow_mut();
                match parts.get_mut(&p) {
                    Some(Slot::Open(log)) => {
                        let log = log.clone();
                        drop(parts);
                        self.lru.borrow_mut().touch(p);
                        self.dispatch(&log, req);
                    }
                    Some(Slot::Opening(pending) | Slot::Closing(pending)) => pending.push(req),
                    Some(Slot::Failed(_) | Slot::OnDisk)
                        if matches!(req, Request::Delete { .. }) =>
                    {
                        drop(parts);
                        self.delete_partition(p, None, req);
                    }
                    Some(Slot::Failed(_) | Slot::OnDisk)
                        if matches!(req, Request::Reopen { .. }) =>
                    {
                        drop(parts);
                        self.reopen(p, None, req);
                    }
                    Some(slot @ Slot::OnDisk) => {
                        *slot = Slot::Opening(vec![req]);
                        drop(parts);
                        self.open_partition(p);
                    }
                    Some(Slot::Failed(e)) => {
                        let e = e.clone();
                        drop(parts);
                        req.fail(RequestError::Unopenable {
                            partition: p,
                            error: e,
                        });
                    }
                    None if matches!(req, Request::Delete { .. }) => {
                        drop(parts);
                        self.delete_partition(p, None, req);
                    }
                    None => {
                        if let Some(e) = refused_by_a_new_partition(&req, p) {
                            drop(parts);
                            req.fail(RequestError::appending(p, e));
                        } else if matches!(req, Request::Append { .. } | Request::Create { .. }) {
                            parts.insert(p, Slot::Opening(vec![req]));
                            drop(parts);
                            self.open_partition(p);
                        } else {
                            drop(parts);
                            req.fail(RequestError::UnknownPartition { partition: p });
                        }
                    }
                }
            }
        }
    }

    /// Starts a caller's task. A panic in it (starting, running or being
    /// dropped) ends that task only: unwinding would kill the shard thread,
    /// and the requests it had taken would never be answered.
    fn spawn_task(self: &Rc<Self>, task: Task) {
        let shard = self.index;
        match std::panic::catch_unwind(AssertUnwindSafe(task)) {
            Ok(fut) => {
                monoio::spawn(Contained {
                    fut: Some(fut),
                    shard,
                });
            }
            Err(_) => {
                tracing::error!("shard {shard}: a task spawned on it panicked; it was dropped")
            }
        }
    }

    /// Closes the least recently used idle partitions while more than
    /// the cap are open (never `keep`, just opened). A closed partition
    /// gives back its descriptor and mappings (poll replies keep theirs) and
    /// is reopened by its next request; one with work in flight is skipped.
    fn close_over_cap(self: &Rc<Self>, keep: u64) {
        while self.lru.borrow().len() > self.open_cap {
            let victim = {
                let parts = self.partitions.borrow();
                let lru = self.lru.borrow();
                let found = lru.oldest().find_map(|q| match parts.get(&q) {
                    Some(Slot::Open(log)) if q != keep && log.is_idle() => Some((q, log.clone())),
                    _ => None,
                });
                found
            };
            let Some((q, log)) = victim else {
                return;
            };
            self.partitions
                .borrow_mut()
                .insert(q, Slot::Closing(Vec::new()));
            self.lru.borrow_mut().forget(q);
            let shard = self.clone();
            self.spawn_tracked(async move {
                if let Err(e) = log.close().await {
                    tracing::warn!("closing idle partition {q}: {e}");
                }
                drop(log);
                let pending = match shard.partitions.borrow_mut().remove(&q) {
                    Some(Slot::Closing(v)) => v,
                    _ => Vec::new(),
                };
                shard.closed_partition(q, pending);
            });
        }
    }

    /// Partition `p`'s log was closed (and is forgotten by the LRU): it
    /// rests on disk, or is reopened at once for the requests that came
    /// meanwhile.
    fn closed_partition(self: &Rc<Self>, p: u64, pending: Vec<Request>) {
        if pending.is_empty() {
            self.partitions.borrow_mut().insert(p, Slot::OnDisk);
        } else {
            self.partitions
                .borrow_mut()
                .insert(p, Slot::Opening(pending));
            self.open_partition(p);
        }
    }
}

impl Shard {
    /// Forgets partition `p` (later requests see no partition), closes its
    /// log if open, then removes its directory and syncs the parent. A
    /// crash during the removal can leave part of the directory, which the
    /// next open recovers or refuses like any damaged partition; a caller
    /// that must not see it again deletes it again.
    fn delete_partition(self: &Rc<Self>, p: u64, log: Option<Log>, req: Request) {
        let Request::Delete { reply, .. } = req else {
            unreachable!("delete_partition is called with Delete requests only");
        };
        self.partitions.borrow_mut().remove(&p);
        self.retention.borrow_mut().remove(&p);
        self.lru.borrow_mut().forget(p);
        let parent = self.dir.clone();
        self.spawn_tracked(async move {
            if let Some(log) = log {
                if let Err(e) = log.close().await {
                    tracing::warn!("closing partition {p} before deleting it: {e}");
                }
            }
            let _ = reply.send(remove_partition_dir(&parent, p));
        });
    }
}

/// Resolves once no request task is running on the shard.
struct Idle {
    shard: Rc<Shard>,
}

impl Future for Idle {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.shard.tasks.get() == 0 {
            return Poll::Ready(());
        }
        *self.shard.idle.borrow_mut() = Some(cx.waker().clone());
        Poll::Pending
    }
}
