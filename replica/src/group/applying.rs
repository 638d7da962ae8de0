//! Applying committed entries: the metadata group's through its applier
//! thread (`meta_applier.rs`), a data group's through its applier on the
//! shard (`apply.rs`), and the proposals waiting on them answered once
//! they are applied.

use super::{Awaited, Group, Role, Waiter};
use crate::apply::{ApplyCmd, ApplyItem};
use crate::command::Command;
use crate::error::{GroupError, ReplicaError};
use crate::inbox::{Applied, Done};
use crate::machine::MetaMachine;
use corelog::AppendAck;
use raft::eraftpb::Entry;
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

impl Group {
    /// Applies committed entries: the metadata group's through its
    /// applier thread, a data group's through its applier on the shard.
    pub(super) fn apply_entries(&mut self, entries: Vec<Entry>) -> Result<(), GroupError> {
        let Some(last) = entries.last().map(|e| e.index) else {
            return Ok(());
        };
        // What is applied is served: never an entry a new leader may still
        // overwrite.
        let committed = self.raw.raft.raft_log.committed;
        if last > committed {
            return Err(GroupError::BeyondCommit {
                group: self.id,
                index: last,
                committed,
            });
        }
        match &self.role {
            Role::Meta(_) => {
                if let Some(a) = &self.meta_applier {
                    a.apply(entries)?;
                }
                self.sent = last;
            }
            Role::Data { applier, meta, .. } => {
                let (applier, meta) = (applier.clone(), meta.clone());
                self.hand_to_applier(&applier, meta.as_ref(), entries, last)?;
            }
        }
        Ok(())
    }

    /// The metadata group's applier applied entry `index`: the proposal
    /// waiting on it is answered (a change made against a version that is
    /// no longer current is a conflict). A machine that failed stops the
    /// group on this node, as it always did.
    pub(super) fn on_meta_applied(
        &mut self,
        index: u64,
        term: u64,
        result: Result<bool, GroupError>,
    ) -> Result<(), GroupError> {
        let effective = result?;
        self.applied = self.applied.max(index);
        self.status().applied.store(self.applied, Ordering::Relaxed);
        if let Some(p) = self.waiters.remove(&index) {
            answer_meta(p, term, effective, self.leader());
        }
        self.release_held();
        Ok(())
    }

    /// A data group hands its committed entries, up to `last`, to the
    /// applier on its shard (with each batch's pointer and the engine's
    /// acknowledgement of its write here).
    fn hand_to_applier(
        &mut self,
        applier: &futures_channel::mpsc::UnboundedSender<Vec<ApplyItem>>,
        meta: &dyn crate::machine::MetaMachine,
        entries: Vec<Entry>,
        last: u64,
    ) -> Result<(), GroupError> {
        let journal = self.store.rl();
        let acks = &mut self.acks;
        let items: Vec<ApplyItem> = entries
            .into_iter()
            .map(|e| {
                let pointer = journal.pointer(e.index);
                let ack = acks.remove(&e.index);
                ApplyItem {
                    index: e.index,
                    term: e.term,
                    cmd: to_apply(self.id, &e, meta, pointer, ack),
                }
            })
            .collect();
        drop(journal);
        // Acknowledgements of entries at or below `last` that were never
        // applied (overwritten) go, and so do batches kept for entries
        // that were never written (a message repeating entries the log
        // held already).
        self.acks = self.acks.split_off(&(last + 1));
        self.admitted = self.admitted.split_off(&(last + 1));
        if applier.unbounded_send(items).is_err() {
            return Err(GroupError::ApplierStopped { group: self.id });
        }
        self.sent = last;
        Ok(())
    }

    /// The applier applied entry `index` of `term`: the send or change
    /// waiting on it is answered, and the entry holds `view`, its batch
    /// read back from the segment, from now on (`Journal::hold_view`).
    pub(super) fn on_applied(
        &mut self,
        index: u64,
        term: u64,
        result: Applied,
        view: Option<bytes::Bytes>,
    ) {
        if let Some(view) = view {
            self.store.wl().hold_view(index, term, view);
        }
        if index <= self.applied {
            return;
        }
        self.applied = index;
        self.status().applied.store(index, Ordering::Relaxed);
        let stored = match &result {
            Ok(Done::Appended(ack)) => Some(*ack),
            _ => None,
        };
        self.clients.applied(index, term, stored);
        if result.is_err() {
            // The partition's end is no longer what the stamps say.
            self.resync();
        }
        let (answered, overwritten) = settled(&mut self.waiters, index, term);
        for p in overwritten {
            // Overwritten by another leader's entry: never stored.
            p.waiter.fail(ReplicaError::NotLeader {
                leader: self.leader(),
            });
        }
        if let Some(p) = answered {
            match (p.waiter, &result) {
                (Waiter::Append(tx), Ok(Done::Appended(ack))) => {
                    let _ = tx.send(Ok(*ack));
                }
                (Waiter::Count(tx), Ok(Done::Count(n))) => {
                    let _ = tx.send(Ok(*n));
                }
                (w, Err(e)) => w.fail(ReplicaError::Store(Box::new(e.clone()))),
                (w, Ok(_)) => w.fail(ReplicaError::Replayed),
            }
        }
        self.release_held();
    }
}

