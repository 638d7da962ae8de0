//! Persistence off the group's loop: raft-rs's asynchronous `Ready`
//! (`advance_append_async`, then `on_persist_ready`).
//!
//! The loop issues a `Ready`'s batches to their partitions' logs and
//! writes the journal's pointer records itself (a `pwrite` each, into the
//! page cache), then hands the waiting to this group's persister thread:
//! the engine's answers for the batches (under `fsync=batch`, each durable
//! when answered) and, under a durable policy, the journal's `fdatasync`
//! (a [`SyncTicket`]). Meanwhile the loop goes on stepping peers' messages
//! and proposals, so the next `Ready` gathers everything that arrived
//! during this one's sync: group commit without a blocked loop.
//!
//! The persister takes jobs in order, waits for all that are queued, runs
//! one `fdatasync` for them (the last ticket covers every entry before it)
//! and hands back one [`Persisted`]: the engine's acknowledgements, the
//! messages raft-rs held for persistence, and the last job's number. Only
//! then does the loop send those messages (`send_persisted` still refuses
//! an acknowledgement past what is written and synced) and tell raft-rs,
//! which counts this node's own entries as held from there: a leader's
//! commit and every node's applying wait for it.

use super::install::{cut_answered, Install};
use crate::error::GroupError;
use crate::inbox::{Inbox, Persisted, WrittenEntry};
use crate::journal::sync_ticket::SyncTicket;
use crate::journal::Pointer;
use corelog::replication::ReplicaLog;
use corelog::{AppendAck, AppendError, Batch, RecoveryReport, Reply, RequestError};
use crossbeam_channel::{Receiver, Sender};
use raft::eraftpb::Message;

/// A request to a partition's log for one `Ready`, in the order the loop
/// made them. The loop issues it (`reply` is `Some`) unless an earlier one
/// found its shard's queue full: from then on the persister issues them,
/// each once everything before it is queued, so that a write never passes
/// the cut or the write before it (`write.rs`).
pub(super) struct Pending {
    pub partition: u64,
    pub op: Op,
}

/// What a [`Pending`] asks of its partition's log.
pub(super) enum Op {
    /// Cut the log from `offset` on: the suffix a new leader replaced.
    Cut {
        offset: u64,
        reply: Option<Reply<Option<RecoveryReport>>>,
    },
    /// Store entry `index`'s batch.
    Append {
        index: u64,
        term: u64,
        pointer: Pointer,
        batch: Batch,
        reply: Option<Reply<AppendAck>>,
    },
}

/// What one `Ready` leaves to persist.
pub(super) struct Job {
    /// The `Ready`'s number.
    pub number: u64,
    pub pending: Vec<Pending>,
    /// The journal's sync, under a durable policy.
    pub ticket: Option<SyncTicket>,
    /// Messages to send once all of it is persisted.
    pub msgs: Vec<Message>,
    /// A leader's messages to send once its batches are written, the
    /// batches of at least `files_from` bytes from their files
    /// (`after_write.rs`).
    pub after_write: Vec<Message>,
    pub files_from: Option<usize>,
}

enum Work {
    Job(Job),
    /// A data snapshot to install once every job before it is handed back.
    Install(Install),
}

/// The handle on a group's persister thread.
pub(super) struct Persister {
    tx: Sender<Work>,
    group: u32,
}

impl Persister {
    /// Starts group `group`'s persister, which answers on `inbox`.
    pub(super) fn start(
        group: u32,
        engine: corelog::Handle,
        inbox: Sender<Inbox>,
    ) -> Result<Persister, GroupError> {
        let (tx, rx) = crossbeam_channel::unbounded();
        std::thread::Builder::new()
            .name(format!("replica-p{group}"))
            .spawn(move || run(group, &engine, &rx, &inbox))
            .map_err(|source| GroupError::PersisterThread { group, source })?;
        Ok(Persister { tx, group })
    }

    /// Hands `job` over (jobs are persisted in the order given).
    pub(super) fn submit(&self, job: Job) -> Result<(), GroupError> {
        self.tx
            .send(Work::Job(job))
            .map_err(|_| GroupError::PersisterStopped { group: self.group })
    }

    /// Hands over a snapshot's install, run after every job given so far
    /// ([`Inbox::Installed`] when done).
    pub(super) fn install(&self, install: Install) -> Result<(), GroupError> {
        self.tx
            .send(Work::Install(install))
            .map_err(|_| GroupError::PersisterStopped { group: self.group })
    }
}

