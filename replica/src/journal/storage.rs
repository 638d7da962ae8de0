//! raft-rs's `Storage` over a [`Journal`]: what the consensus library reads
//! (state, entries, terms, the snapshot). Writes go through the journal's
//! own methods, called by the group's loop in the order raft-rs's `Ready`
//! asks.

use super::Journal;
use raft::eraftpb::{Entry, Snapshot};
use raft::{GetEntriesContext, RaftState, StorageError};
use std::cell::{Ref, RefCell, RefMut};
use std::rc::Rc;

/// The journal, shared between the `RawNode` (reads) and the loop that
/// drives it (writes), on one thread.
#[derive(Debug, Clone)]
pub struct JournalStorage(Rc<RefCell<Journal>>);

impl JournalStorage {
    /// Wraps `journal`.
    pub fn new(journal: Journal) -> JournalStorage {
        JournalStorage(Rc::new(RefCell::new(journal)))
    }

    /// Reads the journal.
    pub fn rl(&self) -> Ref<'_, Journal> {
        self.0.borrow()
    }

    /// Writes the journal.
    pub fn wl(&self) -> RefMut<'_, Journal> {
        self.0.borrow_mut()
    }
}

impl raft::Storage for JournalStorage {
    fn initial_state(&self) -> raft::Result<RaftState> {
        let j = self.rl();
        Ok(RaftState::new(
            j.hard_state().clone(),
            j.conf_state().clone(),
        ))
    }

    fn entries(
        &self,
        low: u64,
        high: u64,
        max_size: impl Into<Option<u64>>,
        _context: GetEntriesContext,
    ) -> raft::Result<Vec<Entry>> {
        let j = self.rl();
        if low < j.first_index() {
            return Err(raft::Error::Store(StorageError::Compacted));
        }
        if high > j.last_index() + 1 {
            return Err(raft::Error::Store(StorageError::Unavailable));
        }
        if low >= high {
            return Ok(Vec::new());
        }
        Ok(j.slice(low, high, max_size.into()))
    }

    fn term(&self, idx: u64) -> raft::Result<u64> {
        let j = self.rl();
        if idx == j.snapshot_index() {
            return Ok(j.snapshot().get_metadata().term);
        }
        if idx < j.first_index() {
            return Err(raft::Error::Store(StorageError::Compacted));
        }
        match j.entry(idx) {
            Some(e) => Ok(e.term),
            None => Err(raft::Error::Store(StorageError::Unavailable)),
        }
    }

    fn first_index(&self) -> raft::Result<u64> {
        Ok(self.rl().first_index())
    }

    fn last_index(&self) -> raft::Result<u64> {
        Ok(self.rl().last_index())
    }

    fn snapshot(&self, request_index: u64, _to: u64) -> raft::Result<Snapshot> {
        let j = self.rl();
        if j.snapshot_index() < request_index {
            return Err(raft::Error::Store(
                StorageError::SnapshotTemporarilyUnavailable,
            ));
        }
        Ok(j.snapshot())
    }
}
