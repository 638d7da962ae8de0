//! What a `corelog` command can fail with: the engine's errors, and the
//! command's own (writing its output, finding the partitions it names).

use corelog::{LogError, OpenError, RequestError};
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub(crate) enum CliError {
    /// Opening the engine or a request to it failed.
    #[error(transparent)]
    Engine(#[from] corelog::Error),
    /// Writing the output or listing the data directory failed.
    #[error("{op} {path}: {source}", path = path.display())]
    Io {
        op: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    /// The command names a partition the directory does not hold.
    #[error("partition {partition} does not exist")]
    UnknownPartition { partition: u64 },
    /// The same, naming the data directory.
    #[error("partition {partition} does not exist in {dir}", dir = dir.display())]
    NoPartition { partition: u64, dir: PathBuf },
    /// Reading the files directly failed.
    #[error(transparent)]
    Read(corelog_segment::log::read_only::ReadError),
    /// The tier's store could not be named or read.
    #[error("tier: {0}")]
    Tier(String),
}

/// How `corelog` exits (see `EXIT_CODES` in main.rs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Exit {
    /// 0: done.
    Success,
    /// 1: I/O, the engine, a lock held by another process.
    Failure,
    /// 3: an input batch was refused; nothing of it was stored.
    Refused,
    /// 4: damaged bytes were found (verify, poll, repair).
    Damage,
}

impl From<Exit> for std::process::ExitCode {
    fn from(e: Exit) -> Self {
        std::process::ExitCode::from(match e {
            Exit::Success => 0,
            Exit::Failure => 1,
            Exit::Refused => 3,
            Exit::Damage => 4,
        })
    }
}

impl CliError {
    /// The exit code of a command that failed with this error.
    pub(crate) fn exit(&self) -> Exit {
        Exit::Failure
    }

    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        CliError::Io {
            op,
            path: path.into(),
            source,
        }
    }
}

impl From<OpenError> for CliError {
    fn from(e: OpenError) -> Self {
        CliError::Engine(e.into())
    }
}

impl From<RequestError> for CliError {
    fn from(e: RequestError) -> Self {
        CliError::Engine(e.into())
    }
}

impl From<LogError> for CliError {
    fn from(e: LogError) -> Self {
        CliError::Engine(e.into())
    }
}
