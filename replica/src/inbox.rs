//! What a group's loop receives, from peers, the handle, the applier and
//! its compaction's flush, and what applying an entry answers.

use crate::command::{Command, Origin};
use crate::error::{GroupError, ReplicaError};
use crate::journal::sync_ticket::SyncTicket;
use bytes::Bytes;
use corelog::{AppendAck, Batch, RequestError};
use futures_channel::oneshot;
use raft::eraftpb::Message;

/// What a group's loop receives.
pub(crate) enum Inbox {
    /// A message from a peer, and the batches of its entries, verified
    /// ([`verified_batches`]).
    Raft(Message, Vec<(u64, u64, Batch)>),
    /// A proposal from the handle.
    Propose(Proposal),
    /// A compaction's flush is done.
    Flushed {
        index: u64,
        ends: Result<bytes::Bytes, corelog::RequestError>,
    },
    /// The applier stored an entry.
    Applied {
        index: u64,
        term: u64,
        result: Applied,
        /// A send's batch, read back from its segment: what the journal's
        /// entry holds from now on instead of the bytes it arrived in.
        view: Option<Bytes>,
    },
    /// A partition's next offset and last timestamp, read on its shard for
    /// a leader's first send to it (`group/stamps.rs`).
    Stamped {
        partition: u64,
        /// The stamps' epoch when the read was asked.
        epoch: u64,
        result: Result<(u64, u64), RequestError>,
    },
    /// The persister is done with every `Ready` up to a number
    /// (`group/persist.rs`).
    Persisted(Persisted),
    /// The metadata group's applier applied an entry: whether its change
    /// took effect, or why the machine failed (`group/meta_applier.rs`).
    MetaApplied {
        index: u64,
        term: u64,
        result: Result<bool, GroupError>,
    },
    /// The snapshot at `index` is installed: a data snapshot's partitions
    /// by the persister (`group/install.rs`), the metadata by its applier.
    Installed {
        index: u64,
        result: Result<(), GroupError>,
    },
    /// Stop the loop.
    Stop,
}

/// Where a leader's written entry's batch lies: entry index, term, the
/// batch (`group/after_write.rs`).
pub(crate) type WrittenEntry = (u64, u64, corelog::WrittenBatch);

/// What the persister hands back to the loop: every job up to `number`
/// is persisted, or `result` says why not.
pub(crate) struct Persisted {
    pub number: u64,
    /// The engine's acknowledgement of each batch written: entry index,
    /// term, acknowledgement.
    pub acks: Vec<(u64, u64, AppendAck)>,
    pub msgs: Vec<Message>,
    /// A leader's messages that waited for its writes (`after_write.rs`),
    /// and where those writes lie, for a send from the files.
    pub after_write: Vec<Message>,
    pub files: Vec<WrittenEntry>,
    /// The sync that ran, for the journal to record.
    pub ticket: Option<SyncTicket>,
    pub result: Result<(), GroupError>,
}

impl std::fmt::Debug for Inbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Inbox::Raft(m, _) => write!(f, "Raft({:?} from {})", m.get_msg_type(), m.from),
            Inbox::Propose(_) => write!(f, "Propose"),
            Inbox::Applied { index, .. } => write!(f, "Applied({index})"),
            Inbox::Flushed { index, .. } => write!(f, "Flushed({index})"),
            Inbox::Persisted(p) => write!(f, "Persisted({})", p.number),
            Inbox::Installed { index, .. } => write!(f, "Installed({index})"),
            Inbox::MetaApplied { index, .. } => write!(f, "MetaApplied({index})"),
            Inbox::Stamped { partition, .. } => write!(f, "Stamped({partition})"),
            Inbox::Stop => write!(f, "Stop"),
        }
    }
}

/// The batches a peer's message carries (the data of its entries whose
/// command is an append), each admitted as a producer's would be: index,
/// term and the verified batch. An entry whose data is no whole, valid
/// batch is an error naming it, and the message is not to be stepped:
/// damage is never stored, and the leader sends the entries again.
pub(crate) fn verified_batches(
    msg: &Message,
    limits: &corelog::Limits,
) -> Result<Vec<(u64, u64, Batch)>, UnverifiedEntry> {
    let mut out = Vec::new();
    for e in msg.get_entries() {
        if let Ok(Command::Append { partition, .. }) = Command::decode(&e.context) {
            let batch = Batch::admit(e.data.clone(), limits).map_err(|source| UnverifiedEntry {
                index: e.index,
                term: e.term,
                partition,
                source,
            })?;
            out.push((e.index, e.term, batch));
        }
    }
    Ok(out)
}

