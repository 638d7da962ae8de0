//! A simulated disk for tests: the same [`Storage`] seam, in memory, with a
//! fault model.
//!
//! # Fault model
//!
//! * **Page cache vs. disk.** Every file has a volatile image (what reads
//!   and mappings see) and a durable image (what survives a power cut).
//!   `sync_data` makes durable the writes and length changes that completed
//!   before it was called, not those completing while it runs; `sync_dir`
//!   makes durable the directory's entries (file names and subdirectories)
//!   as they were when it was called.
//! * **Mappings end at the end of the file**: a mapping has no bytes past
//!   the file's current length (a real one faults there, `SIGBUS`), so
//!   `Mapping::slice` answers `None` there.
//! * **Power cut** ([`SimStorage::crash`]): a new disk whose files start from
//!   their durable image; every write or length change since the file's
//!   last sync is, independently and in order, applied, dropped, or torn at
//!   a random byte (a prefix of it lands). Names created, renamed or removed
//!   since their directory's last sync may each land or not; so may a
//!   directory created since its parent's last sync, and whatever is in a
//!   directory that does not land is gone with it.
//! * **Injected failures** ([`SimFaults`]): the n-th `sync_data` fails with
//!   EIO, the n-th write fails with EIO, writes and allocations past a space
//!   limit fail with ENOSPC (a write may land partly first).
//! * **Bit rot**: [`SimStorage::corrupt`] flips bits in both images.
//! * **Interleaving**: every operation yields to the scheduler a seeded
//!   random number of times, so concurrent appends complete in varied
//!   orders.
//!
//! `create_dir_all(path)` creates `path` as a new entry of its parent,
//! durable once the parent is synced; the missing ancestors it creates on
//! the way are durable at once (a simplification: they stand for the
//! directories the embedding application prepared, which are its to sync).

use super::sim_mem::SimMem;
use super::{Mapped, Mapping, Storage, StorageFile, WriteBufs};
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll};

/// Failures to inject.
#[derive(Debug, Clone, Default)]
pub struct SimFaults {
    /// The n-th `sync_data` (counting from 0) fails with EIO.
    pub fail_sync_at: Option<u64>,
    /// The n-th write (counting from 0) fails with EIO, writing nothing.
    pub fail_write_at: Option<u64>,
    /// Total bytes the disk holds; beyond it writes and allocations fail
    /// with ENOSPC.
    pub space_limit: Option<u64>,
    /// Each operation yields up to this many times before completing.
    pub max_yields: u32,
}

/// Counts of what the simulated disk was asked to do.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SimCounters {
    /// `sync_data` calls.
    pub syncs: u64,
    /// `sync_dir` calls.
    pub dir_syncs: u64,
    /// Writes.
    pub writes: u64,
    /// Bytes written.
    pub bytes_written: u64,
}

/// An in-memory disk with a fault model; clones share the disk.
#[derive(Clone)]
pub struct SimStorage {
    state: Rc<RefCell<State>>,
}

impl std::fmt::Debug for SimStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = self.state.borrow();
        f.debug_struct("SimStorage")
            .field("files", &s.names.len())
            .field("counters", &s.counters)
            .finish()
    }
}

struct State {
    rng: fastrand::Rng,
    faults: SimFaults,
    counters: SimCounters,
    file_capacity: usize,
    next_ino: u64,
    inodes: BTreeMap<u64, Inode>,
    names: BTreeMap<PathBuf, u64>,
    durable_names: BTreeMap<PathBuf, u64>,
    dirs: BTreeSet<PathBuf>,
    durable_dirs: BTreeSet<PathBuf>,
    /// Tickets of the directory syncs, in the order they were called.
    next_dir_sync: u64,
    /// Per directory, the ticket of the latest-called sync that landed.
    dir_synced: BTreeMap<PathBuf, u64>,
}

struct Inode {
    /// The volatile image; its length is the file's length.
    mem: Arc<SimMem>,
    durable: Vec<u8>,
    /// Changes since the last sync, in the order they completed.
    unsynced: Vec<Change>,
    /// The number of the first of `unsynced` (changes are numbered from 0
    /// over the file's life), so a sync can name the changes it covers.
    unsynced_from: u64,
}

