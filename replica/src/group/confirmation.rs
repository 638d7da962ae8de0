//! The group's side of its leader lease (`lease.rs`): asking the peers to
//! confirm this leader, and publishing until when they did.

use super::lease::LeaderLease;
use super::Group;
use std::sync::atomic::Ordering;
use std::time::Instant;

impl Group {
    /// While leader, asks the peers to confirm it (`lease.rs`): every
    /// tick until the first confirmation of its leadership, then once a
    /// heartbeat interval.
    pub(super) fn ask_confirmation(&mut self, now: Instant) {
        let every = if self.lease.until_ms == 0 {
            self.opts.tick
        } else {
            self.opts.tick * self.opts.heartbeat_ticks as u32
        };
        if !self.is_leader() || now.duration_since(self.last_question) < every {
            return;
        }
        self.last_question = now;
        let at = self.shared.ms_of(now);
        self.raw.read_index(LeaderLease::question(at));
    }

    /// Publishes until when this node's leadership is confirmed (0 when it
    /// does not lead).
    pub(super) fn publish_lease(&self) {
        let until = if self.is_leader() {
            self.lease.until_ms
        } else {
            0
        };
        self.status()
            .confirmed_until
            .store(until, Ordering::Release);
    }
}
