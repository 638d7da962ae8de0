//! The chunk cache: fixed-size pieces of remote objects, fetched by ranged
//! GETs and held in memory up to a byte budget, the least recently used
//! evicted first.

use bytes::Bytes;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// A piece of an object: its key and the chunk's number (`u64::MAX` for
/// a whole small object, such as an index).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ChunkKey {
    /// The object's key.
    pub object: String,
    /// The chunk's number: bytes `[n * chunk, (n + 1) * chunk)`.
    pub chunk: u64,
}

/// How the cache has served.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Lookups served from memory.
    pub hits: u64,
    /// Lookups that fetched from the store.
    pub misses: u64,
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
    budget: u64,
    hits: AtomicU64,
    misses: AtomicU64,
}

#[derive(Debug, Default)]
struct Held {
    chunks: HashMap<ChunkKey, (Bytes, u64)>,
    tick: u64,
    bytes: u64,
}

impl ChunkCache {
    /// A cache holding at most `budget` bytes (at least the chunk being
    /// served, whatever the budget).
    pub fn new(budget: u64) -> ChunkCache {
        ChunkCache {
            inner: Mutex::new(Held::default()),
            budget,
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Held> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The chunk, from memory, or fetched by `fetch` and kept.
    pub fn get_or_fetch<E>(
        &self,
        key: &ChunkKey,
        fetch: impl FnOnce() -> Result<Bytes, E>,
    ) -> Result<Bytes, E> {
        if let Some(b) = self.touch(key) {
            self.hits.fetch_add(1, Ordering::Relaxed);
            return Ok(b);
        }
        self.misses.fetch_add(1, Ordering::Relaxed);
        let bytes = fetch()?;
        self.insert(key.clone(), bytes.clone());
        Ok(bytes)
    }

    /// Whether the chunk is held (not counted as a lookup).
    pub fn contains(&self, key: &ChunkKey) -> bool {
        self.lock().chunks.contains_key(key)
    }

    /// Keeps a chunk fetched ahead of its use (a prefetch).
    pub fn insert(&self, key: ChunkKey, bytes: Bytes) {
        let mut h = self.lock();
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
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            if let Some((b, _)) = h.chunks.remove(&oldest) {
                h.bytes -= b.len() as u64;
            }
        }
    }

    /// Drops every chunk of `object` (it was found damaged, or deleted).
    pub fn forget(&self, object: &str) {
        let mut h = self.lock();
        let keys: Vec<ChunkKey> = h
            .chunks
            .keys()
            .filter(|k| k.object == object)
            .cloned()
            .collect();
        for k in keys {
            if let Some((b, _)) = h.chunks.remove(&k) {
                h.bytes -= b.len() as u64;
            }
        }
    }

    fn touch(&self, key: &ChunkKey) -> Option<Bytes> {
        let mut h = self.lock();
        h.tick += 1;
        let tick = h.tick;
        let entry = h.chunks.get_mut(key)?;
        entry.1 = tick;
        Some(entry.0.clone())
    }

    /// Hits, misses and bytes held.
    pub fn stats(&self) -> CacheStats {
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            bytes: self.lock().bytes,
            budget: self.budget,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: u64) -> ChunkKey {
        ChunkKey {
            object: "o".into(),
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
        c.forget("o");
        assert_eq!(c.stats().bytes, 0);
    }
}