impl Inode {
    /// The number the next change will take.
    fn next_change(&self) -> u64 {
        self.unsynced_from + self.unsynced.len() as u64
    }

    /// Removes and returns the unsynced changes numbered below `upto`.
    fn take_changes(&mut self, upto: u64) -> Vec<Change> {
        let n = upto
            .saturating_sub(self.unsynced_from)
            .min(self.unsynced.len() as u64);
        self.unsynced_from += n;
        self.unsynced.drain(..n as usize).collect()
    }

    /// Whether a mapping of the file is alive (the inode holds one
    /// reference to its memory; every mapping holds another).
    fn is_mapped(&self) -> bool {
        Arc::strong_count(&self.mem) > 1
    }
}

#[derive(Clone)]
enum Change {
    Write { pos: usize, data: Vec<u8> },
    SetLen(usize),
}

impl SimStorage {
    /// An empty disk. Files can grow to `file_capacity` bytes; `seed` drives
    /// every random choice, so a run is replayable from it.
    pub fn new(seed: u64, file_capacity: usize) -> SimStorage {
        SimStorage {
            state: Rc::new(RefCell::new(State {
                rng: fastrand::Rng::with_seed(seed),
                faults: SimFaults::default(),
                counters: SimCounters::default(),
                file_capacity,
                next_ino: 1,
                inodes: BTreeMap::new(),
                names: BTreeMap::new(),
                durable_names: BTreeMap::new(),
                dirs: BTreeSet::new(),
                durable_dirs: BTreeSet::new(),
                next_dir_sync: 0,
                dir_synced: BTreeMap::new(),
            })),
        }
    }

    /// Replaces the injected failures.
    pub fn set_faults(&self, faults: SimFaults) {
        self.state.borrow_mut().faults = faults;
    }

    /// What the disk was asked to do so far.
    pub fn counters(&self) -> SimCounters {
        self.state.borrow().counters
    }

    /// The bytes a reader sees in `path` now.
    pub fn file_bytes(&self, path: &Path) -> Option<Vec<u8>> {
        let s = self.state.borrow();
        let ino = s.inodes.get(s.names.get(path)?)?;
        Some(ino.mem.read(0..ino.mem.len()).to_vec())
    }

    /// The paths of every file.
    pub fn files(&self) -> Vec<PathBuf> {
        self.state.borrow().names.keys().cloned().collect()
    }

    /// Overwrites bytes of `path` in both images (bit rot, a stray writer).
    /// Returns false when the file or range does not exist, or when the
    /// file is mapped: writing under a live mapping would change bytes a
    /// reader may hold (see the mapping contract in [`super::Mapping`]), so
    /// damage is done between a close and the next open.
    pub fn corrupt(&self, path: &Path, pos: usize, bytes: &[u8]) -> bool {
        let mut s = self.state.borrow_mut();
        let Some(&ino) = s.names.get(path) else {
            return false;
        };
        let Some(inode) = s.inodes.get_mut(&ino) else {
            return false;
        };
        if inode.is_mapped() || pos + bytes.len() > inode.mem.len() {
            return false;
        }
        inode.mem.write(pos, bytes);
        if inode.durable.len() >= pos + bytes.len() {
            inode.durable[pos..pos + bytes.len()].copy_from_slice(bytes);
        }
        for c in &mut inode.unsynced {
            if let Change::Write { pos: p, data } = c {
                for (i, b) in bytes.iter().enumerate() {
                    let at = pos + i;
                    if at >= *p && at < *p + data.len() {
                        data[at - *p] = *b;
                    }
                }
            }
        }
        true
    }

    /// Sets a file's length in both images (a truncation the log did not
    /// make, or zero-filled growth). False, like [`SimStorage::corrupt`],
    /// for a missing or mapped file.
    pub fn set_len(&self, path: &Path, len: usize) -> bool {
        let mut s = self.state.borrow_mut();
        let cap = s.file_capacity;
        let Some(&ino) = s.names.get(path) else {
            return false;
        };
        let Some(inode) = s.inodes.get_mut(&ino) else {
            return false;
        };
        if len > cap || inode.is_mapped() {
            return false;
        }
        if len > inode.mem.len() {
            inode.mem.zero(inode.mem.len()..len);
        }
        inode.mem.set_len(len);
        inode.durable.resize(len, 0);
        inode.take_changes(u64::MAX);
        true
    }

