//! The owned, validated batch: admitted bytes that can cross threads.
//!
//! A [`Batch`] is what the log appends: only [`Batch::admit`] makes one, so
//! an unvalidated batch cannot be appended by mistake.

use super::admission::{check_keeping_sums, Limits};
use super::checksum::SumInput;
use super::error::BatchError;
use super::stamp::{stamp_header, Stamp, StampedHeader};
use super::view::BatchRef;
use bytes::Bytes;

/// An owned, validated batch: the bytes travel, the fields stay in them.
#[derive(Clone)]
pub struct Batch {
    bytes: Bytes,
    /// The batch checksum's input, gathered by admission (see
    /// [`Batch::stamped_header`]).
    sums: SumInput,
}

/// Batches are equal when their bytes are (the gathered checksums follow
/// from them).
impl PartialEq for Batch {
    fn eq(&self, other: &Batch) -> bool {
        self.bytes == other.bytes
    }
}

impl Eq for Batch {}

impl std::fmt::Debug for Batch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.as_ref().fmt(f)
    }
}

impl Batch {
    /// Admits untrusted bytes: checks the whole layout and both checksums
    /// against `limits`, without copying them.
    pub fn admit(bytes: impl Into<Bytes>, limits: &Limits) -> Result<Batch, BatchError> {
        let bytes = bytes.into();
        let sums = check_keeping_sums(&bytes, limits)?;
        Ok(Batch { bytes, sums })
    }

    /// The stamped header of this batch: the same as
    /// [`stamped_header`](super::stamped_header) of its view, but the checksum is computed
    /// from the frame checksums admission gathered (N × 8 contiguous
    /// bytes), not by walking the frames again.
    pub fn stamped_header(&mut self, stamp: Stamp) -> StampedHeader {
        let sums = &mut self.sums;
        stamp_header(&self.bytes, stamp, |checksummed| {
            sums.with_header(checksummed)
        })
    }

    /// A view over the batch.
    pub fn as_ref(&self) -> BatchRef<'_> {
        BatchRef::new_checked(&self.bytes)
    }

    /// The batch bytes.
    pub fn bytes(&self) -> &Bytes {
        &self.bytes
    }

    /// Gives the bytes back.
    pub fn into_bytes(self) -> Bytes {
        self.bytes
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Never true: a batch holds at least its header.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
}
