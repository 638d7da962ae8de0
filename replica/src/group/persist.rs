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

use crate::error::GroupError;
use crate::inbox::{Inbox, Persisted};
use crate::journal::sync_ticket::SyncTicket;
use crate::journal::Pointer;
use corelog::replication::ReplicaLog;
use corelog::{AppendAck, AppendError, Batch, RequestError};
use crossbeam_channel::{Receiver, Sender};
use raft::eraftpb::Message;

/// A batch issued to its partition's log, not yet answered.
pub(super) struct Pending {
    pub index: u64,
    pub term: u64,
    pub partition: u64,
    pub pointer: Pointer,
    pub reply: corelog::Reply<AppendAck>,
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
}

enum Work {
    Job(Job),
    /// Answered once every job before it is handed back.
    Barrier(Sender<()>),
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

    /// Waits until every job given so far is persisted and handed back.
    pub(super) fn barrier(&self) -> Result<(), GroupError> {
        let (tx, rx) = crossbeam_channel::bounded(1);
        let stopped = GroupError::PersisterStopped { group: self.group };
        self.tx.send(Work::Barrier(tx)).map_err(|_| stopped)?;
        rx.recv()
            .map_err(|_| GroupError::PersisterStopped { group: self.group })
    }
}

fn run(group: u32, engine: &corelog::Handle, rx: &Receiver<Work>, inbox: &Sender<Inbox>) {
    while let Ok(first) = rx.recv() {
        let mut jobs = Vec::new();
        let mut barrier = None;
        let mut next = Some(first);
        while let Some(w) = next.take() {
            match w {
                Work::Job(j) => jobs.push(j),
                Work::Barrier(b) => {
                    barrier = Some(b);
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
        if let Some(b) = barrier {
            let _ = b.send(());
        }
    }
}

/// Waits for `jobs` (in order) and runs the last sync among them.
fn persist(group: u32, engine: &corelog::Handle, jobs: Vec<Job>) -> Option<Persisted> {
    let mut done = Persisted {
        number: jobs.last()?.number,
        acks: Vec::new(),
        msgs: Vec::new(),
        ticket: None,
        result: Ok(()),
    };
    for job in jobs {
        for p in job.pending {
            match written(group, engine, p) {
                Ok(Some(ack)) => done.acks.push(ack),
                Ok(None) => {}
                Err(e) => {
                    done.result = Err(e);
                    return Some(done);
                }
            }
        }
        done.msgs.extend(job.msgs);
        if job.ticket.is_some() {
            done.ticket = job.ticket;
        }
    }
    if let Some(t) = &done.ticket {
        if let Err(source) = t.run() {
            done.result = Err(GroupError::Journal { group, source });
        }
    }
    Some(done)
}

/// Waits for one batch's write: its acknowledgement, or `None` when the
/// log held this very batch already (stored before, by a snapshot's fetch).
fn written(
    group: u32,
    engine: &corelog::Handle,
    p: Pending,
) -> Result<Option<(u64, u64, AppendAck)>, GroupError> {
    match p.reply.wait() {
        Ok(ack) => Ok(Some((p.index, p.term, ack))),
        Err(RequestError::Append(AppendError::OffsetMismatch { expected, found }))
            if found < expected && holds(engine, p.partition, &p.pointer) =>
        {
            Ok(None)
        }
        Err(source) => Err(GroupError::Write {
            group,
            partition: p.partition,
            index: p.index,
            source: Box::new(source),
        }),
    }
}

/// Whether `partition`'s log holds the batch `pointer` names.
pub(super) fn holds(engine: &corelog::Handle, partition: u64, pointer: &Pointer) -> bool {
    match engine.read_written(partition, pointer.base_offset).wait() {
        Ok(Some(bytes)) => {
            Batch::admit(bytes, &engine.limits()).is_ok_and(|b| pointer.names(b.as_ref()))
        }
        _ => false,
    }
}