    /// Writes a whole file directly and durably (test setup). Refused
    /// (`EBUSY`) for a mapped file, like [`SimStorage::corrupt`].
    pub fn put_file(&self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        let file = self.open(path, true)?;
        let mut s = self.state.borrow_mut();
        let inode = s.inodes.get_mut(&file.ino).ok_or_else(gone)?;
        if inode.is_mapped() {
            return Err(io::Error::from_raw_os_error(libc::EBUSY));
        }
        if bytes.len() > inode.mem.cap() {
            return Err(io::Error::from_raw_os_error(libc::EFBIG));
        }
        inode.mem.write(0, bytes);
        inode.mem.set_len(bytes.len());
        inode.durable = bytes.to_vec();
        inode.take_changes(u64::MAX);
        // The name and its directories are durable too (and nothing else:
        // the names the log has not synced stay as they were).
        s.durable_names.insert(path.to_path_buf(), file.ino);
        for a in path.ancestors().skip(1) {
            s.durable_dirs.insert(a.to_path_buf());
        }
        Ok(())
    }

    /// Cuts the power: returns the disk as a reboot would find it (see the
    /// module docs). The old disk stays usable by tasks still holding it,
    /// but nothing they do reaches the new one.
    pub fn crash(&self) -> SimStorage {
        let mut s = self.state.borrow_mut();
        let seed = s.rng.u64(..);
        let mut rng = fastrand::Rng::with_seed(seed);
        // Directories: a durable one stays, a new one lands or not; either
        // is gone when its parent is (ancestors sort first).
        let mut dirs = BTreeSet::new();
        for d in &s.dirs {
            let parent_stays = d.parent().is_none_or(|p| dirs.contains(p));
            if parent_stays && (s.durable_dirs.contains(d) || rng.bool()) {
                dirs.insert(d.clone());
            }
        }
        // Names: each binding that differs between the images lands or not.
        let mut names = BTreeMap::new();
        let keys: BTreeSet<PathBuf> = s
            .names
            .keys()
            .chain(s.durable_names.keys())
            .cloned()
            .collect();
        for k in keys {
            let chosen = match (s.names.get(&k), s.durable_names.get(&k)) {
                (Some(v), Some(d)) if v == d => Some(*v),
                (v, d) => {
                    if rng.bool() {
                        v.copied()
                    } else {
                        d.copied()
                    }
                }
            };
            let dir_stays = k.parent().is_some_and(|p| dirs.contains(p));
            if let (Some(ino), true) = (chosen, dir_stays) {
                names.insert(k, ino);
            }
        }
        let cap = s.file_capacity;
        let mut inodes = BTreeMap::new();
        for ino in names.values().copied().collect::<BTreeSet<_>>() {
            let Some(old) = s.inodes.get(&ino) else {
                continue;
            };
            let mut image = old.durable.clone();
            for change in &old.unsynced {
                match change {
                    Change::Write { pos, data } => match rng.u32(0..5) {
                        0 | 1 => apply_write(&mut image, *pos, data),
                        2 => {
                            let keep = rng.usize(0..=data.len());
                            apply_write(&mut image, *pos, &data[..keep]);
                        }
                        _ => {}
                    },
                    Change::SetLen(len) => {
                        if rng.bool() {
                            image.resize(*len, 0);
                        }
                    }
                }
            }
            image.truncate(cap);
            let mem = Arc::new(SimMem::new(cap));
            mem.write(0, &image);
            mem.set_len(image.len());
            inodes.insert(
                ino,
                Inode {
                    mem,
                    durable: image,
                    unsynced: Vec::new(),
                    unsynced_from: 0,
                },
            );
        }
        SimStorage {
            state: Rc::new(RefCell::new(State {
                rng: fastrand::Rng::with_seed(seed ^ 0x5eed),
                faults: SimFaults::default(),
                counters: SimCounters::default(),
                file_capacity: cap,
                next_ino: s.next_ino,
                inodes,
                durable_names: names.clone(),
                names,
                durable_dirs: dirs.clone(),
                dirs,
                next_dir_sync: 0,
                dir_synced: BTreeMap::new(),
            })),
        }
    }

