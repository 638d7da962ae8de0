//! Finishing a recorded suffix cut (see `log/cut.rs`): the first step of
//! every open that finds a `CUT` record, before any other row of the
//! recovery table applies.
//!
//! In order, each step durable before the record goes:
//! 1. the clean-close record is removed (the log is about to change);
//! 2. the segments after the one holding the offset are removed, newest
//!    first (the first segment is never removed: it is emptied instead);
//! 3. the segment holding the offset is truncated at the batch starting
//!    there and synced, and its index removed (recovery rebuilds it by
//!    scanning). It must go: once appends rotate past the cut segment it
//!    is no longer the last, and a seal record written before the cut
//!    would vouch for its old length and next offset. A power cut in the
//!    sync may leave the truncation half made: the file system block
//!    holding the cut's position written back with zeros after it, the
//!    old length not committed (xfs writes the data before its log), so
//!    the bytes at the offset are zeros, then the old ones; the walk to
//!    the offset takes the end of the batch before it as its position
//!    (`cut::position_in`);
//! 4. the directory is synced, the record removed, the directory synced.
//!
//! A crash anywhere leaves the record, so the next open does it again;
//! each step finds its work done or does it.

use super::super::cut::{self, CutPlan, CUT_RECORD};
use super::super::error::OpenError;
use super::super::recovery::clean::CLEAN_RECORD;
use super::super::segment::{index_name, log_name};
use crate::io::{Mapping, Storage, StorageFile};
use std::path::Path;

/// Reads the record in `dir` and works out the cut for the segments at
/// `bases` (sorted), walking the headers of the segment that holds the
/// offset through `map` (its mapping and length): the offset and the plan.
pub(crate) fn plan_from_record(
    dir: &Path,
    partition: u64,
    record: &[u8],
    bases: &[u64],
    map: impl FnOnce(u64) -> Result<(Mapping, u64), OpenError>,
) -> Result<(u64, Option<CutPlan>), OpenError> {
    let path = dir.join(CUT_RECORD);
    let refuse = |why| OpenError::CutRecord {
        path: path.clone(),
        why,
    };
    let from = cut::decode(partition, record).map_err(refuse)?;
    if bases.is_empty() {
        return Ok((from, None));
    }
    let at = cut::containing(bases, from).map_err(refuse)?;
    let mapped = if bases[at] == from {
        None
    } else {
        Some(map(bases[at])?)
    };
    let data = mapped
        .as_ref()
        .and_then(|(m, len)| m.slice(0..usize::try_from(*len).ok()?))
        .unwrap_or(&[]);
    let plan = cut::plan(bases, at, from, data).map_err(refuse)?;
    Ok((from, Some(plan)))
}

/// Finishes the cut recorded in `dir`, whose segments start at `bases`;
/// returns the offset it cut from.
pub(super) async fn finish<S: Storage>(
    storage: &S,
    dir: &Path,
    partition: u64,
    bases: &[u64],
    clean_record: bool,
) -> Result<u64, OpenError> {
    let path = dir.join(CUT_RECORD);
    let record = read_whole(storage, &path).await?;
    let map = |base: u64| {
        let p = dir.join(log_name(base));
        let file = storage
            .open(&p, false)
            .map_err(|e| OpenError::io("open segment", &p, e))?;
        let len = file.len().map_err(|e| OpenError::io("stat", &p, e))?;
        let map = file
            .map(usize::try_from(len).unwrap_or(usize::MAX))
            .map_err(|e| OpenError::io("map", &p, e))?;
        Ok((map, len))
    };
    // The mapping is gone before anything is truncated.
    let (from, plan) = plan_from_record(dir, partition, &record, bases, map)?;
    if clean_record {
        remove(storage, &dir.join(CLEAN_RECORD))?;
    }
    if let Some(CutPlan { keep, truncate_to }) = plan {
        for &base in bases[keep..].iter().rev() {
            remove(storage, &dir.join(log_name(base)))?;
            remove(storage, &dir.join(index_name(base)))?;
        }
        if let Some(len) = truncate_to {
            let base = bases[keep - 1];
            let p = dir.join(log_name(base));
            let file = storage
                .open(&p, false)
                .map_err(|e| OpenError::io("open segment", &p, e))?;
            file.truncate(len)
                .await
                .map_err(|e| OpenError::io("truncate", &p, e))?;
            file.sync_data()
                .await
                .map_err(|e| OpenError::io("sync", &p, e))?;
            remove(storage, &dir.join(index_name(base)))?;
        }
    }
    sync_dir(storage, dir).await?;
    remove(storage, &path)?;
    sync_dir(storage, dir).await?;
    Ok(from)
}

/// The whole of a small file.
async fn read_whole<S: Storage>(storage: &S, path: &Path) -> Result<Vec<u8>, OpenError> {
    let file = storage
        .open(path, false)
        .map_err(|e| OpenError::io("open", path, e))?;
    let len = file.len().map_err(|e| OpenError::io("stat", path, e))?;
    // A record is 32 bytes; anything much longer is not one, and is
    // refused by its decoding without reading all of it.
    file.read_at(0, usize::try_from(len.min(4096)).unwrap_or(4096))
        .await
        .map_err(|e| OpenError::io("read", path, e))
}

/// Removes a file that may already be gone.
fn remove<S: Storage>(storage: &S, path: &Path) -> Result<(), OpenError> {
    match storage.remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(OpenError::io("remove", path, e)),
    }
}

async fn sync_dir<S: Storage>(storage: &S, dir: &Path) -> Result<(), OpenError> {
    storage
        .sync_dir(dir)
        .await
        .map_err(|e| OpenError::io("directory sync", dir, e))
}
