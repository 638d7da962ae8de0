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
}

impl CliError {
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
