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
//! | holds entries (a snapshot or a leader's entries,   | stands for no election: its        |
//! |   caught up only in part)                          |   election timer never runs out    |
//! | becomes leader (a majority voted for its log)      | unfenced                           |
//!
//! Its own vote is as forgetful as its vote for another: once a fenced
//! node holds part of a leader's log (say a snapshot, its partitions
//! fetched, and not the entries after it), its log can be more up to date
//! than a lagging node's, and with that node's vote and its own it would
//! win, lacking entries it acknowledged before it lost its journal (found
//! by `a_wiped_node_caught_up_in_part_neither_votes_nor_stands`). A
//! fenced node with an empty log still campaigns: its candidacy cannot win
//! against a node holding entries, and a fresh cluster needs someone to
//! start. (A leader hands leadership over only to a node that holds its
//! whole log, `peers.rs`.) The price: while a wiped node is fenced, it does
//! not count towards a quorum for elections, so with one other node down
//! no leader can be elected until it has caught up or that node returns:
//! unavailable rather than losing acknowledged sends.

use raft::eraftpb::{Message, MessageType};
use raft::{RawNode, StateRole, Storage};
use std::collections::BTreeSet;

/// A group's fence (see the table above). The decisions alone: the group
/// (`fencing.rs`) and the cluster simulation (`replica/tests/sim`) both
/// run them on their `RawNode`, and drop the journal's marker themselves
/// when the fence lifts.
#[derive(Debug, Default)]
pub struct Fence {
    /// Whether votes are held back.
    on: bool,
    /// The highest commit index a leader named to this node.
    leader_commit: u64,
    /// Candidates seen with an empty log.
    empty: BTreeSet<u64>,
    /// A leader's append named its commit index (a heartbeat or a
    /// snapshot may name less).
    named: bool,
}

/// What a node does with a message its fence has seen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admit {
    /// Step it.
    Step,
    /// Drop it: a vote request while fenced.
    Drop,
    /// Lift the fence (why), then step it.
    Lift(String),
}

impl Fence {
    /// Fenced or not, knowing nothing yet.
    pub fn new(on: bool) -> Fence {
        Fence {
            on,
            ..Fence::default()
        }
    }

    /// Whether votes are held back.
    pub fn is_on(&self) -> bool {
        self.on
    }

    /// What to do with `m`, for a node whose journal holds entries up to
    /// `stored_last`, at Raft term `term`, in a group of `voters`: a fenced
    /// node drops vote requests, and notes what leaders and candidates
    /// tell about the cluster.
    pub fn admit(&mut self, m: &Message, stored_last: u64, term: u64, voters: usize) -> Admit {
        if !self.on {
            return Admit::Step;
        }
        match m.get_msg_type() {
            MessageType::MsgRequestVote | MessageType::MsgRequestPreVote => {
                if stored_last == 0 && m.index == 0 {
                    self.empty.insert(m.from);
                    if with_me_a_majority(self.empty.len(), voters) {
                        return Admit::Lift(format!(
                            "this node and node(s) {:?} hold no entries, a majority of {voters}: a new cluster",
                            self.empty
                        ));
                    }
                }
                Admit::Drop
            }
            // Each names a commit index the leader reached, or less: a
            // heartbeat the least of it and what the leader believes this
            // node holds, a snapshot its own index. Only an append names
            // the commit itself, so the fence waits for one: a fenced node
            // restarted partway through its catch-up (its fence learnt
            // anew) is told by a heartbeat its own log's end, and taken for
            // the target that would lift the fence at once, short of what
            // was committed (found by the cluster simulation).
            MessageType::MsgAppend | MessageType::MsgHeartbeat | MessageType::MsgSnapshot
                if m.term >= term =>
            {
                let snap = m.get_snapshot().get_metadata().index;
                self.leader_commit = self.leader_commit.max(m.commit).max(snap);
                self.named |= m.get_msg_type() == MessageType::MsgAppend;
                Admit::Step
            }
            _ => Admit::Step,
        }
    }

    /// Keeps a fenced node that holds entries from standing for election:
    /// run before each tick, its election timer never runs out. Its log as
    /// raft-rs campaigns with it: a snapshot stepped and not yet installed
    /// counts (its candidacy would name the snapshot's index while the
    /// partitions are still being fetched).
    pub fn hold_candidacy<S: Storage>(&self, raw: &mut RawNode<S>) {
        if self.on && raw.raft.raft_log.last_index() > 0 {
            raw.raft.election_elapsed = 0;
        }
    }

    /// Why the fence lifts now, if it does: this node leads, or it hears a
    /// leader and its commit index and its journal (up to `stored_last`)
    /// reach the highest commit a leader named to it, an append among what
    /// named it.
    pub fn lifts<S: Storage>(&self, raw: &RawNode<S>, stored_last: u64) -> Option<String> {
        let r = &raw.raft;
        let leader = match r.state {
            StateRole::Leader => Heard::Elected,
            _ if r.leader_id != 0 => Heard::Leader,
            _ => Heard::Nobody,
        };
        self.lifts_at(leader, r.raft_log.committed, stored_last)
    }

