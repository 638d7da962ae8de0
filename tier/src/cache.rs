//! The chunk cache: fixed-size pieces of remote objects, fetched by ranged
//! GETs and held in memory up to a byte budget, the least recently used
//! evicted first. A chunk being fetched (a read-ahead, another reader) is
//! waited for, never fetched twice at once.

use bytes::Bytes;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};

/// A piece of a segment's objects: the partition, the segment's base
/// offset, and the chunk's number (bytes `[n * chunk, (n + 1) * chunk)` of
/// its log object; [`INDEX_CHUNK`] for its whole index object).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ChunkKey {
    /// The partition.
    pub partition: u64,
    /// The segment's base offset.
    pub base: u64,
    /// The chunk's number.
    pub chunk: u64,
}

/// The chunk number of a segment's index object.
pub const INDEX_CHUNK: u64 = u64::MAX;

/// How the cache has served.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Lookups served from memory (a chunk fetched ahead included, waited
    /// for when it was still arriving).
    pub hits: u64,
    /// Lookups that fetched from the store themselves.
    pub misses: u64,
    /// Chunks fetched ahead of their use.
    pub prefetched: u64,
    /// Bytes held now.
    pub bytes: u64,
    /// The byte budget.
    pub budget: u64,
}

impl CacheStats {
    /// Hits over lookups (0 with none).
    pub fn hit_rate(&self) -> f64 {
        let all = self.hits + self.misses;
        if all == 0 {
            0.0
        } else {
            self.hits as f64 / all as f64
        }
    }
}

/// The cache.
#[derive(Debug)]
pub struct ChunkCache {
    inner: Mutex<Held>,
    arrived: Condvar,
    budget: u64,
    hits: AtomicU64,
    misses: AtomicU64,
    prefetched: AtomicU64,
}

#[derive(Debug, Default)]
struct Held {
    chunks: HashMap<ChunkKey, (Bytes, u64)>,
    fetching: HashSet<ChunkKey>,
    tick: u64,
    bytes: u64,
}

