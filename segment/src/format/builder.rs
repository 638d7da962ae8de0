//! Building producer batches (for producers, the bench, tests, embedders).

use super::checksum::{xxh3, BatchChecksum};
use super::error::BuildError;
use super::layout::{self, batch, frame, BATCH_HEADER_LEN, FRAME_HEADER_LEN};

/// One message to put in a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MessageSpec<'a> {
    /// Message id (for example a UUID).
    pub id: u128,
    /// Producer time, µs.
    pub timestamp: u64,
    /// Payload bytes.
    pub payload: &'a [u8],
    /// User headers block (opaque bytes).
    pub user_headers: &'a [u8],
}

/// Writes a producer batch: frame checksums, `offset_delta` = index,
/// `origin_timestamp` = earliest timestamp with deltas against it,
/// `batch_length`, `message_count`, server fields zero and the
/// `batch_checksum` of the header as sent.
///
/// ```
/// use corelog_segment::{BatchBuilder, Batch, Limits, MessageSpec};
/// let mut b = BatchBuilder::new();
/// b.push(MessageSpec { id: 1, timestamp: 1_000, payload: b"hello", user_headers: b"" });
/// b.push(MessageSpec { id: 2, timestamp: 1_007, payload: b"world", user_headers: b"k=v" });
/// let bytes = b.build().unwrap();
/// let batch = Batch::admit(bytes, &Limits::default()).unwrap();
/// assert_eq!(batch.as_ref().message_count(), 2);
/// assert_eq!(batch.as_ref().origin_timestamp(), 1_000);
/// ```
#[derive(Debug, Clone)]
pub struct BatchBuilder {
    buf: Vec<u8>,
    count: usize,
    earliest: u64,
    latest: u64,
    error: Option<BuildError>,
}

/// The same as [`BatchBuilder::new`]: an empty builder with its header.
impl Default for BatchBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl BatchBuilder {
    /// An empty builder.
    pub fn new() -> Self {
        Self::with_capacity(0)
    }

    /// An empty builder with room for `bytes` of frames.
    pub fn with_capacity(bytes: usize) -> Self {
        let mut buf = Vec::with_capacity(BATCH_HEADER_LEN + bytes);
        buf.resize(BATCH_HEADER_LEN, 0);
        BatchBuilder {
            buf,
            count: 0,
            earliest: u64::MAX,
            latest: 0,
            error: None,
        }
    }

    /// Messages added so far.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether no message was added.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Bytes the batch will have.
    pub fn batch_len(&self) -> usize {
        self.buf.len()
    }

    /// Adds a message. Errors surface from [`BatchBuilder::build`].
    pub fn push(&mut self, m: MessageSpec<'_>) -> &mut Self {
        let index = self.count;
        let (Ok(payload_len), Ok(headers_len)) = (
            u32::try_from(m.payload.len()),
            u32::try_from(m.user_headers.len()),
        ) else {
            let (what, len) = if u32::try_from(m.payload.len()).is_err() {
                ("payload", m.payload.len())
            } else {
                ("user headers", m.user_headers.len())
            };
            self.error
                .get_or_insert(BuildError::FieldTooLong { index, what, len });
            return self;
        };
        let Ok(delta_index) = u32::try_from(index) else {
            self.error
                .get_or_insert(BuildError::TooManyMessages { count: index + 1 });
            return self;
        };
        let start = self.buf.len();
        self.buf.resize(start + FRAME_HEADER_LEN, 0);
        let h = &mut self.buf[start..];
        layout::put_u128(h, frame::ID.start, m.id);
        layout::put_u32(h, frame::OFFSET_DELTA.start, delta_index);
        // timestamp_delta is written by build(), once the earliest is known;
        // keep the absolute time in the checksum slot until then.
        layout::put_u64(h, frame::CHECKSUM.start, m.timestamp);
        layout::put_u32(h, frame::USER_HEADERS_LENGTH.start, headers_len);
        layout::put_u32(h, frame::PAYLOAD_LENGTH.start, payload_len);
        self.buf.extend_from_slice(m.payload);
        self.buf.extend_from_slice(m.user_headers);
        self.count += 1;
        self.earliest = self.earliest.min(m.timestamp);
        self.latest = self.latest.max(m.timestamp);
        self
    }

