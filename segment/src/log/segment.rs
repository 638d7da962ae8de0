//! One segment file of a partition: `<base offset, 20 digits>.log` and its
//! `.index`.
//!
//! A segment is *active* (the log appends to it), *sealing* (it reached
//! `segment_bytes`; its last writes may still be in flight; it is being
//! made durable and its index sealed) or *sealed* (read-only, file closed,
//! confirmed on disk by its index's seal record).

use super::event::Event;
use super::index::IndexEntry;
use super::map_slot::{MapSlot, Mapper};
use super::prealloc::Prealloc;
use crate::io::Mapping;
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// The file name of the segment starting at `base`.
pub fn log_name(base: u64) -> String {
    format!("{base:020}.log")
}

/// The index file name of the segment starting at `base`.
pub fn index_name(base: u64) -> String {
    format!("{base:020}.index")
}

/// The base offset named by a segment file name.
pub fn parse_log_name(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(".log")?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SegState {
    Active,
    Sealing,
    Sealed,
}

/// What readers may see of a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Visible {
    pub len: u64,
    pub next_offset: u64,
    pub last_batch: Option<u64>,
    pub last_timestamp: u64,
}

pub(crate) struct Segment<F> {
    pub base_offset: u64,
    pub log_path: PathBuf,
    pub index_path: PathBuf,
    /// Mapped while the segment is active, and while read once sealed
    /// (see `map_slot.rs`).
    pub map: MapSlot,
    /// Open while the segment takes writes or is being sealed.
    pub writer: Option<F>,
    pub state: SegState,
    /// Bytes reserved (active) or held (sealed).
    pub len: u64,
    /// Offset after the last reserved batch.
    pub next_offset: u64,
    pub last_batch: Option<u64>,
    pub last_timestamp: u64,
    pub first_timestamp: Option<u64>,
    /// What readers see: below the written (or durable) mark.
    pub visible: Visible,
    pub index: Vec<IndexEntry>,
    /// Entries whose batches are durable (may be written to the index).
    pub index_durable: usize,
    /// Entries in the index file.
    pub index_written: usize,
    pub index_flushing: bool,
    /// The index file is durable as it stands: synced, and not written
    /// since. A clean close syncs only the index files without it.
    pub index_synced: bool,
    pub last_indexed: Option<u64>,
    pub pending_writes: usize,
    /// Writes completed since the last fdatasync of this file.
    pub dirty: bool,
    /// Set once no write is pending and no more will be reserved.
    pub drained: Rc<Event>,
    /// Preallocation ahead of the write position (active segments).
    pub prealloc: Prealloc,
}

impl<F> Segment<F> {
    /// A segment mapped with `map` (`None`: mapped by its first read,
    /// through `mapper`).
    pub(crate) fn new(
        dir: &Path,
        base_offset: u64,
        map: Option<Mapping>,
        mapper: Mapper,
        writer: Option<F>,
    ) -> Segment<F> {
        Segment {
            base_offset,
            log_path: dir.join(log_name(base_offset)),
            index_path: dir.join(index_name(base_offset)),
            map: MapSlot::new(map, mapper),
            writer,
            state: SegState::Active,
            len: 0,
            next_offset: base_offset,
            last_batch: None,
            last_timestamp: 0,
            first_timestamp: None,
            visible: Visible {
                len: 0,
                next_offset: base_offset,
                last_batch: None,
                last_timestamp: 0,
            },
            index: Vec::new(),
            index_durable: 0,
            index_written: 0,
            index_flushing: false,
            index_synced: false,
            last_indexed: None,
            pending_writes: 0,
            dirty: false,
            drained: Rc::new(Event::default()),
            prealloc: Prealloc::default(),
        }
    }

    /// Everything reserved is visible.
    pub(crate) fn fully_visible(&self) -> Visible {
        Visible {
            len: self.len,
            next_offset: self.next_offset,
            last_batch: self.last_batch,
            last_timestamp: self.last_timestamp,
        }
    }

    /// The segment's mapping, made now if it has none (a sealed segment
    /// not read lately).
    pub(crate) fn mapping(&self) -> std::io::Result<&Mapping> {
        self.map.get(&self.log_path, self.len)
    }

    /// Index entries that point below the visible end.
    pub(crate) fn visible_index(&self) -> &[IndexEntry] {
        let n = self
            .index
            .partition_point(|e| u64::from(e.position) < self.visible.len);
        &self.index[..n]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        assert_eq!(log_name(42), "00000000000000000042.log");
        assert_eq!(parse_log_name(&log_name(u64::MAX)), Some(u64::MAX));
        assert_eq!(parse_log_name("42.log"), None);
        assert_eq!(parse_log_name("0000000000000000004x.log"), None);
        assert_eq!(parse_log_name("00000000000000000042.index"), None);
    }
}