impl ChunkCache {
    /// A cache holding at most `budget` bytes (at least the chunk being
    /// served, whatever the budget).
    pub fn new(budget: u64) -> ChunkCache {
        ChunkCache {
            inner: Mutex::new(Held::default()),
            arrived: Condvar::new(),
            budget,
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            prefetched: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Held> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The chunk, from memory (waiting for it when another thread is
    /// fetching it), or fetched by `fetch` and kept.
    pub fn get_or_fetch<E>(
        &self,
        key: &ChunkKey,
        fetch: impl FnOnce() -> Result<Bytes, E>,
    ) -> Result<Bytes, E> {
        let mut h = self.lock();
        loop {
            if let Some(b) = touch(&mut h, key) {
                self.hits.fetch_add(1, Ordering::Relaxed);
                return Ok(b);
            }
            if h.fetching.insert(*key) {
                break;
            }
            h = self.arrived.wait(h).unwrap_or_else(|p| p.into_inner());
        }
        drop(h);
        self.misses.fetch_add(1, Ordering::Relaxed);
        self.fetched(key, fetch())
    }

    /// Fetches the chunk ahead of its use, unless it is held or arriving.
    pub fn prefetch<E>(&self, key: &ChunkKey, fetch: impl FnOnce() -> Result<Bytes, E>) {
        {
            let mut h = self.lock();
            if h.chunks.contains_key(key) || !h.fetching.insert(*key) {
                return;
            }
        }
        if self.fetched(key, fetch()).is_ok() {
            self.prefetched.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Keeps what a fetch brought (if anything) and wakes its waiters.
    fn fetched<E>(&self, key: &ChunkKey, got: Result<Bytes, E>) -> Result<Bytes, E> {
        let mut h = self.lock();
        h.fetching.remove(key);
        if let Ok(b) = &got {
            self.keep(&mut h, *key, b.clone());
        }
        drop(h);
        self.arrived.notify_all();
        got
    }

    /// Whether the chunk is held (not counted as a lookup).
    pub fn contains(&self, key: &ChunkKey) -> bool {
        self.lock().chunks.contains_key(key)
    }

    /// Keeps a chunk.
    pub fn insert(&self, key: ChunkKey, bytes: Bytes) {
        let mut h = self.lock();
        self.keep(&mut h, key, bytes);
    }

    fn keep(&self, h: &mut Held, key: ChunkKey, bytes: Bytes) {
        h.tick += 1;
        let tick = h.tick;
        let len = bytes.len() as u64;
        if let Some((old, _)) = h.chunks.insert(key, (bytes, tick)) {
            h.bytes -= old.len() as u64;
        }
        h.bytes += len;
        while h.bytes > self.budget && h.chunks.len() > 1 {
            let Some(oldest) = h
                .chunks
                .iter()
                .min_by_key(|(_, (_, t))| *t)
                .map(|(k, _)| *k)
            else {
                break;
            };
            if let Some((b, _)) = h.chunks.remove(&oldest) {
                h.bytes -= b.len() as u64;
            }
        }
    }

    /// Drops every chunk of a segment (it was found damaged, or deleted).
    pub fn forget(&self, partition: u64, base: u64) {
        let mut h = self.lock();
        let keys: Vec<ChunkKey> = h
            .chunks
            .keys()
            .filter(|k| k.partition == partition && k.base == base)
            .copied()
            .collect();
        for k in keys {
            if let Some((b, _)) = h.chunks.remove(&k) {
                h.bytes -= b.len() as u64;
            }
        }
    }

    /// Hits, misses and bytes held.
    pub fn stats(&self) -> CacheStats {
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            prefetched: self.prefetched.load(Ordering::Relaxed),
            bytes: self.lock().bytes,
            budget: self.budget,
        }
    }
}

fn touch(h: &mut Held, key: &ChunkKey) -> Option<Bytes> {
    h.tick += 1;
    let tick = h.tick;
    let entry = h.chunks.get_mut(key)?;
    entry.1 = tick;
    Some(entry.0.clone())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    fn key(n: u64) -> ChunkKey {
        ChunkKey {
            partition: 1,
            base: 0,
            chunk: n,
        }
    }

    #[test]
    fn the_cache_keeps_its_budget_evicting_the_least_recently_used() {
        let c = ChunkCache::new(250);
        for n in 0..3 {
            let got: Result<Bytes, ()> = c.get_or_fetch(&key(n), || Ok(Bytes::from(vec![0; 100])));
            assert_eq!(got.map(|b| b.len()), Ok(100));
        }
        // 300 > 250: chunk 0, the oldest, went.
        assert!(!c.contains(&key(0)) && c.contains(&key(1)) && c.contains(&key(2)));
        // Using 1 makes 2 the oldest.
        let _: Result<Bytes, ()> = c.get_or_fetch(&key(1), || Err(()));
        c.insert(key(3), Bytes::from(vec![0; 100]));
        assert!(c.contains(&key(1)) && !c.contains(&key(2)));
        let s = c.stats();
        assert_eq!((s.hits, s.misses, s.bytes), (1, 3, 200));
        // The hit rate the server reports (and the tier benchmark's table).
        assert_eq!(s.hit_rate(), 0.25);
        assert_eq!(CacheStats::default().hit_rate(), 0.0, "no lookups");
        c.forget(1, 0);
        assert_eq!(c.stats().bytes, 0);
    }

    fn chunk(partition: u64, base: u64, n: u64) -> ChunkKey {
        ChunkKey {
            partition,
            base,
            chunk: n,
        }
    }

    /// Its byte count stays exact (a chunk kept again replaces itself, a
    /// forgotten segment takes only its own chunks); a cache of exactly
    /// its budget evicts nothing; a chunk larger than the budget stays
    /// alone; eviction follows use, whatever the keys' order.
    #[test]
    fn the_cache_counts_its_bytes_and_evicts_by_use_alone() {
        let c = ChunkCache::new(300);
        for n in [2, 1, 0] {
            c.insert(key(n), Bytes::from(vec![0; 100]));
        }
        assert_eq!(c.stats().bytes, 300, "exactly the budget: all kept");
        c.insert(key(1), Bytes::from(vec![0; 100]));
        assert_eq!(c.stats().bytes, 300, "kept again: replaced, not added");
        // Chunk 2 was kept first and never used since: it goes first.
        c.insert(key(3), Bytes::from(vec![0; 100]));
        assert!(!c.contains(&key(2)), "the least recently used goes");
        assert!(c.contains(&key(0)) && c.contains(&key(1)) && c.contains(&key(3)));
        // Using 0 makes 1 the oldest (kept again after 0).
        let _: Result<Bytes, ()> = c.get_or_fetch(&key(0), || Err(()));
        c.insert(key(4), Bytes::from(vec![0; 100]));
        assert!(!c.contains(&key(1)) && c.contains(&key(0)), "used, kept");
        // Forgetting a segment takes its chunks only.
        let c = ChunkCache::new(1 << 20);
        for k in [
            chunk(1, 0, 0),
            chunk(1, 0, 1),
            chunk(1, 16, 0),
            chunk(2, 0, 0),
        ] {
            c.insert(k, Bytes::from(vec![0; 10]));
        }
        c.forget(1, 0);
        assert_eq!(c.stats().bytes, 20);
        assert!(c.contains(&chunk(1, 16, 0)) && c.contains(&chunk(2, 0, 0)));
        // A chunk larger than the whole budget is kept, alone.
        let c = ChunkCache::new(50);
        c.insert(key(0), Bytes::from(vec![0; 10]));
        c.insert(key(1), Bytes::from(vec![0; 100]));
        assert!(c.contains(&key(1)) && !c.contains(&key(0)));
        assert_eq!(c.stats().bytes, 100);
    }

    #[test]
    fn a_chunk_being_fetched_is_waited_for_not_fetched_twice() {
        let c = Arc::new(ChunkCache::new(1 << 20));
        let ahead = {
            let c = c.clone();
            std::thread::spawn(move || {
                c.prefetch::<()>(&key(7), || {
                    std::thread::sleep(Duration::from_millis(200));
                    Ok(Bytes::from_static(b"ahead"))
                })
            })
        };
        std::thread::sleep(Duration::from_millis(50));
        let got: Result<Bytes, ()> = c.get_or_fetch(&key(7), || Ok(Bytes::from_static(b"twice")));
        assert_eq!(got, Ok(Bytes::from_static(b"ahead")));
        ahead.join().unwrap();
        let s = c.stats();
        assert_eq!((s.hits, s.misses, s.prefetched), (1, 0, 1));
    }
}
