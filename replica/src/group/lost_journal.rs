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
