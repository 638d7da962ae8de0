//! How a group deals with its peers beyond what raft-rs does: a node that
//! lost its journal, data groups' leadership following the metadata
//! group's, and a lagging node saying how far behind it is.

use super::{Group, Role};
use raft::eraftpb::Message;
use std::time::Instant;

impl Group {
    /// raft-rs assumes a node never loses what it persisted. A node whose
    /// data directory was wiped (or whose journal lost a tail under
    /// `fsync=never`) comes back with less: as a follower it would be told
    /// a commit index past its log (raft-rs panics), and as leader raft-rs
    /// would ignore its rejections below what it once matched (it would
    /// never be sent what it lost). So: a commit past the log is lowered
    /// to the log's end (and the leader told), and a follower's rejection
    /// below its matched index lowers the match and probes from there.
    pub(super) fn guard_lost_journal(&mut self, m: &mut Message) {
        use raft::eraftpb::MessageType;
        let last = self.store.rl().last_index();
        if m.get_msg_type() == MessageType::MsgHeartbeat && m.commit > last {
            tracing::warn!(
                "group {}: node {} says entries up to {} are committed, this node holds {last}: it lost its journal (a wiped directory?) and catches up",
                self.id,
                m.from,
                m.commit
            );
            m.commit = last;
            // Tell the leader, which believes this node holds more and
            // would otherwise send nothing: a rejection naming this log's
            // end (handled below, on the leader).
            let mut nack = Message::default();
            nack.set_msg_type(MessageType::MsgAppendResponse);
            nack.to = m.from;
            nack.from = self.shared.me;
            nack.term = m.term;
            nack.reject = true;
            nack.index = last;
            nack.reject_hint = last;
            self.transport.send(self.id, nack);
        }
        if m.get_msg_type() == MessageType::MsgAppendResponse && m.reject && self.is_leader() {
            let hint = m.reject_hint;
            if let Some(pr) = self.raw.raft.mut_prs().get_mut(m.from) {
                if hint < pr.matched {
                    tracing::warn!(
                        "group {}: node {} holds entries only up to {hint}, not {}: it lost its journal (a wiped directory?); sending it what it lacks",
                        self.id,
                        m.from,
                        pr.matched
                    );
                    pr.matched = hint;
                    pr.become_probe();
                }
            }
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