    fn yields(&self) -> Yield {
        let mut s = self.state.borrow_mut();
        let max = s.faults.max_yields;
        let n = if max == 0 { 0 } else { s.rng.u32(0..=max) };
        Yield(n)
    }

    fn used(s: &State) -> u64 {
        s.inodes.values().map(|i| i.mem.len() as u64).sum()
    }
}

fn apply_write(image: &mut Vec<u8>, pos: usize, data: &[u8]) {
    if image.len() < pos + data.len() {
        image.resize(pos + data.len(), 0);
    }
    image[pos..pos + data.len()].copy_from_slice(data);
}

fn gone() -> io::Error {
    io::Error::new(io::ErrorKind::NotFound, "simulated file no longer exists")
}

struct Yield(u32);

impl Future for Yield {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 == 0 {
            return Poll::Ready(());
        }
        self.0 -= 1;
        // monoio re-runs a task that woke itself while being polled at
        // once (it goes to the front of the run queue), so waking our own
        // waker here would let no other task in. Wake it from a task
        // spawned at the back of the queue instead: every task already
        // runnable gets a turn first.
        let waker = cx.waker().clone();
        monoio::spawn(async move { waker.wake() });
        Poll::Pending
    }
}

impl Storage for SimStorage {
    type File = SimFile;

    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        let mut s = self.state.borrow_mut();
        for a in path.ancestors() {
            // `path` is a new entry of its parent, durable once the parent
            // is synced; missing ancestors are the caller's (module docs).
            if s.dirs.insert(a.to_path_buf()) && a != path {
                s.durable_dirs.insert(a.to_path_buf());
            }
        }
        Ok(())
    }

    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        let s = self.state.borrow();
        if !s.dirs.contains(path) {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("{}: no such directory", path.display()),
            ));
        }
        let mut out = BTreeSet::new();
        for p in s.names.keys().chain(s.dirs.iter()) {
            if p.parent() == Some(path) {
                if let Some(n) = p.file_name() {
                    out.insert(n.to_string_lossy().into_owned());
                }
            }
        }
        Ok(out.into_iter().collect())
    }

    fn open(&self, path: &Path, create: bool) -> io::Result<SimFile> {
        let mut s = self.state.borrow_mut();
        if let Some(&ino) = s.names.get(path) {
            return Ok(SimFile {
                disk: self.clone(),
                ino,
            });
        }
        if !create {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("{}: no such file", path.display()),
            ));
        }
        if let Some(parent) = path.parent() {
            if !s.dirs.contains(parent) {
                return Err(io::Error::new(
                    io::ErrorKind::NotFound,
                    format!("{}: no such directory", parent.display()),
                ));
            }
        }
        let ino = s.next_ino;
        s.next_ino += 1;
        let cap = s.file_capacity;
        s.inodes.insert(
            ino,
            Inode {
                mem: Arc::new(SimMem::new(cap)),
                durable: Vec::new(),
                unsynced: Vec::new(),
                unsynced_from: 0,
            },
        );
        s.names.insert(path.to_path_buf(), ino);
        Ok(SimFile {
            disk: self.clone(),
            ino,
        })
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        let mut s = self.state.borrow_mut();
        match s.names.remove(path) {
            Some(_) => Ok(()),
            None => Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("{}: no such file", path.display()),
            )),
        }
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut s = self.state.borrow_mut();
        let ino = s.names.remove(from).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("{}: no such file", from.display()),
            )
        })?;
        s.names.insert(to.to_path_buf(), ino);
        Ok(())
    }

    async fn sync_dir(&self, path: &Path) -> io::Result<()> {
        // The entries as they are now; those made while the sync runs are
        // not covered.
        let in_dir = |p: &PathBuf| p.parent() == Some(path);
        let (ticket, names, dirs) = {
            let mut s = self.state.borrow_mut();
            let ticket = s.next_dir_sync;
            s.next_dir_sync += 1;
            let names: Vec<(PathBuf, u64)> = s
                .names
                .iter()
                .filter(|(p, _)| in_dir(p))
                .map(|(p, i)| (p.clone(), *i))
                .collect();
            let dirs: Vec<PathBuf> = s.dirs.iter().filter(|p| in_dir(p)).cloned().collect();
            (ticket, names, dirs)
        };
        self.yields().await;
        let mut s = self.state.borrow_mut();
        s.counters.dir_syncs += 1;
        if s.dir_synced.get(path).is_some_and(|&t| t > ticket) {
            // A sync called later already landed, with newer entries.
            return Ok(());
        }
        s.dir_synced.insert(path.to_path_buf(), ticket);
        s.durable_names.retain(|p, _| !in_dir(p));
        s.durable_names.extend(names);
        s.durable_dirs.extend(dirs);
        Ok(())
    }
}