/// Answers the metadata proposal `p` waiting on the entry just applied,
/// which has `term`: its outcome if the entry is the one proposed (same
/// term), else "not leader" (another leader's entry took its index).
fn answer_meta(p: Awaited, term: u64, effective: bool, leader: Option<u64>) {
    match p.waiter {
        Waiter::Meta(tx) if p.term == term => {
            let _ = tx.send(if effective {
                Ok(true)
            } else {
                Err(ReplicaError::Conflict)
            });
        }
        w => w.fail(ReplicaError::NotLeader { leader }),
    }
}

/// The waiters entry `index` of `term`, just applied, settles, taken from
/// `waiters`: the one proposed as that very entry (its index and term), if
/// any, and every other at or below it, whose entry another leader's
/// replaced (never stored: the index was reached without it).
fn settled(
    waiters: &mut BTreeMap<u64, Awaited>,
    index: u64,
    term: u64,
) -> (Option<Awaited>, Vec<Awaited>) {
    let later = match index.checked_add(1) {
        Some(next) => waiters.split_off(&next),
        None => BTreeMap::new(),
    };
    let due = std::mem::replace(waiters, later);
    let mut answered = None;
    let mut overwritten = Vec::new();
    for (i, p) in due {
        if i < index || p.term != term {
            overwritten.push(p);
        } else {
            answered = Some(p);
        }
    }
    (answered, overwritten)
}

