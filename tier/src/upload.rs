//! Copying a partition's sealed segments to the store: each segment's log
//! and index objects first, then the manifest that names them; and the
//! store's own housekeeping (strays, retention).

use crate::error::{StoreError, TierError};
use crate::manifest::{
    index_key, log_key, partition_prefix, Manifest, RemoteSegment, MANIFEST_PREFIX,
};
use crate::store::ObjectStore;
use corelog_segment::log::{Retention, SealedSegment};
use std::io::Read;
use std::sync::atomic::{AtomicBool, Ordering};
use xxhash_rust::xxh3::Xxh3;

/// The partition's manifest in force: the highest term's, or an empty one
/// when none was ever committed.
pub fn load_manifest(store: &dyn ObjectStore, partition: u64) -> Result<Manifest, TierError> {
    let Some(term) = manifest_terms(store, partition)?.into_iter().max() else {
        return Ok(Manifest::new(partition));
    };
    match store.get(&Manifest::key(partition, term), None) {
        Ok(bytes) => Manifest::decode(partition, term, &bytes),
        // Deleted since the listing: a newer term's superseded it.
        Err(StoreError::NotFound { .. }) => load_manifest(store, partition),
        Err(e) => Err(e.into()),
    }
}

/// The terms of the partition's manifests in the store.
pub fn manifest_terms(store: &dyn ObjectStore, partition: u64) -> Result<Vec<u64>, TierError> {
    let prefix = format!("{}{MANIFEST_PREFIX}", partition_prefix(partition));
    Ok(store
        .list(&prefix)?
        .iter()
        .filter_map(|o| Manifest::term_of_key(partition, &o.key))
        .collect())
}

/// Commits `manifest` (one more generation) under its term: one atomic
/// PUT, made only while `may_commit()` (this node still leads).
pub fn commit(
    store: &dyn ObjectStore,
    manifest: &mut Manifest,
    may_commit: &dyn Fn() -> bool,
) -> Result<(), TierError> {
    if !may_commit() {
        return Err(TierError::Deposed {
            partition: manifest.partition,
            term: manifest.term,
        });
    }
    manifest.generation += 1;
    let done = store.put(
        &Manifest::key(manifest.partition, manifest.term),
        &manifest.encode(),
    );
    if done.is_err() {
        manifest.generation -= 1;
    }
    Ok(done?)
}

/// Reads a file for an upload, hashing what it reads; fails once `stop`
/// is set, so a shutdown does not wait for a large upload.
struct Hashing<'a, R> {
    inner: R,
    hash: Xxh3,
    read: u64,
    stop: &'a AtomicBool,
}

impl<R: Read> Read for Hashing<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.stop.load(Ordering::Relaxed) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::Interrupted,
                "the tier is stopping",
            ));
        }
        let n = self.inner.read(buf)?;
        self.hash.update(&buf[..n]);
        self.read += n as u64;
        Ok(n)
    }
}

/// Copies one sealed segment's log and index to the store, under keys
/// named by its offsets (a redone copy replaces the same objects). It is
/// not held until [`commit`]ted in the manifest.
pub fn upload_segment(
    store: &dyn ObjectStore,
    partition: u64,
    seg: &SealedSegment,
    stop: &AtomicBool,
) -> Result<RemoteSegment, TierError> {
    let local = |path: &std::path::Path| {
        let path = path.to_owned();
        move |source| TierError::Store(StoreError::Local { path, source })
    };
    let index = std::fs::read(&seg.index_path).map_err(local(&seg.index_path))?;
    let file = std::fs::File::open(&seg.log_path).map_err(local(&seg.log_path))?;
    let mut remote = RemoteSegment {
        base_offset: seg.base_offset,
        next_offset: seg.next_offset,
        bytes: seg.len,
        index_bytes: index.len() as u64,
        first_timestamp: seg.first_timestamp,
        last_timestamp: seg.last_timestamp,
        checksum: 0,
    };
    let mut body = Hashing {
        inner: file,
        hash: Xxh3::new(),
        read: 0,
        stop,
    };
    store.put_reader(&log_key(partition, &remote), &mut body, seg.len)?;
    if body.read != seg.len {
        return Err(TierError::Store(StoreError::Local {
            path: seg.log_path.clone(),
            source: std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!("{} of {} bytes read", body.read, seg.len),
            ),
        }));
    }
    remote.checksum = body.hash.digest();
    store.put(&index_key(partition, &remote), &index)?;
    Ok(remote)
}

/// Deletes the partition's segment objects that `manifest` does not name:
/// copies a crash interrupted before their commit, or removals whose
/// delete failed. Returns their keys.
pub fn clean_strays(
    store: &dyn ObjectStore,
    manifest: &Manifest,
    may_delete: &dyn Fn() -> bool,
) -> Result<Vec<String>, TierError> {
    let p = manifest.partition;
    let named: std::collections::HashSet<String> = manifest
        .segments
        .iter()
        .flat_map(|s| [log_key(p, s), index_key(p, s)])
        .collect();
    let mut deleted = Vec::new();
    for o in store.list(&partition_prefix(p))? {
        let segment_object = o.key.ends_with(".log") || o.key.ends_with(".index");
        if segment_object && !named.contains(&o.key) {
            // A leader deposed meanwhile would delete what its successor
            // uploaded and names.
            if !may_delete() {
                return Err(TierError::Deposed {
                    partition: p,
                    term: manifest.term,
                });
            }
            store.delete(&o.key)?;
            deleted.push(o.key);
        }
    }
    Ok(deleted)
}

/// Removes from the store the oldest segments past `retention`, applied
/// to the whole log: the store's segments below `local_first` and the
/// `local_bytes` held locally. By size, only segments the store alone
/// holds go: dropping the remote copy of a segment still held locally
/// would not shrink the log (local retention takes the local copy, and the
/// next pass the remote one), and the next pass would copy it again. The
/// manifest is committed without them first, then their objects deleted
/// (a failed delete leaves a stray).
pub fn expire(
    store: &dyn ObjectStore,
    may_commit: &dyn Fn() -> bool,
    manifest: &mut Manifest,
    retention: &Retention,
    local_first: u64,
    local_bytes: u64,
    now_micros: u64,
) -> Result<Vec<RemoteSegment>, TierError> {
    let only_remote = |m: &Manifest| -> u64 {
        m.segments
            .iter()
            .filter(|s| s.base_offset < local_first)
            .map(|s| s.bytes)
            .sum()
    };
    let mut total = only_remote(manifest) + local_bytes;
    let mut drop = 0;
    for s in &manifest.segments {
        let expired = retention
            .max_age
            .map(|age| s.last_timestamp.saturating_add(age.as_micros() as u64) < now_micros)
            .unwrap_or(false);
        let oversize = s.base_offset < local_first
            && retention.max_bytes.map(|max| total > max).unwrap_or(false);
        if !(expired || oversize) {
            break;
        }
        if s.base_offset < local_first {
            total = total.saturating_sub(s.bytes);
        }
        drop += 1;
    }
    if drop == 0 {
        return Ok(Vec::new());
    }
    let mut next = manifest.clone();
    let removed: Vec<RemoteSegment> = next.segments.drain(..drop).collect();
    commit(store, &mut next, may_commit)?;
    *manifest = next;
    for s in &removed {
        // A failure leaves a stray for the next pass's cleaning.
        let _ = store.delete(&log_key(manifest.partition, s));
        let _ = store.delete(&index_key(manifest.partition, s));
    }
    Ok(removed)
}
