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

use std::collections::BTreeSet;

/// A group's fence (see the table above).
#[derive(Debug, Default)]
pub(super) struct Fence {
    /// Whether votes are held back.
    pub on: bool,
    /// The highest commit index a leader named to this node.
    pub leader_commit: u64,
    /// Candidates seen with an empty log.
    pub empty: BTreeSet<u64>,
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