/// An entry of a peer's message whose batch does not verify.
#[derive(Debug, thiserror::Error)]
#[error("entry {index} (term {term}) for partition {partition}: {source}")]
pub(crate) struct UnverifiedEntry {
    /// the entry's index
    pub index: u64,
    /// its term
    pub term: u64,
    /// the partition it appends to
    pub partition: u64,
    /// what admission said
    pub source: corelog::BatchError,
}

/// What the handle asks a group's leader to replicate.
pub(crate) enum Proposal {
    /// A producer's admitted batch.
    Append {
        partition: u64,
        batch: Batch,
        origin: Origin,
        /// Only a repeat of a send this node knows is answered; anything
        /// else is refused as "not the leader" (the node does not lead
        /// every group).
        only_repeat: bool,
        reply: oneshot::Sender<Result<AppendAck, ReplicaError>>,
    },
    /// A command on a partition with a count for an answer (offsets,
    /// deletions).
    Partition {
        cmd: Command,
        reply: oneshot::Sender<Result<u64, ReplicaError>>,
    },
    /// A metadata change made from the metadata as of `base`.
    Meta {
        base: u64,
        data: Bytes,
        reply: oneshot::Sender<Result<bool, ReplicaError>>,
    },
}

impl Proposal {
    /// Answers the proposal with `e`.
    pub(crate) fn fail(self, e: ReplicaError) {
        match self {
            Proposal::Append { reply, .. } => {
                let _ = reply.send(Err(e));
            }
            Proposal::Partition { reply, .. } => {
                let _ = reply.send(Err(e));
            }
            Proposal::Meta { reply, .. } => {
                let _ = reply.send(Err(e));
            }
        }
    }
}

/// What storing an entry did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Done {
    /// The batch was stored now.
    Appended(AppendAck),
    /// The batch was stored before (a replay).
    Replayed,
    /// Done; a count (offsets deleted, segments deleted), 0 when none.
    Count(u64),
}

/// What applying an entry gave.
pub(crate) type Applied = Result<Done, RequestError>;

#[cfg(test)]
mod tests {
    use super::*;
    use raft::eraftpb::Entry;

    fn batch() -> Bytes {
        let mut b = corelog::BatchBuilder::new();
        b.push(corelog::MessageSpec {
            id: 1,
            timestamp: 5,
            payload: b"hello",
            user_headers: &[],
        });
        Bytes::from(b.build().expect("build"))
    }

    fn entry(index: u64, cmd: Command, data: Bytes) -> Entry {
        let mut e = Entry::default();
        e.index = index;
        e.term = 2;
        e.context = Bytes::from(cmd.encode());
        e.data = data;
        e
    }

    #[test]
    fn an_append_message_is_verified_batch_by_batch() {
        let append = Command::Append {
            partition: 3,
            client: 0,
            request: 1,
        };
        let mut msg = Message::default();
        msg.mut_entries().push(entry(
            6,
            Command::Meta { base: 1 },
            Bytes::from_static(b"meta"),
        ));
        msg.mut_entries().push(entry(7, append.clone(), batch()));
        let limits = corelog::Limits::default();
        let got = verified_batches(&msg, &limits).expect("verified");
        assert_eq!(got.len(), 1, "only the append's data is a batch");
        assert_eq!((got[0].0, got[0].1), (7, 2));
        assert_eq!(got[0].2.bytes(), &msg.get_entries()[1].data);
        // One flipped payload byte and the message is refused, naming it.
        let mut bad = batch().to_vec();
        let last = bad.len() - 1;
        bad[last] ^= 1;
        msg.mut_entries().push(entry(8, append, Bytes::from(bad)));
        let why = verified_batches(&msg, &limits).expect_err("damaged batch");
        assert!((why.index, why.partition) == (8, 3), "{why}");
    }
}
