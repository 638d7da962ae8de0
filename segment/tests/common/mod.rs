//! Helpers shared by the integration tests.
#![allow(dead_code, clippy::unwrap_used)]

use corelog_segment::log::{LogConfig, PartitionLog, PollFrom};
use corelog_segment::watchdog::Watchdog;
use corelog_segment::{Batch, BatchBuilder, Limits, MessageSpec};
use std::future::Future;
use std::time::Duration;

/// A run (`run`, `run_sim`) that has not ended after this fails the test
/// binary with the test's name: an append waiting for a sync round that
/// never publishes would otherwise hang the suite, and CI with it. Far
/// past any run's length; it asserts nothing about speed.
const RUN_LIMIT: Duration = Duration::from_secs(120);

/// Armed for one run, named by the test's thread.
fn watch() -> Watchdog {
    let name = std::thread::current().name().unwrap_or("a test").to_owned();
    Watchdog::arm(name, RUN_LIMIT)
}

/// Runs `f` on a monoio runtime with the io_uring driver and timers.
pub fn run<F: Future>(f: F) -> F::Output {
    let _watchdog = watch();
    monoio::RuntimeBuilder::<monoio::IoUringDriver>::new()
        .enable_timer()
        .build()
        .expect("io_uring runtime")
        .block_on(f)
}

/// Runs `f` on a monoio runtime with the legacy (epoll) driver: enough for
/// the simulated disk, which does no real I/O.
pub fn run_sim<F: Future>(f: F) -> F::Output {
    let _watchdog = watch();
    monoio::RuntimeBuilder::<monoio::LegacyDriver>::new()
        .enable_timer()
        .build()
        .expect("legacy runtime")
        .block_on(f)
}

/// A producer batch of `count` messages of `size` bytes, tagged with `tag`.
pub fn batch(tag: u64, count: usize, size: usize) -> Batch {
    let mut b = BatchBuilder::new();
    let payloads: Vec<Vec<u8>> = (0..count)
        .map(|i| {
            let mut p = vec![0u8; size];
            for (j, byte) in p.iter_mut().enumerate() {
                *byte = (tag as usize * 31 + i * 7 + j) as u8;
            }
            p
        })
        .collect();
    for (i, p) in payloads.iter().enumerate() {
        b.push(MessageSpec {
            id: (u128::from(tag) << 32) | i as u128,
            timestamp: 1_700_000_000_000_000 + tag * 1000 + i as u64,
            payload: p,
            user_headers: if i % 2 == 0 { b"h=1" } else { b"" },
        });
    }
    Batch::admit(b.build().unwrap(), &Limits::default()).unwrap()
}

/// Small segments and a frequent index, so tests cross boundaries.
pub fn small_config() -> LogConfig {
    LogConfig {
        segment_bytes: 16 << 10,
        index_interval_bytes: 1024,
        limits: Limits {
            max_batch_bytes: 1 << 20,
        },
        ..LogConfig::default()
    }
}

/// Every batch of the log, as (base_offset, bytes), read with polls.
pub fn read_all<S: corelog_segment::io::Storage>(log: &PartitionLog<S>) -> Vec<(u64, Vec<u8>)> {
    let mut out = Vec::new();
    let mut from = PollFrom::First;
    loop {
        let reply = log.poll(from, 64 << 10).unwrap();
        if reply.is_empty() {
            return out;
        }
        reply.verify(&log.config().limits).unwrap();
        for b in reply.batches() {
            out.push((b.base_offset(), b.as_bytes().to_vec()));
        }
        from = PollFrom::Offset(reply.next_offset());
    }
}

/// Lets every task that is already runnable run once before this one goes
/// on. (monoio re-runs a task that wakes itself while being polled at once,
/// so a plain self-wake would let no one in; the wake comes from a task
/// spawned at the back of the run queue instead.)
pub async fn yield_to_others() {
    struct YieldToOthers(bool);
    impl Future for YieldToOthers {
        type Output = ();
        fn poll(
            mut self: std::pin::Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
        ) -> std::task::Poll<()> {
            if self.0 {
                return std::task::Poll::Ready(());
            }
            self.0 = true;
            let waker = cx.waker().clone();
            monoio::spawn(async move { waker.wake() });
            std::task::Poll::Pending
        }
    }
    YieldToOthers(false).await
}

