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
//! | asks for a vote (or a pre-vote)                    | the request is marked as a fenced  |
//! |                                                    |   node's, with its journal's       |
//! |                                                    |   incarnation (drawn when made)    |
//! | is asked for a vote (or a pre-vote)                | the request is dropped             |
//! | its log is empty, and so is the marked candidate's;| a fresh cluster: nothing can have  |
//! |   with it, a majority of the nodes is known empty  |   been committed; unfenced, votes  |
//! |   and fenced                                       |                                    |
//! | hears a leader; its log and commit reach the       | caught up: unfenced                |
//! |   highest commit a leader named to it (an append   |                                    |
//! |   among what named it), its commit at an entry of  |                                    |
//! |   the leader's term                                |                                    |
//! | holds entries (a snapshot or a leader's entries,   | stands for no election: its        |
//! |   caught up only in part)                          |   election timer never runs out    |
//! | becomes leader (a majority voted for its log)      | unfenced                           |
//!
//! | a group not fenced                                 | done                               |
//! |----------------------------------------------------|------------------------------------|
//! | is asked for a vote by a marked (fenced) candidate | the request is dropped, unless it  |
//! |                                                    |   formed a new cluster with that   |
//! |                                                    |   node under that incarnation      |
//!
//! A node holding its journal may still hold nothing, or less than a wiped
//! node forgot (it lagged, a link down): with its vote and its own, a wiped
//! node with an empty log would win, lacking what only the node that is
//! down holds (found by the cluster simulation, seed 160). So only fenced
//! nodes forming a new cluster elect a fenced candidate, and a lagging
//! node, empty, counts as no new node for that rule: its journal is not
//! new. A node that formed a new cluster with fenced candidates goes on
//! voting for them while they are fenced (else two nodes forming a
//! cluster of three, one lifting first, would never elect), but only for
//! the journal it formed it with: the same node wiped since draws another
//! incarnation.
//!
//! Its own vote is as forgetful as its vote for another: once a fenced
//! node holds part of a leader's log (say a snapshot, its partitions
//! fetched, and not the entries after it), its log can be more up to date
//! than a lagging node's, and with that node's vote and its own it would
//! win, lacking entries it acknowledged before it lost its journal (found
//! by `a_wiped_node_caught_up_in_part_neither_votes_nor_stands`). A
//! fenced node with an empty log still campaigns, since a fresh cluster
//! needs someone to start; marked, it wins only the votes of fenced nodes
//! that find a majority new with it. (With the marks, a wiped node's
//! candidacy wins no vote anyway: holding it spares the cluster elections
//! and terms that cannot succeed; no test can tell it is gone.) (A leader hands leadership over only to a node that holds its
//! whole log, `peers.rs`.) The price: while a wiped node is fenced, it does
//! not count towards a quorum for elections, so with one other node down
//! no leader can be elected until it has caught up or that node returns:
//! unavailable rather than losing acknowledged sends.

use raft::eraftpb::{Message, MessageType};
use raft::{RawNode, StateRole, Storage};
use std::collections::BTreeMap;

