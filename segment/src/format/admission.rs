//! Admission: untrusted bytes in, a validated view or a precise error out.
//!
//! The same check serves producer batches (at admission) and stored
//! batches (recovery, verified polls): a stamped batch is a valid batch
//! whose `batch_checksum` covers the stamped header.

use super::checksum::{xxh3, BatchChecksum, Gather, SumInput};
use super::error::BatchError;
use super::layout::{self, batch, frame, BATCH_HEADER_LEN, FRAME_HEADER_LEN};
use super::view::BatchRef;

/// What a batch may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest accepted `batch_length`.
    pub max_batch_bytes: u64,
}

impl Limits {
    /// 64 MiB: well above Iggy's default producer batches, small enough
    /// that one batch cannot monopolise a shard.
    pub const DEFAULT_MAX_BATCH_BYTES: u64 = 64 << 20;
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_batch_bytes: Self::DEFAULT_MAX_BATCH_BYTES,
        }
    }
}

/// Reads `batch_length` from the first bytes of a batch, refusing values
/// that can never be valid. Stream readers use it to know how much to read.
pub fn declared_length(header: &[u8], limits: &Limits) -> Result<u64, BatchError> {
    if header.len() < BATCH_HEADER_LEN {
        return Err(BatchError::ShortHeader { len: header.len() });
    }
    let declared = layout::u64_at(header, batch::BATCH_LENGTH.start);
    if declared < BATCH_HEADER_LEN as u64 {
        return Err(BatchError::LengthBelowHeader { declared });
    }
    if declared > limits.max_batch_bytes {
        return Err(BatchError::TooLarge {
            declared,
            max: limits.max_batch_bytes,
        });
    }
    Ok(declared)
}

/// Checks that `bytes` is exactly one whole batch: lengths, reserved bytes,
/// frame tiling, `offset_delta`s, every frame checksum and the batch
/// checksum. Never panics, whatever the bytes.
pub fn check<'a>(bytes: &'a [u8], limits: &Limits) -> Result<BatchRef<'a>, BatchError> {
    let header = checked_header(bytes, limits)?;
    check_frames(bytes, BatchChecksum::new(&header))
}

impl<'a> BatchRef<'a> {
    /// Validates `bytes` as one whole batch (layout and both checksums).
    pub fn new(bytes: &'a [u8], limits: &Limits) -> Result<BatchRef<'a>, BatchError> {
        check(bytes, limits)
    }
}

/// [`check`], keeping the batch checksum's input for a later stamp.
pub(crate) fn check_keeping_sums(bytes: &[u8], limits: &Limits) -> Result<SumInput, BatchError> {
    let header = checked_header(bytes, limits)?;
    // checked_header bounded the count by the blob's length.
    let count = layout::u32_at(bytes, batch::MESSAGE_COUNT.start) as usize;
    let mut sums = SumInput::new(&header, count);
    check_frames(bytes, &mut sums)?;
    Ok(sums)
}

/// The checks of the header alone; returns its checksummed bytes.
fn checked_header(
    bytes: &[u8],
    limits: &Limits,
) -> Result<[u8; layout::CHECKSUMMED_HEADER_LEN], BatchError> {
    let declared = declared_length(bytes, limits)?;
    if declared != bytes.len() as u64 {
        return Err(BatchError::LengthMismatch {
            declared,
            actual: bytes.len(),
        });
    }
    check_reserved(&bytes[..BATCH_HEADER_LEN])?;
    let count = layout::u32_at(bytes, batch::MESSAGE_COUNT.start);
    if count == 0 {
        return Err(BatchError::Empty);
    }
    let blob_len = bytes.len() - BATCH_HEADER_LEN;
    if u64::from(count) * FRAME_HEADER_LEN as u64 > blob_len as u64 {
        return Err(BatchError::CountTooLarge { count, blob_len });
    }
    Ok(layout::checksummed_header(bytes))
}

/// The frames and the batch checksum, after [`checked_header`].
#[inline(always)]
fn check_frames<G: Gather>(bytes: &[u8], mut sum: G) -> Result<BatchRef<'_>, BatchError> {
    let count = layout::u32_at(bytes, batch::MESSAGE_COUNT.start);
    let mut position = BATCH_HEADER_LEN;
    // Every message's time (origin + delta) must fit a u64; only batches
    // whose origin is within u32::MAX of the top can fail. Reported after
    // the checksums, so damaged bytes are called damaged.
    let origin = layout::u64_at(bytes, batch::ORIGIN_TIMESTAMP.start);
    let near_top = origin > u64::MAX - u64::from(u32::MAX);
    let mut overflow = None;
    for index in 0..count {
        let frame_checksum = check_frame(bytes, index, position)?;
        if near_top && overflow.is_none() {
            let delta = layout::u32_at(bytes, position + frame::TIMESTAMP_DELTA.start);
            if origin.checked_add(u64::from(delta)).is_none() {
                overflow = Some(BatchError::TimestampOverflow {
                    index,
                    position,
                    origin,
                    delta,
                });
            }
        }
        sum.push(frame_checksum.0);
        position = frame_checksum.1;
    }
    if position != bytes.len() {
        return Err(BatchError::TrailingBytes {
            count,
            position,
            extra: bytes.len() - position,
        });
    }
    let stored = layout::u64_at(bytes, batch::BATCH_CHECKSUM.start);
    let computed = sum.finish();
    if stored != computed {
        return Err(BatchError::BatchChecksum { stored, computed });
    }
    if let Some(e) = overflow {
        return Err(e);
    }
    Ok(BatchRef::new_checked(bytes))
}

