//! What can go wrong with an object store, and with a tier's work on it.

use corelog_segment::log::LogError;
use std::path::PathBuf;

/// An object store's answer to one request, when it is not success.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// No answer: the endpoint is down, refuses the connection, or timed out.
    #[error("{store}: the object store does not answer: {reason}")]
    Unreachable {
        /// The store (`s3://bucket/prefix at endpoint`).
        store: String,
        /// What the client saw.
        reason: String,
    },
    /// The bucket does not exist.
    #[error("{store}: bucket `{bucket}` does not exist")]
    NoBucket {
        /// The store.
        store: String,
        /// The bucket.
        bucket: String,
    },
    /// The store refused the credentials (or their signature).
    #[error(
        "{store}: credentials refused for access key `{access_key}` (HTTP {status}): {message}"
    )]
    Credentials {
        /// The store.
        store: String,
        /// The access key used (never the secret).
        access_key: String,
        /// The HTTP status.
        status: u16,
        /// The store's message.
        message: String,
    },
    /// The object does not exist.
    #[error("{store}: object `{key}` not found")]
    NotFound {
        /// The store.
        store: String,
        /// The object's key.
        key: String,
    },
    /// Any other refusal.
    #[error("{store}: {op} `{key}` failed (HTTP {status}): {message}")]
    Failed {
        /// The store.
        store: String,
        /// The request (`PUT`, `GET`, `DELETE`, `LIST`).
        op: &'static str,
        /// The object's key (or prefix).
        key: String,
        /// The HTTP status.
        status: u16,
        /// The store's message.
        message: String,
    },
    /// A local file could not be read for an upload.
    #[error("{}: {source}", path.display())]
    Local {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

/// A tier's work (an upload, a manifest, a remote read) that failed.
#[derive(Debug, thiserror::Error)]
pub enum TierError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A manifest in the store does not parse or contradicts itself.
    #[error("{key}: damaged manifest: {reason}")]
    Manifest {
        /// The manifest's object key.
        key: String,
        /// What is wrong.
        reason: String,
    },
    /// An object's bytes are damaged: they are never served.
    #[error("{object}: damaged at byte {position}: {reason}")]
    Damaged {
        /// The object (`s3://bucket/key`).
        object: String,
        /// The byte position in the object.
        position: u64,
        /// What is wrong.
        reason: String,
    },
    /// A remote read's batches failed their check (named in the error).
    #[error(transparent)]
    Batch(#[from] LogError),
    /// This node no longer leads the partition's group under the term it
    /// was about to commit a manifest in: nothing was committed.
    #[error(
        "partition {partition}: no longer the leader of term {term}: the manifest is not committed"
    )]
    Deposed {
        /// The partition.
        partition: u64,
        /// The term.
        term: u64,
    },
    /// The store's manifest for the partition was not written from this
    /// partition's log (a data directory started afresh against a prefix
    /// an earlier one filled): nothing is uploaded or removed for it.
    #[error("partition {partition}: the store's manifest does not describe the local log ({reason}); nothing is uploaded or removed for it: point --tier at another prefix, or delete the partition's objects from the store")]
    Foreign {
        /// The partition.
        partition: u64,
        /// What disagrees.
        reason: String,
    },
    /// The tier was stopped (the engine shuts down).
    #[error("the tier is stopped")]
    Stopped,
}