/// A group's fence (see the table above). The decisions alone: the group
/// (`fencing.rs`) and the cluster simulation (`replica/tests/sim`) both
/// run them on their `RawNode`, and drop the journal's marker themselves
/// when the fence lifts.
#[derive(Debug, Default)]
pub struct Fence {
    /// Whether votes are held back.
    on: bool,
    /// The new journal's incarnation, while fenced.
    incarnation: u64,
    /// The highest commit index a leader named to this node.
    leader_commit: u64,
    /// Fenced candidates seen with an empty log, by node: their journals'
    /// incarnations. Once a new cluster formed with them, they may still
    /// ask for this node's vote as long as they are fenced, under the same
    /// journal (a wiped one draws another).
    empty: BTreeMap<u64, u64>,
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
    /// Fenced (with the new journal's incarnation) or not, knowing
    /// nothing yet.
    pub fn new(new_journal: Option<u64>) -> Fence {
        Fence {
            on: new_journal.is_some(),
            incarnation: new_journal.unwrap_or(0),
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
            // A fenced candidate (its request marked) is elected only by
            // fenced nodes forming a new cluster with it: a node that holds
            // its journal may lack what the candidate forgot (it lagged),
            // and their two votes would elect a log lacking committed
            // entries.
            return match marked(m) {
                Some(inc) if self.empty.get(&m.from) != Some(&inc) => Admit::Drop,
                _ => Admit::Step,
            };
        }
        match m.get_msg_type() {
            MessageType::MsgRequestVote | MessageType::MsgRequestPreVote => {
                if let Some(inc) = marked(m).filter(|_| stored_last == 0 && m.index == 0) {
                    self.empty.insert(m.from, inc);
                    if with_me_a_majority(self.empty.len(), voters) {
                        return Admit::Lift(format!(
                            "this node and node(s) {:?} hold no entries, a majority of {voters}: a new cluster",
                            self.empty.keys().collect::<Vec<_>>()
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
    /// named it, and its commit index is at an entry of the leader's term.
    /// The last because a leader just elected may name less than was
    /// committed before it (its own commit index is learnt, and persisted
    /// lazily); once an entry of its term is committed, everything before
    /// it was (Raft's leader completeness), and this node holds it all.
    pub fn lifts<S: Storage>(&self, raw: &RawNode<S>, stored_last: u64) -> Option<String> {
        if !self.on {
            return None;
        }
        let r = &raw.raft;
        let leader = match r.state {
            StateRole::Leader => Heard::Elected,
            _ if r.leader_id != 0 => Heard::Leader,
            _ => Heard::Nobody,
        };
        let committed = r.raft_log.committed;
        let in_term = r.raft_log.term(committed).is_ok_and(|t| t == r.term);
        self.lifts_at(leader, committed, in_term, stored_last)
    }

    /// `lifts`, from what this node knows: who leads, its commit index
    /// (and whether the entry there is of the current term) and the end of
    /// its journal.
    fn lifts_at(
        &self,
        leader: Heard,
        committed: u64,
        in_term: bool,
        stored_last: u64,
    ) -> Option<String> {
        let target = self.leader_commit;
        match leader {
            _ if !self.on => None,
            Heard::Elected => Some("this node was elected".to_string()),
            Heard::Leader
                if self.named && in_term && committed >= target && stored_last >= target =>
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

    /// Marks `m`, a message this node sends, as a fenced node's when it is
    /// a vote request (raft-rs's `context`, which a vote request carries
    /// only for a leadership transfer, never to a fenced node).
    pub fn mark(&self, m: &mut Message) {
        if self.on && is_vote_request(m) {
            let mut c = NEW_JOURNAL.to_vec();
            c.extend_from_slice(&self.incarnation.to_le_bytes());
            m.context = c.into();
        }
    }
}

/// What a fenced node's vote requests carry, then its incarnation.
const NEW_JOURNAL: &[u8] = b"corelog:new-journal:";

/// The incarnation a fenced candidate's request names, if it is one's.
fn marked(m: &Message) -> Option<u64> {
    if !is_vote_request(m) {
        return None;
    }
    let inc = m.context.strip_prefix(NEW_JOURNAL)?;
    Some(u64::from_le_bytes(inc.try_into().ok()?))
}

fn is_vote_request(m: &Message) -> bool {
    matches!(
        m.get_msg_type(),
        MessageType::MsgRequestVote | MessageType::MsgRequestPreVote
    )
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
        let mut f = Fence::new(Some(7));
        let hb = msg(MessageType::MsgHeartbeat, 99);
        assert_eq!(f.admit(&hb, 99, 5, 3), Admit::Step);
        assert_eq!(f.lifts_at(Heard::Leader, 99, true, 99), None);
        let append = msg(MessageType::MsgAppend, 506);
        assert_eq!(f.admit(&append, 99, 5, 3), Admit::Step);
        assert_eq!(f.lifts_at(Heard::Leader, 99, true, 99), None);
        assert_eq!(f.lifts_at(Heard::Leader, 505, true, 506), None);
        assert_eq!(f.lifts_at(Heard::Nobody, 506, true, 506), None);
        // A commit index at an entry of an earlier term: a leader just
        // elected may name less than was committed before it.
        assert_eq!(f.lifts_at(Heard::Leader, 506, false, 506), None);
        assert!(f.lifts_at(Heard::Leader, 506, true, 506).is_some());
        // A heartbeat's higher commit counts once an append was seen.
        assert_eq!(
            f.admit(&msg(MessageType::MsgHeartbeat, 600), 506, 5, 3),
            Admit::Step
        );
        assert_eq!(f.lifts_at(Heard::Leader, 506, true, 506), None);
        assert!(f.lifts_at(Heard::Leader, 600, true, 600).is_some());
        // A stale leader's append (an older term) names nothing.
        let mut g = Fence::new(Some(7));
        let mut stale = msg(MessageType::MsgAppend, 7);
        stale.term = 4;
        assert_eq!(g.admit(&stale, 7, 5, 3), Admit::Step);
        assert_eq!(g.lifts_at(Heard::Leader, 7, true, 7), None);
        // Elected, it lifts; unfenced, nothing lifts.
        assert!(g.lifts_at(Heard::Elected, 0, true, 0).is_some());
        g.lift();
        assert_eq!(g.lifts_at(Heard::Elected, 0, true, 0), None);
    }

    /// `lifts` on a `RawNode`: caught up with what an append named, at a
    /// commit of the current term, it lifts only while it hears a leader
    /// (a candidate's target may be stale), and at once when it leads.
    #[test]
    fn the_fence_lifts_only_hearing_a_leader_or_leading() {
        use raft::storage::MemStorage;
        use raft::{eraftpb::ConfState, eraftpb::Entry, RawNode, StateRole};
        let store = MemStorage::new_with_conf_state(ConfState::from((vec![1, 2, 3], vec![])));
        let entry = Entry {
            index: 1,
            term: 5,
            ..Entry::default()
        };
        store.wl().append(&[entry]).expect("append");
        let cfg = raft::Config {
            id: 1,
            ..raft::Config::default()
        };
        let logger = slog::Logger::root(slog::Discard, slog::o!());
        let mut raw = RawNode::new(&cfg, store, &logger).expect("raft");
        raw.raft.term = 5;
        raw.raft.raft_log.committed = 1;
        let mut f = Fence::new(Some(7));
        assert_eq!(
            f.admit(&msg(MessageType::MsgAppend, 1), 1, 5, 3),
            Admit::Step
        );
        raw.raft.leader_id = 0;
        assert_eq!(f.lifts(&raw, 1), None, "no leader heard");
        raw.raft.leader_id = 2;
        assert!(f.lifts(&raw, 1).is_some());
        // At a commit of an earlier term, it waits.
        raw.raft.term = 6;
        assert_eq!(f.lifts(&raw, 1), None, "commit of an earlier term");
        raw.raft.state = StateRole::Leader;
        assert!(f.lifts(&raw, 0).is_some(), "elected");
    }

    /// A vote request as a fenced node sends it.
    fn marked(t: MessageType) -> Message {
        let mut m = msg(t, 0);
        Fence::new(Some(7)).mark(&mut m);
        m
    }

    /// A fenced node drops vote requests, unless it and the fenced
    /// candidates it saw empty make a majority (a new cluster); a node not
    /// fenced drops a fenced candidate's.
    #[test]
    fn a_fenced_node_drops_votes_unless_a_majority_is_new() {
        let mut f = Fence::new(Some(7));
        let mut v = marked(MessageType::MsgRequestPreVote);
        v.index = 3;
        assert_eq!(f.admit(&v, 0, 5, 3), Admit::Drop);
        let vote = marked(MessageType::MsgRequestVote);
        assert_eq!(f.admit(&vote, 2, 5, 3), Admit::Drop);
        // An empty candidate whose journal is not new (it lagged) makes no
        // new cluster: what it lacks, the node that is down may hold.
        let lagging = msg(MessageType::MsgRequestVote, 0);
        assert_eq!(f.admit(&lagging, 0, 5, 3), Admit::Drop);
        assert!(matches!(f.admit(&vote, 0, 5, 3), Admit::Lift(_)));
        let mut five = Fence::new(Some(7));
        let from = |id| {
            let mut m = marked(MessageType::MsgRequestPreVote);
            m.from = id;
            m
        };
        assert_eq!(five.admit(&from(1), 0, 5, 5), Admit::Drop);
        assert_eq!(five.admit(&from(1), 0, 5, 5), Admit::Drop);
        assert!(matches!(five.admit(&from(2), 0, 5, 5), Admit::Lift(_)));
        // Formed a new cluster with node 1 (of incarnation 7): its requests
        // while it is fenced are still stepped, those of the node 1 of
        // another journal (wiped since) dropped.
        let mut partner = Fence::new(Some(9));
        assert!(matches!(partner.admit(&vote, 0, 5, 3), Admit::Lift(_)));
        partner.lift();
        assert_eq!(partner.admit(&vote, 0, 5, 3), Admit::Step);
        let mut wiped = msg(MessageType::MsgRequestVote, 0);
        Fence::new(Some(8)).mark(&mut wiped);
        assert_eq!(partner.admit(&wiped, 0, 5, 3), Admit::Drop);
        // Not fenced, formed with no one: a fenced candidate's requests are
        // dropped, others stepped; and what it sends is not marked.
        let mut open = Fence::new(None);
        assert_eq!(open.admit(&v, 0, 5, 3), Admit::Drop);
        assert_eq!(open.admit(&vote, 0, 5, 3), Admit::Drop);
        assert_eq!(open.admit(&lagging, 0, 5, 3), Admit::Step);
        let mut plain = msg(MessageType::MsgRequestVote, 0);
        open.mark(&mut plain);
        assert!(plain.context.is_empty());
        let mut append = msg(MessageType::MsgAppend, 0);
        Fence::new(Some(7)).mark(&mut append);
        assert!(append.context.is_empty());
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
