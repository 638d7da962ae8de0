//! # corelog
//!
//! A thread-per-core io_uring storage engine for Apache Iggy-style message
//! batches. [`Engine::open`] starts one shard per core: an OS thread pinned
//! to its core running a monoio runtime on the io_uring driver, owning the
//! partitions placed on it ([`Handle::shard_of`]). The [`Handle`] is the API:
//! `Clone + Send + Sync`, usable from any thread or async runtime; requests
//! travel to the owning shard through a bounded lock-free queue and come
//! back through a oneshot channel. Every `Handle` request returns a
//! [`Reply`].
//!
//! Batches are stored and served in the one layout of `message-batches.md`:
//! the bytes a producer sends are the bytes on disk and the bytes a poll
//! returns, but for the server-stamped header fields.
//!
//! ## What is public
//!
//! The items below are the whole embedding API: the engine, its handle and
//! replies, the configuration, the batch types, and the errors the
//! signatures use ([`OpenError`] from [`Engine::open`], [`RequestError`]
//! from every [`Reply`], [`Error`] for either).
//!
//! The storage layer's own seams (the io_uring `Ring`, the fault-injecting
//! `SimStorage`, `PartitionLog`, the layout, the inspector) are not part of
//! it. Tests, fuzzing and benchmarks reach them through the `testing` cargo
//! feature, which adds `corelog::testing::segment` (the `corelog-segment` crate).
//! This crate's own integration tests turn it on through a dev-dependency
//! on itself.

mod config;
mod consume;
mod engine;
mod error;
mod health;
mod lock;
mod metrics;
mod offloader;
mod partition_options;
mod partitions;
mod preallocation;
mod produce;
mod queue;
mod request;
mod shard;
mod size;
mod task;
mod thread;

#[doc(hidden)]
pub mod cli;

/// For the owner of replicated partitions (a Raft group): appends of
/// batches its leader stamped, the commit mark, the suffix cut, reads past
/// the mark. A broker that does not replicate needs none of it.
pub mod replication {
    pub use crate::engine::replicated::ReplicaLog;
}

pub use config::DEFAULT_INLINE_WRITE_MAX;
pub use config::{Config, OpenPartitions, Placement};
pub use consume::Consumer;
pub use engine::try_append::Full;
pub use engine::{Engine, Handle};
pub use error::{Error, ErrorKind, OpenError, RequestError, ShutdownError};
pub use health::{Health, ShardHealth, ShardState};
pub use metrics::{LatencyHistogram, Metrics, ShardMetrics, LATENCY_BUCKETS};
pub use offloader::OffloadReport;
pub use partition_options::{OptionsError, PartitionOptions};
pub use produce::Producer;
pub use queue::Reply;
pub use shard::PartitionRecovery;

pub use corelog_segment::declared_length;
pub use corelog_segment::io::InlineWrites;
pub use corelog_segment::log::{
    AppendAck, AppendError, CleanClose, CommitMarkError, CutError, Damage, FsyncPolicy, LogConfig,
    LogError, LogStats, OpenCheck, OpenError as LogOpenError, ParseFsyncError, Poison, PollFrom,
    PollReply, Preallocation, RecoveryReport, Retention, SetAsideFile, SyncIssue, TailCut,
    WrittenBatch, FIRST_RESERVED_CONSUMER,
};
/// Tiered storage (`Config::tier`): the object store seam, its S3 and
/// in-memory implementations, the tier's configuration and figures.
pub use corelog_tier as tier;
pub use corelog_tier::TierConfig;
// Named in the signatures above (a tail cut's reason, a refused batch's
// header field, a stamp's header): exported so an embedder can name them.
pub use corelog_segment::layout::HeaderField;
// The batch header's length, fixed by the format (a replica compares
// stored headers with it).
pub use corelog_segment::layout::BATCH_HEADER_LEN;
pub use corelog_segment::log::scan::CutReason;
pub use corelog_segment::{
    Batch, BatchBuilder, BatchError, BatchRef, BuildError, Limits, Message, MessageSpec, Messages,
    Stamp, StampedHeader,
};

/// Seams for tests, fuzzing and benchmarks (cargo feature `testing`): the
/// storage layer beneath the engine, with its simulated disk, its io_uring
/// ring and its byte layout. Nothing an embedding broker should use.
#[cfg(feature = "testing")]
pub mod testing {
    pub use corelog_segment as segment;
}