/// A simulated open file; clones share it.
#[derive(Clone)]
pub struct SimFile {
    disk: SimStorage,
    ino: u64,
}

impl std::fmt::Debug for SimFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimFile").field("ino", &self.ino).finish()
    }
}

impl SimFile {
    fn with<R>(&self, f: impl FnOnce(&mut State, u64) -> io::Result<R>) -> io::Result<R> {
        let mut s = self.disk.state.borrow_mut();
        if !s.inodes.contains_key(&self.ino) {
            return Err(gone());
        }
        f(&mut s, self.ino)
    }
}

fn inode(s: &mut State, ino: u64) -> io::Result<&mut Inode> {
    s.inodes.get_mut(&ino).ok_or_else(gone)
}

impl StorageFile for SimFile {
    fn len(&self) -> io::Result<u64> {
        self.with(|s, ino| Ok(inode(s, ino)?.mem.len() as u64))
    }

    async fn write_all_at(&self, pos: u64, bufs: WriteBufs) -> io::Result<()> {
        self.disk.yields().await;
        self.with(|s, ino| {
            let n = s.counters.writes;
            s.counters.writes += 1;
            if s.faults.fail_write_at == Some(n) {
                return Err(io::Error::from_raw_os_error(libc::EIO));
            }
            let mut data = Vec::with_capacity(bufs.len());
            data.extend_from_slice(&bufs.head);
            data.extend_from_slice(&bufs.body);
            let pos = pos as usize;
            let used = SimStorage::used(s);
            let cur_len = inode(s, ino)?.mem.len();
            let growth = (pos + data.len()).saturating_sub(cur_len) as u64;
            let mut result = Ok(());
            if let Some(limit) = s.faults.space_limit {
                if used + growth > limit {
                    let room = limit.saturating_sub(used) as usize;
                    let fits = (cur_len + room).saturating_sub(pos).min(data.len());
                    data.truncate(fits);
                    result = Err(io::Error::from_raw_os_error(libc::ENOSPC));
                }
            }
            let ind = inode(s, ino)?;
            if pos + data.len() > ind.mem.cap() {
                return Err(io::Error::from_raw_os_error(libc::EFBIG));
            }
            if pos > ind.mem.len() {
                ind.mem.zero(ind.mem.len()..pos);
            }
            ind.mem.write(pos, &data);
            ind.mem.set_len(ind.mem.len().max(pos + data.len()));
            let written = data.len() as u64;
            ind.unsynced.push(Change::Write { pos, data });
            s.counters.bytes_written += written;
            result
        })
    }

    async fn read_at(&self, pos: u64, len: usize) -> io::Result<Vec<u8>> {
        self.disk.yields().await;
        self.with(|s, ino| {
            let ind = inode(s, ino)?;
            let start = (pos as usize).min(ind.mem.len());
            let end = (start + len).min(ind.mem.len());
            Ok(ind.mem.read(start..end).to_vec())
        })
    }

    async fn sync_data(&self) -> io::Result<()> {
        // Covers the changes completed before the call, not those
        // completing while it runs.
        let upto = self.with(|s, ino| Ok(inode(s, ino)?.next_change()))?;
        self.disk.yields().await;
        self.with(|s, ino| {
            let n = s.counters.syncs;
            s.counters.syncs += 1;
            if s.faults.fail_sync_at == Some(n) {
                // Like Linux after a failed writeback: the error is reported
                // once and the pages are no longer dirty, so whether they
                // reached the disk is unknown. Model the worst case: drop.
                inode(s, ino)?.take_changes(upto);
                return Err(io::Error::from_raw_os_error(libc::EIO));
            }
            let ind = inode(s, ino)?;
            for c in ind.take_changes(upto) {
                match c {
                    Change::Write { pos, data } => apply_write(&mut ind.durable, pos, &data),
                    Change::SetLen(len) => ind.durable.resize(len, 0),
                }
            }
            Ok(())
        })
    }

