//! Why a batch is refused.

use super::layout::HeaderField;

/// A batch whose bytes break the layout of `message-batches.md`.
///
/// Positions are byte offsets from the start of the batch; frame indexes
/// count from zero. The storage layer adds the file and file position.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BatchError {
    /// Fewer bytes than one batch header.
    #[error("batch is {len} bytes, shorter than the 256-byte batch header")]
    ShortHeader {
        /// bytes given
        len: usize,
    },
    /// `batch_length` below the header size.
    #[error("batch_length is {declared}, below the 256-byte header size")]
    LengthBelowHeader {
        /// the declared `batch_length`
        declared: u64,
    },
    /// `batch_length` above the configured maximum.
    #[error("batch_length is {declared} bytes, over the {max}-byte batch size limit")]
    TooLarge {
        /// the declared `batch_length`
        declared: u64,
        /// the limit
        max: u64,
    },
    /// `batch_length` disagrees with the bytes given.
    #[error("batch_length says {declared} bytes but {actual} bytes were given")]
    LengthMismatch {
        /// the declared `batch_length`
        declared: u64,
        /// bytes given
        actual: usize,
    },
    /// A reserved header byte is not zero.
    #[error("header byte {at} is {value:#04x}; the reserved bytes 52..256 must be zero")]
    ReservedHeaderByte {
        /// byte offset in the header
        at: usize,
        /// its value
        value: u8,
    },
    /// `message_count` is zero.
    #[error("message_count is 0; a batch holds at least one message")]
    Empty,
    /// `message_count` cannot fit the blob even with empty messages.
    #[error(
        "message_count {count} cannot fit in a blob of {blob_len} bytes (every frame needs 48)"
    )]
    CountTooLarge {
        /// the declared `message_count`
        count: u32,
        /// bytes after the batch header
        blob_len: usize,
    },
    /// A frame header runs past the end of the batch.
    #[error("frame {index} at byte {position}: its 48-byte header runs past the end of the batch ({available} bytes remain)")]
    FrameHeaderTruncated {
        /// frame index
        index: u32,
        /// byte offset of the frame
        position: usize,
        /// bytes left in the batch
        available: usize,
    },
    /// A frame's payload and user headers run past the end of the batch.
    #[error("frame {index} at byte {position}: payload_length {payload_length} + user_headers_length {user_headers_length} run {overrun} bytes past the end of the batch")]
    FrameBodyTruncated {
        /// frame index
        index: u32,
        /// byte offset of the frame
        position: usize,
        /// the frame's `payload_length`
        payload_length: u32,
        /// the frame's `user_headers_length`
        user_headers_length: u32,
        /// bytes missing
        overrun: u64,
    },
    /// A frame's reserved bytes are not zero.
    #[error("frame {index} at byte {position}: reserved is {value:#x}, must be zero")]
    FrameReserved {
        /// frame index
        index: u32,
        /// byte offset of the frame
        position: usize,
        /// the reserved u64
        value: u64,
    },
    /// A frame's `offset_delta` is not its index.
    #[error("frame {index} at byte {position}: offset_delta is {stored}, must equal the frame's index {index}")]
    OffsetDelta {
        /// frame index
        index: u32,
        /// byte offset of the frame
        position: usize,
        /// the stored `offset_delta`
        stored: u32,
    },
    /// A frame's checksum does not match its bytes.
    #[error("frame {index} at byte {position}: checksum is {stored:#018x} but the frame hashes to {computed:#018x}")]
    FrameChecksum {
        /// frame index
        index: u32,
        /// byte offset of the frame
        position: usize,
        /// checksum in the frame
        stored: u64,
        /// checksum of the frame's bytes
        computed: u64,
    },
    /// The blob ends before `message_count` frames.
    #[error("message_count is {declared} but the batch ends after {found} frames")]
    MissingFrames {
        /// the declared `message_count`
        declared: u32,
        /// whole frames present
        found: u32,
    },
    /// Bytes follow the last frame.
    #[error("{extra} bytes follow the last of {count} frames at byte {position}; frames must fill batch_length exactly")]
    TrailingBytes {
        /// `message_count`
        count: u32,
        /// where the extra bytes start
        position: usize,
        /// how many
        extra: usize,
    },
    /// A message's producer time, `origin_timestamp + timestamp_delta`,
    /// does not fit a `u64`.
    #[error("frame {index} at byte {position}: origin_timestamp {origin} + timestamp_delta {delta} overflows a u64")]
    TimestampOverflow {
        /// frame index
        index: u32,
        /// byte offset of the frame
        position: usize,
        /// the batch's `origin_timestamp`
        origin: u64,
        /// the frame's `timestamp_delta`
        delta: u32,
    },
    /// `batch_checksum` does not match the header and frame checksums.
    #[error("batch_checksum is {stored:#018x} but the header and frame checksums hash to {computed:#018x}")]
    BatchChecksum {
        /// checksum in the header
        stored: u64,
        /// computed checksum
        computed: u64,
    },
}

impl BatchError {
    /// The header field at fault, when the error is about one.
    pub fn header_field(&self) -> Option<HeaderField> {
        match self {
            BatchError::LengthBelowHeader { .. }
            | BatchError::TooLarge { .. }
            | BatchError::LengthMismatch { .. } => Some(HeaderField::BatchLength),
            BatchError::ReservedHeaderByte { .. } => Some(HeaderField::Reserved),
            BatchError::Empty
            | BatchError::CountTooLarge { .. }
            | BatchError::MissingFrames { .. }
            | BatchError::TrailingBytes { .. } => Some(HeaderField::MessageCount),
            BatchError::BatchChecksum { .. } => Some(HeaderField::BatchChecksum),
            _ => None,
        }
    }

    /// The frame at fault, when the error is about one.
    pub fn frame_index(&self) -> Option<u32> {
        match *self {
            BatchError::FrameHeaderTruncated { index, .. }
            | BatchError::FrameBodyTruncated { index, .. }
            | BatchError::FrameReserved { index, .. }
            | BatchError::OffsetDelta { index, .. }
            | BatchError::FrameChecksum { index, .. }
            | BatchError::TimestampOverflow { index, .. } => Some(index),
            _ => None,
        }
    }
}

/// Why a producer batch could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// No messages were added.
    #[error("a batch needs at least one message")]
    Empty,
    /// The producer timestamps span more than a `u32` of microseconds.
    #[error("message timestamps span {span_us} µs (from {earliest} to {latest}); one batch can span at most {max} µs", max = u32::MAX)]
    TimestampSpan {
        /// earliest timestamp
        earliest: u64,
        /// latest timestamp
        latest: u64,
        /// `latest - earliest`
        span_us: u64,
    },
    /// A payload or user-headers block is longer than a `u32`.
    #[error("message {index}: {what} is {len} bytes, over the u32 limit")]
    FieldTooLong {
        /// message index
        index: usize,
        /// "payload" or "user headers"
        what: &'static str,
        /// its length
        len: usize,
    },
    /// More messages than a `u32` count.
    #[error("{count} messages do not fit the u32 message_count")]
    TooManyMessages {
        /// messages added
        count: usize,
    },
}
