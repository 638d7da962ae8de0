//! # corelog-segment
//!
//! The storage of corelog, in three layers, each knowing only those below:
//!
//! - [`format`](mod@format): Iggy message batches (see `message-batches.md`) as
//!   zero-copy views; their admission, stamping and verification. The
//!   layout is written once, in [`layout`]. Knows nothing of files.
//! - [`io`]: the storage seam: a shard's io_uring [`io::Ring`], real files
//!   and their mappings, and (feature `testing`) the fault-injecting
//!   `io::SimStorage`. The only place with `unsafe`.
//! - [`log`]: the partition log: segment files, the sparse index, append
//!   and group commit, polls from the mappings, recovery, retention.
//!
//! For tests (feature `testing`), `watchdog` turns a hang into a failure.
//!
//! The crate root re-exports the format's types, which every layer above
//! speaks.

pub mod format;
pub mod io;
pub mod log;
#[cfg(feature = "testing")]
pub mod watchdog;

pub use format::{
    check, checksum, declared_length, layout, set_origin_timestamp, stamp_in_place, stamped_header,
    Batch, BatchBuilder, BatchError, BatchRef, BuildError, Limits, Message, MessageSpec, Messages,
    Stamp, StampedHeader,
};
