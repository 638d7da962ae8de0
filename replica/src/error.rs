//! The replica's errors: a request's ([`ReplicaError`]), starting one
//! ([`StartError`]), and what stops a group ([`GroupError`]).

use crate::journal::JournalError;

/// Why a replicated request failed.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ReplicaError {
    /// This node does not lead the group: nothing was stored; send it to
    /// the leader.
    #[error("this node does not lead (leader: {leader:?}); nothing was stored")]
    NotLeader {
        /// the leader, if known
        leader: Option<u64>,
    },
    /// The outcome is unknown: the entry may still commit, or may have
    /// (a leader change or a timeout came first, or a snapshot replaced the
    /// entry on this node).
    #[error("not committed in time: the outcome is unknown")]
    NotCommitted,
    /// A metadata change made from an older version; nothing changed.
    #[error("the metadata changed meanwhile; nothing was applied")]
    Conflict,
    /// The batch was refused at admission; nothing was stored.
    #[error("partition {partition}: batch refused: {error}")]
    Admission {
        /// the partition
        partition: u64,
        /// why
        error: corelog::BatchError,
    },
    /// The committed entry could not be stored here.
    #[error("applying: {0}")]
    Store(Box<corelog::RequestError>),
    /// The leader could not read the partition it stamps the batch for;
    /// nothing was proposed.
    #[error("stamping: {0}")]
    Stamp(Box<corelog::RequestError>),
    /// The entry committed, but this node had stored its batch before (a
    /// replay after a restart): the acknowledgement is not at hand.
    #[error("the entry was already stored (replayed)")]
    Replayed,
    /// The leader a send was forwarded to failed it (what it said is
    /// logged where the answer arrives).
    #[error("the leader failed the forwarded request")]
    LeaderFailed,
    /// The replica is stopping.
    #[error("the replica is stopping")]
    Stopped,
}

/// Why a replica cannot start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// This node is not in the cluster file.
    #[error("node {0} is not in the cluster file")]
    UnknownNode(u64),
    /// The engine's shards differ from the cluster's data groups.
    #[error("the engine runs {engine} shards, the cluster {cluster} data groups (set the same)")]
    Shards {
        /// the engine's
        engine: usize,
        /// the cluster file's
        cluster: usize,
    },
    /// The replica port.
    #[error("listen on {addr}: {source}")]
    Listen {
        /// the address
        addr: std::net::SocketAddr,
        /// the error
        source: std::io::Error,
    },
    /// A thread could not be started.
    #[error("start the {what} thread: {source}")]
    Thread {
        /// which thread
        what: &'static str,
        /// the error
        source: std::io::Error,
    },
    /// A shard's applier could not be started.
    #[error("start the applier of group {group}: {source}")]
    Applier {
        /// the group
        group: u32,
        /// the engine's error
        source: Box<corelog::RequestError>,
    },
    /// A group thread ended before it said it was ready.
    #[error("a group thread ended before it was ready")]
    GroupThreadEnded,
    /// A group could not open.
    #[error(transparent)]
    Group(#[from] GroupError),
}

/// Why a group cannot run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GroupError {
    /// The journal.
    #[error("group {group}: journal: {source}")]
    Journal {
        /// the group
        group: u32,
        /// the error
        source: JournalError,
    },
    /// raft-rs refused.
    #[error("group {group}: raft: {source}")]
    Raft {
        /// the group
        group: u32,
        /// the error
        source: RaftError,
    },
    /// The embedder's state machine failed to apply an entry or a snapshot.
    #[error("group {group}: the state machine: {source}")]
    Machine {
        /// the group
        group: u32,
        /// the machine's error
        source: crate::machine::MachineError,
    },
    /// Entries past the commit index were about to be applied (a bug:
    /// the group stops rather than serve what a new leader may overwrite).
    #[error("group {group}: entry {index} was to be applied, but only {committed} is committed")]
    BeyondCommit {
        /// the group
        group: u32,
        /// the last entry to be applied
        index: u64,
        /// the commit index
        committed: u64,
    },
    /// Opening the group panicked (raft-rs asserts on the state it is
    /// given): the node does not start, instead of waiting for the group.
    #[error("group {group}: opening it panicked: {what}")]
    OpenPanicked {
        /// the group
        group: u32,
        /// the panic's message
        what: String,
    },
    /// The shard's applier is gone (the engine is stopping).
    #[error("group {group}: the applier on the shard stopped")]
    ApplierStopped {
        /// the group
        group: u32,
    },
    /// The metadata group's applier thread could not start.
    #[error("group {group}: no thread to apply the metadata: {source}")]
    MetaApplierThread {
        /// the group
        group: u32,
        /// the error
        source: std::io::Error,
    },
    /// The metadata group's applier thread is gone (it stopped on an
    /// error, logged where it happened).
    #[error("group {group}: the metadata applier stopped")]
    MetaApplierStopped {
        /// the group
        group: u32,
    },
    /// A data group's snapshot is not a list of partition ends.
    #[error("group {group}: a data snapshot that does not decode")]
    SnapshotUndecodable {
        /// the group
        group: u32,
    },
    /// A snapshot came from a node the cluster file does not name.
    #[error("group {group}: snapshot from unknown node {node}")]
    SnapshotFromUnknown {
        /// the group
        group: u32,
        /// the sender
        node: u64,
    },
    /// The engine could not say how far a partition reaches.
    #[error("group {group}: partition {partition}: {source}")]
    Engine {
        /// the group
        group: u32,
        /// the partition
        partition: u64,
        /// the engine's error
        source: Box<corelog::RequestError>,
    },
    /// An entry's batch could not be written into its partition's log.
    #[error("group {group}: entry {index}: writing its batch to partition {partition}: {source}")]
    Write {
        /// the group
        group: u32,
        /// the partition
        partition: u64,
        /// the entry
        index: u64,
        /// the engine's error
        source: Box<corelog::RequestError>,
    },
    /// The group's persister thread could not start.
    #[error("group {group}: no thread to persist its entries: {source}")]
    PersisterThread {
        /// the group
        group: u32,
        /// the error
        source: std::io::Error,
    },
    /// The group's persister thread is gone (it stopped on an error,
    /// logged where it happened).
    #[error("group {group}: its persister stopped")]
    PersisterStopped {
        /// the group
        group: u32,
    },
    /// An uncommitted suffix could not be cut from a partition's log.
    #[error("group {group}: cutting partition {partition} from offset {offset}: {source}")]
    Cut {
        /// the group
        group: u32,
        /// the partition
        partition: u64,
        /// where the cut starts
        offset: u64,
        /// the engine's error
        source: Box<corelog::RequestError>,
    },
    /// A snapshot's batches could not be fetched from the leader.
    #[error("group {group}: {source}")]
    Fetch {
        /// the group
        group: u32,
        /// the fetch's error
        source: Box<crate::net::fetch::FetchError>,
    },
}

/// What raft-rs said when it refused (its own error type stays out of
/// this crate's API, so a raft-rs upgrade is not a breaking change here).
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct RaftError(#[from] raft::Error);
