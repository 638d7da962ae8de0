//! Request payload buffers, reused instead of allocated per request.
//!
//! A SEND_MESSAGES batch is handed to the engine as a [`Bytes`] slice of
//! its request's buffer and lives until its write completes (longer while a
//! replica holds it), so a connection cannot read its next request into
//! the same buffer. Instead a filled buffer is frozen into a [`Bytes`] whose
//! owner gives the buffer back to this pool when the last reference drops,
//! on whichever thread that is. A request gets a buffer only from the pool
//! (or a fresh one), so never one that a pending append still holds: the
//! next request of a connection whose last batch is still referenced is
//! read into another buffer.
//!
//! The pool owns at most its `max_bytes` of buffer capacity, free or in
//! use, so what it keeps beyond the in-flight budget is bounded; requests
//! under [`MIN_POOLED`] bytes never use it.
//!
//! A cluster's leader stamps each batch where it lies (`Batch::stamp`),
//! which it can only do to bytes nothing else owns: a pooled buffer (its
//! owner is the pool's) is copied whole instead, a megabyte per 1 MiB
//! batch. So a cluster node's pool pools nothing ([`BufPool::unpooled`]):
//! each payload is read into a buffer of exactly its size, frozen into a
//! [`Bytes`] that is the buffer's only owner.

use bytes::Bytes;
use std::sync::{Arc, Mutex};

/// Requests shorter than this get a buffer of their own, never pooled.
pub const MIN_POOLED: usize = 64 << 10;

/// The most the server's pool may own: 16 buffers for 1 MiB batches.
pub const MAX_POOL_BYTES: usize = 16 << 20;

/// What the server's pool may own under an in-flight budget of
/// `max_inflight_bytes`: [`MAX_POOL_BYTES`], at most a quarter of it.
pub fn pool_bytes(max_inflight_bytes: u64) -> usize {
    usize::try_from(max_inflight_bytes / 4)
        .unwrap_or(usize::MAX)
        .min(MAX_POOL_BYTES)
}

/// Buffers given back by the requests that used them.
#[derive(Debug)]
pub struct BufPool {
    max_bytes: usize,
    /// Payloads of at least [`MIN_POOLED`] bytes are read into a buffer of
    /// their exact size and frozen unshared, so they can be stamped in place.
    unpooled: bool,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    free: Vec<Vec<u8>>,
    /// Capacity of every buffer the pool owns, free or in use.
    owned: usize,
    /// Requests of at least [`MIN_POOLED`] bytes that got a pooled buffer,
    /// and those that got a fresh one.
    reused: u64,
    fresh: u64,
}

/// A request's payload buffer; given back to its pool when dropped (or,
/// frozen, when the last [`Bytes`] of it is).
#[derive(Debug)]
pub struct ReqBuf {
    /// The payload bytes read so far.
    pub buf: Vec<u8>,
    /// The capacity the pool counts for it; `None` when it does not own it.
    owned: Option<usize>,
    pool: Arc<BufPool>,
}

impl BufPool {
    /// A pool owning at most `max_bytes` of buffers.
    pub fn new(max_bytes: usize) -> Arc<BufPool> {
        Arc::new(BufPool {
            max_bytes,
            unpooled: false,
            state: Mutex::new(State::default()),
        })
    }

    /// A pool that keeps nothing: every payload gets a buffer of its own,
    /// of its exact size, that its frozen [`Bytes`] alone owns (see the
    /// module's note: for a cluster's leader).
    pub fn unpooled() -> Arc<BufPool> {
        Arc::new(BufPool {
            max_bytes: 0,
            unpooled: true,
            state: Mutex::new(State::default()),
        })
    }

    /// An empty buffer for a payload of `len` bytes: a pooled one, or a
    /// fresh one with room for `first` bytes (it grows as bytes arrive).
    pub fn take(self: &Arc<Self>, len: usize, first: usize) -> ReqBuf {
        if len >= MIN_POOLED && self.unpooled {
            if let Ok(mut st) = self.state.lock() {
                st.fresh += 1;
            }
            // Its whole size at once: grown in steps, each step would copy
            // what came before. Only reserved: a page is touched (and
            // counted in the RSS) as the bytes the budget granted arrive.
            return ReqBuf {
                buf: Vec::with_capacity(len),
                owned: None,
                pool: self.clone(),
            };
        }
        if len >= MIN_POOLED {
            if let Ok(mut st) = self.state.lock() {
                if let Some(buf) = st.free.pop() {
                    st.reused += 1;
                    let owned = Some(buf.capacity());
                    return ReqBuf {
                        buf,
                        owned,
                        pool: self.clone(),
                    };
                }
                st.fresh += 1;
            }
        }
        ReqBuf {
            buf: Vec::with_capacity(len.min(first)),
            owned: None,
            pool: self.clone(),
        }
    }

    /// Requests of at least [`MIN_POOLED`] bytes so far that got a pooled
    /// buffer, and that got a fresh one.
    pub fn counts(&self) -> (u64, u64) {
        self.state
            .lock()
            .map(|st| (st.reused, st.fresh))
            .unwrap_or((0, 0))
    }

    #[cfg(test)]
    /// Capacity the pool owns now, free or in use.
    pub fn owned_bytes(&self) -> usize {
        self.state.lock().map(|st| st.owned).unwrap_or(0)
    }

