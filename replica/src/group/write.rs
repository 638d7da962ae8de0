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
//! partition logs (`cut_suffix`, crash-safe), queued on each partition's
//! shard ahead of the batches that replace it, while the journal
//! overwrites its pointers; the persister waits for the cut with the
//! writes. A crash before the journal's sync leaves pointers that name
//! batches the logs no longer (or do not yet) hold, entries this node
//! never said it held: `reconcile.rs` cuts the journal there.

use super::persist::{Op, Pending};
use super::{Group, Role};
use crate::command::Command;
use crate::error::GroupError;
use crate::journal::{Kind, Pointer};
use corelog::replication::ReplicaLog;
use corelog::{Batch, BatchError, Limits};
use raft::eraftpb::Entry;
use std::collections::{BTreeMap, HashMap};

/// Requests issued to the partitions' logs, awaited before the entries
/// count as persisted.
pub(super) struct Writes {
    /// How each entry is journaled (a pointer record for a written batch).
    kinds: HashMap<u64, Kind>,
    /// The requests to wait for (`persist.rs`).
    pub(super) pending: Vec<Pending>,
}

impl Writes {
    /// How entry `e` is journaled.
    pub(super) fn kind(&self, e: &Entry) -> Kind {
        self.kinds.get(&e.index).copied().unwrap_or(Kind::Plain)
    }
}

impl Group {
    /// Issues the batches of `ents` (the entries raft-rs asks this node to
    /// persist in `Ready` number `number`, in log order) to their
    /// partitions' logs, after cutting the suffix they replace from those
    /// logs. Entries that carry no batch for a partition this node keeps
    /// are journaled whole. Nothing here waits for the engine: once a
    /// request finds its shard's queue full, the persister issues this
    /// `Ready`'s remaining requests and those of every `Ready` until it
    /// hands this one back (`deferred`), so that none passes another.
    pub(super) fn write_batches(
        &mut self,
        number: u64,
        ents: &[Entry],
    ) -> Result<Writes, GroupError> {
        let mut writes = Writes {
            kinds: HashMap::new(),
            pending: Vec::new(),
        };
        let Role::Data { meta, .. } = &self.role else {
            return Ok(writes);
        };
        let meta = meta.clone();
        if let Some(first) = ents.first() {
            for (partition, offset) in self.replaced(first.index) {
                self.stamps.forget(partition);
                let op = Op::Cut {
                    offset,
                    reply: None,
                };
                writes.pending.push(self.issue(number, partition, op));
            }
        }
        for e in ents {
            let Ok(Command::Append { partition, .. }) = Command::decode(&e.context) else {
                continue;
            };
            let batch = match entry_batch(&mut self.admitted, e, &self.engine.limits()) {
                Ok(b) => b,
                Err(err) => {
                    // Never admitted here: journaled whole, and the
                    // applier refuses it as it always did.
                    tracing::error!("group {}: entry {}: {err}", self.id, e.index);
                    continue;
                }
            };
            if !meta.keeps(partition) {
                writes.kinds.insert(e.index, Kind::VerifiedBatch);
                continue;
            }
            let Some(pointer) = Pointer::of(batch.as_ref()) else {
                continue;
            };
            writes.kinds.insert(e.index, Kind::Pointer(pointer));
            let op = Op::Append {
                index: e.index,
                term: e.term,
                pointer,
                batch,
                reply: None,
            };
            writes.pending.push(self.issue(number, partition, op));
        }
        Ok(writes)
    }

    /// Issues `op` to `partition`'s shard now, unless the persister issues
    /// it (`deferred`); a request that finds the queue full makes this
    /// `Ready` one whose later requests the persister issues.
    fn issue(&mut self, number: u64, partition: u64, op: Op) -> Pending {
        issue(&self.engine, &mut self.deferred, number, partition, op)
    }

    /// Where each partition's log is to be cut for the entries from
    /// `index` on, which the entries being persisted replace (a new
    /// leader's log differs there): from its first such batch, before the
    /// journal drops their pointers.
    fn replaced(&self, index: u64) -> BTreeMap<u64, u64> {
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
    }
}

/// [`Group::issue`]: `op` for `partition`, of the `Ready` numbered
/// `number`, sent to its shard now when no earlier request is parked
/// (`deferred` is `None`), else left to the persister; `deferred` names
/// the latest `Ready` whose requests the persister issues.
fn issue(
    engine: &corelog::Handle,
    deferred: &mut Option<u64>,
    number: u64,
    partition: u64,
    mut op: Op,
) -> Pending {
    if deferred.is_none() {
        let sent = match &mut op {
            Op::Cut { offset, reply } => reply
                .insert(engine.cut_suffix(partition, *offset))
                .is_sent(),
            Op::Append { batch, reply, .. } => reply
                .insert(engine.append_stamped_admitted(partition, batch.clone()))
                .is_sent(),
        };
        if !sent {
            *deferred = Some(number);
        }
    } else {
        *deferred = Some(number);
    }
    Pending { partition, op }
}

