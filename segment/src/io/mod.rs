//! The storage seam: the few file operations the partition log performs.
//!
//! [`UringStorage`] runs them on real files through a shard's io_uring
//! ([`Ring`]); [`SimStorage`] runs them in memory with a fault model
//! (power loss tearing unsynced writes, failed fsyncs, ENOSPC, bit flips).
//! The log is generic over [`Storage`], so one code path is exercised on
//! both.
//!
//! Operations whose latency matters (writes, syncs, preallocation,
//! truncation, reads) are async; rare metadata operations (open, list,
//! rename, remove) are synchronous system calls.

mod real;
pub mod sim;
mod uring;

pub use real::{map_file, UringFile, UringStorage};
pub use sim::{SimFaults, SimStorage};
pub use uring::Ring;

use bytes::Bytes;
use std::io;
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

/// The bytes of one positional write: a head (a stamped batch header) and a
/// body (the untouched frames), written as one vectored write.
#[derive(Debug, Clone, Default)]
pub struct WriteBufs {
    /// Written first.
    pub head: Bytes,
    /// Written right after `head`.
    pub body: Bytes,
}

impl WriteBufs {
    /// A write of one buffer.
    pub fn one(bytes: Bytes) -> WriteBufs {
        WriteBufs {
            head: bytes,
            body: Bytes::new(),
        }
    }

    /// Total length.
    pub fn len(&self) -> usize {
        self.head.len() + self.body.len()
    }

    /// Whether there is nothing to write.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A read-only mapping of a file (or of a simulated file).
///
/// A mapping may be longer than its file: the partition log maps an active
/// segment once, at its full capacity, and only ever reads bytes that are
/// written and below the readers' visible end. Reading past the end of the
/// file would fault, so [`Mapped::slice`] is only called for such ranges.
pub trait Mapped: Send + Sync + 'static {
    /// The mapped length.
    fn capacity(&self) -> usize;
    /// The bytes of `range`, or `None` past the mapped length. The caller
    /// promises the range is written and not being written.
    fn slice(&self, range: Range<usize>) -> Option<&[u8]>;
}

/// Files and directories, as the partition log uses them.
#[allow(async_fn_in_trait)]
pub trait Storage: Clone + 'static {
    /// An open file.
    type File: StorageFile;

    /// Creates a directory and its parents.
    fn create_dir_all(&self, path: &Path) -> io::Result<()>;
    /// Names of the entries of a directory.
    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>>;
    /// Opens a file for reading and writing, creating it when `create`.
    fn open(&self, path: &Path, create: bool) -> io::Result<Self::File>;
    /// Removes a file.
    fn remove_file(&self, path: &Path) -> io::Result<()>;
    /// Renames a file, replacing `to`.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Makes the directory's entries (creations, renames, removals) durable.
    async fn sync_dir(&self, path: &Path) -> io::Result<()>;
}

/// An open file.
#[allow(async_fn_in_trait, clippy::len_without_is_empty)]
pub trait StorageFile: Clone + 'static {
    /// Current length.
    fn len(&self) -> io::Result<u64>;
    /// Writes all of `bufs` at `pos`.
    async fn write_all_at(&self, pos: u64, bufs: WriteBufs) -> io::Result<()>;
    /// Reads up to `len` bytes at `pos` (fewer at the end of the file).
    async fn read_at(&self, pos: u64, len: usize) -> io::Result<Vec<u8>>;
    /// `fdatasync`: makes written data (and the length) durable.
    async fn sync_data(&self) -> io::Result<()>;
    /// Allocates blocks up to `len` (the file grows to at least `len`).
    async fn allocate(&self, len: u64) -> io::Result<()>;
    /// Sets the length.
    async fn truncate(&self, len: u64) -> io::Result<()>;
    /// Maps the first `capacity` bytes read-only (see [`Mapped`]).
    fn map(&self, capacity: usize) -> io::Result<Arc<dyn Mapped>>;
}
