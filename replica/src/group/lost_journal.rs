//! A peer that lost its journal. raft-rs assumes a node never loses what
//! it persisted. A node whose data directory was wiped (or whose journal
//! lost a tail under `fsync=never`) comes back with less: as a follower it
//! would be told a commit index past its log (raft-rs panics), and as
//! leader raft-rs would ignore its rejections below what it once matched
//! (it would never be sent what it lost). So, before a message is stepped:
//!
//! | message                                   | done                                   |
//! |-------------------------------------------|----------------------------------------|
//! | a heartbeat naming a commit past this     | the commit lowered to the log's end;   |
//! |   node's log                              |   the leader told (a rejection there)  |
//! | to a leader: a rejection hinting below    | the match lowered to the hint; the     |
//! |   the follower's matched index            |   follower probed from there           |
//!
//! The group runs it on each message (`peers.rs`), the cluster simulation
//! (`replica/tests/sim`) on its nodes' too.

use raft::eraftpb::{Message, MessageType};
use raft::{RawNode, Storage};

/// Guards `m`, to node `me` of group `group` whose journal holds entries up
/// to `stored_last`, as the table above says; the rejection to send to the
/// leader, if one is due.
pub fn guard<S: Storage>(
    raw: &mut RawNode<S>,
    group: u32,
    me: u64,
    stored_last: u64,
    m: &mut Message,
) -> Option<Message> {
    let mut nack = None;
    if m.get_msg_type() == MessageType::MsgHeartbeat && m.commit > stored_last {
        tracing::warn!(
            "group {group}: node {} says entries up to {} are committed, this node holds {stored_last}: it lost its journal (a wiped directory?) and catches up",
            m.from,
            m.commit
        );
        m.commit = stored_last;
        // The leader believes this node holds more and would otherwise
        // send nothing: a rejection naming this log's end (below).
        let mut n = Message::default();
        n.set_msg_type(MessageType::MsgAppendResponse);
        n.to = m.from;
        n.from = me;
        n.term = m.term;
        n.reject = true;
        n.index = stored_last;
        n.reject_hint = stored_last;
        nack = Some(n);
    }
    if m.get_msg_type() == MessageType::MsgAppendResponse
        && m.reject
        && raw.raft.state == raft::StateRole::Leader
    {
        let hint = m.reject_hint;
        if let Some(pr) = raw.raft.mut_prs().get_mut(m.from) {
            if hint < pr.matched {
                tracing::warn!(
                    "group {group}: node {} holds entries only up to {hint}, not {}: it lost its journal (a wiped directory?); sending it what it lacks",
                    m.from,
                    pr.matched
                );
                pr.matched = hint;
                pr.become_probe();
            }
        }
    }
    nack
}

#[cfg(test)]
mod tests {
    use super::guard;
    use raft::eraftpb::{ConfState, Entry, Message, MessageType};
    use raft::storage::MemStorage;
    use raft::{ProgressState, RawNode, StateRole};

    fn node(last: u64) -> RawNode<MemStorage> {
        let store = MemStorage::new_with_conf_state(ConfState::from((vec![1, 2, 3], vec![])));
        let ents: Vec<Entry> = (1..=last)
            .map(|index| Entry {
                index,
                term: 1,
                ..Entry::default()
            })
            .collect();
        store.wl().append(&ents).expect("append");
        let cfg = raft::Config {
            id: 1,
            ..raft::Config::default()
        };
        let logger = slog::Logger::root(slog::Discard, slog::o!());
        RawNode::new(&cfg, store, &logger).expect("raft")
    }

    fn msg(t: MessageType, from: u64) -> Message {
        let mut m = Message::default();
        m.set_msg_type(t);
        m.from = from;
        m.to = 1;
        m.term = 1;
        m
    }

    /// The table's rows: a heartbeat's commit past the log is lowered and
    /// the leader told; one at the log's end is left alone.
    #[test]
    fn a_commit_past_the_log_is_lowered_and_the_leader_told() {
        let mut raw = node(5);
        let mut hb = msg(MessageType::MsgHeartbeat, 2);
        hb.commit = 9;
        let nack = guard(&mut raw, 0, 1, 5, &mut hb).expect("a rejection for the leader");
        assert_eq!(hb.commit, 5);
        assert_eq!(nack.get_msg_type(), MessageType::MsgAppendResponse);
        assert_eq!((nack.to, nack.from, nack.term), (2, 1, 1));
        assert!(nack.reject);
        assert_eq!((nack.index, nack.reject_hint), (5, 5));
        let mut at_end = msg(MessageType::MsgHeartbeat, 2);
        at_end.commit = 5;
        assert!(guard(&mut raw, 0, 1, 5, &mut at_end).is_none());
        assert_eq!(at_end.commit, 5);
    }

    /// A leader lowers its match for a follower that rejects below it, and
    /// probes it from there; a rejection at or above the match, an answer
    /// that is no rejection, or a rejection reaching a node that does not
    /// lead changes nothing.
    #[test]
    fn a_rejection_below_the_match_lowers_it() {
        let mut raw = node(10);
        let set = |raw: &mut RawNode<MemStorage>, matched: u64| {
            let pr = raw.raft.mut_prs().get_mut(2).expect("progress");
            pr.matched = matched;
            pr.become_replicate();
        };
        let of = |raw: &RawNode<MemStorage>| {
            let pr = raw.raft.prs().get(2).expect("progress");
            (pr.matched, pr.state)
        };
        let mut reject = msg(MessageType::MsgAppendResponse, 2);
        reject.reject = true;
        reject.reject_hint = 3;
        // Not leading.
        set(&mut raw, 8);
        assert!(guard(&mut raw, 0, 1, 10, &mut reject.clone()).is_none());
        assert_eq!(of(&raw), (8, ProgressState::Replicate));
        raw.raft.state = StateRole::Leader;
        // An answer that is no rejection.
        let mut ack = reject.clone();
        ack.reject = false;
        guard(&mut raw, 0, 1, 10, &mut ack);
        assert_eq!(of(&raw), (8, ProgressState::Replicate));
        // A rejection at the match.
        let mut at = reject.clone();
        at.reject_hint = 8;
        guard(&mut raw, 0, 1, 10, &mut at);
        assert_eq!(of(&raw), (8, ProgressState::Replicate));
        // Below it.
        assert!(guard(&mut raw, 0, 1, 10, &mut reject).is_none());
        assert_eq!(of(&raw), (3, ProgressState::Probe));
    }
}
