//! How a partition log behaves.

use crate::format::Limits;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// When appended bytes are made durable, and what an acknowledgement
/// promises.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FsyncPolicy {
    /// Acknowledge once the write reached the page cache. Data survives a
    /// crash of the process (the kernel holds it) but not a power cut until
    /// the kernel writes it back (`vm.dirty_expire_centisecs`, 30 s by
    /// default) or a flush or a clean close syncs it. A sealed segment is
    /// synced and confirmed 30 s after its rotation (by then the kernel has
    /// written most of it back, so the sync does not stall appends), or at
    /// close. Readers see a batch as soon as it is written.
    #[default]
    Never,
    /// Acknowledge only after an `fdatasync` that covers the batch (and, for
    /// a new segment file, a sync of its directory): an acknowledged batch
    /// survives a power cut. One `fdatasync` acknowledges every batch whose
    /// write completed before it started (group commit). Readers see a batch
    /// only once it is durable, so nothing they read can vanish in a crash.
    Batch,
    /// Acknowledge after the write, like `Never`, and `fdatasync` every
    /// interval while there are unsynced writes: a power cut loses at most
    /// about one interval of acknowledged batches (plus the sync's own
    /// time). Readers see a batch as soon as it is written.
    Interval(Duration),
}

impl FsyncPolicy {
    /// Whether acknowledgements wait for durability.
    pub fn acks_durable(&self) -> bool {
        matches!(self, FsyncPolicy::Batch)
    }
}

impl fmt::Display for FsyncPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FsyncPolicy::Never => f.write_str("never"),
            FsyncPolicy::Batch => f.write_str("batch"),
            FsyncPolicy::Interval(d) => write!(f, "interval:{}", d.as_millis()),
        }
    }
}

/// An `--fsync` value that is not `never`, `batch` or `interval:MS`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid fsync policy {given:?}: expected never, batch or interval:MS (MS a positive number of milliseconds)")]
pub struct ParseFsyncError {
    /// what was given
    pub given: String,
}

impl FromStr for FsyncPolicy {
    type Err = ParseFsyncError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || ParseFsyncError {
            given: s.to_string(),
        };
        match s {
            "never" => Ok(FsyncPolicy::Never),
            "batch" => Ok(FsyncPolicy::Batch),
            _ => {
                let ms = s.strip_prefix("interval:").ok_or_else(err)?;
                let ms: u64 = ms.parse().map_err(|_| err())?;
                if ms == 0 {
                    return Err(err());
                }
                Ok(FsyncPolicy::Interval(Duration::from_millis(ms)))
            }
        }
    }
}

/// Which sealed segments may be deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Retention {
    /// Delete a sealed segment once its newest batch is older than this.
    pub max_age: Option<Duration>,
    /// Delete the oldest sealed segments while the partition is larger.
    pub max_bytes: Option<u64>,
}

/// How much of the log is verified when it is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OpenCheck {
    /// Verify every batch after each segment's last index entry (the
    /// active segment's unsynced tail, the sealed segments' ends). Fast.
    #[default]
    Tail,
    /// Verify every batch of every segment.
    Full,
}

/// How far ahead of the write position segment files are preallocated
/// (see `log/prealloc.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Preallocation {
    /// The first step. Default 1 MiB.
    pub step_min: u64,
    /// The largest step, reached by partitions that use a step up within a
    /// second. Default 64 MiB.
    pub step_max: u64,
    /// Preallocated but unwritten bytes, over all the partitions of a shard
    /// (a thread), never more than this. Default 1 GiB.
    pub budget: u64,
}

impl Default for Preallocation {
    fn default() -> Self {
        Preallocation {
            step_min: 1 << 20,
            step_max: 64 << 20,
            budget: 1 << 30,
        }
    }
}

