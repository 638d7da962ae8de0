//! Why a partition log operation failed.

use crate::format::BatchError;
use std::fmt;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;

/// What broke stored bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Damage {
    /// The batch breaks the layout or a checksum.
    Batch(BatchError),
    /// A batch's `base_offset` does not continue the previous batch.
    OffsetGap {
        /// the offset expected
        expected: u64,
        /// the offset found
        found: u64,
    },
    /// A batch is stamped for another partition.
    WrongPartition {
        /// this partition
        expected: u64,
        /// the batch's `partition_id`
        found: u64,
    },
    /// A batch's `base_timestamp` is older than the previous batch's.
    TimestampBackwards {
        /// the previous `base_timestamp`
        previous: u64,
        /// this one
        found: u64,
    },
    /// Fewer bytes than a batch header remain.
    TornHeader {
        /// bytes left
        available: u64,
    },
    /// The batch runs past the end of the data.
    TornBatch {
        /// its `batch_length`
        declared: u64,
        /// bytes left
        available: u64,
    },
    /// An index entry disagrees with the log.
    Index {
        /// which entry
        entry: usize,
    },
    /// A segment's offsets do not continue the previous segment's.
    SegmentGap {
        /// the next offset of the previous segment
        expected: u64,
        /// this segment's base offset
        found: u64,
    },
    /// A segment's batches stop short of where the next segment starts.
    EndsShort {
        /// the offset after this segment's last whole batch
        ends: u64,
        /// the next segment's base offset
        next: u64,
    },
    /// A sealed segment's batches do not end where its seal record says
    /// (where they do end, in bytes, is the error's position).
    SealMismatch {
        /// bytes the seal record gives
        sealed_len: u64,
        /// the next offset the seal record gives
        sealed_next: u64,
        /// the offset after the last whole batch
        next: u64,
    },
    /// A consumer offset file fails its checksum, its magic or its consumer
    /// id (a torn one, as a power cut leaves it, is read as no offset).
    OffsetFile,
}

impl fmt::Display for Damage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Damage::Batch(e) => e.fmt(f),
            Damage::OffsetGap { expected, found } => {
                write!(
                    f,
                    "base_offset is {found} but the previous batch ends at offset {expected}"
                )
            }
            Damage::WrongPartition { expected, found } => {
                write!(
                    f,
                    "batch is stamped for partition {found}, but this is partition {expected}"
                )
            }
            Damage::TimestampBackwards { previous, found } => {
                write!(
                    f,
                    "base_timestamp {found} is older than the previous batch's {previous}"
                )
            }
            Damage::TornHeader { available } => {
                write!(f, "torn batch header: only {available} bytes remain")
            }
            Damage::TornBatch {
                declared,
                available,
            } => {
                write!(
                    f,
                    "torn batch: batch_length is {declared} but only {available} bytes remain"
                )
            }
            Damage::Index { entry } => write!(
                f,
                "index entry {entry} does not point at the batch it names"
            ),
            Damage::SegmentGap { expected, found } => {
                write!(f, "segment starts at offset {found} but the previous segment ends at offset {expected}")
            }
            Damage::EndsShort { ends, next } => write!(
                f,
                "the segment's batches end at offset {ends} but the next segment starts at offset {next}"
            ),
            Damage::SealMismatch {
                sealed_len,
                sealed_next,
                next,
            } => write!(
                f,
                "the seal record says {sealed_len} bytes up to offset {sealed_next}, but the whole batches end here, at offset {next}"
            ),
            Damage::OffsetFile => f.write_str("consumer offset file is damaged (fails its checksum, its magic or its consumer id); storing an offset replaces it"),
        }
    }
}

/// Why a write or sync failed and poisoned the partition.
#[derive(Debug)]
pub struct Poison {
    /// what was being done
    pub op: &'static str,
    /// the file
    pub path: PathBuf,
    /// the error
    pub error: io::Error,
}

impl fmt::Display for Poison {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} of {} failed: {}",
            self.op,
            self.path.display(),
            self.error
        )
    }
}

/// Why [`PartitionLog::open`](super::PartitionLog::open) failed: the log
/// was not opened and nothing was changed past what the error names.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// An I/O operation failed.
    #[error("{op} {path}: {source}{hint}", path = path.display(), hint = if is_no_space(source) { " (the disk is full: free space first)" } else { "" })]
    Io {
        /// what was being done
        op: &'static str,
        /// the file or directory
        path: PathBuf,
        /// the error
        source: Arc<io::Error>,
    },
    /// Stored bytes are damaged where recovery may not cut them.
    #[error("{path} at byte {position}: {damage}", path = path.display())]
    Corrupt {
        /// the file
        path: PathBuf,
        /// byte position in it
        position: u64,
        /// what is wrong
        damage: Damage,
    },
    /// Damaged bytes are followed by whole batches: not what a power cut
    /// leaves, so recovery drops nothing and refuses to open. A repair
    /// ([`PartitionLog::repair`](super::PartitionLog::repair), `corelog
    /// repair`) cuts there and sets everything after aside.
    #[error("{path} at byte {position}: {damage}; {whole_batches} whole batches follow, so this is damage, not a torn write: nothing was dropped and the partition is not opened (a repair moves the damaged tail aside, deleting nothing)", path = path.display())]
    DamageBeforeData {
        /// the file
        path: PathBuf,
        /// byte position in it
        position: u64,
        /// what is wrong
        damage: Damage,
        /// whole batches after the damage (in the file and later ones)
        whole_batches: u64,
    },
    /// A recorded suffix cut (`CUT`, see `PartitionLog::cut_suffix`) cannot
    /// be finished: the record is damaged or names an offset the log has
    /// no batch start at. Nothing was changed; the record stays.
    #[error("{path}: the recorded suffix cut cannot be finished: {why}; nothing was changed (move the record away to open the log uncut)", path = path.display())]
    CutRecord {
        /// the record
        path: PathBuf,
        /// what is wrong
        why: &'static str,
    },
    /// The log configuration cannot work.
    #[error("invalid log configuration: {reason}")]
    InvalidConfig {
        /// which setting, and why
        reason: &'static str,
    },
}

