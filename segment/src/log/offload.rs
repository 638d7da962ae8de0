//! What a tier (an object store behind the log) needs of a partition: its
//! sealed segments, to copy, and the removal of local copies it holds.

use super::error::LogError;
use super::partition::PartitionLog;
use super::segment::SegState;
use crate::io::Storage;
use std::path::PathBuf;

/// A sealed segment whose every batch is visible: its files never change
/// again (only retention or a tier's trim removes them), so another thread
/// may read them, as a copy to an object store does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SealedSegment {
    /// Offset of its first batch (the number in its file names).
    pub base_offset: u64,
    /// Offset after its last message.
    pub next_offset: u64,
    /// Bytes of its log file.
    pub len: u64,
    /// `base_timestamp` of its first batch (µs).
    pub first_timestamp: u64,
    /// `base_timestamp` of its last batch (µs).
    pub last_timestamp: u64,
    /// Its log file.
    pub log_path: PathBuf,
    /// Its index file (entries and the seal record).
    pub index_path: PathBuf,
}

impl<S: Storage> PartitionLog<S> {
    /// The sealed segments, oldest first, that hold only visible batches
    /// (under a commit gate, only those wholly below the commit mark).
    pub fn sealed_segments(&self) -> Vec<SealedSegment> {
        let st = self.inner.st.borrow();
        st.segments
            .iter()
            .filter(|s| s.state == SegState::Sealed && s.len > 0)
            .filter(|s| s.visible.len == s.len && s.visible.next_offset == s.next_offset)
            .map(|s| SealedSegment {
                base_offset: s.base_offset,
                next_offset: s.next_offset,
                len: s.len,
                first_timestamp: s.first_timestamp.unwrap_or(s.last_timestamp),
                last_timestamp: s.last_timestamp,
                log_path: s.log_path.clone(),
                index_path: s.index_path.clone(),
            })
            .collect()
    }

    /// Removes local copies a tier holds: the oldest sealed segments, while
    /// each lies wholly below `offloaded_through` (the end of what the
    /// tier's manifest holds) and the log's local bytes exceed
    /// `keep_bytes`. Never the active segment; like retention, a power cut
    /// leaves a prefix removed. Returns the removed segment files.
    pub async fn trim_offloaded(
        &self,
        offloaded_through: u64,
        keep_bytes: u64,
    ) -> Result<Vec<PathBuf>, LogError> {
        self.remove_oldest_sealed(|seg, total| {
            seg.next_offset <= offloaded_through && total > keep_bytes
        })
        .await
    }
}
