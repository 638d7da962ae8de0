//! One write per byte: a data group persists a send's entry by writing its
//! stamped batch into the partition's log, where it stays, and journals
//! only a pointer to it (`journal/record.rs`).
//!
//! The partition logs are opened with a commit mark
//! (`LogConfig::commit_gate`): a batch written here is served to no reader
//! until the entry commits and the applier moves the mark past it
//! (`apply.rs`). Under `fsync=batch` the engine makes the batch durable
//! before its append resolves, and the journal's `fdatasync` makes the
//! pointer durable; both have happened before this node says it holds the
//! entry. A conflicting suffix a new leader replaces is cut from the
//! partition logs (`cut_suffix`, crash-safe) before the journal cuts its
//! pointers; `reconcile.rs` reconciles the two after a crash between.

use super::persist::Pending;
use super::{Group, Role};
use crate::command::Command;
use crate::error::GroupError;
use crate::journal::{Kind, Pointer};
use corelog::replication::ReplicaLog;
use corelog::{Batch, RequestError};
use raft::eraftpb::Entry;
use std::collections::{BTreeMap, HashMap};

/// Batches issued to their partitions' logs, awaited before the entries
/// count as persisted.
pub(super) struct Writes {
    /// How each entry is journaled (a pointer record for a written batch).
    kinds: HashMap<u64, Kind>,
    /// The writes to wait for (`persist.rs`).
    pub(super) pending: Vec<Pending>,
}

impl Writes {
    /// How entry `e` is journaled.
    pub(super) fn kind(&self, e: &Entry) -> Kind {
        self.kinds.get(&e.index).copied().unwrap_or(Kind::Plain)
    }
}

impl Group {
    /// Issues the batches of `ents` (entries raft-rs asks this node to
    /// persist, in log order) to their partitions' logs, after cutting
    /// the suffix they replace from those logs. Entries that carry no
    /// batch for a partition this node keeps are journaled whole.
    pub(super) fn write_batches(&mut self, ents: &[Entry]) -> Result<Writes, GroupError> {
        let mut writes = Writes {
            kinds: HashMap::new(),
            pending: Vec::new(),
        };
        let Role::Data { meta, .. } = &self.role else {
            return Ok(writes);
        };
        let meta = meta.clone();
        if let Some(first) = ents.first() {
            self.cut_replaced(first.index)?;
        }
        for e in ents {
            let Ok(Command::Append { partition, .. }) = Command::decode(&e.context) else {
                continue;
            };
            // Written now, so no longer kept for the applier.
            let admitted = self
                .admitted
                .remove(&e.index)
                .filter(|(term, _)| *term == e.term)
                .map(|(_, b)| b);
            let batch = match admitted {
                Some(b) => b,
                None => match Batch::admit(e.data.clone(), &self.engine.limits()) {
                    Ok(b) => b,
                    Err(err) => {
                        // Never admitted here: journaled whole, and the
                        // applier refuses it as it always did.
                        tracing::error!("group {}: entry {}: {err}", self.id, e.index);
                        continue;
                    }
                },
            };
            if !meta.keeps(partition) {
                writes.kinds.insert(e.index, Kind::VerifiedBatch);
                continue;
            }
            let Some(pointer) = Pointer::of(batch.as_ref()) else {
                continue;
            };
            writes.kinds.insert(e.index, Kind::Pointer(pointer));
            writes.pending.push(Pending {
                index: e.index,
                term: e.term,
                partition,
                pointer,
                reply: self.engine.append_stamped_admitted(partition, batch),
            });
        }
        Ok(writes)
    }

    /// Cuts from the partition logs the batches of the journal's entries
    /// from `index` on, which the entries being persisted replace (a new
    /// leader's log differs there): each partition from its first such
    /// batch, before the journal drops their pointers.
    fn cut_replaced(&mut self, index: u64) -> Result<(), GroupError> {
        let from = {
            let j = self.store.rl();
            let mut from: BTreeMap<u64, u64> = BTreeMap::new();
            for i in index..=j.last_index() {
                let (Some(p), Some(e)) = (j.pointer(i), j.entry(i)) else {
                    continue;
                };
                if let Ok(Command::Append { partition, .. }) = Command::decode(&e.context) {
                    from.entry(partition).or_insert(p.base_offset);
                }
            }
            from
        };
        for (partition, offset) in from {
            self.cut_partition(partition, offset)?;
        }
        Ok(())
    }

    /// Cuts `partition`'s log from `offset` on, crash-safely.
    pub(super) fn cut_partition(&mut self, partition: u64, offset: u64) -> Result<(), GroupError> {
        match self.engine.cut_suffix(partition, offset).wait() {
            Ok(report) => {
                if report.is_some() {
                    tracing::info!(
                        "group {}: partition {partition}: cut the uncommitted batches from offset {offset} (a new leader replaced them)",
                        self.id
                    );
                }
                self.stamps.forget(partition);
                Ok(())
            }
            Err(RequestError::UnknownPartition { .. }) => Ok(()),
            Err(source) => Err(GroupError::Cut {
                group: self.id,
                partition,
                offset,
                source: Box::new(source),
            }),
        }
    }
}
