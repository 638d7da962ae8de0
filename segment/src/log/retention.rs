//! Deleting the oldest sealed segments: by the retention limits, or a
//! number of them on request.

use super::error::LogError;
use super::partition::PartitionLog;
use super::segment::{SegState, Segment};
use crate::io::Storage;
use std::path::PathBuf;

impl<S: Storage> PartitionLog<S> {
    /// Deletes sealed segments past the retention limits in force (see
    /// [`PartitionLog::set_retention`]; never the active one), oldest first,
    /// syncing the directory after each removal so a power cut can only
    /// leave a prefix deleted (no gap). Polls already holding a deleted
    /// segment keep reading it. Returns the deleted segment files.
    pub async fn enforce_retention(&self, now_micros: u64) -> Result<Vec<PathBuf>, LogError> {
        let retention = self.retention();
        self.remove_oldest_sealed(|seg, total| {
            let last_timestamp = seg.last_timestamp;
            let expired = retention
                .max_age
                .map(|age| last_timestamp.saturating_add(age.as_micros() as u64) < now_micros)
                .unwrap_or(false);
            let oversize = retention.max_bytes.map(|max| total > max).unwrap_or(false);
            expired || oversize
        })
        .await
    }

    /// Deletes the oldest `count` sealed segments (fewer when fewer are
    /// sealed; never the active one), like [`PartitionLog::enforce_retention`]
    /// does. Returns the deleted segment files.
    pub async fn delete_oldest_segments(&self, count: usize) -> Result<Vec<PathBuf>, LogError> {
        let mut left = count;
        self.remove_oldest_sealed(|_, _| {
            let remove = left > 0;
            left = left.saturating_sub(1);
            remove
        })
        .await
    }

    /// Removes the oldest segment while it is sealed, is not the only one,
    /// and `remove(it, the log's bytes)` says so.
    pub(super) async fn remove_oldest_sealed(
        &self,
        mut remove: impl FnMut(&Segment<S::File>, u64) -> bool,
    ) -> Result<Vec<PathBuf>, LogError> {
        let mut deleted = Vec::new();
        loop {
            let (log_path, index_path) = {
                let mut st = self.inner.st.borrow_mut();
                if st.segments.len() < 2 {
                    break;
                }
                let total: u64 = st.segments.iter().map(|s| s.len).sum();
                let Some(seg) = st.segments.front() else {
                    break;
                };
                if seg.state != SegState::Sealed || !remove(seg, total) {
                    break;
                }
                let paths = (seg.log_path.clone(), seg.index_path.clone());
                self.leave_clean(&mut st).map_err(|e| {
                    LogError::io("remove the clean-close record", &self.inner.dir, e)
                })?;
                self.inner
                    .storage
                    .remove_file(&paths.0)
                    .map_err(|e| LogError::io("retention: remove", &paths.0, e))?;
                st.segments.pop_front();
                paths
            };
            // A missing index is fine (recovery removes orphans too).
            let _ = self.inner.storage.remove_file(&index_path);
            self.inner
                .storage
                .sync_dir(&self.inner.dir)
                .await
                .map_err(|e| LogError::io("retention: directory sync", &self.inner.dir, e))?;
            deleted.push(log_path);
        }
        Ok(deleted)
    }
}
