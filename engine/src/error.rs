//! Errors of the engine API.

use corelog_segment::log::LogError;
use corelog_segment::BatchError;
use std::path::PathBuf;
use std::sync::Arc;

/// What went wrong; each variant is something a caller can match on.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The batch was refused at admission; nothing of it was stored.
    #[error("partition {partition}: batch refused: {error}")]
    Admission {
        /// the target partition
        partition: u64,
        /// what is wrong with the batch
        error: BatchError,
    },
    /// The partition log failed (I/O, corruption, poisoning, a replicated
    /// batch that does not continue the log).
    #[error(transparent)]
    Storage(#[from] LogError),
    /// The partition does not exist (polls and offsets do not create it).
    #[error("partition {partition} does not exist")]
    UnknownPartition {
        /// the partition
        partition: u64,
    },
    /// The engine is shutting down or has shut down.
    #[error("the engine is shutting down")]
    ShuttingDown,
    /// The shard owning the partition stopped without answering.
    #[error("shard {shard} stopped without answering (its queue is closed)")]
    QueueClosed {
        /// the shard
        shard: usize,
    },
    /// Another process holds the data directory.
    #[error("data directory {dir} is locked by another process{holder}", dir = dir.display(), holder = holder.map(|p| format!(" (pid {p})")).unwrap_or_default())]
    LockHeld {
        /// the data directory
        dir: PathBuf,
        /// the holder's pid, as it wrote it in the lock file
        holder: Option<u32>,
    },
    /// The kernel refuses io_uring.
    #[error("io_uring is unavailable: {reason}. corelog needs io_uring (Linux 6.1 or newer): check that `sysctl kernel.io_uring_disabled` is 0 and, in a container, that the seccomp profile allows io_uring_setup, io_uring_enter and io_uring_register (e.g. docker --security-opt seccomp=<profile allowing them>)")]
    IoUringUnavailable {
        /// the error from io_uring_setup
        reason: Arc<std::io::Error>,
    },
    /// The binary was built for CPU features this machine lacks.
    #[error("this build of corelog uses {path} checksum code but the CPU lacks it; rebuild without `-C target-cpu=x86-64-v3` (see .cargo/config.toml)")]
    UnsupportedCpu {
        /// the SIMD path compiled in
        path: &'static str,
    },
    /// An I/O error outside a partition log.
    #[error("{op} {path}: {source}", path = path.display())]
    Io {
        /// what was being done
        op: &'static str,
        /// the path
        path: PathBuf,
        /// the error
        source: Arc<std::io::Error>,
    },
    /// The configuration cannot work.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// `wait()` was called on a shard thread, where blocking would stall
    /// the shard (and could deadlock it).
    #[error("blocking wait called on a shard thread; await the future instead")]
    WouldBlockShard,
}

impl Error {
    /// An [`Error::Io`].
    pub fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Error {
        Error::Io {
            op,
            path: path.into(),
            source: Arc::new(source),
        }
    }
}
