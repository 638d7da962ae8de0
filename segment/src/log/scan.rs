//! The scanner: walks stored batches, verifying each, and says where and
//! why it stopped. Recovery, `verify` and the fuzz target use it.

use super::error::Damage;
use super::index::IndexEntry;
use crate::format::layout::{self, batch, BATCH_HEADER_LEN};
use crate::format::{check, declared_length, Limits};

/// Where a scan starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScanFrom {
    /// Byte position of the first batch to check.
    pub position: u64,
    /// The `base_offset` that batch must have.
    pub next_offset: u64,
    /// Timestamps may not go below this.
    pub last_timestamp: u64,
    /// The segment's base offset (for index entries).
    pub segment_base: u64,
    /// Position of the last index entry before `position`, if any.
    pub last_indexed: Option<u64>,
    /// The partition every batch must be stamped for (`None`: not known,
    /// e.g. a directory inspected outside its data directory).
    pub partition: Option<u64>,
}

/// Why a scan stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    /// The data ends right after the last good batch.
    End,
    /// Only zero bytes follow, as far as the scanner looked (preallocated
    /// space, or pages a power cut never wrote).
    Zeros,
    /// Damaged bytes follow.
    Damaged(Damage),
}

/// Why recovery cut a segment: what a scan found after the last whole
/// batch, when that is not the end of the data ([`Stop`] less `End`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CutReason {
    /// Only zeros followed the last batch.
    Zeros,
    /// Damaged bytes followed the last whole batch.
    Damaged(Damage),
}

/// What a scan found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scan {
    /// Position after the last good batch.
    pub end: u64,
    /// Offset after the last good batch.
    pub next_offset: u64,
    /// `base_timestamp` of the last good batch (or the starting bound).
    pub last_timestamp: u64,
    /// Position of the last good batch.
    pub last_batch: Option<u64>,
    /// Good batches seen.
    pub batches: u64,
    /// Index entries for the good batches, at the given interval.
    pub entries: Vec<IndexEntry>,
    /// Why it stopped (at `end`).
    pub stop: Stop,
}

/// How many bytes after a zero header are checked before calling the rest
/// of the data a zero tail. A cut is made either way; this only names it.
const ZERO_PROBE: usize = 64 << 10;

/// Verifies batch after batch of `data` from `from`: layout, both
/// checksums, offset continuity, timestamps never going back. Never panics.
pub fn scan(data: &[u8], from: ScanFrom, limits: &Limits, index_interval: u64) -> Scan {
    scan_with(data, from, limits, index_interval, |_, _| {})
}

/// [`scan`], calling `visit` with the position and view of every good batch.
pub fn scan_with<'a>(
    data: &'a [u8],
    from: ScanFrom,
    limits: &Limits,
    index_interval: u64,
    mut visit: impl FnMut(u64, crate::format::BatchRef<'a>),
) -> Scan {
    let mut s = Scan {
        end: from.position,
        next_offset: from.next_offset,
        last_timestamp: from.last_timestamp,
        last_batch: None,
        batches: 0,
        entries: Vec::new(),
        stop: Stop::End,
    };
    let mut last_indexed = from.last_indexed;
    loop {
        let Some(rest) = usize::try_from(s.end).ok().and_then(|p| data.get(p..)) else {
            s.stop = Stop::Damaged(Damage::TornHeader { available: 0 });
            return s;
        };
        if rest.is_empty() {
            s.stop = Stop::End;
            return s;
        }
        if let Err(stop) = next_batch(rest, &s, from.partition, limits) {
            s.stop = stop;
            return s;
        }
        let len = declared_length(rest, limits).unwrap_or(0) as usize;
        let view = crate::format::BatchRef::new_checked(&rest[..len]);
        let due = match last_indexed {
            None => true,
            Some(p) => s.end - p >= index_interval,
        };
        if due {
            if let (Ok(rel), Ok(pos)) = (
                u32::try_from(view.base_offset() - from.segment_base),
                u32::try_from(s.end),
            ) {
                s.entries.push(IndexEntry {
                    rel_offset: rel,
                    position: pos,
                    timestamp: view.base_timestamp(),
                });
                last_indexed = Some(s.end);
            }
        }
        visit(s.end, view);
        s.last_batch = Some(s.end);
        s.last_timestamp = view.base_timestamp();
        s.next_offset = view.next_offset();
        s.batches += 1;
        s.end += len as u64;
    }
}

/// Checks the batch at the start of `rest`.
fn next_batch(rest: &[u8], s: &Scan, partition: Option<u64>, limits: &Limits) -> Result<(), Stop> {
    if rest.len() < BATCH_HEADER_LEN {
        return Err(if all_zero(rest) {
            Stop::Zeros
        } else {
            Stop::Damaged(Damage::TornHeader {
                available: rest.len() as u64,
            })
        });
    }
    if all_zero(&rest[..BATCH_HEADER_LEN]) && all_zero(&rest[..rest.len().min(ZERO_PROBE)]) {
        return Err(Stop::Zeros);
    }
    let declared = declared_length(rest, limits).map_err(|e| Stop::Damaged(Damage::Batch(e)))?;
    if declared > rest.len() as u64 {
        return Err(Stop::Damaged(Damage::TornBatch {
            declared,
            available: rest.len() as u64,
        }));
    }
    let view =
        check(&rest[..declared as usize], limits).map_err(|e| Stop::Damaged(Damage::Batch(e)))?;
    if let Some(expected) = partition {
        if view.partition_id() != expected {
            return Err(Stop::Damaged(Damage::WrongPartition {
                expected,
                found: view.partition_id(),
            }));
        }
    }
    if view.base_offset() != s.next_offset {
        return Err(Stop::Damaged(Damage::OffsetGap {
            expected: s.next_offset,
            found: view.base_offset(),
        }));
    }
    if view.base_timestamp() < s.last_timestamp {
        return Err(Stop::Damaged(Damage::TimestampBackwards {
            previous: s.last_timestamp,
            found: view.base_timestamp(),
        }));
    }
    Ok(())
}

fn all_zero(b: &[u8]) -> bool {
    let mut chunks = b.chunks_exact(8);
    chunks.all(|c| c == [0u8; 8]) && chunks.remainder().iter().all(|&x| x == 0)
}

/// Reads a stored batch's header fields without verifying the batch: the
/// poll path walks headers it already trusts.
/// The header fields of the batch at `pos` of `data` (unchecked: read as
/// stored), or `None` when fewer than a header's bytes lie there.
pub fn header_at(data: &[u8], pos: u64) -> Option<HeaderPeek> {
    let p = usize::try_from(pos).ok()?;
    let h = data.get(p..p.checked_add(BATCH_HEADER_LEN)?)?;
    Some(HeaderPeek {
        base_offset: layout::u64_at(h, batch::BASE_OFFSET.start),
        base_timestamp: layout::u64_at(h, batch::BASE_TIMESTAMP.start),
        batch_length: layout::u64_at(h, batch::BATCH_LENGTH.start),
        message_count: layout::u32_at(h, batch::MESSAGE_COUNT.start),
    })
}

/// The header fields the poll path needs.
#[derive(Debug, Clone, Copy)]
pub struct HeaderPeek {
    /// `base_offset`.
    pub base_offset: u64,
    /// `base_timestamp` (µs).
    pub base_timestamp: u64,
    /// `batch_length`: header and frames.
    pub batch_length: u64,
    /// `message_count`.
    pub message_count: u32,
}

impl HeaderPeek {
    /// The offset after the batch's last message.
    pub fn next_offset(&self) -> u64 {
        self.base_offset
            .saturating_add(u64::from(self.message_count))
    }
}
