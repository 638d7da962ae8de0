//! A node whose journal is new holds back its votes until it has caught up.
//!
//! Raft's safety rests on votes being remembered: a node votes once per
//! term, and only for a candidate whose log holds all it holds, so two
//! majorities always share a node that stops a candidate lacking a
//! committed entry. A node whose directory was wiped has forgotten its
//! votes and its log: it would vote for any candidate, and with it a
//! candidate lacking entries this node once acknowledged could win (the
//! leader that committed them being down meanwhile), and those entries
//! would be overwritten. So a new journal (`Journal::is_new`, kept across
//! restarts until it is dropped here) fences its node's votes:
//!
//! | a fenced group                                     | done                               |
//! |----------------------------------------------------|------------------------------------|
//! | is asked for a vote (or a pre-vote)                | the request is dropped             |
//! | its log is empty, and so is the candidate's; with  | a fresh cluster: nothing can have  |
//! |   it, a majority of the nodes is known empty       |   been committed; unfenced, votes  |
//! | hears a leader; its log and commit reach the       | caught up: unfenced                |
//! |   highest commit a leader named to it              |                                    |
//! | becomes leader (a majority voted for its log)      | unfenced                           |
//!
//! A fenced node still campaigns: its candidacy cannot win against a node
//! holding entries (their logs are more up to date), and a fresh cluster
//! needs someone to start. The price: while a wiped node is fenced, it does
//! not count towards a quorum for elections, so with one other node down
//! no leader can be elected until it has caught up or that node returns:
//! unavailable rather than losing acknowledged sends.

use super::Group;
use raft::eraftpb::{Message, MessageType};
use std::collections::BTreeSet;

/// A group's fence (see the table above).
#[derive(Debug, Default)]
pub(super) struct Fence {
    /// Whether votes are held back.
    pub on: bool,
    /// The highest commit index a leader named to this node.
    leader_commit: u64,
    /// Candidates seen with an empty log.
    empty: BTreeSet<u64>,
}

impl Fence {
    /// Fenced or not, knowing nothing yet.
    pub fn new(on: bool) -> Fence {
        Fence {
            on,
            ..Fence::default()
        }
    }
}

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
                    if (1 + self.fence.empty.len()) * 2 > voters {
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
