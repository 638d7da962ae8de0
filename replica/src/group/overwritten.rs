//! Sends waiting on entries that a new leader's entries replace or cut.
//!
//! A follower appends what its leader sends, cutting any suffix of its own
//! log that conflicts. What is cut was never committed (a committed entry
//! is in every later leader's log), so a send this node took while it led
//! and whose entry is cut is answered "not accepted" at once, and Iggy's
//! SDK retries it at the leader. Otherwise it would wait for its index to
//! be applied, which, past the new leader's log, takes until that log grows
//! there or the commit timeout.

use super::{Awaited, Group};
use crate::error::ReplicaError;
use raft::eraftpb::Entry;
use std::collections::BTreeMap;

impl Group {
    /// Answers "not accepted" the sends whose entries `entries` (about to
    /// be appended) replace or cut.
    pub(super) fn fail_overwritten(&mut self, entries: &[Entry]) {
        for i in overwritten(&self.waiters, entries) {
            if let Some(p) = self.waiters.remove(&i) {
                p.waiter.fail(ReplicaError::NotLeader {
                    leader: self.leader(),
                });
            }
        }
    }
}

/// The indexes of `waiters` whose entries `entries` (to be appended,
/// replacing any suffix from the first's index on) overwrite or cut: a
/// waiter at or past the first index whose term differs from the new
/// entry's there, or which lies past the last.
fn overwritten(waiters: &BTreeMap<u64, Awaited>, entries: &[Entry]) -> Vec<u64> {
    let Some(first) = entries.first().map(|e| e.index) else {
        return Vec::new();
    };
    waiters
        .range(first..)
        .filter(|(i, p)| {
            let new = usize::try_from(**i - first)
                .ok()
                .and_then(|k| entries.get(k));
            new.is_none_or(|e| e.term != p.term)
        })
        .map(|(i, _)| *i)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::overwritten;
    use crate::group::{Awaited, Waiter};
    use raft::eraftpb::Entry;
    use std::collections::BTreeMap;
    use std::time::Instant;

    fn pending(term: u64) -> Awaited {
        let (tx, _rx) = futures_channel::oneshot::channel();
        Awaited {
            term,
            deadline: Instant::now(),
            waiter: Waiter::Count(tx),
        }
    }

    fn entries(first: u64, terms: &[u64]) -> Vec<Entry> {
        terms
            .iter()
            .enumerate()
            .map(|(k, t)| {
                let mut e = Entry::default();
                e.index = first + k as u64;
                e.term = *t;
                e
            })
            .collect()
    }

    #[test]
    fn waiters_whose_entries_are_replaced_or_cut_are_found() {
        let mut w = BTreeMap::new();
        for (i, t) in [(4, 2), (5, 2), (6, 2), (7, 2)] {
            w.insert(i, pending(t));
        }
        // A leader of term 3 replaces 5 and 6; 7 is cut (past the new end);
        // 4 is before the first new entry.
        assert_eq!(overwritten(&w, &entries(5, &[3, 3])), vec![5, 6, 7]);
        // The same entries again (term 2 at 5 and 6): only what lies past
        // them is cut.
        assert_eq!(overwritten(&w, &entries(5, &[2, 2])), vec![7]);
        // A leader appending its own new entries past every waiter.
        assert!(overwritten(&w, &entries(8, &[2])).is_empty());
        // Its own proposal at 7, same term: kept.
        assert!(overwritten(&w, &entries(7, &[2])).is_empty());
        assert!(overwritten(&w, &[]).is_empty());
    }
}