/// What applying entry `e` of data group `group` does to the engine. A
/// send's batch is in its partition's log already (written when the entry
/// was persisted, `write.rs`): applying it moves the partition's commit
/// mark past it. `pointer`: where the journal says the batch lies; `ack`:
/// the engine's acknowledgement of its write, when this leader wrote it.
fn to_apply(
    group: u32,
    e: &Entry,
    meta: &dyn MetaMachine,
    pointer: Option<crate::journal::Pointer>,
    ack: Option<AppendAck>,
) -> ApplyCmd {
    match Command::decode(&e.context) {
        Ok(Command::Append { partition, .. }) if meta.keeps(partition) => {
            // An entry journaled whole before pointer records (a version-02
            // journal; `open.rs` wrote its batch into the log at open).
            let mark = pointer.map(|p| p.next_offset()).or_else(|| {
                corelog::Batch::admit(e.data.clone(), &corelog::Limits::default())
                    .ok()
                    .map(|b| b.as_ref().next_offset())
            });
            match mark {
                Some(mark) => ApplyCmd::Commit {
                    partition,
                    mark,
                    ack,
                    base: pointer.map(|p| p.base_offset),
                },
                None => {
                    tracing::error!(
                        "group {group}: entry {}: a send whose batch is neither pointed at nor whole",
                        e.index
                    );
                    ApplyCmd::Skip
                }
            }
        }
        Ok(Command::StoreOffset {
            partition,
            consumer,
            offset,
        }) if meta.keeps(partition) => ApplyCmd::StoreOffset {
            partition,
            consumer,
            offset,
        },
        Ok(Command::DeleteOffset {
            partition,
            consumer,
        }) if meta.keeps(partition) => ApplyCmd::DeleteOffset {
            partition,
            consumer,
        },
        Ok(Command::DeleteSegments { partition, count }) if meta.keeps(partition) => {
            ApplyCmd::DeleteSegments {
                partition,
                count: usize::try_from(count).unwrap_or(usize::MAX),
                index: e.index,
            }
        }
        Ok(Command::Offloaded { partition, end }) if meta.keeps(partition) => {
            ApplyCmd::Offloaded { partition, end }
        }
        Ok(_) => ApplyCmd::Skip,
        Err(err) => {
            tracing::error!("group {group}: entry {}: {err}", e.index);
            ApplyCmd::Skip
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{answer_meta, settled, to_apply};
    use crate::apply::ApplyCmd;
    use crate::command::Command;
    use crate::error::ReplicaError;
    use crate::group::{Awaited, Waiter};
    use crate::journal::Pointer;
    use crate::machine::{MachineError, MetaMachine};
    use bytes::Bytes;
    use futures_channel::oneshot;
    use raft::eraftpb::Entry;
    use std::collections::BTreeMap;
    use std::time::Instant;

    /// A catalog that keeps partition 1 only (2 was deleted).
    struct KeepsOne;

    impl MetaMachine for KeepsOne {
        fn applied_index(&self) -> u64 {
            0
        }
        fn version(&self) -> u64 {
            0
        }
        fn apply(&self, _: u64, _: u64, _: &[u8]) -> Result<bool, MachineError> {
            Ok(true)
        }
        fn snapshot(&self) -> Bytes {
            Bytes::new()
        }
        fn restore(&self, _: u64, _: &[u8]) -> Result<(), MachineError> {
            Ok(())
        }
        fn keeps(&self, partition: u64) -> bool {
            partition == 1
        }
    }

    fn entry(cmd: &Command) -> Entry {
        let mut e = Entry::default();
        e.index = 9;
        e.term = 2;
        e.context = Bytes::from(cmd.encode());
        e
    }

    /// A late entry for a partition the metadata deleted stores nothing
    /// (it would bring the partition back); the same entries for a kept
    /// partition each do what they say.
    #[test]
    fn an_entry_for_a_partition_no_longer_kept_is_skipped() {
        let pointer = Some(Pointer {
            base_offset: 10,
            batch_length: 300,
            batch_checksum: 1,
            message_count: 3,
        });
        for partition in [1u64, 2] {
            let cmds = [
                Command::Append {
                    partition,
                    client: 0,
                    request: 0,
                },
                Command::StoreOffset {
                    partition,
                    consumer: 4,
                    offset: 5,
                },
                Command::DeleteOffset {
                    partition,
                    consumer: 4,
                },
                Command::DeleteSegments {
                    partition,
                    count: 1,
                },
                Command::Offloaded { partition, end: 7 },
            ];
            for cmd in &cmds {
                let got = to_apply(1, &entry(cmd), &KeepsOne, pointer, None);
                assert_eq!(
                    !matches!(got, ApplyCmd::Skip),
                    partition == 1,
                    "{cmd:?}: {got:?}"
                );
            }
        }
        let send = Command::Append {
            partition: 1,
            client: 0,
            request: 0,
        };
        match to_apply(1, &entry(&send), &KeepsOne, pointer, None) {
            ApplyCmd::Commit {
                partition: 1,
                mark: 13,
                ack: None,
                base: Some(10),
            } => {}
            other => panic!("a kept send moves the mark past its batch: {other:?}"),
        }
    }

    fn waiting(term: u64) -> (Awaited, oneshot::Receiver<Result<u64, ReplicaError>>) {
        let (tx, rx) = oneshot::channel();
        let p = Awaited {
            term,
            deadline: Instant::now(),
            waiter: Waiter::Count(tx),
        };
        (p, rx)
    }

    fn terms(ps: &[Awaited]) -> Vec<u64> {
        ps.iter().map(|p| p.term).collect()
    }

    /// Entry 5 of term 3 applied: the send proposed as it is answered;
    /// the one at 3, whose index was reached without it, and one proposed
    /// at 5 in another term are overwritten; the one at 8 waits on.
    #[test]
    fn an_applied_entry_answers_its_own_proposal_only() {
        let mut w = BTreeMap::new();
        for (i, t) in [(3, 3), (5, 3), (8, 3)] {
            w.insert(i, waiting(t).0);
        }
        let (answered, overwritten) = settled(&mut w, 5, 3);
        assert_eq!(answered.map(|p| p.term), Some(3));
        assert_eq!(terms(&overwritten), vec![3], "the one at 3");
        assert_eq!(w.keys().copied().collect::<Vec<_>>(), vec![8]);

        let mut w = BTreeMap::from([(5, waiting(2).0)]);
        let (answered, overwritten) = settled(&mut w, 5, 3);
        assert!(answered.is_none(), "another term's proposal at 5");
        assert_eq!(terms(&overwritten), vec![2]);

        let mut w = BTreeMap::from([(9, waiting(3).0)]);
        let (answered, overwritten) = settled(&mut w, 5, 3);
        assert!(answered.is_none() && overwritten.is_empty());
        assert_eq!(w.len(), 1);
    }

    /// A metadata change is answered with its outcome only when the entry
    /// applied at its index is the one proposed (same term).
    #[test]
    fn a_metadata_proposal_is_answered_by_its_own_entry_only() {
        let meta = |term: u64| {
            let (tx, rx) = oneshot::channel();
            let p = Awaited {
                term,
                deadline: Instant::now(),
                waiter: Waiter::Meta(tx),
            };
            (p, rx)
        };
        let (p, mut rx) = meta(2);
        answer_meta(p, 2, true, Some(1));
        assert!(matches!(rx.try_recv(), Ok(Some(Ok(true)))));
        let (p, mut rx) = meta(2);
        answer_meta(p, 2, false, Some(1));
        assert!(matches!(
            rx.try_recv(),
            Ok(Some(Err(ReplicaError::Conflict)))
        ));
        let (p, mut rx) = meta(2);
        answer_meta(p, 3, true, Some(1));
        assert!(matches!(
            rx.try_recv(),
            Ok(Some(Err(ReplicaError::NotLeader { leader: Some(1) })))
        ));
    }
}
