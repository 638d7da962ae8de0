//! The replica's errors: a request's ([`ReplicaError`]), starting one
//! ([`StartError`]), and what stops a group ([`GroupError`]).

use crate::journal::JournalError;

/// Why a replicated request failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReplicaError {
    /// This node does not lead the group: nothing was stored; send it to
    /// the leader.
    #[error("this node does not lead (leader: {leader:?}); nothing was stored")]
    NotLeader {
        /// the leader, if known
        leader: Option<u64>,
    },
    /// The outcome is unknown: the entry may still commit (a leader change
    /// or a timeout came first).
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
    Apply(String),
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
    /// A thread or the applier.
    #[error("start: {0}")]
    Spawn(String),
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
        source: raft::Error,
    },
    /// The state machine failed.
    #[error("group {group}: applying: {why}")]
    Apply {
        /// the group
        group: u32,
        /// what failed
        why: String,
    },
}