/// Configuration of one partition log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogConfig {
    /// Size at which the active segment is sealed (the batch that crosses
    /// it is written whole). Default 1 GiB.
    pub segment_bytes: u64,
    /// An index entry at least every this many bytes. Default 4 KiB.
    pub index_interval_bytes: u64,
    /// Durability of acknowledgements.
    pub fsync: FsyncPolicy,
    /// Preallocate segment files with fallocate ahead of the write
    /// position (fewer metadata updates per write and per sync), in steps
    /// sized by `preallocation`.
    pub preallocate: bool,
    /// The steps of preallocation and the shard's budget for it.
    pub preallocation: Preallocation,
    /// Batch limits checked at admission.
    pub limits: Limits,
    /// Deletion of old sealed segments.
    pub retention: Retention,
    /// Verification on open.
    pub open_check: OpenCheck,
    /// How the data syncs of a shard's partitions meet the ring.
    pub syncs: SyncIssue,
    /// Readers stop at a commit mark that the log's owner moves
    /// ([`PartitionLog::set_commit_mark`](super::PartitionLog::set_commit_mark)),
    /// besides the acknowledgement mark: a replicated log writes a batch
    /// before a majority holds it, and serves it only once committed. The
    /// log opens with its mark at its first offset (nothing served) until
    /// the owner sets it. Default off: everything acknowledged is served.
    pub commit_gate: bool,
    /// Consumers that may have a stored offset in the partition at once
    /// (each is a file): a store for one more is refused
    /// ([`LogError::TooManyConsumers`](super::LogError::TooManyConsumers))
    /// until one is deleted. A new consumer is counted from the moment
    /// its store is admitted, so stores running side by side cannot pass
    /// it together. Keys from
    /// [`FIRST_RESERVED_CONSUMER`](super::FIRST_RESERVED_CONSUMER) up, an
    /// owner's own records, are not counted. Default 10,000.
    pub max_consumer_offsets: usize,
}

/// How the data syncs of a shard's partitions meet the ring.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SyncIssue {
    /// Each partition's sync round sends its fdatasync when it is ready, so
    /// a shard's dirty partitions sync side by side.
    #[default]
    Together,
    /// One fdatasync at a time per shard: each waits longer and covers more
    /// writes. On the development VM's virtio disk this took more appends
    /// a second than `Together` (docs/bench/opens.md); a device that
    /// serves flushes in parallel is better served side by side.
    OneAtATime,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            segment_bytes: 1 << 30,
            index_interval_bytes: 4096,
            fsync: FsyncPolicy::Never,
            preallocate: true,
            preallocation: Preallocation::default(),
            limits: Limits::default(),
            retention: Retention::default(),
            open_check: OpenCheck::Tail,
            syncs: SyncIssue::Together,
            commit_gate: false,
            max_consumer_offsets: 10_000,
        }
    }
}

impl LogConfig {
    /// Checks that positions fit the index's 32-bit fields.
    pub fn validate(&self) -> Result<(), &'static str> {
        if self.segment_bytes == 0 {
            return Err("segment_bytes must be positive");
        }
        if self.max_consumer_offsets == 0 {
            return Err("max_consumer_offsets must be at least 1");
        }
        if self.limits.max_batch_bytes < crate::format::layout::BATCH_HEADER_LEN as u64 {
            return Err("max_batch_bytes must be at least the 256-byte header");
        }
        if self
            .segment_bytes
            .saturating_add(self.limits.max_batch_bytes)
            > u64::from(u32::MAX)
        {
            return Err("segment_bytes + max_batch_bytes must stay below 4 GiB (index positions are 32-bit)");
        }
        if self.index_interval_bytes == 0 {
            return Err("index_interval_bytes must be positive");
        }
        Ok(())
    }

    /// The most bytes a segment can hold: it is sealed once it reaches
    /// `segment_bytes`, and the batch crossing that size is written whole.
    pub fn segment_capacity(&self) -> u64 {
        self.segment_bytes + self.limits.max_batch_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fsync_policies_parse_and_print() {
        for s in ["never", "batch", "interval:250"] {
            assert_eq!(
                s.parse::<FsyncPolicy>().map(|p| p.to_string()),
                Ok(s.to_string())
            );
        }
        for bad in [
            "",
            "always",
            "interval:",
            "interval:0",
            "interval:x",
            "Batch",
        ] {
            assert!(bad.parse::<FsyncPolicy>().is_err(), "{bad}");
        }
    }
}
