//! Real files on a shard's io_uring.
#![allow(unsafe_code)]

use super::inline::InlineWrites;
use super::observer::IoObserver;
use super::seam::{Mapped, Mapping, Storage, StorageFile, WriteBufs};
use super::uring::Ring;
use std::fs::{File, OpenOptions};
use std::io;
use std::ops::Range;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::path::Path;
use std::sync::Arc;

/// Real files, with latency-critical operations on one shard's [`Ring`].
///
/// # Precondition
///
/// No other process writes or truncates the files this storage opens while
/// it runs: their mappings (see [`Mapping`]) would change or fault under
/// readers. The caller guarantees it for the directory it points the
/// storage at (corelog's engine holds an exclusive lock on its data
/// directory for as long as it runs).
#[derive(Debug, Clone)]
pub struct UringStorage {
    ring: Ring,
    syncs: Option<Arc<dyn IoObserver>>,
}

impl UringStorage {
    /// Storage on a new ring of `entries` submission slots. Must be called
    /// inside a monoio runtime (the ring's reaper runs there).
    pub fn new(entries: u32) -> io::Result<UringStorage> {
        Ok(UringStorage {
            ring: Ring::new(entries)?,
            syncs: None,
        })
    }

    /// Tells `observer` how long each file's `fdatasync` takes (not the
    /// directories'), and how each write was made.
    pub fn observe(mut self, observer: Arc<dyn IoObserver>) -> UringStorage {
        self.ring.observe_writes(observer.clone());
        self.syncs = Some(observer);
        self
    }

    /// Makes the writes `policy` allows on the shard's own thread (see
    /// [`InlineWrites`]).
    pub fn inline_writes(self, policy: InlineWrites) -> UringStorage {
        self.ring.set_inline_writes(policy);
        self
    }

    /// The ring.
    pub fn ring(&self) -> &Ring {
        &self.ring
    }
}

impl Storage for UringStorage {
    type File = UringFile;

    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        std::fs::create_dir_all(path)
    }

    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(path)? {
            names.push(entry?.file_name().to_string_lossy().into_owned());
        }
        Ok(names)
    }

    fn open(&self, path: &Path, create: bool) -> io::Result<UringFile> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(create)
            .open(path)?;
        Ok(UringFile {
            file: Arc::new(file),
            ring: self.ring.clone(),
            syncs: self.syncs.clone(),
        })
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }

    async fn replace_file(&self, from: &Path, to: &Path) -> io::Result<()> {
        match self.ring.rename(from, to).await {
            // A kernel without IORING_OP_RENAMEAT (before 5.11).
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => std::fs::rename(from, to),
            other => other,
        }
    }

    async fn sync_dir(&self, path: &Path) -> io::Result<()> {
        let dir = File::open(path)?;
        self.ring.sync(dir.as_raw_fd(), false).await
    }
}

/// A real file; clones share the descriptor.
#[derive(Debug, Clone)]
pub struct UringFile {
    file: Arc<File>,
    ring: Ring,
    syncs: Option<Arc<dyn IoObserver>>,
}

impl StorageFile for UringFile {
    fn len(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }

    async fn write_all_at(&self, pos: u64, bufs: WriteBufs) -> io::Result<()> {
        // The Rc keeps the descriptor open until the operation completes.
        let file = self.file.clone();
        let r = self.ring.write_all_at(file.as_raw_fd(), pos, bufs).await;
        drop(file);
        r
    }

    async fn read_at(&self, pos: u64, len: usize) -> io::Result<Vec<u8>> {
        let file = self.file.clone();
        self.ring.read_at(file.as_raw_fd(), pos, len).await
    }

    async fn sync_data(&self) -> io::Result<()> {
        let file = self.file.clone();
        let started = std::time::Instant::now();
        let r = self.ring.sync(file.as_raw_fd(), true).await;
        if let Some(o) = &self.syncs {
            o.synced(started.elapsed());
        }
        r
    }

    async fn allocate(&self, len: u64) -> io::Result<()> {
        let file = self.file.clone();
        self.ring.allocate(file.as_raw_fd(), len).await
    }

    async fn truncate(&self, len: u64) -> io::Result<()> {
        let file = self.file.clone();
        self.ring.truncate(file.as_raw_fd(), len).await
    }

    fn map(&self, capacity: usize) -> io::Result<Mapping> {
        self.map_keeping(capacity, true)
    }

    fn map_alone(&self, capacity: usize) -> io::Result<Mapping> {
        self.map_keeping(capacity, false)
    }
}

impl UringFile {
    /// The first `capacity` bytes mapped, the mapping holding the file's
    /// descriptor when `keep_fd`.
    fn map_keeping(&self, capacity: usize, keep_fd: bool) -> io::Result<Mapping> {
        if capacity == 0 {
            return Ok(Mapping::new(Arc::new(EmptyMap)));
        }
        // memmap2 asks that the file not be modified behind the mapping's
        // back in ways that break its readers. Within this process, the
        // mapping contract (see `Mapping`) keeps every write and truncation
        // away from the ranges readers are given, and only this crate can
        // read a mapping.
        // SAFETY: as argued above; other processes do not write the file:
        // that is `UringStorage`'s precondition.
        let map = unsafe { memmap2::MmapOptions::new().len(capacity).map(&*self.file)? };
        let file = keep_fd.then(|| self.file.clone());
        Ok(Mapping::new(Arc::new(FileMap { map, file })))
    }
}

struct FileMap {
    map: memmap2::Mmap,
    /// The mapped file (the segment's own descriptor, not a copy), kept
    /// open while the mapping lives so that a reader can also hand its
    /// ranges to the kernel by descriptor (`sendfile`); `None` for a
    /// mapping made alone (`map_alone`).
    file: Option<Arc<File>>,
}

impl Mapped for FileMap {
    fn capacity(&self) -> usize {
        self.map.len()
    }

    fn slice(&self, range: Range<usize>) -> Option<&[u8]> {
        if range.start > range.end || range.end > self.map.len() {
            return None;
        }
        // The slice is built from the raw pointer so that no reference ever
        // covers the mapped pages past the end of the file; the caller only
        // asks for written bytes below the visible end, which no write
        // touches while the slice lives.
        // SAFETY: the range lies inside the mapping (checked above).
        Some(unsafe { std::slice::from_raw_parts(self.map.as_ptr().add(range.start), range.len()) })
    }

    fn fd(&self) -> Option<BorrowedFd<'_>> {
        self.file.as_ref().map(|f| f.as_fd())
    }
}

struct EmptyMap;

impl Mapped for EmptyMap {
    fn capacity(&self) -> usize {
        0
    }

    fn slice(&self, range: Range<usize>) -> Option<&[u8]> {
        (range.start == 0 && range.end == 0).then_some(&[][..])
    }
}

/// Maps a whole file read-only, for tools that inspect a data directory no
/// other process writes meanwhile (the same precondition as
/// [`UringStorage`]'s).
pub fn map_file(path: &Path) -> io::Result<Mapping> {
    let file = File::open(path)?;
    let len = usize::try_from(file.metadata()?.len())
        .map_err(|_| io::Error::other("file too large to map"))?;
    if len == 0 {
        return Ok(Mapping::new(Arc::new(EmptyMap)));
    }
    // SAFETY: as in `UringFile::map`: this process never writes the file
    // while the mapping lives (inspection only reads, up to `len`), and no
    // other process does (the precondition above).
    let map = unsafe { memmap2::MmapOptions::new().len(len).map(&file)? };
    Ok(Mapping::new(Arc::new(FileMap {
        map,
        file: Some(Arc::new(file)),
    })))
}
