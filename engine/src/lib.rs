//! # corelog
//!
//! A thread-per-core io_uring storage engine for Apache Iggy-style message
//! batches. [`Engine::open`] starts one shard per core: an OS thread pinned
//! to its core running a monoio runtime on the io_uring driver, owning the
//! partitions placed on it ([`Handle::shard_of`]). The [`Handle`] is the API:
//! `Clone + Send + Sync`, usable from any thread or async runtime; requests
//! travel to the owning shard through a bounded lock-free queue and come
//! back through a oneshot channel.
//!
//! Batches are stored and served in the one layout of `message-batches.md`
//! (see [`corelog_segment`]): the bytes a producer sends are the bytes on
//! disk and the bytes a poll returns, but for the server-stamped header
//! fields.

mod config;
mod engine;
mod error;
mod lock;
mod queue;
mod request;
mod shard;
mod size;

pub use config::Config;
pub use engine::{Engine, Handle};
pub use error::Error;
pub use lock::DirLock;
pub use queue::Reply;
pub use shard::{placement, PartitionRecovery};
pub use size::parse_size;

pub use corelog_segment as segment;
pub use corelog_segment::log::{
    AppendAck, FsyncPolicy, LogConfig, LogStats, PollFrom, PollReply, RecoveryReport, Retention,
};
pub use corelog_segment::{
    Batch, BatchBuilder, BatchError, BatchRef, Limits, Message, MessageSpec,
};
