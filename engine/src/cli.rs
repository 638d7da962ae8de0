//! Helpers of corelog's own programs (the `corelog` binary and the bench):
//! the directory lock their commands hold, byte sizes as people write them,
//! and their log output. Not part of the embedding API, so hidden from its
//! docs; here rather than behind the `testing` feature because a binary
//! cannot turn on a feature of its own package's library.

pub use crate::lock::DirLock;
pub use crate::size::parse_size;

/// Sends log lines (recovery's reports among them) to standard error:
/// `info` and above unless `RUST_LOG` says otherwise. Every corelog program
/// calls it first, so a recovery that cuts or sets aside bytes is never
/// silent.
pub fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}
