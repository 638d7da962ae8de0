//! corelog-server's request decoding: whatever bytes arrive, framing and
//! decoding return a request or an error, never panic, a decoded
//! SEND_MESSAGES names a batch inside its payload, and the permission check
//! of a decoded request answers (as a user with no grants, it refuses
//! anything but the self-scoped requests).
//!
//! Three shapes of input, by the first byte:
//! - top bit set: the rest is one raw frame, header included;
//! - next bit set: the rest is a connection's byte stream, built from
//!   segments `[selector][len u8][len bytes]`: a selector below 0xf0 makes
//!   a well-framed request of one of the commands the server knows with
//!   those bytes as payload (so sequences reach the payload codecs), one
//!   of 0xf0 and up splices the bytes in raw (torn or lying headers
//!   mid-stream). The stream is split as the server's read loop splits it
//!   (`wire::decode_stream`): every frame lies inside the stream, in
//!   order, decoded as it would be alone, and each is checked as below;
//! - otherwise: one well-framed request of the command the first byte
//!   picks, with the rest as payload.

#![no_main]

use corelog_server::testing::{NewUser, STATUS_ACTIVE};
use corelog_server::testing::Catalog;
use corelog_server::testing::{authorize, need, Need};
use corelog_server::wire::{decode_frame, decode_stream, StreamEnd};
use corelog_server::wire::request::Request;
use iggy_binary_protocol::codes::{
    CHANGE_PASSWORD_CODE, CREATE_CONSUMER_GROUP_CODE, CREATE_PARTITIONS_CODE,
    CREATE_PERSONAL_ACCESS_TOKEN_CODE, CREATE_STREAM_CODE, CREATE_TOPIC_CODE, CREATE_USER_CODE,
    DELETE_CONSUMER_GROUP_CODE, DELETE_CONSUMER_OFFSET_CODE, DESCRIBE_OPTIONS_CODE, LOGIN_USER_CODE, GET_SNAPSHOT_FILE_CODE, DELETE_PARTITIONS_CODE,
    DELETE_PERSONAL_ACCESS_TOKEN_CODE, DELETE_SEGMENTS_CODE, DELETE_STREAM_CODE, DELETE_TOPIC_CODE,
    DELETE_USER_CODE, GET_CLIENT_CODE, GET_CONSUMER_GROUPS_CODE, GET_CONSUMER_GROUP_CODE,
    GET_CONSUMER_OFFSET_CODE, GET_STREAM_CODE, GET_TOPICS_CODE, GET_TOPIC_CODE, GET_USER_CODE,
    JOIN_CONSUMER_GROUP_CODE, LEAVE_CONSUMER_GROUP_CODE, LOGIN_REGISTER_CODE,
    LOGIN_WITH_PERSONAL_ACCESS_TOKEN_CODE, PING_CODE, POLL_MESSAGES_CODE, PURGE_STREAM_CODE,
    PURGE_TOPIC_CODE, SEND_MESSAGES_CODE, STORE_CONSUMER_OFFSET_CODE, SYNC_CONSUMER_GROUP_CODE,
    UPDATE_PERMISSIONS_CODE, UPDATE_STREAM_CODE, UPDATE_TOPIC_CODE, UPDATE_USER_CODE,
};
use iggy_binary_protocol::consensus::{Command, Operation, RequestHeader};
use libfuzzer_sys::fuzz_target;

const CODES: [u32; 41] = [
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
    DELETE_CONSUMER_OFFSET_CODE,
    UPDATE_STREAM_CODE,
    PURGE_STREAM_CODE,
    UPDATE_TOPIC_CODE,
    PURGE_TOPIC_CODE,
    CREATE_PARTITIONS_CODE,
    DELETE_PARTITIONS_CODE,
    DELETE_SEGMENTS_CODE,
    GET_CONSUMER_GROUP_CODE,
    GET_CONSUMER_GROUPS_CODE,
    CREATE_CONSUMER_GROUP_CODE,
    DELETE_CONSUMER_GROUP_CODE,
    JOIN_CONSUMER_GROUP_CODE,
    LEAVE_CONSUMER_GROUP_CODE,
    SYNC_CONSUMER_GROUP_CODE,
    GET_CLIENT_CODE,
    GET_USER_CODE,
    CREATE_USER_CODE,
    DELETE_USER_CODE,
    UPDATE_USER_CODE,
    UPDATE_PERMISSIONS_CODE,
    CHANGE_PASSWORD_CODE,
    CREATE_PERSONAL_ACCESS_TOKEN_CODE,
    DELETE_PERSONAL_ACCESS_TOKEN_CODE,
    LOGIN_WITH_PERSONAL_ACCESS_TOKEN_CODE,
    LOGIN_USER_CODE,
    DESCRIBE_OPTIONS_CODE,
    GET_SNAPSHOT_FILE_CODE,
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

fn check_stream(bytes: &[u8]) {
    let (frames, end) = decode_stream(bytes, MAX_REQUEST);
    let mut next = 0;
    for f in &frames {
        assert_eq!(f.at, next, "frames follow each other");
        assert!(f.len >= 256 && f.at + f.len <= bytes.len());
        let frame = &bytes[f.at..f.at + f.len];
        let alone = decode_frame(frame, MAX_REQUEST);
        assert_eq!(alone.is_ok(), f.decoded.is_ok(), "a frame decodes as it would alone");
        check(frame);
        next += f.len;
    }
    match end {
        StreamEnd::Clean => assert_eq!(next, bytes.len()),
        StreamEnd::Partial { have } => assert_eq!(next + have, bytes.len()),
        StreamEnd::Framing(_) => assert!(next + 256 <= bytes.len()),
    }
}

fn check(frame: &[u8]) {
    let Ok((_, request)) = decode_frame(frame, MAX_REQUEST) else {
        return;
    };
    if let Request::SendMessages(send) = &request {
        assert!(256 + send.batch_at <= frame.len());
    }
    // User 1 exists with no grants; stream 0 and its topic 0 exist.
    let mut catalog = Catalog::default();
    let _ = catalog.add_user(
        NewUser {
            username: "fuzz".into(),
            password_hash: String::new(),
            status: STATUS_ACTIVE,
            permissions: None,
            options: Vec::new(),
            created_at: 0,
        },
        "iggy",
    );
    let _ = catalog.add_stream("s", Vec::new(), 0);
    let parts = catalog.reserve_partitions(1).unwrap_or_default();
    let _ = catalog.add_topic(
        &iggy_binary_protocol::WireIdentifier::numeric(0),
        "t",
        parts,
        Vec::new(),
        0,
    );
    let need = need(&request);
    let allowed = authorize(&catalog, 1, &need).is_ok();
    if matches!(need, Need::Global(_)) {
        assert!(!allowed, "a user without grants passed {need:?}");
    }
    assert!(
        authorize(&catalog, 0, &need).is_ok(),
        "root refused {need:?}"
    );
}
