//! The group's side of its fence (`fence.rs`): which messages a fenced
//! node steps, and when the fence lifts.

use super::Group;
use raft::eraftpb::{Message, MessageType};

impl Group {
    /// Whether `m` may be stepped: a fenced node drops vote requests, and
    /// notes what leaders and candidates tell about the cluster.
    pub(super) fn fence_admits(&mut self, m: &Message) -> bool {
        if !self.fence.on {
            return true;
        }
        match m.get_msg_type() {
            MessageType::MsgRequestVote | MessageType::MsgRequestPreVote => {
                let own_last = self.store.rl().last_index();
                if own_last == 0 && m.index == 0 {
                    self.fence.empty.insert(m.from);
                    let voters = self.cluster.ids().len();
                    if with_me_a_majority(self.fence.empty.len(), voters) {
                        self.unfence(&format!(
                            "this node and node(s) {:?} hold no entries, a majority of {voters}: a new cluster",
                            self.fence.empty
                        ));
                        return true;
                    }
                }
                tracing::debug!(
                    "group {}: a vote request from node {} (its last entry {}) dropped: this node's journal is new",
                    self.id,
                    m.from,
                    m.index
                );
                false
            }
            MessageType::MsgAppend | MessageType::MsgHeartbeat | MessageType::MsgSnapshot
                if m.term >= self.raw.raft.term =>
            {
                let snap = m.get_snapshot().get_metadata().index;
                self.fence.leader_commit = self.fence.leader_commit.max(m.commit).max(snap);
                true
            }
            _ => true,
        }
    }

    /// Keeps a fenced node that holds entries from standing for election
    /// (`fence.rs`): run before each tick, its election timer never runs
    /// out. Its log as raft-rs campaigns with it: a snapshot stepped and
    /// not yet installed counts (its candidacy would name the snapshot's
    /// index while the partitions are still being fetched).
    pub(super) fn hold_candidacy(&mut self) {
        if self.fence.on && self.raw.raft.raft_log.last_index() > 0 {
            self.raw.raft.election_elapsed = 0;
        }
    }

    /// Lifts the fence once this node has caught up with a leader, or leads.
    pub(super) fn check_fence(&mut self) {
        if !self.fence.on {
            return;
        }
        if self.is_leader() {
            self.unfence("this node was elected");
            return;
        }
        let committed = self.raw.raft.raft_log.committed;
        let target = self.fence.leader_commit;
        if self.leader().is_some()
            && target > 0
            && committed >= target
            && self.store.rl().last_index() >= target
        {
            self.unfence(&format!(
                "caught up with the leader's commit index {target}"
            ));
        }
    }

    fn unfence(&mut self, why: &str) {
        self.fence.on = false;
        tracing::info!("group {}: this node votes again: {why}", self.id);
        if let Err(e) = self.store.wl().caught_up() {
            // The marker stays: the next start fences again, which is safe.
            tracing::warn!("group {}: {e}", self.id);
        }
    }
}

/// Whether this node and `others` more make a majority of `voters`.
fn with_me_a_majority(others: usize, voters: usize) -> bool {
    (1 + others) * 2 > voters
}

#[cfg(test)]
mod tests {
    use super::with_me_a_majority;

    /// A fenced node takes the cluster for new only when it and the nodes
    /// it saw empty are more than half the voters: never half of an even
    /// cluster, where the other half may hold what was committed.
    #[test]
    fn a_new_cluster_takes_a_strict_majority_known_empty() {
        for (voters, least) in [(1, 0), (3, 1), (4, 2), (5, 2), (7, 3)] {
            for others in 0..voters {
                assert_eq!(
                    with_me_a_majority(others, voters),
                    others >= least,
                    "{others} others of {voters}"
                );
            }
        }
    }
}