/// Why an append was refused or failed. Nothing of the batch is
/// acknowledged. What any request on the log can meet (poisoned, closed,
/// an I/O failure) is a [`LogError`], once, in [`AppendError::Log`]; the
/// rest is the append's own.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum AppendError {
    /// The log cannot take it: poisoned by an earlier failed write or
    /// sync (or this append's own; appends are refused until it is
    /// reopened), closed, or creating the next segment failed (not
    /// poisoned).
    #[error(transparent)]
    Log(#[from] LogError),
    /// The batch is larger than the log's `limits` allow (which may be
    /// stricter than those it was admitted by).
    #[error("batch refused: {0}")]
    TooLarge(BatchError),
    /// A replicated batch does not continue the log.
    #[error(
        "stamped batch has base_offset {found}, but the partition's next offset is {expected}"
    )]
    OffsetMismatch {
        /// the partition's next offset
        expected: u64,
        /// the batch's base_offset
        found: u64,
    },
    /// A replicated batch is stamped for another partition.
    #[error("stamped batch has partition_id {found}, but this is partition {expected}")]
    PartitionMismatch {
        /// this partition
        expected: u64,
        /// the batch's partition_id
        found: u64,
    },
    /// A replicated batch's timestamp goes backwards.
    #[error(
        "stamped batch has base_timestamp {found}, older than the partition's last {previous}"
    )]
    TimestampBackwards {
        /// the partition's last base_timestamp
        previous: u64,
        /// the batch's
        found: u64,
    },
}

/// Why a request on an open log (poll, flush, close, consumer offsets,
/// retention) failed.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum LogError {
    /// A write or sync failed earlier; the partition refuses appends until
    /// it is reopened (which recovers it from what is on disk).
    #[error("partition {partition} is poisoned: {cause}{hint}; nothing more is appended until it is reopened and recovered", hint = if is_no_space(&cause.error) { " (the disk is full: free space first)" } else { "" })]
    Poisoned {
        /// the partition
        partition: u64,
        /// the failure
        cause: Arc<Poison>,
    },
    /// An I/O operation failed without poisoning the partition.
    #[error("{op} {path}: {source}{hint}", path = path.display(), hint = if is_no_space(source) { " (the disk is full: free space, then append again)" } else { "" })]
    Io {
        /// what was being done
        op: &'static str,
        /// the file or directory
        path: PathBuf,
        /// the error
        source: Arc<io::Error>,
    },
    /// Stored bytes are damaged.
    #[error("{path} at byte {position}: {damage}", path = path.display())]
    Corrupt {
        /// the file
        path: PathBuf,
        /// byte position in it
        position: u64,
        /// what is wrong
        damage: Damage,
    },
    /// The log was closed.
    #[error("partition {partition} is closed")]
    Closed {
        /// the partition
        partition: u64,
    },
    /// A store of a consumer's offset was refused: `max` consumers already
    /// have one in the partition (`max_consumer_offsets`). Nothing was
    /// stored; the consumers' stored offsets are as they were.
    #[error("partition {partition}: consumer {consumer}'s offset refused: {max} consumers already have a stored offset here (the most a partition keeps: delete one, or raise max_consumer_offsets)")]
    TooManyConsumers {
        /// the partition
        partition: u64,
        /// the consumer refused
        consumer: u64,
        /// the limit
        max: usize,
    },
}

fn is_no_space(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::ENOSPC)
}

impl LogError {
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: io::Error) -> LogError {
        LogError::Io {
            op,
            path: path.into(),
            source: Arc::new(source),
        }
    }

    /// Whether the error is a full disk (directly or as the poison cause).
    pub fn is_no_space(&self) -> bool {
        match self {
            LogError::Io { source, .. } => is_no_space(source),
            LogError::Poisoned { cause, .. } => is_no_space(&cause.error),
            _ => false,
        }
    }
}

impl AppendError {
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: io::Error) -> AppendError {
        AppendError::Log(LogError::io(op, path, source))
    }

    /// Whether the error is a full disk (directly or as the poison cause).
    pub fn is_no_space(&self) -> bool {
        match self {
            AppendError::Log(e) => e.is_no_space(),
            _ => false,
        }
    }
}

impl OpenError {
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: io::Error) -> OpenError {
        OpenError::Io {
            op,
            path: path.into(),
            source: Arc::new(source),
        }
    }

    /// Whether the error is a full disk.
    pub fn is_no_space(&self) -> bool {
        matches!(self, OpenError::Io { source, .. } if is_no_space(source))
    }
}
