//! Whatever bytes a peer sends or a journal file holds, the decoders
//! answer with a value or an error, never a panic: arbitrary bytes, and
//! valid encodings with bytes flipped, cut or appended.

use super::forward::{self, Answer};
use super::{frame, raft_frame};
use crate::command::Command;
use crate::journal::record;
use bytes::Bytes;
use proptest::prelude::*;
use raft::eraftpb::{Entry, Message, MessageType};

/// A valid raft frame's body: a MsgAppend with two entries, one an
/// append command whose data is not a batch.
fn raft_body() -> Vec<u8> {
    let mut msg = Message::default();
    msg.set_msg_type(MessageType::MsgAppend);
    msg.to = 2;
    msg.from = 1;
    msg.term = 3;
    for i in 0..2u64 {
        let mut e = Entry::default();
        e.index = 10 + i;
        e.term = 3;
        e.context = Bytes::from(
            Command::Append {
                partition: i,
                client: 9,
                request: i,
            }
            .encode(),
        );
        e.data = Bytes::from(vec![i as u8; 300]);
        msg.mut_entries().push(e);
    }
    let enc = raft_frame::encode(1, msg).expect("encode");
    let mut wire = enc.prefix;
    for d in &enc.data {
        wire.extend_from_slice(d);
    }
    wire[9..].to_vec() // the body, after the frame head
}

/// A valid journal record.
fn record_bytes() -> Vec<u8> {
    let mut e = Entry::default();
    e.index = 4;
    e.term = 2;
    e.context = Bytes::from_static(b"\x02context");
    e.data = Bytes::from(vec![5u8; 700]);
    record::encode_parts(&e, 1, record::Kind::Plain)
        .slices()
        .concat()
}

/// Every decoder over `bytes`.
fn decode_all(bytes: &[u8]) {
    let b = Bytes::copy_from_slice(bytes);
    let _ = frame::read(&mut &bytes[..]);
    if let Ok(msg) = raft_frame::decode(&b) {
        let _ = crate::inbox::verified_batches(&msg, &corelog::Limits::default());
    }
    let _ = record::decode(&b);
    let _ = Command::decode(&b);
    let _ = forward::decode_send(&b);
    let (tx, _rx) = futures_channel::oneshot::channel();
    Answer::Send(tx).deliver(bytes);
    let (tx, _rx) = futures_channel::oneshot::channel();
    Answer::Count(tx).deliver(bytes);
}

/// `good` with byte `at` (modulo its length) xored with `x`, cut to `cut`
/// bytes (modulo its length + 1) and followed by `tail`.
fn mutated(good: &[u8], at: usize, x: u8, cut: usize, tail: &[u8]) -> Vec<u8> {
    let mut v = good.to_vec();
    if !v.is_empty() {
        let i = at % v.len();
        v[i] ^= x;
    }
    v.truncate(cut % (good.len() + 1));
    v.extend_from_slice(tail);
    v
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        decode_all(&bytes);
    }

    #[test]
    fn damaged_encodings_never_panic(
        at in any::<usize>(),
        x in any::<u8>(),
        cut in any::<usize>(),
        tail in proptest::collection::vec(any::<u8>(), 0..16),
    ) {
        for good in [raft_body(), record_bytes(), Command::StoreOffset { partition: 1, consumer: 2, offset: 3 }.encode()] {
            decode_all(&mutated(&good, at, x, cut, &tail));
        }
        // A damaged record is refused, or is the record (a flip of 0 or a
        // cut past its end changes nothing).
        let good = record_bytes();
        let bad = mutated(&good, at, x, cut, &[]);
        if let Ok(d) = record::decode(&Bytes::from(bad.clone())) {
            prop_assert_eq!(&bad[..d.len], &good[..]);
        }
    }
}