    /// Finishes the batch. Refuses an empty batch and timestamps spanning
    /// more than `u32::MAX` µs.
    pub fn build(self) -> Result<Vec<u8>, BuildError> {
        if let Some(e) = self.error {
            return Err(e);
        }
        if self.count == 0 {
            return Err(BuildError::Empty);
        }
        let span_us = self.latest - self.earliest;
        if span_us > u64::from(u32::MAX) {
            return Err(BuildError::TimestampSpan {
                earliest: self.earliest,
                latest: self.latest,
                span_us,
            });
        }
        let count = u32::try_from(self.count)
            .map_err(|_| BuildError::TooManyMessages { count: self.count })?;
        let mut buf = self.buf;
        let total = buf.len() as u64;
        {
            let h = &mut buf[..BATCH_HEADER_LEN];
            layout::put_u64(h, batch::ORIGIN_TIMESTAMP.start, self.earliest);
            layout::put_u64(h, batch::BATCH_LENGTH.start, total);
            layout::put_u32(h, batch::MESSAGE_COUNT.start, count);
        }
        let mut sum = BatchChecksum::new(&layout::checksummed_header(&buf));
        let mut pos = BATCH_HEADER_LEN;
        for _ in 0..count {
            let f = &mut buf[pos..];
            let timestamp = layout::u64_at(f, frame::CHECKSUM.start);
            // span_us fits u32, so every delta does.
            let delta = (timestamp - self.earliest) as u32;
            layout::put_u32(f, frame::TIMESTAMP_DELTA.start, delta);
            let len = FRAME_HEADER_LEN
                + layout::u32_at(f, frame::PAYLOAD_LENGTH.start) as usize
                + layout::u32_at(f, frame::USER_HEADERS_LENGTH.start) as usize;
            let checksum = xxh3(&f[frame::CHECKSUMMED_FROM..len]);
            layout::put_u64(f, frame::CHECKSUM.start, checksum);
            sum.push(checksum);
            pos += len;
        }
        layout::put_u64(&mut buf, batch::BATCH_CHECKSUM.start, sum.finish());
        Ok(buf)
    }
}

/// Sets the `origin_timestamp` of a producer batch built by
/// [`BatchBuilder`] and recomputes its `batch_checksum` (the frames keep
/// their deltas and checksums; only N × 8 checksum bytes are hashed). Lets a
/// load generator reuse pre-built batches while stamping each with its send
/// time. Returns `None`, changing nothing, when the bytes are not laid out
/// as a batch.
pub fn set_origin_timestamp(bytes: &mut [u8], origin_timestamp: u64) -> Option<()> {
    let count = layout::u32_at(bytes.get(..BATCH_HEADER_LEN)?, batch::MESSAGE_COUNT.start);
    let mut header = [0u8; BATCH_HEADER_LEN];
    header.copy_from_slice(&bytes[..BATCH_HEADER_LEN]);
    layout::put_u64(&mut header, batch::ORIGIN_TIMESTAMP.start, origin_timestamp);
    let mut sum = BatchChecksum::new(&layout::checksummed_header(&header));
    let mut pos = BATCH_HEADER_LEN;
    for _ in 0..count {
        let f = bytes.get(pos..pos + FRAME_HEADER_LEN)?;
        sum.push(layout::u64_at(f, frame::CHECKSUM.start));
        let len = FRAME_HEADER_LEN
            + layout::u32_at(f, frame::PAYLOAD_LENGTH.start) as usize
            + layout::u32_at(f, frame::USER_HEADERS_LENGTH.start) as usize;
        pos = pos.checked_add(len)?;
    }
    if pos != bytes.len() {
        return None;
    }
    layout::put_u64(&mut header, batch::BATCH_CHECKSUM.start, sum.finish());
    bytes[..BATCH_HEADER_LEN].copy_from_slice(&header);
    Some(())
}
