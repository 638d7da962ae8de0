//! What kind of failure a [`RequestError`] is: one flat enum to match on,
//! whichever enum nests the cause (an append's, a log's, a cut's).

use super::RequestError;
use corelog_segment::log::{AppendError, CutError, LogError};
use corelog_segment::BatchError;

/// The kind of a [`RequestError`], for callers that act on what failed
/// rather than on where: a broker maps it to its protocol's statuses, a
/// producer decides whether to retry.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// use corelog::{Config, Engine, ErrorKind, PollFrom};
/// let engine = Engine::open(Config::new(dir.path()))?;
/// let h = engine.handle();
/// let err = h.poll(9, PollFrom::First, 1 << 20).wait().unwrap_err();
/// assert_eq!(err.kind(), ErrorKind::NotFound);
/// assert_eq!(err.partition(), Some(9));
/// assert!(!err.is_retryable());
/// // A batch that is no batch: refused, and the error says why.
/// let err = h.append(9, &b"not a batch"[..]).wait().unwrap_err();
/// assert_eq!(err.kind(), ErrorKind::BadBatch);
/// assert!(err.bad_batch().is_some());
/// engine.shutdown()?;
/// # Ok::<(), corelog::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A batch was refused (its layout, a checksum, its size): nothing of
    /// it was stored; [`RequestError::bad_batch`] says what is wrong.
    BadBatch,
    /// The partition does not exist (polls and offsets do not create it).
    NotFound,
    /// The disk is full, directly or as what poisoned the partition: free
    /// space, then retry (a poisoned partition must be reopened first).
    NoSpace,
    /// A write or sync failed before: the partition refuses appends until
    /// it is reopened and recovered.
    Poisoned,
    /// An I/O call failed.
    Io,
    /// Stored bytes are damaged (the error names the file and position);
    /// they are never served.
    Corrupt,
    /// The partition was being closed (an idle close, a suffix cut):
    /// retry.
    Closed,
    /// The partition cannot be opened (its recovery refused or failed).
    Unopenable,
    /// A replication request that does not fit the log: a stamped batch
    /// that does not continue it, a commit mark or a cut on a log without
    /// a commit mark, a cut below the mark or inside a batch; or a producer
    /// batch sent straight to a replicated partition.
    Replication,
    /// The shard owning the partition panicked.
    ShardFailed,
    /// The engine is shutting down, or the shard stopped.
    ShuttingDown,
    /// The object store behind the log (the tier) did not answer or
    /// refused: retry once it is back.
    Remote,
    /// The call itself was wrong: a shard that does not exist, a blocking
    /// wait on a shard's thread.
    Misuse,
    /// A limit of the partition's configuration refused it: a store of an
    /// offset for one consumer more than `max_consumer_offsets`. Nothing
    /// was changed; it fails again until a consumer's offset is deleted or
    /// the limit raised.
    Limit,
}

fn io_kind(no_space: bool) -> ErrorKind {
    if no_space {
        ErrorKind::NoSpace
    } else {
        ErrorKind::Io
    }
}

fn poisoned_kind(no_space: bool) -> ErrorKind {
    if no_space {
        ErrorKind::NoSpace
    } else {
        ErrorKind::Poisoned
    }
}

fn log_kind(e: &LogError) -> ErrorKind {
    match e {
        LogError::Poisoned { .. } => poisoned_kind(e.is_no_space()),
        LogError::Corrupt { .. } => ErrorKind::Corrupt,
        LogError::Closed { .. } => ErrorKind::Closed,
        LogError::TooManyConsumers { .. } => ErrorKind::Limit,
        _ => io_kind(e.is_no_space()),
    }
}

fn append_kind(e: &AppendError) -> ErrorKind {
    match e {
        AppendError::Log(e) => log_kind(e),
        AppendError::TooLarge(_) => ErrorKind::BadBatch,
        AppendError::OffsetMismatch { .. }
        | AppendError::PartitionMismatch { .. }
        | AppendError::TimestampBackwards { .. } => ErrorKind::Replication,
        _ => io_kind(e.is_no_space()),
    }
}

