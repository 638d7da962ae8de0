//! An owned vectored write for monoio: the bytes the server built (reply
//! header, prefix, rewritten batch headers) and ranges of the engine's
//! mapped segments, kept mapped by the [`PollReply`] that owns them.
//!
//! monoio's `writev` takes its buffer by value and hands it back when the
//! kernel is done (the operation owns it even if the future is dropped), so
//! the buffer type must promise stable iovecs: that is the one `unsafe impl`
//! here (the server's other `unsafe` is `net/by_reference.rs`, the same
//! iovecs and the segment files handed to `writev` and `sendfile`).
#![allow(unsafe_code)]

use corelog::PollReply;
use monoio::buf::IoVecBuf;
use std::ops::Range;

/// Most iovecs one `writev` takes (Linux `IOV_MAX`); longer writes loop.
const IOV_MAX: usize = 1024;

/// A piece of the write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    /// Bytes of the built buffer.
    Built(Range<usize>),
    /// Bytes of the reply's `chunk`-th slice (see [`PollReply::slices`]).
    Stored {
        /// which slice
        chunk: usize,
        /// which bytes of it
        range: Range<usize>,
    },
}

/// A stretch of the write, for a send by reference (`net/by_reference.rs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Run {
    /// These iovecs ([`WireVec::iovecs`]), written from memory.
    Vectored(Range<usize>),
    /// Bytes `start..start + len` of the reply's `chunk`-th slice, sent
    /// from its segment file by descriptor ([`WireVec::slice_file`]).
    File {
        /// which slice
        chunk: usize,
        /// where in it
        start: usize,
        /// how many bytes
        len: usize,
    },
}

/// The write: owns every byte its iovecs point to.
pub struct WireVec {
    /// The bytes built in user space (the iovecs point into it).
    built: Box<[u8]>,
    /// Keeps the mappings the iovecs point into.
    reply: PollReply,
    /// What the iovecs were made from, for a copying write (TLS).
    pieces: Vec<Piece>,
    iovecs: Vec<libc::iovec>,
    /// The first iovec not wholly written.
    first: usize,
    remaining: usize,
}

impl std::fmt::Debug for WireVec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WireVec")
            .field("iovecs", &self.iovecs.len())
            .field("remaining", &self.remaining)
            .finish()
    }
}

/// A piece that does not lie inside what it names.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("write piece {0:?} lies outside its buffer")]
pub struct OutOfBounds(pub Piece);

impl WireVec {
    /// The write of `pieces`, in order. Every piece is bounds-checked
    /// against `built` or the reply's slices here, so the iovecs only ever
    /// cover bytes this value owns.
    pub fn new(
        built: Box<[u8]>,
        reply: PollReply,
        pieces: Vec<Piece>,
    ) -> Result<WireVec, OutOfBounds> {
        let slices: Vec<&[u8]> = reply.slices().collect();
        let mut iovecs = Vec::with_capacity(pieces.len());
        let mut remaining = 0;
        let mut kept = Vec::with_capacity(pieces.len());
        for piece in pieces {
            let bytes: &[u8] = match &piece {
                Piece::Built(r) => built.get(r.clone()),
                Piece::Stored { chunk, range } => {
                    slices.get(*chunk).and_then(|s| s.get(range.clone()))
                }
            }
            .ok_or_else(|| OutOfBounds(piece.clone()))?;
            if bytes.is_empty() {
                continue;
            }
            remaining += bytes.len();
            iovecs.push(libc::iovec {
                iov_base: bytes.as_ptr().cast_mut().cast(),
                iov_len: bytes.len(),
            });
            kept.push(piece);
        }
        drop(slices);
        Ok(WireVec {
            built,
            reply,
            pieces: kept,
            iovecs,
            first: 0,
            remaining,
        })
    }

    /// The whole write as slices, in order (for a transport that copies,
    /// such as TLS, which encrypts them); ignores [`WireVec::advance`].
    pub fn slices(&self) -> Vec<&[u8]> {
        let stored: Vec<&[u8]> = self.reply.slices().collect();
        self.pieces
            .iter()
            .filter_map(|p| match p {
                Piece::Built(r) => self.built.get(r.clone()),
                Piece::Stored { chunk, range } => {
                    stored.get(*chunk).and_then(|s| s.get(range.clone()))
                }
            })
            .collect()
    }

