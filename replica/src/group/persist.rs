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
    let (mut to_run, mut quiet) = (None, None);
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
        // The last ticket that syncs covers every entry written before
        // it; one that syncs nothing saw nothing newer than the last that
        // did, here or in an earlier round.
        match job.ticket {
            Some(t) if t.syncs() => to_run = Some(t),
            Some(t) => quiet = Some(t),
            None => {}
        }
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
fn holds(engine: &corelog::Handle, partition: u64, pointer: &Pointer) -> bool {
    match engine.read_written(partition, pointer.base_offset).wait() {
        Ok(Some(bytes)) => {
            Batch::admit(bytes, &engine.limits()).is_ok_and(|b| pointer.names(b.as_ref()))
        }
        _ => false,
    }
}

#[cfg(all(test, feature = "testing"))]
mod tests {
    use super::{persist, Job};
    use crate::journal::sync_ticket::hold::hold_syncs;
    use crate::journal::Journal;
    use raft::eraftpb::{ConfState, Entry};
    use std::sync::mpsc;
    use std::time::Duration;

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
