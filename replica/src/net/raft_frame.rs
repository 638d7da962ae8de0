//! A Raft message on the wire without copying its entries' data: raft-rs's
//! protobuf encoding of the message with every entry's `data` taken out,
//! then the data, verbatim, each a view of the frame on the receiving side.
//!
//! ```text
//! body = proto_len u32, proto (the message, entries' data emptied),
//!        count u32, count × data_len u32, the data back to back
//! ```

use bytes::Bytes;
use protobuf::Message as _;
use raft::eraftpb::Message;

/// A message ready to write: a small owned prefix, then the entries' data.
#[derive(Debug)]
pub struct Encoded {
    /// Frame head, proto, and the data lengths.
    pub prefix: Vec<u8>,
    /// The entries' data, in order.
    pub data: Vec<Bytes>,
    /// Where each entry's data lies in a segment file, by the same index,
    /// when the sender may send it from there (`by_reference.rs`); empty
    /// or `None`: from memory.
    pub files: Vec<Option<corelog::WrittenBatch>>,
}

impl Encoded {
    /// Bytes on the wire.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.prefix.len() + self.data.iter().map(Bytes::len).sum::<usize>()
    }
}

/// Encodes `msg` for group `group` (its entries' data are moved out).
pub fn encode(group: u32, mut msg: Message) -> Result<Encoded, protobuf::ProtobufError> {
    let data: Vec<Bytes> = msg
        .mut_entries()
        .iter_mut()
        .map(|e| std::mem::take(&mut e.data))
        .collect();
    let proto = msg.write_to_bytes()?;
    let body_len =
        4 + proto.len() + 4 + 4 * data.len() + data.iter().map(Bytes::len).sum::<usize>();
    let mut prefix = Vec::with_capacity(9 + 8 + proto.len() + 4 * data.len());
    prefix.extend_from_slice(&super::frame::head(
        super::frame::Kind::Raft,
        group,
        body_len,
    ));
    prefix.extend_from_slice(&(proto.len() as u32).to_le_bytes());
    prefix.extend_from_slice(&proto);
    prefix.extend_from_slice(&(data.len() as u32).to_le_bytes());
    for d in &data {
        prefix.extend_from_slice(&(d.len() as u32).to_le_bytes());
    }
    Ok(Encoded {
        prefix,
        data,
        files: Vec::new(),
    })
}

/// Why a Raft frame's body is not a message.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// Lengths that do not fit the body.
    #[error("raft frame: {0}")]
    Layout(&'static str),
    /// The protobuf part.
    #[error("raft frame: {0}")]
    Proto(#[from] protobuf::ProtobufError),
}

/// Decodes a Raft frame's body; entries' data are views of `body`.
pub fn decode(body: &Bytes) -> Result<Message, DecodeError> {
    let u32_at = |at: usize| -> Result<usize, DecodeError> {
        body.get(at..at + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
            .ok_or(DecodeError::Layout("cut short"))
    };
    let proto_len = u32_at(0)?;
    let proto_end = 4usize
        .checked_add(proto_len)
        .filter(|e| *e <= body.len())
        .ok_or(DecodeError::Layout("protobuf length past the end"))?;
    let mut msg = Message::parse_from_carllerche_bytes(&body.slice(4..proto_end))?;
    // The protobuf's byte fields are views of `body` too: an entry's
    // `context` (tens of bytes) would keep the whole frame, its batches
    // included, alive for as long as the journal holds the entry, long
    // after the entry's data became a view of its segment
    // (`Journal::hold_view`). Copied out, the frame goes once its data does.
    msg.context = Bytes::copy_from_slice(&msg.context);
    for e in msg.mut_entries() {
        e.context = Bytes::copy_from_slice(&e.context);
    }
    let count = u32_at(proto_end)?;
    if count != msg.entries.len() {
        return Err(DecodeError::Layout("data count is not the entry count"));
    }
    let mut at = proto_end + 4 + 4 * count;
    if at > body.len() {
        return Err(DecodeError::Layout("data lengths past the end"));
    }
    for i in 0..count {
        let len = u32_at(proto_end + 4 + 4 * i)?;
        let end = at
            .checked_add(len)
            .filter(|e| *e <= body.len())
            .ok_or(DecodeError::Layout("data past the end"))?;
        msg.mut_entries()[i].data = body.slice(at..end);
        at = end;
    }
    if at != body.len() {
        return Err(DecodeError::Layout("bytes after the data"));
    }
    Ok(msg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use raft::eraftpb::{Entry, MessageType};

    #[test]
    fn round_trips_without_copying_data_and_refuses_bad_lengths() {
        let mut msg = Message::default();
        msg.set_msg_type(MessageType::MsgAppend);
        msg.to = 2;
        msg.from = 1;
        msg.term = 7;
        msg.commit = 4;
        for i in 0..3u8 {
            let mut e = Entry::default();
            e.index = 5 + u64::from(i);
            e.term = 7;
            e.context = Bytes::from(vec![1, i]);
            e.data = Bytes::from(vec![i; 1000 * usize::from(i)]);
            msg.mut_entries().push(e);
        }
        let enc = encode(3, msg.clone()).expect("encode");
        let mut wire = enc.prefix.clone();
        for d in &enc.data {
            wire.extend_from_slice(d);
        }
        assert_eq!(wire.len(), enc.len());
        let frame = super::super::frame::read(&mut &wire[..]).expect("frame");
        assert_eq!(frame.group, 3);
        let back = decode(&frame.body).expect("decode");
        assert_eq!(back, msg);
        // Only the entries' data are views of the frame: an entry's
        // context, kept by the journal after its data became a view of its
        // segment, must not hold the frame (and its batches) alive.
        let frame_bytes = frame.body.as_ptr_range();
        for e in back.get_entries() {
            assert!(
                !frame_bytes.contains(&e.context.as_ptr()),
                "a context is a copy"
            );
            assert!(
                e.data.is_empty() || frame_bytes.contains(&e.data.as_ptr()),
                "data is a view"
            );
        }
        // A data length one byte too long, or a missing byte, is refused.
        let body = frame.body.to_vec();
        assert!(decode(&Bytes::from(body[..body.len() - 1].to_vec())).is_err());
        let mut longer = body.clone();
        longer.push(0);
        assert!(decode(&Bytes::from(longer)).is_err());
        assert!(decode(&Bytes::from_static(&[9, 0, 0, 0])).is_err());
    }
}
