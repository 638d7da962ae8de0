//! Polls served from the store: the segment holding the offset found in
//! the manifest, its index fetched (and cached) to find a batch near the
//! offset, then ranged GETs of fixed-size chunks through the chunk cache.
//! The reply is the same [`PollReply`] a local poll gives, over the
//! fetched bytes, every batch verified before it is served.

use crate::buffers::ChunkBuffers;
use crate::cache::{ChunkCache, ChunkKey, INDEX_CHUNK};
use crate::error::TierError;
use crate::manifest::{index_key, log_key, Manifest, RemoteSegment};
use crate::store::ObjectStore;
use bytes::{Bytes, BytesMut};
use corelog_segment::layout::BATCH_HEADER_LEN;
use corelog_segment::log::index::{self, IndexEntry};
use corelog_segment::log::scan::header_at;
use corelog_segment::log::{PollFrom, PollReply};
use corelog_segment::Limits;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// Decoded index objects, by partition and segment base (at most
/// [`IndexCache::HELD`]; all dropped when full).
#[derive(Debug, Default)]
pub struct IndexCache(Mutex<HashMap<SegmentId, Arc<[IndexEntry]>>>);

/// A segment: its partition and base offset.
type SegmentId = (u64, u64);

impl IndexCache {
    /// Indexes held at most.
    pub const HELD: usize = 256;

    fn get(&self, k: SegmentId) -> Option<Arc<[IndexEntry]>> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&k)
            .cloned()
    }

    /// Drops the partition's indexes.
    pub fn forget_partition(&self, partition: u64) {
        let mut held = self.0.lock().unwrap_or_else(|p| p.into_inner());
        held.retain(|(p, _), _| *p != partition);
    }

    fn put(&self, k: SegmentId, entries: Arc<[IndexEntry]>) {
        let mut held = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if held.len() >= IndexCache::HELD {
            held.clear();
        }
        held.insert(k, entries);
    }
}

/// What a remote read needs.
#[derive(Debug)]
pub struct Reader<'a> {
    /// The store.
    pub store: &'a dyn ObjectStore,
    /// The chunk cache.
    pub cache: &'a ChunkCache,
    /// Decoded indexes.
    pub indexes: &'a IndexCache,
    /// Bytes per chunk.
    pub chunk_bytes: u64,
    /// Buffers of `chunk_bytes` for the chunks fetched.
    pub buffers: &'a ChunkBuffers,
    /// The batch limits (the engine's).
    pub limits: Limits,
}

/// Where a remote poll starts in a segment.
#[derive(Debug, Clone, Copy)]
struct Start {
    pos: u64,
    /// The offset the batch there must start at.
    offset: u64,
}