/// A simulated disk whose files can hold a segment of `config`.
pub fn sim_for(seed: u64, config: &LogConfig) -> corelog_segment::io::SimStorage {
    corelog_segment::io::SimStorage::new(seed, config.segment_capacity() as usize)
}

/// Messages in a batch.
pub fn count_of(b: &Batch) -> u64 {
    u64::from(b.as_ref().message_count())
}

/// The bytes the log stores for `sent` stamped with these fields: the
/// stamped header, then the untouched frames.
pub fn stored_form(sent: &Batch, partition: u64, base_offset: u64, base_timestamp: u64) -> Vec<u8> {
    let header = corelog_segment::stamped_header(
        sent.as_ref(),
        corelog_segment::Stamp {
            partition_id: partition,
            base_offset,
            base_timestamp,
        },
    );
    let mut out = header.0.to_vec();
    out.extend_from_slice(sent.as_ref().blob());
    out
}

/// A batch as a leader would have stamped it (for `append_stamped`, and to
/// choose timestamps).
pub fn stamped(
    tag: u64,
    count: usize,
    size: usize,
    partition: u64,
    base_offset: u64,
    base_timestamp: u64,
) -> Batch {
    let bytes = stored_form(
        &batch(tag, count, size),
        partition,
        base_offset,
        base_timestamp,
    );
    Batch::admit(bytes, &Limits::default()).unwrap()
}

/// The offsets of a list of batches appended from offset `from`: each
/// batch's base offset.
pub fn base_offsets(sent: &[Batch], from: u64) -> Vec<u64> {
    let mut next = from;
    sent.iter()
        .map(|b| {
            let o = next;
            next += count_of(b);
            o
        })
        .collect()
}

/// What a [`GatedStorage`] holds back until [`GatedStorage::release`].
#[derive(Debug, Default)]
struct Gate {
    /// The next `sync_data` of this file waits.
    next_sync_of: Option<std::path::PathBuf>,
    /// Every `sync_dir` waits.
    dir_syncs: bool,
    /// Operations waiting now.
    held: usize,
    waiters: Vec<std::task::Waker>,
}

/// A simulated disk that can hold chosen syncs back, to force the one
/// interleaving a test is about (the simulator's own yields only make it
/// likely).
#[derive(Debug, Clone)]
pub struct GatedStorage {
    /// The disk underneath.
    pub disk: corelog_segment::io::SimStorage,
    gate: std::rc::Rc<std::cell::RefCell<Gate>>,
    power: std::rc::Rc<std::cell::RefCell<PowerCut>>,
}

/// When a [`GatedStorage`] cuts the power: after its n-th changing
/// operation (writes, syncs, truncations, removals, renames), counting
/// from 1 once armed.
#[derive(Debug, Default)]
struct PowerCut {
    armed: bool,
    done: u64,
    at: u64,
    /// The disk as a reboot finds it, taken right after operation `at`.
    after: Option<corelog_segment::io::SimStorage>,
}

impl GatedStorage {
    pub fn new(disk: corelog_segment::io::SimStorage) -> GatedStorage {
        GatedStorage {
            disk,
            gate: Default::default(),
            power: Default::default(),
        }
    }

    /// Takes the disk as a power cut leaves it right after the `n`-th
    /// changing operation from now on (see [`GatedStorage::after_cut`]).
    pub fn cut_power_after(&self, n: u64) {
        *self.power.borrow_mut() = PowerCut {
            armed: true,
            done: 0,
            at: n,
            after: None,
        };
    }

    /// The disk the power cut left, if that many operations ran.
    pub fn after_cut(&self) -> Option<corelog_segment::io::SimStorage> {
        self.power.borrow_mut().after.take()
    }

    /// Counts one changing operation (just done).
    fn changed(&self) {
        let mut p = self.power.borrow_mut();
        if !p.armed {
            return;
        }
        p.done += 1;
        if p.done == p.at {
            p.after = Some(self.disk.crash());
        }
    }

