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
//!   a random byte (a prefix of it lands). A truncation to a length inside
//!   a 4 KiB block is two changes, as on xfs: the rest of that block
//!   written back as zeros, then the new length, so a power cut can keep
//!   the zeros with the old length and the old bytes after the block.
//!   Names created, renamed or removed
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

use super::seam::{Mapped, Mapping, Storage, StorageFile, WriteBufs};
use super::sim_mem::SimMem;
use super::sim_state::{apply_write, gone, Change, Inode, State};
pub use super::sim_state::{SimCounters, SimFaults};
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll};

/// The simulated file system's block size: a truncation zeroes the rest of
/// the block holding the new end.
const SIM_BLOCK: usize = 4096;

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

    async fn replace_file(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.yields().await;
        self.rename(from, to)
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
            let old = ind.mem.len();
            if len > old {
                ind.mem.zero(old..len);
            } else {
                // A file system writes the block holding the new end back
                // zeroed past it, apart from the new length (xfs's
                // fdatasync: the data first, its log after): a power cut
                // between them leaves zeros there and the old length.
                let block_end = (len / SIM_BLOCK + 1) * SIM_BLOCK;
                let zeros = block_end.min(old) - len;
                if !len.is_multiple_of(SIM_BLOCK) && zeros > 0 {
                    ind.unsynced.push(Change::Write {
                        pos: len,
                        data: vec![0; zeros],
                    });
                }
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
#[path = "sim_tests.rs"]
mod tests;
