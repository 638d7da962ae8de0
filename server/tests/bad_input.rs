//! Bytes the SDK would never send: each gets an error status or a closed
//! connection, nothing of a refused batch is stored, and the server goes on
//! serving everyone else.

mod common;

use common::raw::{send_payload, Raw};
use common::{client, named, start, stream_and_topic};
use iggy::prelude::*;
use iggy_binary_protocol::codec::WireEncode;
use iggy_binary_protocol::codes::{GET_STREAMS_CODE, PING_CODE, SEND_MESSAGES_CODE};
use iggy_binary_protocol::requests::streams::GetStreamRequest;
use iggy_binary_protocol::WireIdentifier;
use std::io::Write;

/// A way to damage a request payload.
type Spoil = Box<dyn Fn(&mut Vec<u8>)>;

async fn stored(c: &IggyClient) -> u64 {
    c.get_topic(&named("s"), &named("t"))
        .await
        .expect("get topic")
        .expect("topic")
        .messages_count
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_batches_are_refused_with_their_problem_and_nothing_stored() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start(dir.path());
    let c = client(&server).await;
    stream_and_topic(&c, "s", "t", 1).await;
    let mut raw = Raw::connect(server.local_addr());
    assert_eq!(raw.login("iggy", "iggy"), 0);

    let good = send_payload();
    let batch_at = good.len() - (256 + 2 * 48 + 5 + 6);
    let cases: Vec<(&str, Spoil, u32)> = vec![
        (
            "payload byte flipped",
            Box::new(|p| *p.last_mut().expect("byte") ^= 1),
            4027,
        ),
        (
            "batch checksum flipped",
            Box::new(move |p| p[batch_at + 40] ^= 1),
            4039,
        ),
        (
            "reserved header byte set",
            Box::new(move |p| p[batch_at + 100] = 7),
            4101,
        ),
        (
            "message_count disagrees",
            Box::new(move |p| p[batch_at - 4] = 3),
            4009,
        ),
        (
            "batch truncated",
            Box::new(|p| {
                p.pop();
            }),
            4025,
        ),
    ];
    for (what, spoil, status) in cases {
        let mut payload = good.clone();
        spoil(&mut payload);
        let reply = raw.send(SEND_MESSAGES_CODE, &payload);
        assert_eq!(reply.status, status, "{what}");
        assert!(reply.body.is_empty(), "{what}");
    }
    assert_eq!(stored(&c).await, 0);
    assert_eq!(raw.send(SEND_MESSAGES_CODE, &good).status, 0);
    assert_eq!(stored(&c).await, 2);
    server.shutdown().expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_requests_get_error_statuses() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start(dir.path());
    let mut raw = Raw::connect(server.local_addr());
    // Only ping and login before login.
    assert_eq!(raw.send(PING_CODE, &[]).status, 0);
    assert_eq!(raw.send(GET_STREAMS_CODE, &[]).status, 40);
    assert_eq!(raw.login("iggy", "wrong"), 42);
    assert_eq!(raw.send(GET_STREAMS_CODE, &[]).status, 40);
    assert_eq!(raw.login("iggy", "iggy"), 0);
    assert_eq!(raw.send(GET_STREAMS_CODE, &[]).status, 0);
    // Unknown command, bad identifier, truncated and overlong payloads.
    assert_ne!(raw.send(60_000, b"what").status, 0);
    assert_ne!(raw.send(200, &[1, 2, 0, 0]).status, 0);
    assert_ne!(raw.send(200, &[9, 4, 0, 0, 0, 0]).status, 0);
    let mut get = GetStreamRequest {
        stream_id: WireIdentifier::numeric(0),
    }
    .to_bytes()
    .to_vec();
    assert_ne!(raw.send(200, &get[..3]).status, 0);
    get.push(0);
    assert_ne!(raw.send(200, &get).status, 0);
    // The connection still works after all of that.
    assert_eq!(raw.send(PING_CODE, &[]).status, 0);
    server.shutdown().expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn framing_errors_close_only_that_connection() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start(dir.path());
    let c = client(&server).await;
    for size in [0u32, 255, u32::MAX] {
        let mut raw = Raw::connect(server.local_addr());
        let mut h = raw.header(PING_CODE, 0);
        h[48..52].copy_from_slice(&size.to_le_bytes());
        raw.stream.write_all(&h).expect("write");
        assert!(raw.closed_by_server(), "size {size}");
    }
    c.ping().await.expect("others are served");
    server.shutdown().expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_leaving_mid_request_does_not_disturb_others() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start(dir.path());
    let c = client(&server).await;
    stream_and_topic(&c, "s", "t", 1).await;
    for cut in [10usize, 256, 300] {
        let mut raw = Raw::connect(server.local_addr());
        assert_eq!(raw.login("iggy", "iggy"), 0);
        let payload = send_payload();
        let header = raw.header(SEND_MESSAGES_CODE, payload.len());
        let mut frame = header.to_vec();
        frame.extend_from_slice(&payload);
        raw.stream.write_all(&frame[..cut]).expect("write part");
        drop(raw);
    }
    let mut one = vec![common::message(7, b"still here", None)];
    c.send_messages(
        &named("s"),
        &named("t"),
        &Partitioning::partition_id(0),
        &mut one,
    )
    .await
    .expect("send");
    assert_eq!(stored(&c).await, 1);
    server.shutdown().expect("shutdown");
}
