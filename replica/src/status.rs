//! What the groups' loops publish for every thread: leaders, terms and
//! progress, as atomics (read by `GET_CLUSTER_METADATA`, the handle's
//! routing, and the data groups' leadership transfer).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// One group's published state.
#[derive(Debug, Default)]
pub struct GroupStatus {
    /// The leader this node knows of (0: none).
    pub leader: AtomicU64,
    /// The current term.
    pub term: AtomicU64,
    /// The commit index.
    pub commit: AtomicU64,
    /// The last entry applied here.
    pub applied: AtomicU64,
    /// The journal's last index.
    pub last_index: AtomicU64,
    /// The last index the journal made durable.
    pub synced: AtomicU64,
    /// The journal's snapshot index: entries up to it are compacted.
    pub snapshot: AtomicU64,
    /// Elections this node saw won (leader changes).
    pub leader_changes: AtomicU64,
    /// Acknowledgements of entries past the journal's durable point that
    /// were refused at the send (`Group::send_persisted`); 0 unless the
    /// order of a Ready's handling is broken.
    pub early_acks: AtomicU64,
    /// Bytes of this group's entries sent to peers from segment files
    /// (`net/by_reference.rs`), not through memory.
    pub sent_from_files: AtomicU64,
    /// Peers' messages dropped because a batch in them did not verify.
    pub refused_messages: AtomicU64,
    /// While this node leads: until when a majority's answers confirm it
    /// (`group/lease.rs`), in milliseconds of [`Shared::ms_of`]; 0: not
    /// confirmed.
    pub confirmed_until: AtomicU64,
    /// What this node's open found reconciling the journal with the
    /// partition logs (`group/reconcile.rs`): entries read back, entries
    /// converted from a version-02 journal, partition logs cut, whether
    /// the journal was cut (0 or 1), logs found short of what the journal
    /// and snapshot name.
    pub at_open: [AtomicU64; 5],
}

/// A snapshot of one group's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupView {
    /// The group (0: metadata; `1 + shard` for data).
    pub group: u32,
    /// Its leader, if known.
    pub leader: Option<u64>,
    /// The term.
    pub term: u64,
    /// The commit index.
    pub commit: u64,
    /// The last entry applied here.
    pub applied: u64,
    /// The journal's last index.
    pub last_index: u64,
    /// The last index this node's journal made durable (an fsync
    /// returned): the last index under `fsync=batch`, at most an interval
    /// behind under `interval`.
    pub synced: u64,
    /// The journal's snapshot index: the entries up to it are compacted
    /// away (what they applied is on disk: the partition logs, or the
    /// embedder's metadata).
    pub snapshot: u64,
    /// Acknowledgements refused because they ran ahead of the durable
    /// point (always 0 in a correct node; the tests check it).
    pub early_acks: u64,
    /// Bytes of entries this node sent to peers from segment files.
    pub sent_from_files: u64,
    /// Peers' messages dropped here because a batch in them did not
    /// verify (0 between correct nodes on an undamaged network).
    pub refused_messages: u64,
    /// What the open of this node's data group found and did (all 0 for
    /// the metadata group).
    pub at_open: AtOpen,
}

/// What a data group's open found reconciling its journal with the
/// partition logs, and what it cut (the table of `group/reconcile.rs`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AtOpen {
    /// Entries whose batches were read back from the partition logs.
    pub filled: u64,
    /// Entries of a version-02 journal whose batches were written into
    /// the logs.
    pub converted: u64,
    /// Partition logs cut past the last batch the journal names (written,
    /// their pointers not durable: never acknowledged).
    pub logs_cut: u64,
    /// Whether the journal was cut at an entry whose batch its log lacks.
    pub journal_cut: bool,
    /// Partition logs found short of the end the journal and snapshot
    /// name (only under a policy that does not sync each write).
    pub short_logs: u64,
}

impl AtOpen {
    /// Published in `status`'s counters.
    pub(crate) fn publish(&self, status: &GroupStatus) {
        let values = [
            self.filled,
            self.converted,
            self.logs_cut,
            u64::from(self.journal_cut),
            self.short_logs,
        ];
        for (slot, v) in status.at_open.iter().zip(values) {
            slot.store(v, Ordering::Relaxed);
        }
    }

    fn load(status: &GroupStatus) -> AtOpen {
        let [filled, converted, logs_cut, journal_cut, short_logs] =
            status.at_open.each_ref().map(|a| a.load(Ordering::Relaxed));
        AtOpen {
            filled,
            converted,
            logs_cut,
            journal_cut: journal_cut != 0,
            short_logs,
        }
    }
}

impl std::fmt::Display for GroupView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let leader = self.leader.map_or("none".to_owned(), |l| l.to_string());
        write!(
            f,
            "group {}: leader {leader}, term {}, commit {}, applied {}, last {}, synced {}, \
             snapshot {}, \
             early acks {}, sent from files {} B, refused messages {}; at open: {} entries \
             read back, {} converted, {} logs cut, journal cut: {}, {} logs short",
            self.group,
            self.term,
            self.commit,
            self.applied,
            self.last_index,
            self.synced,
            self.snapshot,
            self.early_acks,
            self.sent_from_files,
            self.refused_messages,
            self.at_open.filled,
            self.at_open.converted,
            self.at_open.logs_cut,
            if self.at_open.journal_cut {
                "yes"
            } else {
                "no"
            },
            self.at_open.short_logs
        )
    }
}

/// Every group's published state, and this node's id.
#[derive(Debug)]
pub struct Shared {
    /// This node.
    pub me: u64,
    /// Index = group id.
    pub groups: Vec<GroupStatus>,
    /// The clock of `confirmed_until`.
    epoch: Instant,
}

impl Shared {
    /// State for `groups` groups on node `me`.
    pub fn new(me: u64, groups: usize) -> Shared {
        Shared {
            me,
            groups: (0..groups).map(|_| GroupStatus::default()).collect(),
            epoch: Instant::now(),
        }
    }

    /// Milliseconds since this node started (monotonic), at least 1.
    pub fn ms_of(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.epoch).as_millis())
            .unwrap_or(u64::MAX)
            .max(1)
    }

    /// Whether this node leads group `g` and a majority confirmed it
    /// within the last election timeout.
    pub fn confirmed_leader(&self, g: usize) -> bool {
        self.leader_of(g) == Some(self.me)
            && self.groups.get(g).is_some_and(|s| {
                s.confirmed_until.load(Ordering::Acquire) > self.ms_of(Instant::now())
            })
    }

    /// The leader of group `g`, if known.
    pub fn leader_of(&self, g: usize) -> Option<u64> {
        let l = self.groups.get(g)?.leader.load(Ordering::Acquire);
        (l != 0).then_some(l)
    }

    /// A snapshot of every group.
    pub fn views(&self) -> Vec<GroupView> {
        self.groups
            .iter()
            .enumerate()
            .map(|(g, s)| GroupView {
                group: g as u32,
                leader: self.leader_of(g),
                term: s.term.load(Ordering::Relaxed),
                commit: s.commit.load(Ordering::Relaxed),
                applied: s.applied.load(Ordering::Relaxed),
                last_index: s.last_index.load(Ordering::Relaxed),
                synced: s.synced.load(Ordering::Relaxed),
                snapshot: s.snapshot.load(Ordering::Relaxed),
                early_acks: s.early_acks.load(Ordering::Relaxed),
                sent_from_files: s.sent_from_files.load(Ordering::Relaxed),
                refused_messages: s.refused_messages.load(Ordering::Relaxed),
                at_open: AtOpen::load(s),
            })
            .collect()
    }
}
