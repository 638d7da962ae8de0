//! Zero-copy typed views over batch bytes.
//!
//! A [`BatchRef`] borrows bytes that passed [`check`](super::check) (the
//! owned twin is [`Batch`](super::Batch)). Nothing is copied out of the bytes
//! until asked for.

use super::layout::{self, batch, frame, BATCH_HEADER_LEN, FRAME_HEADER_LEN};

/// A view over one whole, validated batch.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct BatchRef<'a> {
    bytes: &'a [u8],
}

impl std::fmt::Debug for BatchRef<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BatchRef")
            .field("partition_id", &self.partition_id())
            .field("base_offset", &self.base_offset())
            .field("base_timestamp", &self.base_timestamp())
            .field("batch_length", &self.batch_length())
            .field("message_count", &self.message_count())
            .finish()
    }
}

impl<'a> BatchRef<'a> {
    /// Wraps bytes that [`check`](super::check) accepted.
    pub(crate) fn new_checked(bytes: &'a [u8]) -> BatchRef<'a> {
        debug_assert!(bytes.len() >= BATCH_HEADER_LEN);
        BatchRef { bytes }
    }

    /// The whole batch, header and blob, as stored and served.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// The 256-byte header.
    pub fn header(&self) -> &'a [u8] {
        &self.bytes[..BATCH_HEADER_LEN]
    }

    /// The frames after the header.
    pub fn blob(&self) -> &'a [u8] {
        &self.bytes[BATCH_HEADER_LEN..]
    }

    /// `partition_id` (server-stamped).
    pub fn partition_id(&self) -> u64 {
        layout::u64_at(self.bytes, batch::PARTITION_ID.start)
    }

    /// `base_offset` (server-stamped): the offset of the first message.
    pub fn base_offset(&self) -> u64 {
        layout::u64_at(self.bytes, batch::BASE_OFFSET.start)
    }

    /// `base_timestamp` (server-stamped, µs).
    pub fn base_timestamp(&self) -> u64 {
        layout::u64_at(self.bytes, batch::BASE_TIMESTAMP.start)
    }

    /// `origin_timestamp` (producer, µs): the earliest message timestamp.
    pub fn origin_timestamp(&self) -> u64 {
        layout::u64_at(self.bytes, batch::ORIGIN_TIMESTAMP.start)
    }

    /// `batch_length`: 256 + blob length.
    pub fn batch_length(&self) -> u64 {
        layout::u64_at(self.bytes, batch::BATCH_LENGTH.start)
    }

    /// `batch_checksum`.
    pub fn batch_checksum(&self) -> u64 {
        layout::u64_at(self.bytes, batch::BATCH_CHECKSUM.start)
    }

    /// `message_count`.
    pub fn message_count(&self) -> u32 {
        layout::u32_at(self.bytes, batch::MESSAGE_COUNT.start)
    }

    /// The offset of the last message (`base_offset + message_count - 1`).
    pub fn last_offset(&self) -> u64 {
        self.base_offset()
            .saturating_add(u64::from(self.message_count()).saturating_sub(1))
    }

    /// The offset after the last message.
    pub fn next_offset(&self) -> u64 {
        self.base_offset()
            .saturating_add(u64::from(self.message_count()))
    }

    /// Length in bytes (same as `batch_length`).
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Never true: a batch holds at least its header.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The messages, in order.
    pub fn messages(&self) -> Messages<'a> {
        Messages {
            rest: self.blob(),
            base_offset: self.base_offset(),
            origin_timestamp: self.origin_timestamp(),
            left: self.message_count(),
        }
    }

    /// Each frame's stored checksum, in order.
    pub fn frame_checksums(&self) -> impl Iterator<Item = u64> + 'a {
        self.messages().map(|m| m.checksum())
    }
}

/// Iterator over the messages of a batch.
#[derive(Debug, Clone)]
pub struct Messages<'a> {
    rest: &'a [u8],
    base_offset: u64,
    origin_timestamp: u64,
    left: u32,
}

impl<'a> Iterator for Messages<'a> {
    type Item = Message<'a>;

