//! Which sync rounds of a log are syncing: any number side by side, or
//! one alone (a round that syncs the directory; see `sync.rs`).

use std::task::Waker;

/// Which rounds are syncing: any number side by side, or one alone.
#[derive(Default)]
pub(crate) struct Syncing {
    pub(super) side_by_side: usize,
    pub(super) alone: bool,
    pub(super) waiting: Vec<Waker>,
}

impl Syncing {
    /// A round ends its syncs; returns the rounds waiting to start theirs.
    pub(crate) fn leave(&mut self, alone: bool) -> Vec<Waker> {
        if alone {
            self.alone = false;
        } else {
            self.side_by_side = self.side_by_side.saturating_sub(1);
        }
        std::mem::take(&mut self.waiting)
    }
}
