//! corelog-server's request decoding: whatever bytes arrive, framing and
//! decoding return a request or an error, never panic, and a decoded
//! SEND_MESSAGES names a batch inside its payload.
//!
//! Most inputs are turned into well-framed requests (a valid header for
//! one of the commands the server knows, with the input as payload) so the
//! fuzzer reaches the payload codecs; inputs whose first byte has its top
//! bit set are taken as raw frames, header included.

#![no_main]

use corelog_server::wire::decode_frame;
use corelog_server::wire::request::Request;
use iggy_binary_protocol::codes::{
    CREATE_CONSUMER_GROUP_CODE, CREATE_PARTITIONS_CODE, CREATE_STREAM_CODE, CREATE_TOPIC_CODE,
    DELETE_CONSUMER_GROUP_CODE, DELETE_CONSUMER_OFFSET_CODE, DELETE_PARTITIONS_CODE,
    DELETE_SEGMENTS_CODE, DELETE_STREAM_CODE, DELETE_TOPIC_CODE, GET_CONSUMER_GROUPS_CODE,
    GET_CONSUMER_GROUP_CODE, GET_CONSUMER_OFFSET_CODE, GET_STREAM_CODE, GET_TOPICS_CODE,
    GET_TOPIC_CODE, JOIN_CONSUMER_GROUP_CODE, LEAVE_CONSUMER_GROUP_CODE, LOGIN_REGISTER_CODE,
    PING_CODE, POLL_MESSAGES_CODE, PURGE_STREAM_CODE, PURGE_TOPIC_CODE, SEND_MESSAGES_CODE,
    STORE_CONSUMER_OFFSET_CODE, SYNC_CONSUMER_GROUP_CODE, UPDATE_STREAM_CODE, UPDATE_TOPIC_CODE,
};
use iggy_binary_protocol::consensus::{Command, Operation, RequestHeader};
use libfuzzer_sys::fuzz_target;

const CODES: [u32; 28] = [
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
];

/// Small, so inputs cross it.
const MAX_REQUEST: u64 = 4096;

fuzz_target!(|data: &[u8]| {
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    if first & 0x80 != 0 {
        check(rest);
        return;
    }
    let code = CODES[usize::from(first) % CODES.len()];
    let operation = match code {
        LOGIN_REGISTER_CODE => Operation::Register,
        c => Operation::from_command_code(c).unwrap_or(Operation::NonReplicated),
    };
    let mut reserved = [0u8; 60];
    reserved[..4].copy_from_slice(&code.to_le_bytes());
    let header = RequestHeader {
        command: Command::Request,
        operation,
        size: (256 + rest.len()) as u32,
        client: 1,
        request: 1,
        session: 1,
        reserved,
        ..RequestHeader::default()
    };
    let mut frame = bytemuck::bytes_of(&header).to_vec();
    frame.extend_from_slice(rest);
    check(&frame);
});

fn check(frame: &[u8]) {
    if let Ok((_, Request::SendMessages(send))) = decode_frame(frame, MAX_REQUEST) {
        assert!(256 + send.batch_at <= frame.len());
    }
}
