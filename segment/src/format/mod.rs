//! The batch format of `message-batches.md`: the layout, written once, and
//! everything that reads or writes it in memory.
//!
//! Nothing here knows about files: the format is bytes in, views or errors
//! out. The files that hold batches are [`crate::log`]'s.
//!
//! ```text
//! layout ◄── checksum ◄── error
//!   ▲           ▲           ▲
//!   view ◄── admission ◄── stamp ◄── batch (owned, admitted)
//!                builder (producer side)
//! ```
//!
//! - [`layout`]: every byte offset of the batch and frame headers.
//! - [`checksum`]: XXH3-64 and the batch checksum's input.
//! - `view`: [`BatchRef`], [`Message`], borrowed and zero-copy.
//! - `admission`: [`check`], untrusted bytes to a [`BatchRef`] or a
//!   [`BatchError`].
//! - `stamp`: the server fields and the new batch checksum.
//! - `batch`: [`Batch`], the owned, admitted batch the log appends.
//! - `builder`: [`BatchBuilder`], producer-side batches.

mod admission;
mod batch;
mod builder;
#[cfg(test)]
mod builder_tests;
pub mod checksum;
mod error;
pub mod layout;
mod stamp;
mod view;

pub use admission::{check, declared_length, Limits};
pub use batch::Batch;
pub use builder::{set_origin_timestamp, BatchBuilder, MessageSpec};
pub use error::{BatchError, BuildError};
pub use stamp::{stamp_in_place, stamped_header, Stamp, StampedHeader};
pub use view::{BatchRef, Message, Messages};
