//! The batch layout of `message-batches.md`, written once.
//!
//! Every byte offset of the batch header and the frame header lives here;
//! the rest of the crate reads and writes fields only through these
//! accessors. All integers are little-endian.
//!
//! ```text
//! batch = [batch header: 256 bytes][blob: frame 0][frame 1]...[frame N-1]
//!
//! batch header                                   frame header
//!  0 ..   8  partition_id      u64  (server)      0 ..  8  checksum         u64
//!  8 ..  16  base_offset       u64  (server)      8 .. 24  id               u128
//! 16 ..  24  base_timestamp    u64  (server, µs)  24 .. 28  offset_delta     u32
//! 24 ..  32  origin_timestamp  u64  (producer)   28 .. 32  timestamp_delta  u32
//! 32 ..  40  batch_length      u64               32 .. 36  user_headers_len u32
//! 40 ..  48  batch_checksum    u64               36 .. 40  payload_length   u32
//! 48 ..  52  message_count     u32               40 .. 48  reserved (zero)  u64
//! 52 .. 256  reserved (zero)
//!
//! frame = [frame header: 48][payload][user_headers]
//! frame.checksum = XXH3-64(frame[8..48] ++ payload ++ user_headers)
//! batch_checksum = XXH3-64(header[0..40] ++ header[48..52] ++ checksum of every frame)
//! ```

/// Size of the batch header.
pub const BATCH_HEADER_LEN: usize = 256;
/// Size of a frame header.
pub const FRAME_HEADER_LEN: usize = 48;

/// Byte offsets inside the batch header.
pub mod batch {
    use std::ops::Range;
    /// `partition_id: u64`, server-stamped.
    pub const PARTITION_ID: Range<usize> = 0..8;
    /// `base_offset: u64`, server-stamped.
    pub const BASE_OFFSET: Range<usize> = 8..16;
    /// `base_timestamp: u64` (µs), server-stamped.
    pub const BASE_TIMESTAMP: Range<usize> = 16..24;
    /// `origin_timestamp: u64` (µs), producer-set.
    pub const ORIGIN_TIMESTAMP: Range<usize> = 24..32;
    /// `batch_length: u64`: 256 + blob length.
    pub const BATCH_LENGTH: Range<usize> = 32..40;
    /// `batch_checksum: u64`.
    pub const BATCH_CHECKSUM: Range<usize> = 40..48;
    /// `message_count: u32`.
    pub const MESSAGE_COUNT: Range<usize> = 48..52;
    /// Reserved bytes, zero.
    pub const RESERVED: Range<usize> = 52..256;
}

/// Byte offsets inside a frame header.
pub mod frame {
    use std::ops::Range;
    /// `checksum: u64` over the rest of the frame.
    pub const CHECKSUM: Range<usize> = 0..8;
    /// `id: u128`.
    pub const ID: Range<usize> = 8..24;
    /// `offset_delta: u32`: the frame's index in its batch.
    pub const OFFSET_DELTA: Range<usize> = 24..28;
    /// `timestamp_delta: u32` (µs) against `origin_timestamp`.
    pub const TIMESTAMP_DELTA: Range<usize> = 28..32;
    /// `user_headers_length: u32`.
    pub const USER_HEADERS_LENGTH: Range<usize> = 32..36;
    /// `payload_length: u32`.
    pub const PAYLOAD_LENGTH: Range<usize> = 36..40;
    /// Reserved, zero.
    pub const RESERVED: Range<usize> = 40..48;
    /// The checksummed part of the frame header.
    pub const CHECKSUMMED_FROM: usize = 8;
}

const _: () = assert!(batch::RESERVED.end == BATCH_HEADER_LEN);
const _: () = assert!(batch::MESSAGE_COUNT.end == batch::RESERVED.start);
const _: () = assert!(frame::RESERVED.end == FRAME_HEADER_LEN);
const _: () = assert!(frame::CHECKSUM.end == frame::CHECKSUMMED_FROM);
// The header fields hashed into `batch_checksum` are the 40 bytes before the
// checksum and the 4 bytes of `message_count` after it.
const _: () = assert!(batch::BATCH_CHECKSUM.start == 40 && batch::MESSAGE_COUNT.start == 48);

/// The header fields, in the order `batch_checksum` hashes them.
pub const CHECKSUMMED_HEADER_LEN: usize = 44;