fn run(group: u32, engine: &corelog::Handle, rx: &Receiver<Work>, inbox: &Sender<Inbox>) {
    while let Ok(first) = rx.recv() {
        let mut jobs = Vec::new();
        let mut install = None;
        let mut next = Some(first);
        while let Some(w) = next.take() {
            match w {
                Work::Job(j) => jobs.push(j),
                Work::Install(i) => {
                    install = Some(i);
                    break;
                }
            }
            next = rx.try_recv().ok();
        }
        if let Some(done) = persist(group, engine, jobs) {
            let failed = done.result.is_err();
            if inbox.send(Inbox::Persisted(done)).is_err() || failed {
                return;
            }
        }
        if let Some(i) = install {
            let result = i.run(group, engine);
            let index = i.index;
            if inbox.send(Inbox::Installed { index, result }).is_err() {
                return;
            }
        }
    }
}

/// Waits for `jobs` (in order) and runs the last sync among them.
pub(super) fn persist(group: u32, engine: &corelog::Handle, jobs: Vec<Job>) -> Option<Persisted> {
    let mut done = Persisted {
        number: jobs.last()?.number,
        acks: Vec::new(),
        msgs: Vec::new(),
        after_write: Vec::new(),
        files: Vec::new(),
        ticket: None,
        result: Ok(()),
    };
    let (mut to_run, mut quiet) = (None, None);
    let (mut pending, mut files_from) = (Vec::new(), None);
    for job in jobs {
        pending.extend(job.pending);
        done.msgs.extend(job.msgs);
        done.after_write.extend(job.after_write);
        files_from = job.files_from.or(files_from);
        // The last ticket that syncs covers every entry written before
        // it; one that syncs nothing saw nothing newer than the last that
        // did, here or in an earlier round.
        match job.ticket {
            Some(t) if t.syncs() => to_run = Some(t),
            Some(t) => quiet = Some(t),
            None => {}
        }
    }
    // Every request queued first, in order (the loop's, and those it left
    // to this thread), then their answers awaited.
    for p in &mut pending {
        p.send(engine);
    }
    let mut appended = Vec::new();
    for p in pending {
        let partition = p.partition;
        match p.answer(group, engine) {
            Ok(Some((index, term, ack))) => {
                appended.push((index, term, partition, ack));
                done.acks.push((index, term, ack));
            }
            Ok(None) => {}
            Err(e) => {
                done.result = Err(e);
                return Some(done);
            }
        }
    }
    if let Some(min) = files_from {
        done.files = written_files(engine, &appended, min);
    }
    if let Some(t) = &to_run {
        if let Err(source) = t.run() {
            done.result = Err(GroupError::Journal { group, source });
            return Some(done);
        }
    }
    done.ticket = to_run.or(quiet);
    Some(done)
}

impl Pending {
    /// Issues the request if the loop left it to this thread, and waits
    /// until it is in its shard's queue. (`wait_sent` refuses only on a
    /// shard's thread, which this is not; `wait` would refuse the same.)
    fn send(&mut self, engine: &corelog::Handle) {
        let partition = self.partition;
        match &mut self.op {
            Op::Cut { offset, reply } => {
                let r = reply.get_or_insert_with(|| engine.cut_suffix(partition, *offset));
                let _ = r.wait_sent();
            }
            Op::Append { batch, reply, .. } => {
                let r = reply.get_or_insert_with(|| {
                    engine.append_stamped_admitted(partition, batch.clone())
                });
                let _ = r.wait_sent();
            }
        }
    }

    /// Waits for the answer: a batch's acknowledgement, or `None` for a
    /// cut, or when the log held this very batch already (stored before,
    /// by a snapshot's fetch).
    fn answer(
        self,
        group: u32,
        engine: &corelog::Handle,
    ) -> Result<Option<(u64, u64, AppendAck)>, GroupError> {
        let partition = self.partition;
        match self.op {
            Op::Cut { offset, reply } => {
                let r = reply.unwrap_or_else(|| engine.cut_suffix(partition, offset));
                let why = "a new leader replaced them";
                cut_answered(group, partition, offset, r.wait(), why).map(|()| None)
            }
            Op::Append {
                index,
                term,
                pointer,
                batch,
                reply,
            } => {
                let r = reply.unwrap_or_else(|| engine.append_stamped_admitted(partition, batch));
                match r.wait() {
                    Ok(ack) => Ok(Some((index, term, ack))),
                    Err(RequestError::Append(AppendError::OffsetMismatch { expected, found }))
                        if found < expected && holds(engine, partition, &pointer) =>
                    {
                        Ok(None)
                    }
                    Err(source) => Err(GroupError::Write {
                        group,
                        partition,
                        index,
                        source: Box::new(source),
                    }),
                }
            }
        }
    }
}

