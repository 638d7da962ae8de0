//! What travels to a shard.

use crate::error::RequestError;
use corelog_segment::log::{AppendAck, LogStats, PollFrom, PollReply, RecoveryReport, Retention};
use corelog_segment::Batch;
use futures_channel::oneshot::Sender;
use std::future::Future;
use std::pin::Pin;

pub(crate) type Respond<T> = Sender<Result<T, RequestError>>;

/// A task to start on a shard's runtime.
pub(crate) type Task = Box<dyn FnOnce() -> Pin<Box<dyn Future<Output = ()>>> + Send>;

pub(crate) enum Request {
    Append {
        partition: u64,
        batch: Batch,
        stamped: bool,
        reply: Respond<AppendAck>,
    },
    Poll {
        partition: u64,
        from: PollFrom,
        max_bytes: u64,
        reply: Respond<PollReply>,
    },
    PollWait {
        partition: u64,
        from: PollFrom,
        max_bytes: u64,
        deadline: std::time::Instant,
        reply: Respond<PollReply>,
    },
    PollNext {
        partition: u64,
        consumer: u64,
        max_bytes: u64,
        reply: Respond<PollReply>,
    },
    StoreOffset {
        partition: u64,
        consumer: u64,
        offset: u64,
        reply: Respond<()>,
    },
    LoadOffset {
        partition: u64,
        consumer: u64,
        reply: Respond<Option<u64>>,
    },
    DeleteOffset {
        partition: u64,
        consumer: u64,
        reply: Respond<bool>,
    },
    DeleteSegments {
        partition: u64,
        count: usize,
        reply: Respond<Vec<std::path::PathBuf>>,
    },
    /// What a tier may copy: the sealed segments and the log's retention.
    Offloadable {
        partition: u64,
        reply: Respond<crate::offloader::Offloadable>,
    },
    /// Removes local segments a tier holds, past the local limit.
    TrimOffloaded {
        partition: u64,
        through: u64,
        keep_bytes: u64,
        reply: Respond<Vec<std::path::PathBuf>>,
    },
    SetRetention {
        partition: u64,
        retention: Retention,
        reply: Respond<()>,
    },
    Flush {
        partition: Option<u64>,
        reply: Respond<()>,
    },
    Stats {
        partition: u64,
        reply: Respond<LogStats>,
    },
    Options {
        partition: u64,
        reply: Respond<crate::PartitionOptions>,
    },
    SetCommitMark {
        partition: u64,
        offset: u64,
        reply: Respond<()>,
    },
    CutSuffix {
        partition: u64,
        from: u64,
        reply: Respond<Option<RecoveryReport>>,
    },
    ReadWritten {
        partition: u64,
        offset: u64,
        reply: Respond<Option<corelog_segment::log::WrittenBatch>>,
    },
    Create {
        partition: u64,
        /// Options to keep in its directory (replacing any it had).
        options: Option<crate::PartitionOptions>,
        reply: Respond<()>,
    },
    Delete {
        partition: u64,
        reply: Respond<()>,
    },
    Reopen {
        partition: u64,
        reply: Respond<RecoveryReport>,
    },
    List {
        reply: Respond<Vec<u64>>,
    },
    Retention {
        reply: Respond<Vec<std::path::PathBuf>>,
    },
    Spawn(Task),
    Shutdown,
    /// A fault for tests: the shard panics in its own loop.
    #[cfg(feature = "testing")]
    Panic,
}

impl Request {
    /// The partition the request is about, if one.
    pub(crate) fn partition(&self) -> Option<u64> {
        match self {
            Request::Append { partition, .. }
            | Request::Poll { partition, .. }
            | Request::PollNext { partition, .. }
            | Request::PollWait { partition, .. }
            | Request::StoreOffset { partition, .. }
            | Request::LoadOffset { partition, .. }
            | Request::DeleteOffset { partition, .. }
            | Request::DeleteSegments { partition, .. }
            | Request::Offloadable { partition, .. }
            | Request::TrimOffloaded { partition, .. }
            | Request::SetRetention { partition, .. }
            | Request::Stats { partition, .. }
            | Request::Options { partition, .. }
            | Request::SetCommitMark { partition, .. }
            | Request::CutSuffix { partition, .. }
            | Request::ReadWritten { partition, .. }
            | Request::Create { partition, .. }
            | Request::Delete { partition, .. }
            | Request::Reopen { partition, .. } => Some(*partition),
            Request::Flush { partition, .. } => *partition,
            _ => None,
        }
    }

    /// Answers the request with an error.
    pub(crate) fn fail(self, e: RequestError) {
        match self {
            Request::Append { reply, .. } => drop(reply.send(Err(e))),
            Request::Poll { reply, .. }
            | Request::PollNext { reply, .. }
            | Request::PollWait { reply, .. } => drop(reply.send(Err(e))),
            Request::StoreOffset { reply, .. }
            | Request::Flush { reply, .. }
            | Request::SetRetention { reply, .. }
            | Request::SetCommitMark { reply, .. }
            | Request::Create { reply, .. }
            | Request::Delete { reply, .. } => drop(reply.send(Err(e))),
            Request::LoadOffset { reply, .. } => drop(reply.send(Err(e))),
            Request::DeleteOffset { reply, .. } => drop(reply.send(Err(e))),
            Request::DeleteSegments { reply, .. } => drop(reply.send(Err(e))),
            Request::Offloadable { reply, .. } => drop(reply.send(Err(e))),
            Request::TrimOffloaded { reply, .. } => drop(reply.send(Err(e))),
            Request::Stats { reply, .. } => drop(reply.send(Err(e))),
            Request::Options { reply, .. } => drop(reply.send(Err(e))),
            Request::CutSuffix { reply, .. } => drop(reply.send(Err(e))),
            Request::Reopen { reply, .. } => drop(reply.send(Err(e))),
            Request::ReadWritten { reply, .. } => drop(reply.send(Err(e))),
            Request::List { reply } => drop(reply.send(Err(e))),
            Request::Retention { reply } => drop(reply.send(Err(e))),
            Request::Spawn(_) | Request::Shutdown => {}
            #[cfg(feature = "testing")]
            Request::Panic => {}
        }
    }
}
