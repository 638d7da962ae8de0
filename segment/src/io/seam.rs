//! The seam's types: the operations a storage runs ([`Storage`],
//! [`StorageFile`]), one write's buffers, and a read-only mapping.

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
/// # The mapping contract
///
/// A mapping may be longer than its file: the partition log maps an active
/// segment once, at its full capacity. Two things make reading it sound, and
/// both are this crate's to keep, which is why only this crate can read a
/// mapping ([`Mapping::slice`] is crate-private; everyone else reads through
/// a `PollReply`, built from the ranges below):
///
/// 1. *No read past the end of the file* (it would fault, `SIGBUS`): the log
///    only reads ranges below a segment's visible end, which only covers
///    completed writes; recovery and inspection only read up to the length
///    they found the file to have, and nothing truncates a mapped file below
///    a visible end.
/// 2. *No write under a live slice*: the log only writes at and above the
///    reserved end of the active segment, which is past every visible end;
///    a recovery cut or a close's trim happens only where no reader reads.
///    Other processes must not write the files ([`UringStorage`](super::UringStorage)'s
///    precondition); the simulator refuses to corrupt a mapped file.
///
/// # Write-back errors
///
/// A failed write-back does not change the page cache's copy of a page: the
/// kernel marks the page clean and keeps its bytes, so a reader keeps seeing
/// what was written. The bytes could change only if the page were evicted
/// and read back from the disk, which holds older content. Under
/// `fsync=batch` readers only see bytes a completed `fdatasync` made durable,
/// so a re-read finds the same bytes. Under `never` and `interval`, the
/// failure surfaces at the next `fdatasync`, which poisons the partition
/// (no more appends, the `POISONED` marker makes the next open rewrite what
/// it recovers); a page evicted before that could be served stale, and the
/// checksums every verified poll and every recovery check name the damage
/// instead of serving it as good.
#[derive(Clone)]
pub struct Mapping(Arc<dyn Mapped>);

impl std::fmt::Debug for Mapping {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mapping")
            .field("capacity", &self.capacity())
            .finish()
    }
}

impl Mapping {
    pub(crate) fn new(map: Arc<dyn Mapped>) -> Mapping {
        Mapping(map)
    }

    /// Bytes held in memory, read like a mapping: what a reply serves from
    /// fetched copies (an object store's chunk) rather than a file. No
    /// descriptor.
    pub fn from_bytes(bytes: Bytes) -> Mapping {
        Mapping(Arc::new(HeldBytes(bytes)))
    }

    /// The mapped length.
    pub fn capacity(&self) -> usize {
        self.0.capacity()
    }

    /// The bytes of `range`, or `None` past the mapped length. Callers keep
    /// the mapping contract (see [`Mapping`]): `range` is written and
    /// nothing writes it while the slice lives.
    pub(crate) fn slice(&self, range: Range<usize>) -> Option<&[u8]> {
        self.0.slice(range)
    }

    /// The mapped file's descriptor, open while the mapping lives (`None`
    /// for a mapping of no file, such as the simulator's): the mapping's
    /// byte `i` is the file's byte `i`, so a reader holding a written range
    /// may hand it to the kernel by descriptor (`sendfile`) under the same
    /// contract as reading it here.
    pub fn fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        self.0.fd()
    }
}

/// Bytes owned in memory (see [`Mapping::from_bytes`]).
struct HeldBytes(Bytes);

impl Mapped for HeldBytes {
    fn capacity(&self) -> usize {
        self.0.len()
    }

    fn slice(&self, range: Range<usize>) -> Option<&[u8]> {
        self.0.get(range)
    }
}

/// What a mapping implementation provides (see [`Mapping`]).
pub(crate) trait Mapped: Send + Sync + 'static {
    /// The mapped length.
    fn capacity(&self) -> usize;
    /// The bytes of `range`, or `None` past the mapped length.
    fn slice(&self, range: Range<usize>) -> Option<&[u8]>;
    /// The mapped file's descriptor, if the mapping is of a file.
    fn fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        None
    }
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
    /// Renames `from` over `to` off the calling thread (on the ring): ext4
    /// writes back the source's unwritten data when a rename replaces a
    /// file (`auto_da_alloc`), which would hold a shard for milliseconds.
    async fn replace_file(&self, from: &Path, to: &Path) -> io::Result<()>;
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
    /// Maps the first `capacity` bytes read-only (see [`Mapping`]); the
    /// mapping shares the file's descriptor ([`Mapping::fd`]).
    fn map(&self, capacity: usize) -> io::Result<Mapping>;
    /// [`StorageFile::map`] for a file opened only to be mapped (a sealed
    /// segment mapped for a read): the mapping keeps no descriptor, so
    /// that mapped sealed segments cost no file descriptors.
    fn map_alone(&self, capacity: usize) -> io::Result<Mapping> {
        self.map(capacity)
    }
}
