//! A leader's messages sent once its own writes are done, so that the
//! entries' batches go to the followers from the segment files
//! (`net/by_reference.rs`) rather than copied from memory into each
//! follower's socket.
//!
//! raft-rs lets a leader send its appends before it persists the entries
//! (Raft's parallel write); that is what this node does under `fsync=batch`,
//! where its own write is followed by a sync the followers need not wait
//! for. Without a per-write sync (`never`, `interval:MS`), the write into
//! the page cache is quick, and waiting for it first (Redpanda's order:
//! append locally, then dispatch) lets each batch be sent by reference:
//! the persister reads back where each batch of at least
//! `send_by_reference` bytes lies (`ReplicaLog::read_written`), and the
//! loop hands the messages over with those places.
//!
//! While it defers, the leader defers every append of a `Ready`, with or
//! without entries, in order, so that no later append overtakes one
//! (an append's previous index counts the entries in flight: overtaken,
//! a follower would reject it and the leader probe back). Heartbeats and
//! the rest go at once: they name no log position, and a heartbeat held
//! behind a slow write could cost the leader its followers.

use super::Group;
use crate::inbox::WrittenEntry;
use raft::eraftpb::{Message, MessageType};
use raft::StateRole;

impl Group {
    /// The smallest batch sent from its file, while this node leads
    /// without a per-write sync; `None`: send from memory.
    pub(super) fn files_from(&self) -> Option<usize> {
        let leads = self.raw.raft.state == StateRole::Leader;
        self.opts
            .send_by_reference
            .filter(|_| leads && !self.opts.sync)
    }

    /// Sends `msgs` now, or the appends among them are given back to
    /// wait for this `Ready`'s writes ([`Group::files_from`]).
    pub(super) fn send_or_defer(&self, msgs: Vec<Message>) -> Vec<Message> {
        if self.files_from().is_none() {
            self.send(msgs);
            return Vec::new();
        }
        let (appends, rest): (Vec<_>, Vec<_>) = msgs
            .into_iter()
            .partition(|m| m.get_msg_type() == MessageType::MsgAppend);
        self.send(rest);
        appends
    }

    /// Sends `msgs`, which waited for the writes, each entry's data from
    /// its file when the persister read back where it lies (`files`).
    /// Only an entry of this node's current term while it still leads:
    /// its log is not cut in that term, so the batch read back is the
    /// entry's own.
    pub(super) fn send_after_write(&self, msgs: Vec<Message>, files: &[WrittenEntry]) {
        let leads_in =
            |term: u64| self.raw.raft.state == StateRole::Leader && self.raw.raft.term == term;
        for m in msgs {
            let files = m
                .get_entries()
                .iter()
                .map(|e| {
                    files
                        .iter()
                        .find(|(i, t, _)| *i == e.index && *t == e.term && leads_in(*t))
                        .map(|(_, _, w)| w.clone())
                })
                .collect();
            self.transport.send_from_files(self.id, m, files);
        }
    }
}