    /// Holds the next `sync_data` of `path`.
    pub fn hold_next_sync_of(&self, path: &std::path::Path) {
        self.gate.borrow_mut().next_sync_of = Some(path.to_path_buf());
    }

    /// Holds every `sync_dir` from now on.
    pub fn hold_dir_syncs(&self) {
        self.gate.borrow_mut().dir_syncs = true;
    }

    /// Operations held right now.
    pub fn held(&self) -> usize {
        self.gate.borrow().held
    }

    /// Lets every held operation go on, and holds nothing more.
    pub fn release(&self) {
        let waiters = {
            let mut g = self.gate.borrow_mut();
            g.next_sync_of = None;
            g.dir_syncs = false;
            std::mem::take(&mut g.waiters)
        };
        for w in waiters {
            w.wake();
        }
    }

    async fn wait_if(&self, hold: bool) {
        if !hold {
            return;
        }
        self.gate.borrow_mut().held += 1;
        std::future::poll_fn(|cx| {
            let mut g = self.gate.borrow_mut();
            if g.next_sync_of.is_none() && !g.dir_syncs {
                g.held -= 1;
                return std::task::Poll::Ready(());
            }
            g.waiters.push(cx.waker().clone());
            std::task::Poll::Pending
        })
        .await
    }
}

/// A file of a [`GatedStorage`].
#[derive(Debug, Clone)]
pub struct GatedFile {
    inner: corelog_segment::io::sim::SimFile,
    path: std::path::PathBuf,
    storage: GatedStorage,
}

impl corelog_segment::io::Storage for GatedStorage {
    type File = GatedFile;

    fn create_dir_all(&self, path: &std::path::Path) -> std::io::Result<()> {
        self.disk.create_dir_all(path)
    }
    fn list_dir(&self, path: &std::path::Path) -> std::io::Result<Vec<String>> {
        self.disk.list_dir(path)
    }
    fn open(&self, path: &std::path::Path, create: bool) -> std::io::Result<GatedFile> {
        Ok(GatedFile {
            inner: self.disk.open(path, create)?,
            path: path.to_path_buf(),
            storage: self.clone(),
        })
    }
    fn remove_file(&self, path: &std::path::Path) -> std::io::Result<()> {
        let r = self.disk.remove_file(path);
        self.changed();
        r
    }
    fn rename(&self, from: &std::path::Path, to: &std::path::Path) -> std::io::Result<()> {
        let r = self.disk.rename(from, to);
        self.changed();
        r
    }
    async fn replace_file(
        &self,
        from: &std::path::Path,
        to: &std::path::Path,
    ) -> std::io::Result<()> {
        let r = self.disk.replace_file(from, to).await;
        self.changed();
        r
    }
    async fn sync_dir(&self, path: &std::path::Path) -> std::io::Result<()> {
        let hold = self.gate.borrow().dir_syncs;
        self.wait_if(hold).await;
        let r = self.disk.sync_dir(path).await;
        self.changed();
        r
    }
}

impl corelog_segment::io::StorageFile for GatedFile {
    fn len(&self) -> std::io::Result<u64> {
        self.inner.len()
    }
    async fn write_all_at(
        &self,
        pos: u64,
        bufs: corelog_segment::io::WriteBufs,
    ) -> std::io::Result<()> {
        let r = self.inner.write_all_at(pos, bufs).await;
        self.storage.changed();
        r
    }
    async fn read_at(&self, pos: u64, len: usize) -> std::io::Result<Vec<u8>> {
        self.inner.read_at(pos, len).await
    }
    async fn sync_data(&self) -> std::io::Result<()> {
        let hold = {
            let mut g = self.storage.gate.borrow_mut();
            let hold = g.next_sync_of.as_deref() == Some(self.path.as_path());
            if hold {
                // Only this one sync; the gate stays shut until release.
                g.next_sync_of = Some(std::path::PathBuf::from("/held"));
            }
            hold
        };
        self.storage.wait_if(hold).await;
        let r = self.inner.sync_data().await;
        self.storage.changed();
        r
    }
    async fn allocate(&self, len: u64) -> std::io::Result<()> {
        let r = self.inner.allocate(len).await;
        self.storage.changed();
        r
    }
    async fn truncate(&self, len: u64) -> std::io::Result<()> {
        let r = self.inner.truncate(len).await;
        self.storage.changed();
        r
    }
    fn map(&self, capacity: usize) -> std::io::Result<corelog_segment::io::Mapping> {
        self.inner.map(capacity)
    }
}

