//! What [`Engine::shutdown`](crate::Engine::shutdown) and
//! [`Engine::shutdown_timeout`](crate::Engine::shutdown_timeout) can fail
//! with: their own error, not the one every request returns.

use corelog_segment::log::LogError;
use std::time::Duration;

/// Why an engine did not shut down cleanly.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ShutdownError {
    /// A partition's final flush or close failed (the first such
    /// partition; every failure is logged). What it had acknowledged under
    /// a durable policy is durable; what it had not may be lost. The
    /// threads are stopped and the lock released all the same.
    #[error("shutdown: closing partition {partition} failed: {error}")]
    CloseFailed {
        /// the partition
        partition: u64,
        /// why
        error: LogError,
    },
    /// [`Engine::shutdown_timeout`](crate::Engine::shutdown_timeout): these
    /// shards had not stopped when the time was up (a request or a task
    /// of theirs still running: a stuck disk, a task that never ends).
    /// They stop on their own once it ends; the data directory stays
    /// locked until they have, so no other engine opens it meanwhile.
    #[error("shutdown: shards {running:?} still running after {waited:?} (the directory stays locked until they stop)")]
    TimedOut {
        /// the shards still running
        running: Vec<usize>,
        /// how long shutdown waited
        waited: Duration,
    },
    /// Called on a shard's thread, where waiting for the shards would
    /// stall (and deadlock) that shard. Nothing was stopped.
    #[error("shutdown called on a shard thread; shut the engine down from another thread")]
    WouldBlockShard,
}