/// The batch to write for entry `e`: the one admission verified for this
/// very entry (same index *and* term; taken, since written now it is no
/// longer kept for the applier), else `e`'s own bytes admitted here. A
/// batch admitted for another term's entry at this index (a deposed
/// leader's proposal, or what a follower's reader checked before a new
/// leader replaced it) is never written for this one.
fn entry_batch(
    admitted: &mut BTreeMap<u64, (u64, Batch)>,
    e: &Entry,
    limits: &Limits,
) -> Result<Batch, BatchError> {
    match admitted.remove(&e.index) {
        Some((term, b)) if term == e.term => Ok(b),
        _ => Batch::admit(e.data.clone(), limits),
    }
}

#[cfg(test)]
mod tests {
    use super::entry_batch;
    use corelog::{Batch, BatchBuilder, Limits, MessageSpec};
    use raft::eraftpb::Entry;
    use std::collections::BTreeMap;

    fn batch(payload: &[u8]) -> Batch {
        let mut b = BatchBuilder::new();
        b.push(MessageSpec {
            id: 1,
            timestamp: 5,
            payload,
            user_headers: &[],
        });
        Batch::admit(b.build().expect("batch"), &Limits::default()).expect("admitted")
    }

    fn entry(index: u64, term: u64, data: &Batch) -> Entry {
        let mut e = Entry::default();
        e.index = index;
        e.term = term;
        e.data = bytes::Bytes::copy_from_slice(data.bytes());
        e
    }

    /// The batch admitted for entry 7 of term 2 is written for that entry
    /// (not admitted again from the entry's bytes); for entry 7 of term 3,
    /// which a new leader put where it was, the entry's own batch is.
    #[test]
    fn an_admitted_batch_is_written_only_for_its_own_entry() {
        let (mine, theirs) = (batch(b"proposed in term 2"), batch(b"term 3's"));
        let limits = Limits::default();

        let mut admitted = BTreeMap::from([(7, (2, mine.clone()))]);
        let got = entry_batch(&mut admitted, &entry(7, 2, &mine), &limits).expect("batch");
        assert_eq!(
            got.bytes().as_ptr(),
            mine.bytes().as_ptr(),
            "the admitted one"
        );
        assert!(admitted.is_empty(), "taken once written");

        let mut admitted = BTreeMap::from([(7, (2, mine.clone()))]);
        let got = entry_batch(&mut admitted, &entry(7, 3, &theirs), &limits).expect("batch");
        assert_eq!(
            got.bytes(),
            theirs.bytes(),
            "the new leader's entry's batch"
        );
        assert!(admitted.is_empty(), "the stale one is dropped");

        let mut admitted = BTreeMap::new();
        let got = entry_batch(&mut admitted, &entry(7, 3, &theirs), &limits).expect("batch");
        assert_eq!(got.bytes(), theirs.bytes(), "admitted from the entry");
        let mut damaged = entry(8, 3, &theirs);
        damaged.data = bytes::Bytes::from_static(b"not a batch");
        assert!(entry_batch(&mut admitted, &damaged, &limits).is_err());
    }
}

#[cfg(all(test, feature = "testing"))]
mod queue_tests {
    use super::super::persist::tests::{append, job};
    use super::super::persist::{persist, Op};
    use super::issue;
    use std::sync::mpsc;

    /// A request that finds its shard's queue full is parked, and every
    /// later one, of its `Ready` and of the next, is left to the persister
    /// (`deferred`), which issues them in order: none passes the parked
    /// one, so the log takes the batches in their entries' order.
    #[test]
    fn a_request_parked_on_a_full_queue_defers_the_rest_to_the_persister() {
        let dir = tempfile::tempdir().expect("tempdir");
        let engine = corelog::Engine::open(corelog::Config {
            shards: Some(1),
            pin_threads: false,
            queue_depth: 1,
            ..corelog::Config::new(dir.path().join("engine"))
        })
        .expect("engine");
        let h = engine.handle();
        // The shard's thread held, so its queue stays as the test fills it.
        let (running, is_running) = mpsc::channel::<()>();
        let (release, released) = mpsc::channel::<()>();
        h.spawn_on(0, move || async move {
            let _ = running.send(());
            let _ = released.recv();
        })
        .wait()
        .expect("spawned");
        is_running.recv().expect("the shard is held");

        let mut deferred = None;
        let mut req = |number: u64, index: u64, payload: &[u8]| {
            let p = append(&h, index, 3, index - 1, payload);
            let p = issue(&h, &mut deferred, number, p.partition, p.op);
            (p, deferred)
        };
        let (first, d1) = req(1, 1, b"a");
        let (second, d2) = req(1, 2, b"b");
        let (third, d3) = req(2, 3, b"c");
        assert_eq!(d1, None, "the first fits in the queue");
        assert_eq!(d2, Some(1), "the second is parked: ready 1 is deferred");
        assert_eq!(d3, Some(2), "ready 2's requests are the persister's too");
        assert!(
            matches!(third.op, Op::Append { reply: None, .. }),
            "nothing passes the parked request"
        );

        release.send(()).expect("release");
        let done = persist(1, &h, vec![job(1, vec![first, second])]).expect("jobs");
        assert!(done.result.is_ok(), "{:?}", done.result);
        assert_eq!(done.acks.len(), 2, "both written");
        let done = persist(1, &h, vec![job(2, vec![third])]).expect("jobs");
        assert!(done.result.is_ok(), "in order: {:?}", done.result);
        assert_eq!(done.acks.len(), 1, "written after them");
        drop(h);
        engine.shutdown().expect("shutdown");
    }
}