    /// `lifts`, from what this node knows: who leads, its commit index and
    /// the end of its journal.
    fn lifts_at(&self, leader: Heard, committed: u64, stored_last: u64) -> Option<String> {
        let target = self.leader_commit;
        match leader {
            _ if !self.on => None,
            Heard::Elected => Some("this node was elected".to_string()),
            Heard::Leader
                if self.named && target > 0 && committed >= target && stored_last >= target =>
            {
                Some(format!("caught up with the leader's commit index {target}"))
            }
            _ => None,
        }
    }

    /// Lifts the fence: this node votes again.
    pub fn lift(&mut self) {
        self.on = false;
    }
}

/// Which leader a node knows of.
#[derive(Debug, Clone, Copy)]
enum Heard {
    Nobody,
    Leader,
    /// This node leads.
    Elected,
}

/// Whether this node and `others` more make a majority of `voters`.
fn with_me_a_majority(others: usize, voters: usize) -> bool {
    (1 + others) * 2 > voters
}

#[cfg(test)]
mod tests {
    use super::{with_me_a_majority, Admit, Fence, Heard};
    use raft::eraftpb::{Message, MessageType};

    fn msg(t: MessageType, commit: u64) -> Message {
        let mut m = Message::default();
        m.set_msg_type(t);
        m.from = 1;
        m.term = 5;
        m.commit = commit;
        m
    }

    /// A fenced node restarted partway through its catch-up (its fence
    /// learnt anew) holds entries up to 99; the leader committed 506.
    /// The leader's heartbeat names the least of its commit and what it
    /// believes this node holds, 99: were that taken for the target, the
    /// fence would lift at once, 407 committed entries short (the cluster
    /// simulation's seed 24 lost acknowledged batches that way). The fence
    /// waits for an append, which names the commit itself; what heartbeats
    /// and snapshots named still counts (a snapshot names only its index,
    /// a heartbeat to a wiped node the commit: more than appends may say
    /// before the leader learns what the node lost).
    #[test]
    fn the_fence_waits_for_an_append_to_name_the_commit() {
        let mut f = Fence::new(true);
        let hb = msg(MessageType::MsgHeartbeat, 99);
        assert_eq!(f.admit(&hb, 99, 5, 3), Admit::Step);
        assert_eq!(f.lifts_at(Heard::Leader, 99, 99), None);
        let append = msg(MessageType::MsgAppend, 506);
        assert_eq!(f.admit(&append, 99, 5, 3), Admit::Step);
        assert_eq!(f.lifts_at(Heard::Leader, 99, 99), None);
        assert_eq!(f.lifts_at(Heard::Leader, 505, 506), None);
        assert_eq!(f.lifts_at(Heard::Nobody, 506, 506), None);
        assert!(f.lifts_at(Heard::Leader, 506, 506).is_some());
        // A heartbeat's higher commit counts once an append was seen.
        assert_eq!(
            f.admit(&msg(MessageType::MsgHeartbeat, 600), 506, 5, 3),
            Admit::Step
        );
        assert_eq!(f.lifts_at(Heard::Leader, 506, 506), None);
        assert!(f.lifts_at(Heard::Leader, 600, 600).is_some());
        // A stale leader's append (an older term) names nothing.
        let mut g = Fence::new(true);
        let mut stale = msg(MessageType::MsgAppend, 7);
        stale.term = 4;
        assert_eq!(g.admit(&stale, 7, 5, 3), Admit::Step);
        assert_eq!(g.lifts_at(Heard::Leader, 7, 7), None);
        // Elected, it lifts; unfenced, nothing lifts.
        assert!(g.lifts_at(Heard::Elected, 0, 0).is_some());
        g.lift();
        assert_eq!(g.lifts_at(Heard::Elected, 0, 0), None);
    }

    /// A fenced node drops vote requests, unless it and the candidates it
    /// saw empty make a majority (a new cluster).
    #[test]
    fn a_fenced_node_drops_votes_unless_a_majority_is_new() {
        let mut f = Fence::new(true);
        let mut v = msg(MessageType::MsgRequestPreVote, 0);
        v.index = 3;
        assert_eq!(f.admit(&v, 0, 5, 3), Admit::Drop);
        assert_eq!(
            f.admit(&msg(MessageType::MsgRequestVote, 0), 2, 5, 3),
            Admit::Drop
        );
        assert!(matches!(
            f.admit(&msg(MessageType::MsgRequestVote, 0), 0, 5, 3),
            Admit::Lift(_)
        ));
        let mut five = Fence::new(true);
        let from = |id| {
            let mut m = msg(MessageType::MsgRequestPreVote, 0);
            m.from = id;
            m
        };
        assert_eq!(five.admit(&from(1), 0, 5, 5), Admit::Drop);
        assert_eq!(five.admit(&from(1), 0, 5, 5), Admit::Drop);
        assert!(matches!(five.admit(&from(2), 0, 5, 5), Admit::Lift(_)));
        let mut open = Fence::new(false);
        assert_eq!(open.admit(&v, 0, 5, 3), Admit::Step);
    }

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