/// Direct access to a disk's files, around the log's back: to look at what
/// it stored and to damage it the way crashes and bit rot do.
pub trait Disk {
    /// The file's bytes, if it exists.
    fn read(&self, path: &std::path::Path) -> Option<Vec<u8>>;
    /// Overwrites bytes in place.
    fn overwrite(&self, path: &std::path::Path, pos: usize, bytes: &[u8]);
    /// Truncates, or extends with zeros.
    fn set_len(&self, path: &std::path::Path, len: usize);
    /// Deletes a file.
    fn remove(&self, path: &std::path::Path);
    /// Writes a whole file.
    fn put(&self, path: &std::path::Path, bytes: &[u8]);
    /// Names in a directory, sorted.
    fn names(&self, dir: &std::path::Path) -> Vec<String>;
}

/// Real files, through std::fs (not through the code under test).
#[derive(Debug, Clone, Copy)]
pub struct RealDisk;

impl Disk for RealDisk {
    fn read(&self, path: &std::path::Path) -> Option<Vec<u8>> {
        std::fs::read(path).ok()
    }
    fn overwrite(&self, path: &std::path::Path, pos: usize, bytes: &[u8]) {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
        f.write_all_at(bytes, pos as u64).unwrap();
    }
    fn set_len(&self, path: &std::path::Path, len: usize) {
        let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
        f.set_len(len as u64).unwrap();
    }
    fn remove(&self, path: &std::path::Path) {
        std::fs::remove_file(path).unwrap();
    }
    fn put(&self, path: &std::path::Path, bytes: &[u8]) {
        std::fs::write(path, bytes).unwrap();
    }
    fn names(&self, dir: &std::path::Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }
}

impl Disk for corelog_segment::io::SimStorage {
    fn read(&self, path: &std::path::Path) -> Option<Vec<u8>> {
        self.file_bytes(path)
    }
    fn overwrite(&self, path: &std::path::Path, pos: usize, bytes: &[u8]) {
        assert!(self.corrupt(path, pos, bytes), "{}", path.display());
    }
    fn set_len(&self, path: &std::path::Path, len: usize) {
        assert!(
            corelog_segment::io::SimStorage::set_len(self, path, len),
            "{}",
            path.display()
        );
    }
    fn remove(&self, path: &std::path::Path) {
        corelog_segment::io::Storage::remove_file(self, path).unwrap();
    }
    fn put(&self, path: &std::path::Path, bytes: &[u8]) {
        self.put_file(path, bytes).unwrap();
    }
    fn names(&self, dir: &std::path::Path) -> Vec<String> {
        corelog_segment::io::Storage::list_dir(self, dir).unwrap()
    }
}

/// Declares a test module running the scenario function `$name` twice: on
/// real files through io_uring, and on the simulated disk seeded with the
/// calling file's `SIM_SEED`. The scenario takes a storage factory, a
/// [`Disk`] to inspect and damage files with, and the partition directory.
#[macro_export]
macro_rules! on_both {
    ($name:ident) => {
        mod $name {
            use super::*;

            #[test]
            fn real_files() {
                let tmp = tempfile::tempdir().unwrap();
                let dir = tmp.path().join("p");
                run(async {
                    super::$name(|| UringStorage::new(64).unwrap(), &RealDisk, &dir).await
                });
            }

            #[test]
            fn sim() {
                let sim = SimStorage::new(SIM_SEED, (1 << 20) + (64 << 10));
                run_sim(async { super::$name(|| sim.clone(), &sim, Path::new("/p")).await });
            }
        }
    };
}