impl Reader<'_> {
    /// Whole batches from `from`, up to `max_bytes` (at least one), from the
    /// one segment of `manifest` that holds the start, and where they end
    /// (the segment's base offset, the byte after them); `None` when the
    /// store holds nothing there.
    pub fn poll(
        &self,
        manifest: &Manifest,
        from: PollFrom,
        max_bytes: u64,
    ) -> Result<Option<(PollReply, u64, u64)>, TierError> {
        let seg = match from {
            PollFrom::Offset(o) => manifest.segment_from(o),
            PollFrom::First => manifest.segments.first(),
            PollFrom::Timestamp(t) => manifest.segments.iter().find(|s| s.last_timestamp >= t),
            PollFrom::Last => None,
        };
        let Some(seg) = seg else {
            return Ok(None);
        };
        let p = manifest.partition;
        let start = self.locate(p, seg, from)?;
        let end = self.collect_end(p, seg, &start, max_bytes)?;
        let bytes = self.read(p, seg, start.pos..end)?;
        let key = log_key(p, seg);
        let origin = PathBuf::from(self.store.object_name(&key));
        let reply =
            PollReply::from_fetched(bytes, origin, start.pos, &self.limits).inspect_err(|_| {
                // Never served; fetched again next time, in case the
                // damage was in flight.
                self.cache.forget(p, seg.base_offset);
            })?;
        // The object's batches are this partition's: a key that holds
        // another's (a bucket shared by mistake, a restore into the wrong
        // prefix) checks out batch by batch and must not be served.
        let mut at = start.pos;
        for b in reply.batches() {
            if b.partition_id() != p {
                self.cache.forget(p, seg.base_offset);
                return Err(TierError::Damaged {
                    object: self.store.object_name(&key),
                    position: at,
                    reason: format!(
                        "a batch of partition {} in partition {p}'s segment",
                        b.partition_id()
                    ),
                });
            }
            at += b.len() as u64;
        }
        if reply.first_offset() != start.offset {
            return Err(TierError::Damaged {
                object: self.store.object_name(&key),
                position: start.pos,
                reason: format!(
                    "the batch there starts at offset {}, not {}",
                    reply.first_offset(),
                    start.offset
                ),
            });
        }
        let reply = match from {
            PollFrom::Offset(o) => reply.starting_at(o),
            _ => reply,
        };
        Ok(Some((reply, seg.base_offset, end)))
    }

    /// The batch to start from: near the index entry at or below the
    /// target, then a walk of batch headers.
    fn locate(&self, p: u64, seg: &RemoteSegment, from: PollFrom) -> Result<Start, TierError> {
        let entries = self.index(p, seg)?;
        let entry = match from {
            PollFrom::Offset(o) if o > seg.base_offset => {
                index::floor_offset(&entries, o - seg.base_offset)
            }
            PollFrom::Timestamp(t) => index::floor_timestamp(&entries, t),
            _ => None,
        };
        let start = Start {
            pos: 0,
            offset: seg.base_offset,
        };
        let entry = entry.filter(|e| u64::from(e.position) < seg.bytes);
        let mut at = entry
            .map(|e| Start {
                pos: u64::from(e.position),
                offset: seg.base_offset.saturating_add(u64::from(e.rel_offset)),
            })
            .unwrap_or(start);
        let hint_timestamp = entry.map_or(0, |e| e.timestamp);
        // An index is a hint: only the first header read comes from it,
        // and one that does not name its batch (no batch header there, or
        // another batch's offset or timestamp, as the local log checks) is
        // not followed: the walk starts again from the segment's start,
        // once. Every later position is the walk's own, so damage it meets
        // is the log's and is named.
        let mut hinted = at.pos > 0;
        loop {
            let h = match self.header(p, seg, at.pos) {
                Ok(h)
                    if !hinted
                        || (h.base_offset == at.offset && h.base_timestamp == hint_timestamp) =>
                {
                    h
                }
                Err(e) if !hinted || !matches!(e, TierError::Damaged { .. }) => return Err(e),
                _ => {
                    tracing::warn!(
                        "{}: index entry for offset {} at byte {} does not name its batch; walking from the start",
                        self.store.object_name(&log_key(p, seg)),
                        at.offset,
                        at.pos
                    );
                    hinted = false;
                    at = start;
                    continue;
                }
            };
            hinted = false;
            if h.base_offset != at.offset {
                return Err(self.damaged(
                    p,
                    seg,
                    at.pos,
                    format!(
                        "the batch there starts at offset {}, not {}",
                        h.base_offset, at.offset
                    ),
                ));
            }
            let here = match from {
                PollFrom::Offset(o) => o < h.next_offset(),
                PollFrom::Timestamp(t) => h.base_timestamp >= t,
                _ => true,
            };
            let next = at.pos + h.batch_length;
            if here || next >= seg.bytes {
                return Ok(at);
            }
            at = Start {
                pos: next,
                offset: h.next_offset(),
            };
        }
    }

    /// Where the reply ends: whole batches from the start, at least one,
    /// up to `max_bytes`, within the segment.
    fn collect_end(
        &self,
        p: u64,
        seg: &RemoteSegment,
        start: &Start,
        max_bytes: u64,
    ) -> Result<u64, TierError> {
        let mut end = start.pos;
        loop {
            let h = self.header(p, seg, end)?;
            if end > start.pos && end - start.pos + h.batch_length > max_bytes {
                return Ok(end);
            }
            end += h.batch_length;
            if end >= seg.bytes {
                return Ok(end);
            }
        }
    }

    /// The batch header at `pos`, checked to lie inside the segment.
    fn header(
        &self,
        p: u64,
        seg: &RemoteSegment,
        pos: u64,
    ) -> Result<corelog_segment::log::scan::HeaderPeek, TierError> {
        // What the manifest says remains from `pos`: the declared length is
        // compared with it, never added to `pos` (a damaged length near
        // 2^64 would wrap around).
        let remain = seg.bytes.saturating_sub(pos);
        let head = self.read(p, seg, pos..pos + remain.min(BATCH_HEADER_LEN as u64))?;
        let h = header_at(&head, 0)
            .ok_or_else(|| self.damaged(p, seg, pos, "a torn batch header".into()))?;
        if h.batch_length < BATCH_HEADER_LEN as u64 || h.batch_length > remain {
            return Err(self.damaged(
                p,
                seg,
                pos,
                format!("a batch of {} bytes where {remain} remain", h.batch_length),
            ));
        }
        Ok(h)
    }

    fn damaged(&self, p: u64, seg: &RemoteSegment, position: u64, reason: String) -> TierError {
        let key = log_key(p, seg);
        self.cache.forget(p, seg.base_offset);
        TierError::Damaged {
            object: self.store.object_name(&key),
            position,
            reason,
        }
    }

    /// The segment's index entries (the whole index object, fetched once
    /// and kept decoded).
    fn index(&self, p: u64, seg: &RemoteSegment) -> Result<Arc<[IndexEntry]>, TierError> {
        if let Some(e) = self.indexes.get((p, seg.base_offset)) {
            return Ok(e);
        }
        let key = ChunkKey {
            partition: p,
            base: seg.base_offset,
            chunk: INDEX_CHUNK,
        };
        let object = index_key(p, seg);
        let bytes = self
            .cache
            .get_or_fetch(&key, || self.store.get(&object, None).map(Bytes::from))?;
        let (entries, _) = index::decode_file(&bytes);
        // An index is a hint: only entries inside the segment count (the
        // walk then checks the batch each one names).
        let good = index::well_formed_prefix(&entries, seg.bytes);
        let entries: Arc<[IndexEntry]> = entries[..good].into();
        self.indexes.put((p, seg.base_offset), entries.clone());
        Ok(entries)
    }

    /// Bytes `range` of the segment's log object, through the cache. A
    /// range inside one chunk is a view of it; a longer one is copied
    /// together.
    fn read(
        &self,
        p: u64,
        seg: &RemoteSegment,
        range: std::ops::Range<u64>,
    ) -> Result<Bytes, TierError> {
        let c = self.chunk_bytes.max(1);
        let first = range.start / c;
        let last = range.end.saturating_sub(1) / c;
        let mut out = BytesMut::new();
        for n in first..=last {
            let chunk = self.chunk(p, seg, n)?;
            let from = range.start.max(n * c) - n * c;
            let to = (range.end.min((n + 1) * c) - n * c).min(chunk.len() as u64);
            if from > to {
                return Err(self.damaged(
                    p,
                    seg,
                    n * c + chunk.len() as u64,
                    format!(
                        "the object ends there, its manifest says {} bytes",
                        seg.bytes
                    ),
                ));
            }
            let part = chunk.slice(from as usize..to as usize);
            if first == last {
                return Ok(part);
            }
            out.extend_from_slice(&part);
        }
        Ok(out.freeze())
    }

    /// Chunk `n` of the segment's log object, whole: a chunk shorter than
    /// the manifest's length allows means the object ends early, and is
    /// named at the byte where it does.
    fn chunk(&self, p: u64, seg: &RemoteSegment, n: u64) -> Result<Bytes, TierError> {
        let key = ChunkKey {
            partition: p,
            base: seg.base_offset,
            chunk: n,
        };
        let chunk = self.cache.get_or_fetch(&key, || self.fetch(p, seg, n))?;
        let c = self.chunk_bytes.max(1);
        let start = n.saturating_mul(c);
        let want = seg.bytes.saturating_sub(start).min(c);
        if (chunk.len() as u64) < want {
            // Fetched again next time, in case the object is put again.
            self.cache.forget(p, seg.base_offset);
            let there = if chunk.is_empty() {
                "at or before this byte"
            } else {
                "there"
            };
            return Err(self.damaged(
                p,
                seg,
                start + chunk.len() as u64,
                format!(
                    "the object ends {there}, its manifest says {} bytes",
                    seg.bytes
                ),
            ));
        }
        Ok(chunk)
    }

    fn fetch(&self, p: u64, seg: &RemoteSegment, n: u64) -> Result<Bytes, crate::StoreError> {
        let c = self.chunk_bytes.max(1);
        let start = n.saturating_mul(c);
        let range = start..start.saturating_add(c).min(seg.bytes);
        if range.end - range.start != self.buffers.size() as u64 {
            // A segment's short last chunk takes memory of its size: in a
            // whole chunk's buffer it would hold more than the cache counts.
            // So do chunks larger than the buffers (over 1 GiB).
            return self
                .store
                .get(&log_key(p, seg), Some(range))
                .map(Bytes::from);
        }
        let mut buf = self.buffers.take();
        let got = self.store.get_into(&log_key(p, seg), range, &mut buf)?;
        Ok(self.buffers.freeze(buf, got))
    }

    /// Fetches chunk `n` of the segment into the cache ahead of its use
    /// (nothing when it is held, arriving, or past the end).
    pub fn prefetch(&self, p: u64, seg: &RemoteSegment, n: u64) {
        if n.saturating_mul(self.chunk_bytes.max(1)) >= seg.bytes {
            return;
        }
        let key = ChunkKey {
            partition: p,
            base: seg.base_offset,
            chunk: n,
        };
        self.cache.prefetch(&key, || self.fetch(p, seg, n));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::MemoryStore;

    #[test]
    fn only_whole_chunks_take_a_pooled_buffer() {
        let store = MemoryStore::new();
        let seg = RemoteSegment {
            base_offset: 0,
            next_offset: 1,
            bytes: 12,
            index_bytes: 0,
            first_timestamp: 0,
            last_timestamp: 0,
            checksum: 0,
        };
        store.put(&log_key(1, &seg), b"abcdefghijkl").expect("put");
        let (cache, indexes, buffers) = (
            ChunkCache::new(1 << 10),
            IndexCache::default(),
            ChunkBuffers::new(8),
        );
        let r = Reader {
            store: &store,
            cache: &cache,
            indexes: &indexes,
            chunk_bytes: 8,
            buffers: &buffers,
            limits: Limits::default(),
        };
        let whole = r.fetch(1, &seg, 0).expect("chunk 0");
        let short = r.fetch(1, &seg, 1).expect("chunk 1");
        assert_eq!((&whole[..], &short[..]), (&b"abcdefgh"[..], &b"ijkl"[..]));
        drop(short);
        assert_eq!(buffers.held(), 0, "a short chunk held a whole buffer");
        drop(whole);
        assert_eq!(buffers.held(), 1);
    }
}
