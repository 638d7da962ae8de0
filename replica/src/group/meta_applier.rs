//! The metadata group's applier: the embedder's [`MetaMachine`] applies
//! committed entries and restores snapshots on a thread of its own, never
//! on the group's loop. corelog-server's machine creates and deletes
//! partitions there and waits for the engine; a loop that waited with it
//! would answer no heartbeat meanwhile.
//!
//! Work is taken in order (entries, and a snapshot to restore after every
//! entry handed before it), and each result goes back to the loop:
//! [`Inbox::MetaApplied`] per entry, which answers the proposal waiting on
//! it, and [`Inbox::Installed`] for a snapshot, whose `Ready` the loop
//! takes only then (`snapshot.rs`).

use crate::command::Command;
use crate::error::GroupError;
use crate::inbox::Inbox;
use crate::machine::MetaMachine;
use bytes::Bytes;
use crossbeam_channel::{Receiver, Sender};
use raft::eraftpb::Entry;
use std::sync::Arc;

enum Work {
    Apply(Vec<Entry>),
    Restore { index: u64, data: Bytes },
}

/// The handle on the metadata group's applier thread.
pub(super) struct MetaApplier {
    tx: Sender<Work>,
    group: u32,
}

impl MetaApplier {
    /// Starts the applier of group `group` (the metadata group) over `sm`,
    /// answering on `inbox`.
    pub(super) fn start(
        group: u32,
        sm: Arc<dyn MetaMachine>,
        inbox: Sender<Inbox>,
    ) -> Result<MetaApplier, GroupError> {
        let (tx, rx) = crossbeam_channel::unbounded();
        std::thread::Builder::new()
            .name(format!("replica-a{group}"))
            .spawn(move || run(group, sm.as_ref(), &rx, &inbox))
            .map_err(|source| GroupError::MetaApplierThread { group, source })?;
        Ok(MetaApplier { tx, group })
    }

    /// Hands committed entries over, in log order.
    pub(super) fn apply(&self, entries: Vec<Entry>) -> Result<(), GroupError> {
        self.send(Work::Apply(entries))
    }

    /// Hands over a snapshot to restore once every entry before it is
    /// applied.
    pub(super) fn restore(&self, index: u64, data: Bytes) -> Result<(), GroupError> {
        self.send(Work::Restore { index, data })
    }

    fn send(&self, w: Work) -> Result<(), GroupError> {
        self.tx
            .send(w)
            .map_err(|_| GroupError::MetaApplierStopped { group: self.group })
    }
}

fn run(group: u32, sm: &dyn MetaMachine, rx: &Receiver<Work>, inbox: &Sender<Inbox>) {
    while let Ok(w) = rx.recv() {
        match w {
            Work::Apply(entries) => {
                for e in entries {
                    let result = apply(group, sm, &e);
                    let failed = result.is_err();
                    let (index, term) = (e.index, e.term);
                    let sent = inbox.send(Inbox::MetaApplied {
                        index,
                        term,
                        result,
                    });
                    if sent.is_err() || failed {
                        return;
                    }
                }
            }
            Work::Restore { index, data } => {
                let result = sm
                    .restore(index, &data)
                    .map_err(|source| GroupError::Machine { group, source });
                if inbox.send(Inbox::Installed { index, result }).is_err() {
                    return;
                }
            }
        }
    }
}

/// Applies one committed entry: whether its change took effect (a change
/// proposed against a version that is no longer current does not).
fn apply(group: u32, sm: &dyn MetaMachine, e: &Entry) -> Result<bool, GroupError> {
    match Command::decode(&e.context) {
        Ok(Command::Meta { base }) if e.index > sm.applied_index() => sm
            .apply(e.index, base, &e.data)
            .map_err(|source| GroupError::Machine { group, source }),
        Ok(_) => Ok(true),
        Err(err) => {
            tracing::error!("group {group}: entry {}: {err}", e.index);
            Ok(true)
        }
    }
}