    /// The iovecs, in order (see [`Run::Vectored`]).
    pub fn iovecs(&self) -> &[libc::iovec] {
        &self.iovecs
    }

    /// Where the reply's `chunk`-th slice lies in its segment file (see
    /// `PollReply::slice_file`), open while this write lives.
    pub fn slice_file(&self, chunk: usize) -> Option<(std::os::fd::BorrowedFd<'_>, u64)> {
        self.reply.slice_file(chunk)
    }

    /// The write cut into runs: stored bytes that lie together in one
    /// segment file, at least `min_file` of them, are sent from the file by
    /// descriptor; everything else (built bytes, shorter stored runs, a
    /// mapping of no file) from memory, in vectored writes. In order, and
    /// covering every byte once.
    pub fn runs(&self, min_file: usize) -> Vec<Run> {
        let mut runs = Vec::new();
        let mut vectored: Option<Range<usize>> = None;
        let mut i = 0;
        while i < self.pieces.len() {
            let Piece::Stored { chunk, range } = &self.pieces[i] else {
                extend(&mut vectored, i);
                i += 1;
                continue;
            };
            // The stored pieces that continue this one in the same slice.
            let (start, mut end, mut j) = (range.start, range.end, i + 1);
            while let Some(Piece::Stored { chunk: c, range: r }) = self.pieces.get(j) {
                if c != chunk || r.start != end {
                    break;
                }
                end = r.end;
                j += 1;
            }
            if end - start >= min_file && self.reply.slice_file(*chunk).is_some() {
                runs.extend(vectored.take().map(Run::Vectored));
                runs.push(Run::File {
                    chunk: *chunk,
                    start,
                    len: end - start,
                });
            } else {
                for k in i..j {
                    extend(&mut vectored, k);
                }
            }
            i = j;
        }
        runs.extend(vectored.map(Run::Vectored));
        runs
    }

    /// Bytes not yet written.
    pub fn remaining(&self) -> usize {
        self.remaining
    }

    /// Records that the kernel wrote the next `n` bytes.
    pub fn advance(&mut self, mut n: usize) {
        n = n.min(self.remaining);
        self.remaining -= n;
        while n > 0 {
            let Some(v) = self.iovecs.get_mut(self.first) else {
                return;
            };
            if n < v.iov_len {
                v.iov_base = v.iov_base.cast::<u8>().wrapping_add(n).cast();
                v.iov_len -= n;
                return;
            }
            n -= v.iov_len;
            self.first += 1;
        }
    }
}

/// Adds iovec `i` to a vectored run (they come in order).
fn extend(run: &mut Option<Range<usize>>, i: usize) {
    match run {
        Some(r) => r.end = i + 1,
        None => *run = Some(i..i + 1),
    }
}

// SAFETY: monoio requires that, while the runtime owns the value, the
// pointer returned by `read_iovec_ptr` and the `read_iovec_len` iovecs
// behind it stay valid and unchanged. They do:
// - the iovec array is the heap buffer of `self.iovecs`, which is neither
//   grown nor shrunk after `new` (only `advance`, which needs `&mut self`
//   and so cannot run while the runtime owns the value, edits entries in
//   place), so moving `WireVec` does not move it;
// - every iovec covers bytes that `new` bounds-checked against `built` (a
//   boxed slice never reallocated) or against a slice of `reply`, whose
//   segment mappings are `Arc`s kept alive by `reply` and never remapped
//   or shrunk while mapped (the engine's invariant, ARCHITECTURE.md);
//   `advance` only moves an iovec's start forward within its own bytes;
// - `first + read_iovec_len() <= iovecs.len()`.
// The kernel only reads these bytes (a write), so nothing is mutated
// through the `*mut` iov_base.
unsafe impl IoVecBuf for WireVec {
    fn read_iovec_ptr(&self) -> *const libc::iovec {
        self.iovecs[self.first.min(self.iovecs.len())..].as_ptr()
    }

    fn read_iovec_len(&self) -> usize {
        (self.iovecs.len() - self.first.min(self.iovecs.len())).min(IOV_MAX)
    }
}
