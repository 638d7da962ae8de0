//! Helpers of corelog's own programs (the `corelog` binary and the bench):
//! the directory lock their read-only commands hold, and byte sizes as
//! people write them. Not part of the embedding API, so hidden from its
//! docs; here rather than behind the `testing` feature because a binary
//! cannot turn on a feature of its own package's library.

pub use crate::lock::DirLock;
pub use crate::size::parse_size;
