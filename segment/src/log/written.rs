//! Reading back a written batch past the commit mark.
//!
//! A replicated log holds batches its owner wrote before they were
//! committed (`commit.rs`): a Raft node writes an entry's batch into the
//! partition log when it persists the entry, and its journal keeps only a
//! pointer to it. To send such an entry to a peer after a restart, the node
//! reads the batch back: the bytes it acknowledged (below the
//! acknowledgement mark, so written, and under `fsync=batch` durable),
//! whether or not readers may see them yet. No reader is served through
//! this: it is the owner's own view of its log.

use super::error::LogError;
use super::index;
use super::partition::PartitionLog;
use super::scan::header_at;
use crate::format::layout::BATCH_HEADER_LEN;
use crate::io::{Mapping, Storage};
use bytes::Bytes;
use std::ops::Range;

/// A written batch inside its segment's mapping: a view of the segment,
/// not a copy. [`WrittenBatch::bytes`] reads it through the mapping;
/// [`WrittenBatch::file`] names the same bytes in the segment file, for a
/// sender that hands them to the kernel by descriptor (`sendfile`).
#[derive(Clone)]
pub struct WrittenBatch {
    map: Mapping,
    range: Range<usize>,
}

impl std::fmt::Debug for WrittenBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WrittenBatch")
            .field("range", &self.range)
            .finish()
    }
}

impl WrittenBatch {
    /// The batch's length in bytes.
    pub fn len(&self) -> usize {
        self.range.len()
    }

    /// Never true: a batch is at least its header.
    pub fn is_empty(&self) -> bool {
        self.range.is_empty()
    }

    /// The batch as [`Bytes`] that keep the mapping alive.
    pub fn bytes(&self) -> Bytes {
        Bytes::from_owner(self.clone())
    }

    /// The segment file's descriptor and the batch's position in it;
    /// `None` when the log's storage has no file (a simulated one).
    pub fn file(&self) -> Option<(std::os::fd::BorrowedFd<'_>, u64)> {
        Some((self.map.fd()?, self.range.start as u64))
    }
}

impl From<WrittenBatch> for Bytes {
    fn from(w: WrittenBatch) -> Bytes {
        Bytes::from_owner(w)
    }
}

impl AsRef<[u8]> for WrittenBatch {
    fn as_ref(&self) -> &[u8] {
        // The range was checked against the mapping when it was made; the
        // bytes lie below the acknowledgement mark, where nothing writes
        // while the log is open (see `Mapping`).
        self.map.slice(self.range.clone()).unwrap_or(&[])
    }
}

impl<S: Storage> PartitionLog<S> {
    /// The whole batch whose base offset is `offset`, if the log holds one
    /// below its acknowledgement mark, committed or not: a view of the
    /// segment's mapping. `None` when no batch starts there (below the
    /// log's start, past its acknowledged end, or inside a batch).
    pub fn read_written(&self, offset: u64) -> Result<Option<Bytes>, LogError> {
        Ok(self.written_batch(offset)?.map(|w| w.bytes()))
    }

    /// [`PartitionLog::read_written`]'s batch as a [`WrittenBatch`], which
    /// also names its place in the segment file.
    pub fn written_batch(&self, offset: u64) -> Result<Option<WrittenBatch>, LogError> {
        let st = self.inner.st.borrow();
        let ack = self.ack_mark(&st);
        let Some(i) = st
            .segments
            .partition_point(|s| s.base_offset <= offset)
            .checked_sub(1)
        else {
            return Ok(None);
        };
        let seg = &st.segments[i];
        let limit = match seg.base_offset.cmp(&ack.segment) {
            std::cmp::Ordering::Less => seg.len,
            std::cmp::Ordering::Equal => ack.end,
            std::cmp::Ordering::Greater => return Ok(None),
        };
        let map = seg
            .mapping()
            .map_err(|e| LogError::io("map segment", &seg.log_path, e))?;
        let Some(data) = usize::try_from(limit).ok().and_then(|l| map.slice(0..l)) else {
            return Ok(None);
        };
        let rel = offset - seg.base_offset;
        let (mut pos, mut next) = match index::floor_offset(&seg.index, rel) {
            Some(e) if u64::from(e.position) < limit => (
                u64::from(e.position),
                seg.base_offset + u64::from(e.rel_offset),
            ),
            _ => (0, seg.base_offset),
        };
        while let Some(p) = header_at(data, pos) {
            let Some(end) = pos.checked_add(p.batch_length) else {
                break;
            };
            // An index entry is a hint: a header that does not continue
            // the walk ends it.
            if p.base_offset != next || p.batch_length < BATCH_HEADER_LEN as u64 || end > limit {
                break;
            }
            if p.base_offset == offset {
                let (Ok(from), Ok(to)) = (usize::try_from(pos), usize::try_from(end)) else {
                    break;
                };
                return Ok(Some(WrittenBatch {
                    map: map.clone(),
                    range: from..to,
                }));
            }
            if p.base_offset > offset {
                break;
            }
            next = p.next_offset();
            pos = end;
        }
        Ok(None)
    }
}
