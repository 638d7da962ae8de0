//! What [`Engine::open`](crate::Engine::open) can fail with.

use std::path::PathBuf;
use std::sync::Arc;

/// Why the engine could not be opened; nothing is left running.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// The binary was built for CPU features this machine lacks.
    #[error("this build of corelog uses {path} checksum code but the CPU lacks it; rebuild without `-C target-cpu=x86-64-v3` (see .cargo/config.toml)")]
    UnsupportedCpu {
        /// the SIMD path compiled in
        path: &'static str,
    },
    /// The configuration cannot work.
    #[error("invalid configuration: {reason}")]
    InvalidConfig {
        /// which setting is wrong and what it must be
        reason: &'static str,
    },
    /// `Config::cpus` names a CPU this process may not run on (its
    /// affinity mask, a cgroup's cpuset).
    #[error(
        "Config::cpus names CPU {cpu}, which this process may not run on (allowed: {allowed:?})"
    )]
    CpuNotAllowed {
        /// the CPU named
        cpu: usize,
        /// the CPUs this process may run on
        allowed: Vec<usize>,
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
    /// A shard thread ended before it reported that its partitions were
    /// open (it panicked: the panic message is on standard error).
    #[error("a shard thread stopped while opening its partitions (see its panic message above)")]
    ShardStopped,
    /// The tier's object store cannot be used: it does not answer, the
    /// bucket is missing, or it refuses the credentials (named).
    #[error("tiered storage: {error}")]
    Tier {
        /// what the store answered
        error: Arc<corelog_tier::TierError>,
    },
    /// An I/O error on the data directory outside a partition log.
    #[error("{op} {path}: {source}", path = path.display())]
    Io {
        /// what was being done
        op: &'static str,
        /// the path
        path: PathBuf,
        /// the error
        source: Arc<std::io::Error>,
    },
}

impl OpenError {
    /// An [`OpenError::Io`].
    pub fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> OpenError {
        OpenError::Io {
            op,
            path: path.into(),
            source: Arc::new(source),
        }
    }
}
