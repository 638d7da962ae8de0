//! A PollMessages reply laid out for one vectored write, straight from the
//! engine's mapped segments:
//!
//! ```text
//! [reply header 256][partition_id u32][current_offset u64][count u32]
//! then per batch:  [stored batch bytes]                       (whole batch, mapped)
//!              or  [rewritten header 256][included frames]    (partial batch; frames mapped)
//! ```
//!
//! A batch is cut when the poll starts inside it (frames before the start
//! offset are left out) or when `count` ends inside it. Its rewritten
//! header keeps `partition_id`, `base_offset`, `base_timestamp` and
//! `origin_timestamp` (the frames' deltas are relative to them) and has
//! `message_count`, `batch_length` and `batch_checksum` recomputed over the
//! included frames' checksums. Only headers are built in user space; batch
//! bytes go from the page cache to the socket.

use crate::wire::header::{reply_header, RequestHead, HEADER_LEN};
use crate::wire::iovec::{OutOfBounds, Piece, WireVec};
use corelog::{BatchRef, PollReply};
use iggy_binary_protocol::batch::{calculate_batch_checksum, BatchHeader, BATCH_HEADER_SIZE};

/// The 16-byte prefix of a poll reply's body.
const PREFIX_LEN: usize = 16;

/// Which stored bytes a poll sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PollWindow {
    /// Leave out messages below this offset.
    pub start: u64,
    /// Send at most this many messages.
    pub count: u32,
}

/// What went into a poll reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PollSummary {
    /// Messages sent.
    pub messages: u32,
    /// Offset of the last message sent, if any.
    pub last_offset: Option<u64>,
}

/// Lays out the reply to `head` for `reply` cut to `window`; returns the
/// owned write and what it holds. `partition_id` and `current_offset` fill
/// the prefix.
pub fn poll_wire(
    head: &RequestHead,
    reply: PollReply,
    window: PollWindow,
    partition_id: u32,
    current_offset: u64,
) -> Result<(WireVec, PollSummary), OutOfBounds> {
    let mut built = vec![0u8; HEADER_LEN + PREFIX_LEN];
    let mut pieces = vec![Piece::Built(0..HEADER_LEN + PREFIX_LEN)];
    let mut summary = PollSummary {
        messages: 0,
        last_offset: None,
    };
    let chunks: Vec<(usize, usize)> = reply
        .slices()
        .map(|s| (s.as_ptr() as usize, s.len()))
        .collect();
    let mut body_len = PREFIX_LEN;
    for batch in reply.batches() {
        let left = window.count - summary.messages;
        if left == 0 {
            break;
        }
        let Some(cut) = cut_batch(batch, window.start, left) else {
            continue;
        };
        summary.messages += cut.messages;
        summary.last_offset = Some(cut.last_offset);
        if let Some(h) = cut.header {
            let at = built.len();
            built.extend_from_slice(&h);
            pieces.push(Piece::Built(at..at + BATCH_HEADER_SIZE));
            body_len += BATCH_HEADER_SIZE;
        }
        pieces.push(stored_piece(&chunks, cut.bytes));
        body_len += cut.bytes.len();
    }
    built[..HEADER_LEN].copy_from_slice(&reply_header(Some(head), 0, body_len));
    let prefix = &mut built[HEADER_LEN..HEADER_LEN + PREFIX_LEN];
    prefix[..4].copy_from_slice(&partition_id.to_le_bytes());
    prefix[4..12].copy_from_slice(&current_offset.to_le_bytes());
    prefix[12..].copy_from_slice(&summary.messages.to_le_bytes());
    let wire = WireVec::new(built.into_boxed_slice(), reply, pieces)?;
    Ok((wire, summary))
}

/// Names `bytes`, a range of one of the reply's slices, by slice and range.
fn stored_piece(chunks: &[(usize, usize)], bytes: &[u8]) -> Piece {
    let at = bytes.as_ptr() as usize;
    for (i, (start, len)) in chunks.iter().enumerate() {
        if at >= *start && at + bytes.len() <= start + len {
            let off = at - start;
            return Piece::Stored {
                chunk: i,
                range: off..off + bytes.len(),
            };
        }
    }
    // Not inside the reply: WireVec::new refuses it.
    Piece::Stored {
        chunk: usize::MAX,
        range: 0..bytes.len(),
    }
}

/// The part of one batch a poll sends.
struct Cut<'a> {
    messages: u32,
    last_offset: u64,
    /// `None`: the whole batch as stored.
    header: Option<[u8; BATCH_HEADER_SIZE]>,
    /// The stored bytes sent: the whole batch, or the included frames.
    bytes: &'a [u8],
}

/// Cuts `batch` to its messages at or after `start`, at most `left` of
/// them; `None` when none qualifies.
fn cut_batch<'a>(batch: BatchRef<'a>, start: u64, left: u32) -> Option<Cut<'a>> {
    let bytes = batch.as_bytes();
    // Wholly inside the window: sent as stored, its frames not walked (a
    // walk reads every frame header, 1,000 of them in a 1 MB batch of
    // 1 KB messages). Admission made each frame's offset_delta its index,
    // so the batch's offsets are base_offset..base_offset + message_count.
    let count = batch.message_count();
    if count > 0 && batch.base_offset() >= start && count <= left {
        return Some(Cut {
            messages: count,
            last_offset: batch.last_offset(),
            header: None,
            bytes,
        });
    }
    let mut pos = BATCH_HEADER_SIZE;
    let (mut from, mut to) = (None, pos);
    let (mut messages, mut last_offset, mut skipped) = (0u32, 0u64, false);
    for m in batch.messages() {
        let len = m.frame_bytes().len();
        if m.offset() < start {
            skipped = true;
        } else if messages < left {
            from.get_or_insert(pos);
            to = pos + len;
            messages += 1;
            last_offset = m.offset();
        }
        pos += len;
    }
    let from = from?;
    let whole = !skipped && messages == batch.message_count();
    let frames = bytes.get(from..to)?;
    if whole {
        return Some(Cut {
            messages,
            last_offset,
            header: None,
            bytes,
        });
    }
    Some(Cut {
        messages,
        last_offset,
        header: Some(rewritten_header(batch, frames, messages)),
        bytes: frames,
    })
}

/// The header of a cut batch: counts, length and checksum of `frames`.
fn rewritten_header(batch: BatchRef<'_>, frames: &[u8], messages: u32) -> [u8; BATCH_HEADER_SIZE] {
    let mut h = BatchHeader::new(
        batch.partition_id(),
        batch.origin_timestamp(),
        (BATCH_HEADER_SIZE + frames.len()) as u64,
        messages,
    );
    h.base_offset = batch.base_offset();
    h.base_timestamp = batch.base_timestamp();
    h.batch_checksum = calculate_batch_checksum(&h, frames);
    let mut out = [0u8; BATCH_HEADER_SIZE];
    h.encode_into(&mut out);
    out
}
