//! The readers waiting for a log's visible end to move, as the log's
//! state holds them (`wait.rs` is how a reader waits).

use std::collections::BTreeMap;
use std::task::Waker;

/// The readers waiting for the visible end to move.
#[derive(Default)]
pub(super) struct Waiters {
    pub(super) generation: u64,
    pub(super) next_id: u64,
    pub(super) wakers: BTreeMap<u64, Waker>,
}

impl Waiters {
    /// The visible end may have moved: wakes every waiter.
    pub(super) fn moved(&mut self) {
        self.generation = self.generation.wrapping_add(1);
        if !self.wakers.is_empty() {
            for w in std::mem::take(&mut self.wakers).into_values() {
                w.wake();
            }
        }
    }
}
