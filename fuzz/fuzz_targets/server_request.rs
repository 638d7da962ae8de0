//! corelog-server's request decoding: whatever bytes arrive, framing and
//! decoding return a request or an error, never panic, and a decoded
//! SEND_MESSAGES names a batch inside its payload.
//!
//! Three shapes of input, by the first byte:
//! - top bit set: the rest is one raw frame, header included;
//! - next bit set: the rest is a connection's byte stream, built from
//!   segments `[selector][len u8][len bytes]`: a selector below 0xf0 makes
//!   a well-framed request of one of the commands the server knows with
//!   those bytes as payload (so sequences reach the payload codecs), one
//!   of 0xf0 and up splices the bytes in raw (torn or lying headers
//!   mid-stream). The stream is split as the server's read loop splits it,
//!   and every frame must lie inside the stream, in order, each decoded as
//!   it would be alone;
//! - otherwise: one well-framed request of the command the first byte
//!   picks, with the rest as payload.

#![no_main]

use corelog_server::wire::request::Request;
use corelog_server::wire::{decode_frame, decode_stream, StreamEnd};
use iggy_binary_protocol::codes::{
    CREATE_STREAM_CODE, CREATE_TOPIC_CODE, DELETE_STREAM_CODE, DELETE_TOPIC_CODE,
    GET_CONSUMER_OFFSET_CODE, GET_STREAM_CODE, GET_TOPICS_CODE, GET_TOPIC_CODE,
    LOGIN_REGISTER_CODE, PING_CODE, POLL_MESSAGES_CODE, SEND_MESSAGES_CODE,
    STORE_CONSUMER_OFFSET_CODE,
};
use iggy_binary_protocol::consensus::{Command, Operation, RequestHeader};
use libfuzzer_sys::fuzz_target;

const CODES: [u32; 13] = [
    PING_CODE,
    LOGIN_REGISTER_CODE,
    GET_STREAM_CODE,
    CREATE_STREAM_CODE,
    DELETE_STREAM_CODE,
    GET_TOPIC_CODE,
    GET_TOPICS_CODE,
    CREATE_TOPIC_CODE,
    DELETE_TOPIC_CODE,
    SEND_MESSAGES_CODE,
    POLL_MESSAGES_CODE,
    STORE_CONSUMER_OFFSET_CODE,
    GET_CONSUMER_OFFSET_CODE,
];

/// Small, so inputs cross it.
const MAX_REQUEST: u64 = 4096;

fuzz_target!(|data: &[u8]| {
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    if first & 0x80 != 0 {
        check(rest);
    } else if first & 0x40 != 0 {
        check_stream(&stream(rest));
    } else {
        check(&framed(first, rest));
    }
});

/// A well-framed request of the command `selector` picks.
fn framed(selector: u8, payload: &[u8]) -> Vec<u8> {
    let code = CODES[usize::from(selector) % CODES.len()];
    let operation = match code {
        LOGIN_REGISTER_CODE => Operation::Register,
        c => Operation::from_command_code(c).unwrap_or(Operation::NonReplicated),
    };
    let mut reserved = [0u8; 60];
    reserved[..4].copy_from_slice(&code.to_le_bytes());
    let header = RequestHeader {
        command: Command::Request,
        operation,
        size: (256 + payload.len()) as u32,
        client: 1,
        request: 1,
        session: 1,
        reserved,
        ..RequestHeader::default()
    };
    let mut frame = bytemuck::bytes_of(&header).to_vec();
    frame.extend_from_slice(payload);
    frame
}

/// A connection's byte stream from `[selector][len][bytes]` segments.
fn stream(mut data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let [selector, len, rest @ ..] = data {
        let n = usize::from(*len).min(rest.len());
        let (bytes, tail) = rest.split_at(n);
        if *selector >= 0xf0 {
            out.extend_from_slice(bytes);
        } else {
            out.extend_from_slice(&framed(*selector, bytes));
        }
        data = tail;
    }
    out
}

fn check(frame: &[u8]) {
    if let Ok((_, Request::SendMessages(send))) = decode_frame(frame, MAX_REQUEST) {
        assert!(256 + send.batch_at <= frame.len());
    }
}

fn check_stream(bytes: &[u8]) {
    let (frames, end) = decode_stream(bytes, MAX_REQUEST);
    let mut next = 0;
    for f in &frames {
        assert_eq!(f.at, next, "frames follow each other");
        assert!(f.len >= 256 && f.at + f.len <= bytes.len());
        let alone = decode_frame(&bytes[f.at..f.at + f.len], MAX_REQUEST);
        assert_eq!(alone.is_ok(), f.decoded.is_ok(), "a frame decodes as it would alone");
        if let Ok((_, Request::SendMessages(send))) = &f.decoded {
            assert!(256 + send.batch_at <= f.len);
        }
        next += f.len;
    }
    match end {
        StreamEnd::Clean => assert_eq!(next, bytes.len()),
        StreamEnd::Partial { have } => assert_eq!(next + have, bytes.len()),
        StreamEnd::Framing(_) => assert!(next + 256 <= bytes.len()),
    }
}
