//! Real files on a shard's io_uring.
#![allow(unsafe_code)]

use super::{Mapped, Ring, Storage, StorageFile, WriteBufs};
use std::fs::{File, OpenOptions};
use std::io;
use std::ops::Range;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::rc::Rc;
use std::sync::Arc;

/// Real files, with latency-critical operations on one shard's [`Ring`].
#[derive(Debug, Clone)]
pub struct UringStorage {
    ring: Ring,
}

impl UringStorage {
    /// Storage on a new ring of `entries` submission slots. Must be called
    /// inside a monoio runtime (the ring's reaper runs there).
    pub fn new(entries: u32) -> io::Result<UringStorage> {
        Ok(UringStorage {
            ring: Ring::new(entries)?,
        })
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
            file: Rc::new(file),
            ring: self.ring.clone(),
        })
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }

    async fn sync_dir(&self, path: &Path) -> io::Result<()> {
        let dir = File::open(path)?;
        self.ring.sync(dir.as_raw_fd(), false).await
    }
}

/// A real file; clones share the descriptor.
#[derive(Debug, Clone)]
pub struct UringFile {
    file: Rc<File>,
    ring: Ring,
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
        self.ring.sync(file.as_raw_fd(), true).await
    }

    async fn allocate(&self, len: u64) -> io::Result<()> {
        let file = self.file.clone();
        self.ring.allocate(file.as_raw_fd(), len).await
    }

    async fn truncate(&self, len: u64) -> io::Result<()> {
        let file = self.file.clone();
        self.ring.truncate(file.as_raw_fd(), len).await
    }

    fn map(&self, capacity: usize) -> io::Result<Arc<dyn Mapped>> {
        if capacity == 0 {
            return Ok(Arc::new(EmptyMap));
        }
        // memmap2's contract is that the file is not modified behind the
        // mapping's back in ways that break the reader. corelog holds the
        // data directory's lock, never rewrites bytes below a reader's
        // visible end, and only reads ranges that are written (so never
        // past the end of the file, where a read would fault).
        // SAFETY: no write or truncation touches a range a reader is given.
        let map = unsafe { memmap2::MmapOptions::new().len(capacity).map(&*self.file)? };
        Ok(Arc::new(FileMap { map }))
    }
}

struct FileMap {
    map: memmap2::Mmap,
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

/// Maps a whole file read-only, for tools that inspect a data directory
/// they hold the lock of (nothing writes it meanwhile).
pub fn map_file(path: &Path) -> io::Result<Arc<dyn Mapped>> {
    let file = File::open(path)?;
    let len = usize::try_from(file.metadata()?.len())
        .map_err(|_| io::Error::other("file too large to map"))?;
    if len == 0 {
        return Ok(Arc::new(EmptyMap));
    }
    // SAFETY: as in `UringFile::map`; the caller holds the directory lock,
    // so no process writes or truncates the file while it is mapped.
    let map = unsafe { memmap2::MmapOptions::new().len(len).map(&file)? };
    Ok(Arc::new(FileMap { map }))
}