/// Reads back where each batch of `acks` of at least `min` bytes lies
/// (entry index, term, partition, acknowledgement), asking every shard
/// first, then waiting; a batch not found is sent from memory.
fn written_files(
    engine: &corelog::Handle,
    acks: &[(u64, u64, u64, AppendAck)],
    min: usize,
) -> Vec<WrittenEntry> {
    let asked: Vec<_> = acks
        .iter()
        .filter(|(_, _, _, a)| usize::try_from(a.bytes).is_ok_and(|b| b >= min))
        .map(|&(index, term, partition, a)| {
            (index, term, engine.read_written(partition, a.base_offset))
        })
        .collect();
    asked
        .into_iter()
        .filter_map(|(index, term, r)| Some((index, term, r.wait().ok()??)))
        .collect()
}

/// Whether `partition`'s log holds the batch `pointer` names.
fn holds(engine: &corelog::Handle, partition: u64, pointer: &Pointer) -> bool {
    match engine.read_written(partition, pointer.base_offset).wait() {
        Ok(Some(written)) => {
            Batch::admit(written, &engine.limits()).is_ok_and(|b| pointer.names(b.as_ref()))
        }
        _ => false,
    }
}

#[cfg(all(test, feature = "testing"))]
pub(super) mod tests {
    use super::{persist, run, Job, Op, Pending, Work};
    use crate::error::GroupError;
    use crate::inbox::Inbox;
    use crate::journal::sync_ticket::hold::hold_syncs;
    use crate::journal::{Journal, Pointer};
    use raft::eraftpb::{ConfState, Entry};
    use std::sync::mpsc;
    use std::time::Duration;

    fn engine(dir: &std::path::Path) -> corelog::Engine {
        corelog::Engine::open(corelog::Config {
            shards: Some(1),
            pin_threads: false,
            ..corelog::Config::new(dir.join("engine"))
        })
        .expect("engine")
    }

    /// Entry `index`'s batch: one message of `payload`, stamped for
    /// `partition` at offset `base` (always the same bytes for the same
    /// arguments).
    pub(crate) fn append(
        engine: &corelog::Handle,
        index: u64,
        partition: u64,
        base: u64,
        payload: &[u8],
    ) -> Pending {
        let mut b = corelog::BatchBuilder::new();
        b.push(corelog::MessageSpec {
            id: 1,
            timestamp: 5,
            payload,
            user_headers: &[],
        });
        let bytes = bytes::Bytes::from(b.build().expect("build"));
        let batch = corelog::Batch::admit(bytes, &engine.limits())
            .expect("admit")
            .stamp(corelog::Stamp {
                partition_id: partition,
                base_offset: base,
                base_timestamp: 7,
            });
        Pending {
            partition,
            op: Op::Append {
                index,
                term: 1,
                pointer: Pointer::of(batch.as_ref()).expect("pointer"),
                batch,
                reply: None,
            },
        }
    }

    pub(crate) fn job(number: u64, pending: Vec<Pending>) -> Job {
        Job {
            number,
            pending,
            ticket: None,
            msgs: Vec::new(),
            after_write: Vec::new(),
            files_from: None,
        }
    }