    async fn allocate(&self, len: u64) -> io::Result<()> {
        self.disk.yields().await;
        self.with(|s, ino| {
            let used = SimStorage::used(s);
            let cur = inode(s, ino)?.mem.len();
            let len = len as usize;
            if len <= cur {
                return Ok(());
            }
            if let Some(limit) = s.faults.space_limit {
                if used + (len - cur) as u64 > limit {
                    return Err(io::Error::from_raw_os_error(libc::ENOSPC));
                }
            }
            let ind = inode(s, ino)?;
            if len > ind.mem.cap() {
                return Err(io::Error::from_raw_os_error(libc::EFBIG));
            }
            ind.mem.zero(cur..len);
            ind.mem.set_len(len);
            ind.unsynced.push(Change::SetLen(len));
            Ok(())
        })
    }

    async fn truncate(&self, len: u64) -> io::Result<()> {
        self.disk.yields().await;
        self.with(|s, ino| {
            let ind = inode(s, ino)?;
            let len = len as usize;
            if len > ind.mem.cap() {
                return Err(io::Error::from_raw_os_error(libc::EFBIG));
            }
            if len > ind.mem.len() {
                ind.mem.zero(ind.mem.len()..len);
            }
            ind.mem.set_len(len);
            ind.unsynced.push(Change::SetLen(len));
            Ok(())
        })
    }

    fn map(&self, capacity: usize) -> io::Result<Mapping> {
        self.with(|s, ino| {
            let ind = inode(s, ino)?;
            if capacity > ind.mem.cap() {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "simulated files hold at most {} bytes; asked to map {capacity}",
                        ind.mem.cap()
                    ),
                ));
            }
            Ok(Mapping::new(ind.mem.clone() as Arc<dyn Mapped>))
        })
    }
}

