//! What a request to a running engine (every [`Handle`](crate::Handle)
//! method's [`Reply`](crate::Reply)) can fail with.

use corelog_segment::log::{
    AppendError, CommitMarkError, CutError, LogError, OpenError as LogOpenError,
};
use corelog_segment::BatchError;

/// Why a request failed; each variant is something a caller can match on.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum RequestError {
    /// The batch was refused at admission; nothing of it was stored.
    #[error("partition {partition}: batch refused: {error}")]
    Admission {
        /// the target partition
        partition: u64,
        /// what is wrong with the batch
        error: BatchError,
    },
    /// The partition log refused an append of its own accord (a
    /// replicated batch that does not continue the log); nothing of the
    /// batch is acknowledged. The engine answers what else an append meets
    /// as every other request does, one variant for one cause: a batch too
    /// large as [`RequestError::Admission`] (whichever check caught it), a
    /// poisoned or closed log or an I/O failure as
    /// [`RequestError::Storage`].
    #[error(transparent)]
    Append(#[from] AppendError),
    /// The partition log failed another request (I/O, damaged bytes,
    /// poisoning).
    #[error(transparent)]
    Storage(#[from] LogError),
    /// The partition has no commit mark to move (the engine's
    /// `LogConfig::commit_gate` is off).
    #[error(transparent)]
    CommitMark(#[from] CommitMarkError),
    /// A suffix cut was refused (nothing changed) or failed (a recorded
    /// cut is finished by the partition's next open).
    #[error(transparent)]
    Cut(#[from] CutError),
    /// The partition could not be opened (recovery refused or failed); it
    /// answers every request with this until the engine is reopened.
    #[error("partition {partition} cannot be opened: {error}")]
    Unopenable {
        /// the partition
        partition: u64,
        /// why
        error: LogOpenError,
    },
    /// A producer batch sent to a replicated partition (one whose log has
    /// a commit mark, `LogConfig::commit_gate`): only its Raft group
    /// appends there, stamped ([`ReplicaLog::append_stamped`](crate::replication::ReplicaLog::append_stamped)); send it
    /// through the replica. Nothing was stored.
    #[error("partition {partition} is replicated: append through its replica, not to the engine")]
    Replicated {
        /// the partition
        partition: u64,
    },
    /// The partition does not exist (polls and offsets do not create it).
    #[error("partition {partition} does not exist")]
    UnknownPartition {
        /// the partition
        partition: u64,
    },
    /// [`Handle::spawn_on`](crate::Handle::spawn_on) named a shard the
    /// engine does not have.
    #[error("no shard {shard}: the engine has {shards} (shards are numbered from 0)")]
    NoSuchShard {
        /// the shard asked for
        shard: usize,
        /// how many the engine has
        shards: usize,
    },
    /// A file operation outside a partition log failed (deleting a
    /// partition's directory).
    #[error("{op} {path}: {source}", path = path.display())]
    Io {
        /// what was being done
        op: &'static str,
        /// the file or directory
        path: std::path::PathBuf,
        /// the error
        source: std::sync::Arc<std::io::Error>,
    },
    /// The engine is shutting down or has shut down.
    /// The object store behind the log failed a poll below the local log:
    /// it did not answer or refused (retry later), or its bytes are damaged
    /// (named, never served).
    #[error("partition {partition}: {error}")]
    Tier {
        /// the partition
        partition: u64,
        /// what failed
        error: std::sync::Arc<corelog_tier::TierError>,
    },
    #[error("the engine is shutting down")]
    ShuttingDown,
    /// The shard owning the partition died (a panic in its own work,
    /// logged): this request, and every later one for its partitions, is
    /// refused at once. Its partitions' data is on disk as after a crash;
    /// reopening the engine recovers it.
    #[error("shard {shard} failed (it panicked; see the log): its partitions are unavailable until the engine is reopened")]
    ShardFailed {
        /// the shard
        shard: usize,
    },
    /// The shard owning the partition stopped without answering.
    #[error("shard {shard} stopped without answering (its queue is closed)")]
    QueueClosed {
        /// the shard
        shard: usize,
    },
    /// A blocking call ([`Reply::wait`](crate::Reply::wait)) was made on a shard
    /// thread, where blocking would stall the shard (and could deadlock it).
    #[error("blocking wait called on a shard thread; await the future instead")]
    WouldBlockShard,
}

impl RequestError {
    pub(crate) fn io(
        op: &'static str,
        path: impl Into<std::path::PathBuf>,
        source: std::io::Error,
    ) -> RequestError {
        RequestError::Io {
            op,
            path: path.into(),
            source: std::sync::Arc::new(source),
        }
    }

    /// Whether the request failed because the disk is full (directly, or
    /// as the cause that poisoned the partition).
    pub fn is_no_space(&self) -> bool {
        match self {
            RequestError::Append(e) => e.is_no_space(),
            RequestError::Storage(e) => e.is_no_space(),
            RequestError::Cut(CutError::Log { source, .. }) => source.is_no_space(),
            RequestError::Unopenable { error, .. } => error.is_no_space(),
            RequestError::Io { source, .. } => source.kind() == std::io::ErrorKind::StorageFull,
            _ => false,
        }
    }
}

impl RequestError {
    /// `partition`'s log refusing or failing an append, as a request
    /// error: a batch too large for the log is an admission refusal, as
    /// the handle's own size check answers it; what any request on the log
    /// can meet (poisoned, closed, I/O) is a storage failure, as a poll's
    /// or a flush's.
    pub(crate) fn appending(partition: u64, e: AppendError) -> RequestError {
        match e {
            AppendError::TooLarge(error) => RequestError::Admission { partition, error },
            AppendError::Log(e) => RequestError::Storage(e),
            e => RequestError::Append(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_append_failure_has_one_variant_per_cause() {
        let error = BatchError::TooLarge {
            declared: 10,
            max: 5,
        };
        let e = RequestError::appending(7, AppendError::TooLarge(error.clone()));
        assert!(
            matches!(&e, RequestError::Admission { partition: 7, error: got } if *got == error),
            "{e:?}"
        );
        let closed = LogError::Closed { partition: 7 };
        let e = RequestError::appending(7, AppendError::Log(closed));
        assert!(
            matches!(e, RequestError::Storage(LogError::Closed { partition: 7 })),
            "{e:?}"
        );
        let mismatch = AppendError::OffsetMismatch {
            expected: 1,
            found: 2,
        };
        let e = RequestError::appending(7, mismatch);
        assert!(matches!(
            e,
            RequestError::Append(AppendError::OffsetMismatch { .. })
        ));
    }
}