    /// An entry whose offset the log has passed is vouched for only when
    /// the log holds that very batch there (a snapshot's fetch stored it):
    /// a different batch at its offset means this node does not hold the
    /// entry, and saying it does would acknowledge what it never stored.
    #[test]
    fn an_entry_the_log_passed_is_vouched_for_only_if_the_log_holds_its_batch() {
        let dir = tempfile::tempdir().expect("tempdir");
        let engine = engine(dir.path());
        let h = engine.handle();
        let done = persist(1, &h, vec![job(1, vec![append(&h, 1, 3, 0, b"a")])]).expect("jobs");
        assert!(done.result.is_ok(), "{:?}", done.result);
        assert_eq!(done.acks.len(), 1, "the batch was written");
        let done = persist(1, &h, vec![job(2, vec![append(&h, 1, 3, 0, b"a")])]).expect("jobs");
        assert!(
            done.result.is_ok(),
            "the same batch, held: {:?}",
            done.result
        );
        assert!(done.acks.is_empty(), "held already, not written again");
        let done = persist(1, &h, vec![job(3, vec![append(&h, 1, 3, 0, b"b")])]).expect("jobs");
        assert!(
            matches!(done.result, Err(GroupError::Write { .. })),
            "another batch at the entry's offset was vouched for: {:?}",
            done.result
        );
        drop(h);
        engine.shutdown().expect("shutdown");
    }

    /// A failed persist is the group's end: the persister hands it back
    /// and stops, taking no later job (whose writes would follow a failed
    /// one).
    #[test]
    fn a_failed_persist_stops_the_persister() {
        let dir = tempfile::tempdir().expect("tempdir");
        let engine = engine(dir.path());
        let h = engine.handle();
        // Offset 5 on an empty partition: refused.
        let failing = job(1, vec![append(&h, 1, 4, 5, b"a")]);
        let (tx, rx) = crossbeam_channel::unbounded();
        let (itx, irx) = crossbeam_channel::unbounded();
        let t = std::thread::spawn(move || run(1, &h, &rx, &itx));
        tx.send(Work::Job(failing)).expect("submit");
        match irx.recv_timeout(Duration::from_secs(10)) {
            Ok(Inbox::Persisted(p)) => assert!(
                matches!(p.result, Err(GroupError::Write { .. })),
                "{:?}",
                p.result
            ),
            other => panic!("expected the failed persist, got {other:?}"),
        }
        let _ = tx.send(Work::Job(job(2, Vec::new())));
        if let Ok(later) = irx.recv_timeout(Duration::from_millis(500)) {
            panic!("the persister went on after a failure: {later:?}");
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while !t.is_finished() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(t.is_finished(), "the persister did not stop");
        t.join().expect("persister");
        engine.shutdown().expect("shutdown");
    }

    fn entry(index: u64) -> Entry {
        let mut e = Entry::default();
        e.index = index;
        e.term = 1;
        e
    }

    /// Two jobs handed over together, the first with entries (its ticket
    /// syncs), the second with none (its ticket syncs nothing): the
    /// persister runs the first's sync before it hands either back, and
    /// vouches for the entries.
    #[test]
    fn a_quiet_ticket_after_a_syncing_one_does_not_skip_its_sync() {
        let dir = tempfile::tempdir().expect("tempdir");
        let jdir = dir.path().join("journal");
        let (mut j, _) = Journal::open(&jdir, &ConfState::from((vec![1], vec![]))).expect("open");
        j.append(&[entry(1), entry(2)]).expect("append");
        let syncing = j.sync_ticket().expect("ticket");
        let quiet = j.sync_ticket().expect("ticket");
        assert!(syncing.syncs() && !quiet.syncs());
        let engine = corelog::Engine::open(corelog::Config {
            shards: Some(1),
            pin_threads: false,
            ..corelog::Config::new(dir.path().join("engine"))
        })
        .expect("engine");
        let handle = engine.handle();
        let job = |number, ticket| Job {
            number,
            pending: Vec::new(),
            ticket: Some(ticket),
            msgs: Vec::new(),
            after_write: Vec::new(),
            files_from: None,
        };
        let jobs = vec![job(1, syncing), job(2, quiet)];
        let held = hold_syncs(&jdir);
        let (tx, rx) = mpsc::channel();
        let t = std::thread::spawn(move || {
            let _ = tx.send(persist(1, &handle, jobs));
        });
        assert!(
            rx.recv_timeout(Duration::from_millis(300)).is_err(),
            "handed back while the first job's sync was held"
        );
        drop(held);
        let done = rx
            .recv_timeout(Duration::from_secs(10))
            .expect("handed back once the sync returns")
            .expect("jobs");
        t.join().expect("persister");
        assert!(done.result.is_ok());
        assert_eq!(done.number, 2);
        j.synced_by(done.ticket.as_ref().expect("a ticket"));
        assert_eq!(j.synced_index(), 2);
        engine.shutdown().expect("shutdown");
    }
}