    fn next(&mut self) -> Option<Message<'a>> {
        if self.left == 0 || self.rest.len() < FRAME_HEADER_LEN {
            return None;
        }
        let payload = layout::u32_at(self.rest, frame::PAYLOAD_LENGTH.start) as usize;
        let headers = layout::u32_at(self.rest, frame::USER_HEADERS_LENGTH.start) as usize;
        let len = FRAME_HEADER_LEN + payload + headers;
        // A validated batch always has the whole frame; stop rather than
        // panic should that ever not hold.
        let frame = self.rest.get(..len)?;
        self.rest = &self.rest[len..];
        self.left -= 1;
        Some(Message {
            frame,
            base_offset: self.base_offset,
            origin_timestamp: self.origin_timestamp,
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(self.left as usize))
    }
}

/// A view over one message frame of a batch.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Message<'a> {
    frame: &'a [u8],
    base_offset: u64,
    origin_timestamp: u64,
}

impl std::fmt::Debug for Message<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Message")
            .field("offset", &self.offset())
            .field("timestamp", &self.timestamp())
            .field("id", &self.id())
            .field("payload_len", &self.payload().len())
            .field("user_headers_len", &self.user_headers().len())
            .finish()
    }
}

impl<'a> Message<'a> {
    /// The frame's stored checksum.
    pub fn checksum(&self) -> u64 {
        layout::u64_at(self.frame, frame::CHECKSUM.start)
    }

    /// The message id.
    pub fn id(&self) -> u128 {
        layout::u128_at(self.frame, frame::ID.start)
    }

    /// `offset_delta`: the index of the frame in its batch.
    pub fn offset_delta(&self) -> u32 {
        layout::u32_at(self.frame, frame::OFFSET_DELTA.start)
    }

    /// Absolute offset: `base_offset + offset_delta`.
    pub fn offset(&self) -> u64 {
        self.base_offset
            .saturating_add(u64::from(self.offset_delta()))
    }

    /// `timestamp_delta` (µs) against the batch `origin_timestamp`.
    pub fn timestamp_delta(&self) -> u32 {
        layout::u32_at(self.frame, frame::TIMESTAMP_DELTA.start)
    }

    /// Producer time (µs): `origin_timestamp + timestamp_delta`.
    pub fn timestamp(&self) -> u64 {
        self.origin_timestamp
            .saturating_add(u64::from(self.timestamp_delta()))
    }

    /// The payload.
    pub fn payload(&self) -> &'a [u8] {
        let len = layout::u32_at(self.frame, frame::PAYLOAD_LENGTH.start) as usize;
        &self.frame[FRAME_HEADER_LEN..FRAME_HEADER_LEN + len]
    }

    /// The user headers block (opaque bytes).
    pub fn user_headers(&self) -> &'a [u8] {
        let len = layout::u32_at(self.frame, frame::PAYLOAD_LENGTH.start) as usize;
        &self.frame[FRAME_HEADER_LEN + len..]
    }

    /// The whole frame: header, payload, user headers.
    pub fn frame_bytes(&self) -> &'a [u8] {
        self.frame
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::BatchRef;
    use crate::format::builder::{BatchBuilder, MessageSpec};

    /// The messages iterator never promises more than the messages left,
    /// and each says what it is.
    #[test]
    fn messages_count_down_and_show_themselves() {
        let mut b = BatchBuilder::new();
        for i in 0..3u8 {
            b.push(MessageSpec {
                id: u128::from(i) + 7,
                timestamp: 100 + u64::from(i),
                payload: &[i; 5],
                user_headers: b"hh",
            });
        }
        let bytes = b.build().unwrap();
        // The builder's output is a valid batch (admission's own tests).
        let view = BatchRef::new_checked(&bytes);
        let mut messages = view.messages();
        assert_eq!(messages.size_hint(), (0, Some(3)));
        let first = messages.next().unwrap();
        assert_eq!(messages.size_hint(), (0, Some(2)));
        assert_eq!(messages.by_ref().count(), 2);
        assert_eq!(messages.size_hint(), (0, Some(0)));
        assert!(messages.next().is_none());
        let shown = format!("{first:?}");
        for part in [
            "offset: 0",
            "timestamp: 100",
            "id: 7",
            "payload_len: 5",
            "user_headers_len: 2",
        ] {
            assert!(shown.contains(part), "{part} in {shown}");
        }
    }
}