/// Checks frame `index` at `position`; returns its checksum and the
/// position after it.
#[inline(always)]
fn check_frame(bytes: &[u8], index: u32, position: usize) -> Result<(u64, usize), BatchError> {
    let available = bytes.len() - position;
    if available < FRAME_HEADER_LEN {
        return Err(if available == 0 {
            BatchError::MissingFrames {
                declared: layout::u32_at(bytes, batch::MESSAGE_COUNT.start),
                found: index,
            }
        } else {
            BatchError::FrameHeaderTruncated {
                index,
                position,
                available,
            }
        });
    }
    let header = &bytes[position..position + FRAME_HEADER_LEN];
    let reserved = layout::u64_at(header, frame::RESERVED.start);
    if reserved != 0 {
        return Err(BatchError::FrameReserved {
            index,
            position,
            value: reserved,
        });
    }
    let stored_delta = layout::u32_at(header, frame::OFFSET_DELTA.start);
    if stored_delta != index {
        return Err(BatchError::OffsetDelta {
            index,
            position,
            stored: stored_delta,
        });
    }
    let payload_length = layout::u32_at(header, frame::PAYLOAD_LENGTH.start);
    let user_headers_length = layout::u32_at(header, frame::USER_HEADERS_LENGTH.start);
    let body = u64::from(payload_length) + u64::from(user_headers_length);
    let room = (available - FRAME_HEADER_LEN) as u64;
    if body > room {
        return Err(BatchError::FrameBodyTruncated {
            index,
            position,
            payload_length,
            user_headers_length,
            overrun: body - room,
        });
    }
    // body <= room < usize::MAX, so the cast is exact.
    let end = position + FRAME_HEADER_LEN + body as usize;
    let stored = layout::u64_at(header, frame::CHECKSUM.start);
    let computed = xxh3(&bytes[position + frame::CHECKSUMMED_FROM..end]);
    if stored != computed {
        return Err(BatchError::FrameChecksum {
            index,
            position,
            stored,
            computed,
        });
    }
    Ok((stored, end))
}

fn check_reserved(header: &[u8]) -> Result<(), BatchError> {
    let reserved = &header[batch::RESERVED];
    // Fast path: eight bytes at a time; find the exact byte only on failure.
    if reserved
        .chunks(8)
        .all(|c| c.iter().fold(0u8, |a, b| a | b) == 0)
    {
        return Ok(());
    }
    match reserved.iter().position(|&b| b != 0) {
        Some(i) => Err(BatchError::ReservedHeaderByte {
            at: batch::RESERVED.start + i,
            value: reserved[i],
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{BatchBuilder, MessageSpec};

    /// A batch of one-byte messages with these timestamps.
    fn with_times(times: &[u64]) -> Vec<u8> {
        let mut b = BatchBuilder::new();
        for &t in times {
            b.push(MessageSpec {
                id: 1,
                timestamp: t,
                payload: b"x",
                user_headers: b"",
            });
        }
        b.build().expect("valid")
    }

    #[test]
    fn a_message_time_past_u64_is_refused() {
        // Origin 6 below the top: message 1 (delta 10) would be 2^64 + 4,
        // and so would message 2 (delta 20): the first is named.
        for times in [&[0u64, 10][..], &[0, 10, 20]] {
            let mut bytes = with_times(times);
            assert!(crate::format::set_origin_timestamp(&mut bytes, u64::MAX - 5).is_some());
            assert_eq!(
                check(&bytes, &Limits::default()).err(),
                Some(BatchError::TimestampOverflow {
                    index: 1,
                    position: BATCH_HEADER_LEN + FRAME_HEADER_LEN + 1,
                    origin: u64::MAX - 5,
                    delta: 10,
                }),
                "messages at {times:?}"
            );
        }
        // At the very top with delta 0 and the largest fitting delta: fine.
        let mut bytes = with_times(&[0, 10]);
        assert!(crate::format::set_origin_timestamp(&mut bytes, u64::MAX - 10).is_some());
        assert!(check(&bytes, &Limits::default()).is_ok());
    }

    /// A header whose reserved bytes are all non-zero (every eight-byte
    /// word of them) is refused at the first, as one with a single one is.
    #[test]
    fn reserved_bytes_all_non_zero_are_refused() {
        let good = with_times(&[0]);
        for fill in [0x01u8, 0x80, 0xff] {
            let mut bytes = good.clone();
            bytes[batch::RESERVED].fill(fill);
            assert_eq!(
                check(&bytes, &Limits::default()).err(),
                Some(BatchError::ReservedHeaderByte {
                    at: batch::RESERVED.start,
                    value: fill,
                }),
                "reserved bytes all {fill:#x}"
            );
        }
    }
}