    /// Keeps `buf`, emptied, if the pool may own it.
    fn give_back(&self, mut buf: Vec<u8>, owned: Option<usize>) {
        let cap = buf.capacity();
        if owned.is_none() && cap < MIN_POOLED {
            return;
        }
        let Ok(mut st) = self.state.lock() else {
            return;
        };
        let others = st.owned - owned.unwrap_or(0);
        if others + cap > self.max_bytes {
            st.owned = others;
            return;
        }
        st.owned = others + cap;
        buf.clear();
        st.free.push(buf);
    }
}

impl ReqBuf {
    /// The filled buffer as [`Bytes`], without a copy; the buffer goes back
    /// to the pool when the last clone or slice of it is dropped.
    pub fn freeze(mut self) -> Bytes {
        if self.owned.is_none() && (self.pool.unpooled || self.buf.capacity() < MIN_POOLED) {
            return Bytes::from(std::mem::take(&mut self.buf));
        }
        Bytes::from_owner(self)
    }
}

impl AsRef<[u8]> for ReqBuf {
    fn as_ref(&self) -> &[u8] {
        &self.buf
    }
}

impl Drop for ReqBuf {
    fn drop(&mut self) {
        let buf = std::mem::take(&mut self.buf);
        self.pool.give_back(buf, self.owned.take());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MB: usize = 1 << 20;

    /// A request of `len` bytes of `fill`, read into a buffer from `pool`.
    fn request(pool: &Arc<BufPool>, len: usize, fill: u8) -> Bytes {
        let mut req = pool.take(len, 256 << 10);
        req.buf.resize(len, fill);
        req.freeze()
    }

    fn overlaps(a: &[u8], b: &[u8]) -> bool {
        let (a0, b0) = (a.as_ptr() as usize, b.as_ptr() as usize);
        a0 < b0 + b.len() && b0 < a0 + a.len()
    }

    #[test]
    fn a_buffer_a_pending_append_holds_is_never_handed_to_the_next_request() {
        let pool = BufPool::new(16 * MB);
        let first = request(&pool, MB, 0xaa);
        // The engine's append holds the batch (a slice past the routing
        // part); the connection is done with its request.
        let pending = first.slice(64..);
        drop(first);
        // The connection's next request is read meanwhile.
        let second = request(&pool, MB, 0x55);
        assert!(
            !overlaps(&pending, &second),
            "the next request was read into the pending batch's buffer"
        );
        assert!(
            pending.iter().all(|b| *b == 0xaa),
            "a pending batch changed"
        );
        assert_eq!(
            pool.counts(),
            (0, 2),
            "both requests needed a buffer of their own"
        );
        // Once the append lets go, its buffer serves the next request.
        let at = pending.as_ptr() as usize - 64;
        drop(pending);
        let third = request(&pool, MB, 0x11);
        assert_eq!(
            third.as_ptr() as usize,
            at,
            "the freed buffer was not reused"
        );
        assert_eq!(pool.counts(), (1, 2));
        assert!(
            second.iter().all(|b| *b == 0x55),
            "a request in use changed"
        );
    }

    #[test]
    fn an_unpooled_payloads_batch_is_its_buffers_only_owner() {
        // What `Batch::stamp` needs to stamp in place: the batch, sliced
        // past the routing part with the payload dropped, owns its buffer.
        let unpooled = BufPool::unpooled();
        let payload = request(&unpooled, MB, 0xaa);
        let at = payload.as_ptr() as usize + 64;
        let batch = payload.slice(64..);
        drop(payload);
        let own = batch
            .try_into_mut()
            .expect("an unpooled payload's batch is shared: its stamp copies it");
        assert_eq!(own.as_ptr() as usize, at, "made unique by a copy");
        assert_eq!(own.len(), MB - 64);
        drop(own);
        assert_eq!(unpooled.counts(), (0, 1));
        assert_eq!(unpooled.owned_bytes(), 0, "an unpooled pool keeps nothing");
        // A pooled payload's batch never is (its owner is the pool's):
        // the reason a cluster node does not pool.
        let pooled = BufPool::new(16 * MB);
        let payload = request(&pooled, MB, 0xaa);
        let batch = payload.slice(64..);
        drop(payload);
        assert!(batch.try_into_mut().is_err());
    }

    #[test]
    fn the_pool_owns_at_most_its_bytes_and_small_requests_pass_it_by() {
        let pool = BufPool::new(2 * MB + MB / 2);
        let held: Vec<Bytes> = (0..4).map(|i| request(&pool, MB, i)).collect();
        assert_eq!(pool.owned_bytes(), 0, "nothing is the pool's while in use");
        drop(held);
        // Two 1 MiB buffers fit in 2.5 MiB; the others were freed.
        assert_eq!(pool.owned_bytes(), 2 * MB);
        let small = request(&pool, 100, 7);
        assert_eq!(
            pool.counts(),
            (0, 4),
            "a small request takes no pooled buffer"
        );
        drop(small);
        assert_eq!(pool.owned_bytes(), 2 * MB, "nor is its buffer kept");
        // A pooled buffer that grows past what the pool may own is freed.
        let mut big = pool.take(4 * MB, 256 << 10);
        big.buf.resize(4 * MB, 1);
        drop(big.freeze());
        assert_eq!(pool.owned_bytes(), MB);
        // A request abandoned half-read gives its buffer back too.
        let mut half = pool.take(MB, 256 << 10);
        half.buf.resize(MB / 2, 1);
        drop(half);
        assert_eq!(pool.owned_bytes(), MB);
        assert_eq!(pool.counts(), (2, 4));
    }
}
