//! # corelog-segment
//!
//! The storage format of corelog: Iggy message batches (see
//! `message-batches.md`) as zero-copy views, their admission, stamping and
//! verification; and (in [`log`]) the partition log that stores them in
//! segment files on io_uring.
//!
//! The batch layout is written once, in [`layout`]; everything else reads
//! it through [`BatchRef`] and [`Message`].

mod admission;
mod builder;
pub mod checksum;
mod error;
pub mod layout;
mod stamp;
mod view;

pub use admission::{check, declared_length, Limits};
pub use builder::{set_origin_timestamp, BatchBuilder, MessageSpec};
pub use error::{BatchError, BuildError};
pub use stamp::{stamp_in_place, stamped_header, Stamp, StampedHeader};
pub use view::{Batch, BatchRef, Message, Messages};
pub mod io;
pub mod log;
