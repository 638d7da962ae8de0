//! Chunk buffers, used again: a remote read's ranged GET lands in a buffer
//! of the chunk's size that an evicted chunk gave back, so the bytes of a
//! long read from the store are not, chunk after chunk, fresh memory the
//! kernel must map, zero and (on a VM that reports free pages) fetch back
//! from the host. A chunk's [`Bytes`] owns its buffer; when the cache and
//! the last poll holding a slice of it let go, the buffer returns here, up
//! to [`ChunkBuffers::KEEP`] of them (the rest are freed). Only whole
//! chunks use them (`Reader::fetch`): the cache counts a chunk's length,
//! and a short one must not hold a whole buffer.

use bytes::Bytes;
use crossbeam_queue::ArrayQueue;
use std::sync::Arc;

/// The free buffers of one chunk size.
#[derive(Debug, Clone)]
pub struct ChunkBuffers(Arc<Free>);

#[derive(Debug)]
struct Free {
    size: usize,
    /// Lock-free: the last slice of a chunk may be dropped on a shard's
    /// thread.
    held: ArrayQueue<Vec<u8>>,
}

impl ChunkBuffers {
    /// Free buffers kept at most: enough for the read-ahead's fetches to
    /// take what the evictions they cause give back.
    pub const KEEP: usize = 4;

    /// Buffers of `size` bytes.
    pub fn new(size: usize) -> ChunkBuffers {
        ChunkBuffers(Arc::new(Free {
            size,
            held: ArrayQueue::new(Self::KEEP),
        }))
    }

    /// A buffer of the chunk size, its bytes initialised (zeros when new,
    /// an old chunk's otherwise: they are written over before use).
    pub fn take(&self) -> Vec<u8> {
        self.0.held.pop().unwrap_or_else(|| vec![0; self.0.size])
    }

    /// The first `len` bytes of `buf` as a chunk; `buf` comes back here
    /// when the last [`Bytes`] of it is dropped.
    pub fn freeze(&self, buf: Vec<u8>, len: usize) -> Bytes {
        let len = len.min(buf.len());
        Bytes::from_owner(Owned {
            buf,
            len,
            home: self.clone(),
        })
    }

    /// The buffers' size.
    pub fn size(&self) -> usize {
        self.0.size
    }

    /// Free buffers held now.
    pub fn held(&self) -> usize {
        self.0.held.len()
    }

    fn give_back(&self, buf: Vec<u8>) {
        if buf.len() == self.0.size {
            // Full: this one is freed.
            let _ = self.0.held.push(buf);
        }
    }
}

/// A chunk's buffer, owned by its [`Bytes`].
struct Owned {
    buf: Vec<u8>,
    len: usize,
    home: ChunkBuffers,
}

impl AsRef<[u8]> for Owned {
    fn as_ref(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

impl Drop for Owned {
    fn drop(&mut self) {
        self.home.give_back(std::mem::take(&mut self.buf));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chunks_buffer_comes_back_once_every_slice_of_it_is_dropped() {
        let pool = ChunkBuffers::new(8);
        let mut buf = pool.take();
        buf[..3].copy_from_slice(b"abc");
        let ptr = buf.as_ptr();
        let chunk = pool.freeze(buf, 3);
        assert_eq!(&chunk[..], b"abc");
        let part = chunk.slice(1..2);
        drop(chunk);
        assert_eq!(pool.held(), 0, "a slice still holds the buffer");
        assert_eq!(&part[..], b"b");
        drop(part);
        assert_eq!(pool.held(), 1);
        let again = pool.take();
        assert_eq!(again.as_ptr(), ptr, "the same memory, used again");
        assert_eq!(again.len(), 8);
    }

    #[test]
    fn at_most_keep_buffers_are_held_and_other_sizes_never() {
        let pool = ChunkBuffers::new(4);
        let chunks: Vec<Bytes> = (0..ChunkBuffers::KEEP + 2)
            .map(|_| pool.freeze(pool.take(), 4))
            .collect();
        drop(chunks);
        assert_eq!(pool.held(), ChunkBuffers::KEEP);
        let _out = pool.take();
        drop(pool.freeze(vec![0; 3], 3));
        assert_eq!(
            pool.held(),
            ChunkBuffers::KEEP - 1,
            "a buffer of another size is freed"
        );
    }
}
