//! How a group deals with its peers beyond what raft-rs does: a node that
//! lost its journal (`lost_journal.rs`), data groups' leadership following the metadata
//! group's, and a lagging node saying how far behind it is.

use super::{Group, Role};
use raft::eraftpb::Message;
use std::time::Instant;

impl Group {
    /// A peer that lost its journal (`lost_journal.rs`): `m` guarded
    /// before it is stepped, the leader told where this node's log ends.
    pub(super) fn guard_lost_journal(&mut self, m: &mut Message) {
        let last = self.store.rl().last_index();
        let me = self.shared.me;
        if let Some(nack) = super::lost_journal::guard(&mut self.raw, self.id, me, last, m) {
            self.transport.send(self.id, nack);
        }
    }

    /// Keeps every data group's leadership on the metadata group's leader,
    /// the node clients are sent to: a data group led elsewhere hands its
    /// leadership over.
    pub(super) fn follow_cluster_leader(&mut self, now: Instant) {
        if !matches!(self.role, Role::Data { .. }) || !self.is_leader() {
            return;
        }
        let Some(target) = self.shared.leader_of(0) else {
            return;
        };
        let election = self.opts.tick * self.opts.election_ticks as u32;
        if target == self.shared.me || now.duration_since(self.last_transfer) < election {
            return;
        }
        // Only to a node this group hears from (the metadata group may not
        // have noticed yet that its leader is gone), and that is nearly
        // caught up (a transfer stops proposals until it completes).
        let last = self.raw.raft.raft_log.last_index();
        let ready = self
            .raw
            .raft
            .prs()
            .get(target)
            .is_some_and(|p| p.recent_active && p.matched + 64 >= last);
        if !ready {
            return;
        }
        self.last_transfer = now;
        tracing::info!(
            "group {}: handing leadership to node {target}, the metadata leader",
            self.id
        );
        self.raw.transfer_leader(target);
    }

    /// Says how far behind this node is while it catches up (every 5 s at
    /// most).
    pub(super) fn log_catch_up(&mut self, now: Instant) {
        let commit = self.raw.raft.raft_log.committed;
        let behind = commit.saturating_sub(self.applied);
        if behind < 64 || now.duration_since(self.last_progress_log).as_secs() < 5 {
            return;
        }
        self.last_progress_log = now;
        tracing::info!(
            "group {}: catching up: applied {} of {commit} committed entries ({behind} to go)",
            self.id,
            self.applied
        );
    }
}