impl RequestError {
    /// What kind of failure this is (see [`ErrorKind`]).
    pub fn kind(&self) -> ErrorKind {
        match self {
            RequestError::Admission { .. } => ErrorKind::BadBatch,
            RequestError::Append(e) => append_kind(e),
            RequestError::Storage(e) => log_kind(e),
            RequestError::CommitMark(_) | RequestError::Replicated { .. } => ErrorKind::Replication,
            RequestError::Cut(CutError::Log { source, .. }) => log_kind(source),
            RequestError::Cut(_) => ErrorKind::Replication,
            RequestError::Unopenable { error, .. } => {
                if error.is_no_space() {
                    ErrorKind::NoSpace
                } else {
                    ErrorKind::Unopenable
                }
            }
            RequestError::UnknownPartition { .. } => ErrorKind::NotFound,
            RequestError::NoSuchShard { .. } | RequestError::WouldBlockShard => ErrorKind::Misuse,
            RequestError::Io { .. } => io_kind(self.is_no_space()),
            RequestError::ShuttingDown | RequestError::QueueClosed { .. } => {
                ErrorKind::ShuttingDown
            }
            RequestError::ShardFailed { .. } => ErrorKind::ShardFailed,
            RequestError::Tier { error, .. } => match **error {
                corelog_tier::TierError::Store(_) => ErrorKind::Remote,
                corelog_tier::TierError::Stopped => ErrorKind::ShuttingDown,
                _ => ErrorKind::Corrupt,
            },
        }
    }

    /// Whether the same request may succeed if sent again unchanged: the
    /// partition was only being closed, or the disk was full (once space
    /// is freed). Every other kind fails again until something else
    /// changes (the batch, the partition, the engine).
    pub fn is_retryable(&self) -> bool {
        matches!(
            self.kind(),
            ErrorKind::Closed | ErrorKind::NoSpace | ErrorKind::Remote
        )
    }

    /// The partition the failure is about, when it names one.
    pub fn partition(&self) -> Option<u64> {
        match self {
            RequestError::Admission { partition, .. }
            | RequestError::Unopenable { partition, .. }
            | RequestError::UnknownPartition { partition }
            | RequestError::Tier { partition, .. }
            | RequestError::Replicated { partition } => Some(*partition),
            RequestError::Append(AppendError::Log(
                LogError::Poisoned { partition, .. } | LogError::Closed { partition },
            ))
            | RequestError::Storage(
                LogError::Poisoned { partition, .. }
                | LogError::Closed { partition }
                | LogError::TooManyConsumers { partition, .. },
            ) => Some(*partition),
            RequestError::CommitMark(e) => match e {
                corelog_segment::log::CommitMarkError::NotGated { partition } => Some(*partition),
            },
            RequestError::Cut(
                CutError::NotGated { partition }
                | CutError::Committed { partition, .. }
                | CutError::NotABatchStart { partition, .. }
                | CutError::Log { partition, .. },
            ) => Some(*partition),
            _ => None,
        }
    }

    /// What is wrong with a refused batch (whether admission or the log
    /// refused it): for [`ErrorKind::BadBatch`].
    pub fn bad_batch(&self) -> Option<&BatchError> {
        match self {
            RequestError::Admission { error, .. }
            | RequestError::Append(AppendError::TooLarge(error)) => Some(error),
            _ => None,
        }
    }
}

impl super::ShutdownError {
    /// What kind of failure this is: a partition's final close as its
    /// storage error's kind, a timeout as `ShuttingDown`, a call from a
    /// shard's thread as `Misuse`.
    pub fn kind(&self) -> ErrorKind {
        match self {
            super::ShutdownError::CloseFailed { error, .. } => log_kind(error),
            super::ShutdownError::TimedOut { .. } => ErrorKind::ShuttingDown,
            super::ShutdownError::WouldBlockShard => ErrorKind::Misuse,
        }
    }

    /// The partition whose final close failed, when that is the failure.
    pub fn partition(&self) -> Option<u64> {
        match self {
            super::ShutdownError::CloseFailed { partition, .. } => Some(*partition),
            _ => None,
        }
    }
}