/// Reads a little-endian `u64` at `range` of a buffer known to be long enough.
#[inline(always)]
pub(crate) fn u64_at(bytes: &[u8], at: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(b)
}

/// Reads a little-endian `u32` at `at` of a buffer known to be long enough.
#[inline(always)]
pub(crate) fn u32_at(bytes: &[u8], at: usize) -> u32 {
    let mut b = [0u8; 4];
    b.copy_from_slice(&bytes[at..at + 4]);
    u32::from_le_bytes(b)
}

/// Reads a little-endian `u128` at `at` of a buffer known to be long enough.
#[inline(always)]
pub(crate) fn u128_at(bytes: &[u8], at: usize) -> u128 {
    let mut b = [0u8; 16];
    b.copy_from_slice(&bytes[at..at + 16]);
    u128::from_le_bytes(b)
}

#[inline(always)]
pub(crate) fn put_u64(bytes: &mut [u8], at: usize, v: u64) {
    bytes[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

#[inline(always)]
pub(crate) fn put_u32(bytes: &mut [u8], at: usize, v: u32) {
    bytes[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

#[inline(always)]
pub(crate) fn put_u128(bytes: &mut [u8], at: usize, v: u128) {
    bytes[at..at + 16].copy_from_slice(&v.to_le_bytes());
}

/// The 44 checksummed header bytes of a header (`partition_id` ..
/// `batch_length`, then `message_count`).
#[inline(always)]
pub(crate) fn checksummed_header(header: &[u8]) -> [u8; CHECKSUMMED_HEADER_LEN] {
    let mut out = [0u8; CHECKSUMMED_HEADER_LEN];
    out[..40].copy_from_slice(&header[..batch::BATCH_CHECKSUM.start]);
    out[40..].copy_from_slice(&header[batch::MESSAGE_COUNT]);
    out
}

/// Names of the batch header fields, for error messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeaderField {
    /// `partition_id`
    PartitionId,
    /// `base_offset`
    BaseOffset,
    /// `base_timestamp`
    BaseTimestamp,
    /// `origin_timestamp`
    OriginTimestamp,
    /// `batch_length`
    BatchLength,
    /// `batch_checksum`
    BatchChecksum,
    /// `message_count`
    MessageCount,
    /// the reserved bytes 52..256
    Reserved,
}

impl HeaderField {
    /// The field that holds header byte `at`.
    pub fn at(at: usize) -> HeaderField {
        let fields = [
            (batch::PARTITION_ID, HeaderField::PartitionId),
            (batch::BASE_OFFSET, HeaderField::BaseOffset),
            (batch::BASE_TIMESTAMP, HeaderField::BaseTimestamp),
            (batch::ORIGIN_TIMESTAMP, HeaderField::OriginTimestamp),
            (batch::BATCH_LENGTH, HeaderField::BatchLength),
            (batch::BATCH_CHECKSUM, HeaderField::BatchChecksum),
            (batch::MESSAGE_COUNT, HeaderField::MessageCount),
        ];
        fields
            .into_iter()
            .find(|(range, _)| range.contains(&at))
            .map_or(HeaderField::Reserved, |(_, field)| field)
    }
}

impl std::fmt::Display for HeaderField {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            HeaderField::PartitionId => "partition_id",
            HeaderField::BaseOffset => "base_offset",
            HeaderField::BaseTimestamp => "base_timestamp",
            HeaderField::OriginTimestamp => "origin_timestamp",
            HeaderField::BatchLength => "batch_length",
            HeaderField::BatchChecksum => "batch_checksum",
            HeaderField::MessageCount => "message_count",
            HeaderField::Reserved => "reserved",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each header byte is named by its field, as the table at the top of
    /// this file and `message-batches.md` lay them out.
    #[test]
    fn every_header_byte_is_named_by_its_field() {
        let names: Vec<String> = (0..BATCH_HEADER_LEN)
            .map(|at| HeaderField::at(at).to_string())
            .collect();
        let spans = [
            (0..8, "partition_id"),
            (8..16, "base_offset"),
            (16..24, "base_timestamp"),
            (24..32, "origin_timestamp"),
            (32..40, "batch_length"),
            (40..48, "batch_checksum"),
            (48..52, "message_count"),
            (52..256, "reserved"),
        ];
        for (span, name) in spans {
            for at in span {
                assert_eq!(names[at], name, "header byte {at}");
            }
        }
        assert_eq!(HeaderField::at(10_000), HeaderField::Reserved);
    }
}
