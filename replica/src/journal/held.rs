//! Which of a journal's entries hold their batch in memory, and how many
//! bytes that is.
//!
//! An entry's data is either the buffer its batch arrived in (memory of
//! this process) or, once applied or read back at open, a view of its
//! partition's segment (`Journal::hold_view`, `Journal::fill`): pages of
//! the page cache that the kernel may write back and drop, costing the
//! process only the entry itself. Compaction is triggered by the first
//! kind (`ReplicaOptions::compact_bytes`); counting views as memory made a
//! data group compact every 64 MiB of batches, and under a policy without
//! per-write syncs each compaction flushes the group's partitions first
//! (docs/bench/cluster-profile.md).

use super::record;
use raft::eraftpb::Entry;
use std::collections::VecDeque;

/// What an entry whose data is a view counts as held in memory: the entry
/// and its handle on the mapping, not the batch.
pub const VIEW_ENTRY_BYTES: u64 = 256;

/// Per entry (in the journal's order), whether its data is a view, and the
/// bytes by which views lower the records' total.
#[derive(Debug, Default)]
pub(super) struct Held {
    views: VecDeque<bool>,
    /// Σ over view entries of `record::len(e) - VIEW_ENTRY_BYTES`.
    discount: u64,
}

fn discount(e: &Entry) -> u64 {
    record::len(e).saturating_sub(VIEW_ENTRY_BYTES)
}

impl Held {
    /// An entry appended after the others, its data in memory.
    pub(super) fn push(&mut self) {
        self.views.push_back(false);
    }

    /// Entry `at` (counted from the first held) now holds a view; `e` is
    /// the entry with its new data (of the same length).
    pub(super) fn viewed(&mut self, at: usize, e: &Entry) {
        if let Some(v) = self.views.get_mut(at) {
            if !*v {
                *v = true;
                self.discount += discount(e);
            }
        }
    }

    /// Entries `keep..` of `entries` are cut.
    pub(super) fn truncate(&mut self, keep: usize, entries: &VecDeque<Entry>) {
        self.forget(keep..self.views.len().min(entries.len()), entries);
        self.views.truncate(keep);
    }

    /// The first `n` entries of `entries` are dropped (compacted).
    pub(super) fn drop_front(&mut self, n: usize, entries: &VecDeque<Entry>) {
        let n = n.min(self.views.len());
        self.forget(0..n.min(entries.len()), entries);
        self.views.drain(..n);
    }

    pub(super) fn clear(&mut self) {
        self.views.clear();
        self.discount = 0;
    }

    fn forget(&mut self, range: std::ops::Range<usize>, entries: &VecDeque<Entry>) {
        for (e, v) in entries.range(range.clone()).zip(self.views.range(range)) {
            if *v {
                self.discount = self.discount.saturating_sub(discount(e));
            }
        }
    }

    /// Of `records` (the records' bytes of every entry held), what is in
    /// memory.
    pub(super) fn in_memory(&self, records: u64) -> u64 {
        records.saturating_sub(self.discount)
    }
}
