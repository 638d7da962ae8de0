//! Stamping: the server fields of an admitted batch and its new checksum.
//!
//! Only `partition_id`, `base_offset`, `base_timestamp` and
//! `batch_checksum` change. Frame bytes are never touched and never hashed
//! again: the new `batch_checksum` hashes the stamped header fields and the
//! N frame checksums (N × 8 bytes).

use super::admission::{check, Limits};
use super::checksum::BatchChecksum;
use super::error::BatchError;
use super::layout::{self, batch, BATCH_HEADER_LEN, CHECKSUMMED_HEADER_LEN};
use super::view::BatchRef;

/// The server-stamped fields of a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    /// The partition that stores the batch.
    pub partition_id: u64,
    /// The offset of its first message.
    pub base_offset: u64,
    /// Server time at append, µs.
    pub base_timestamp: u64,
}

/// The header of a stamped batch: the original header with the stamp and
/// the recomputed `batch_checksum`. Written in front of the untouched blob.
#[derive(Clone, PartialEq, Eq)]
pub struct StampedHeader(pub [u8; BATCH_HEADER_LEN]);

impl std::fmt::Debug for StampedHeader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StampedHeader")
            .field(
                "base_offset",
                &layout::u64_at(&self.0, batch::BASE_OFFSET.start),
            )
            .finish()
    }
}

/// Builds the stamped header of `batch`.
pub fn stamped_header(batch: BatchRef<'_>, stamp: Stamp) -> StampedHeader {
    stamp_header(batch.header(), stamp, |checksummed| {
        let mut sum = BatchChecksum::new(checksummed);
        for c in batch.frame_checksums() {
            sum.push(c);
        }
        sum.finish()
    })
}

/// Checks `bytes` as a batch, then stamps it in place.
pub fn stamp_in_place(bytes: &mut [u8], stamp: Stamp, limits: &Limits) -> Result<(), BatchError> {
    let header = stamped_header(check(bytes, limits)?, stamp);
    bytes[..BATCH_HEADER_LEN].copy_from_slice(&header.0);
    Ok(())
}

/// `header` with `stamp` written and the `batch_checksum` that
/// `checksum` computes from the stamped header's checksummed bytes.
pub(crate) fn stamp_header(
    header: &[u8],
    stamp: Stamp,
    checksum: impl FnOnce(&[u8; CHECKSUMMED_HEADER_LEN]) -> u64,
) -> StampedHeader {
    let mut h = [0u8; BATCH_HEADER_LEN];
    h.copy_from_slice(&header[..BATCH_HEADER_LEN]);
    write_stamp(&mut h, stamp, 0);
    let sum = checksum(&layout::checksummed_header(&h));
    write_stamp(&mut h, stamp, sum);
    StampedHeader(h)
}

fn write_stamp(header: &mut [u8], stamp: Stamp, checksum: u64) {
    layout::put_u64(header, batch::PARTITION_ID.start, stamp.partition_id);
    layout::put_u64(header, batch::BASE_OFFSET.start, stamp.base_offset);
    layout::put_u64(header, batch::BASE_TIMESTAMP.start, stamp.base_timestamp);
    layout::put_u64(header, batch::BATCH_CHECKSUM.start, checksum);
}
