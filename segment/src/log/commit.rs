//! The commit mark: how far a replicated log may be read.
//!
//! A log opened with [`LogConfig::commit_gate`](super::LogConfig) holds
//! batches that are written (even durable) but not yet committed: a Raft
//! node writes an entry's batch before a majority holds it. Readers see
//! a batch only once it is below both marks: the acknowledgement mark (the
//! log's own, see `partition.rs`) and the commit mark, which only the
//! log's owner moves. Each segment's `visible` end is kept at the lower of
//! the two, on a batch boundary, so the poll path needs no second check:
//! everything that stops at the visible end stops at the commit mark.
//!
//! The commit mark only grows. What lies past it may still be cut, since
//! no reader holds those bytes.

use super::partition::PartitionLog;
use super::visible::set_visible;
use crate::io::Storage;

/// Why a commit mark was not set.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CommitMarkError {
    /// The log serves everything acknowledged: it has no commit mark.
    #[error("partition {partition} has no commit mark: it was opened without commit_gate")]
    NotGated {
        /// The partition.
        partition: u64,
    },
}

impl<S: Storage> PartitionLog<S> {
    /// Moves the commit mark to `offset` (the offset after the last
    /// committed message): readers may now see every acknowledged batch
    /// ending at or below it. A mark below the current one is ignored (the
    /// mark only grows); one past the log's end lets readers follow the
    /// acknowledgement mark up to it. A mark inside a batch serves only
    /// the batches before that one.
    pub fn set_commit_mark(&self, offset: u64) -> Result<(), CommitMarkError> {
        let mut st = self.inner.st.borrow_mut();
        let Some(mark) = st.commit else {
            return Err(CommitMarkError::NotGated {
                partition: self.inner.partition,
            });
        };
        if offset <= mark {
            return Ok(());
        }
        st.commit = Some(offset);
        let ack = self.ack_mark(&st);
        set_visible(&mut st, ack);
        Ok(())
    }

    /// The commit mark, for a log opened with `commit_gate`.
    pub fn commit_mark(&self) -> Option<u64> {
        self.inner.st.borrow().commit
    }
}