/// The fault model's strictness, one test per rule: each of these passed
/// on a simulator kinder than a disk.
#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::cell::Cell;

    fn run<F: Future>(f: F) -> F::Output {
        monoio::RuntimeBuilder::<monoio::LegacyDriver>::new()
            .build()
            .expect("legacy runtime")
            .block_on(f)
    }

    fn bufs(b: &[u8]) -> WriteBufs {
        WriteBufs::one(bytes::Bytes::copy_from_slice(b))
    }

    /// What `path` holds after each of `n` power cuts (`None`: gone).
    fn after_cuts(disk: &SimStorage, path: &Path, n: usize) -> Vec<Option<Vec<u8>>> {
        (0..n).map(|_| disk.crash().file_bytes(path)).collect()
    }

    /// A new disk with a durable directory `/d`.
    async fn disk_with_dir() -> SimStorage {
        let disk = SimStorage::new(7, 4096);
        disk.create_dir_all(Path::new("/d")).unwrap();
        disk.sync_dir(Path::new("/")).await.unwrap();
        disk
    }

    /// Starts `op` as a task that stays in its yields, and runs it up to
    /// its first one; `done` tells whether it finished.
    async fn start_slow<F>(
        disk: &SimStorage,
        op: F,
    ) -> (monoio::task::JoinHandle<()>, Rc<Cell<bool>>)
    where
        F: Future<Output = io::Result<()>> + 'static,
    {
        disk.set_faults(SimFaults {
            max_yields: 1000,
            ..SimFaults::default()
        });
        let done = Rc::new(Cell::new(false));
        let task = monoio::spawn({
            let done = done.clone();
            async move {
                op.await.unwrap();
                done.set(true);
            }
        });
        Yield(1).await;
        disk.set_faults(SimFaults::default());
        (task, done)
    }

    /// fdatasync covers the writes that completed before it was called: one
    /// completing while it runs stays unsynced, and a power cut may lose it.
    #[test]
    fn a_sync_covers_only_writes_completed_before_it_started() {
        run(async {
            let disk = disk_with_dir().await;
            let path = Path::new("/d/f");
            let f = disk.open(path, true).unwrap();
            disk.sync_dir(Path::new("/d")).await.unwrap();
            f.write_all_at(0, bufs(b"before")).await.unwrap();
            let (sync, done) = start_slow(&disk, {
                let f = f.clone();
                async move { f.sync_data().await }
            })
            .await;
            f.write_all_at(6, bufs(b"during")).await.unwrap();
            assert!(!done.get(), "the write completed while the sync ran");
            sync.await;
            let cuts = after_cuts(&disk, path, 64);
            assert!(
                cuts.iter()
                    .all(|c| c.as_deref().map(|b| &b[..6]) == Some(b"before")),
                "the write before the sync is durable"
            );
            assert!(
                cuts.iter().any(|c| c.as_deref() != Some(b"beforeduring")),
                "the write completed during the sync must be able to vanish in a power cut"
            );
        });
    }

    /// A new directory is an entry of its parent: until the parent is
    /// synced, a power cut may lose it and everything in it, even files
    /// whose data and names (in the new directory) were synced.
    #[test]
    fn a_new_directory_is_durable_only_once_its_parent_is_synced() {
        run(async {
            let disk = disk_with_dir().await;
            let sub = Path::new("/d/sub");
            let path = sub.join("f");
            disk.create_dir_all(sub).unwrap();
            let f = disk.open(&path, true).unwrap();
            f.write_all_at(0, bufs(b"data")).await.unwrap();
            f.sync_data().await.unwrap();
            let cuts = after_cuts(&disk, &path, 64);
            assert!(
                cuts.iter().any(|c| c.is_none()),
                "a synced file whose name was never synced can vanish"
            );
            disk.sync_dir(sub).await.unwrap();
            let cuts = after_cuts(&disk, &path, 64);
            assert!(
                cuts.iter().any(|c| c.is_none()),
                "a file in a new directory whose parent was never synced can vanish"
            );
            disk.sync_dir(Path::new("/d")).await.unwrap();
            let cuts = after_cuts(&disk, &path, 64);
            assert!(
                cuts.iter().all(|c| c.as_deref() == Some(b"data")),
                "once the parent is synced, the directory and the file are durable"
            );
        });
    }

    /// A directory sync covers the entries made before it was called, not
    /// one created while it runs.
    #[test]
    fn a_directory_sync_covers_only_names_made_before_it_started() {
        run(async {
            let disk = disk_with_dir().await;
            let path = Path::new("/d/f");
            let (sync, done) = start_slow(&disk, {
                let disk = disk.clone();
                async move { disk.sync_dir(Path::new("/d")).await }
            })
            .await;
            let f = disk.open(path, true).unwrap();
            f.write_all_at(0, bufs(b"data")).await.unwrap();
            f.sync_data().await.unwrap();
            assert!(!done.get(), "the file was created while the sync ran");
            sync.await;
            assert!(
                after_cuts(&disk, path, 64).iter().any(|c| c.is_none()),
                "a name made during the directory sync must be able to vanish"
            );
        });
    }

    /// A mapping has no bytes past the end of the file (a real one would
    /// fault): `slice` answers `None` there, after growth, and after a
    /// truncation.
    #[test]
    fn a_mapping_has_no_bytes_past_the_end_of_the_file() {
        run(async {
            let disk = disk_with_dir().await;
            let f = disk.open(Path::new("/d/f"), true).unwrap();
            f.write_all_at(0, bufs(&[7u8; 100])).await.unwrap();
            let map = f.map(4096).unwrap();
            assert_eq!(map.slice(0..100), Some(&[7u8; 100][..]));
            assert_eq!(map.slice(0..101), None, "one byte past the end");
            assert_eq!(map.slice(200..300), None, "wholly past the end");
            f.truncate(50).await.unwrap();
            assert_eq!(map.slice(0..100), None, "past the end after a truncation");
            assert_eq!(map.slice(0..50), Some(&[7u8; 50][..]));
            f.allocate(1000).await.unwrap();
            assert_eq!(
                map.slice(900..1000),
                Some(&[0u8; 100][..]),
                "allocated: zeros"
            );
            assert_eq!(map.slice(900..1001), None);
        });
    }
}
