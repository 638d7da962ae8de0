//! What a poll puts on the wire: whole batches byte for byte as stored, and
//! cut batches whose rewritten header verifies.

mod common;

use common::raw::Raw;
use common::{client, message, named, start, stream_and_topic};
use iggy::prelude::*;
use iggy_binary_protocol::batch::decode_batch_slice;
use iggy_binary_protocol::codec::WireEncode;
use iggy_binary_protocol::codes::POLL_MESSAGES_CODE;
use iggy_binary_protocol::requests::messages::PollMessagesRequest;
use iggy_binary_protocol::{WireConsumer, WireIdentifier, WirePollingStrategy};

fn poll_request(strategy: WirePollingStrategy, count: u32) -> Vec<u8> {
    PollMessagesRequest {
        consumer: WireConsumer::consumer(WireIdentifier::numeric(1)),
        stream_id: WireIdentifier::named("s").expect("id"),
        topic_id: WireIdentifier::named("t").expect("id"),
        partition_id: Some(0),
        strategy,
        count,
        auto_commit: false,
    }
    .to_bytes()
    .to_vec()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn whole_batches_are_the_stored_bytes_and_cut_batches_verify() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start(dir.path());
    let c = client(&server).await;
    stream_and_topic(&c, "s", "t", 1).await;
    let mut batch: Vec<IggyMessage> = (0..5u128)
        .map(|i| message(i + 1, format!("m{i}").as_bytes(), Some(("h", "v"))))
        .collect();
    c.send_messages(
        &named("s"),
        &named("t"),
        &Partitioning::partition_id(0),
        &mut batch,
    )
    .await
    .expect("send");

    let mut raw = Raw::connect(server.local_addr());
    assert_eq!(raw.login("iggy", "iggy"), 0);
    let whole = raw.send(
        POLL_MESSAGES_CODE,
        &poll_request(WirePollingStrategy::first(), 10),
    );
    assert_eq!(whole.status, 0);
    assert_eq!(&whole.body[12..16], &5u32.to_le_bytes());
    let segment = std::fs::read_dir(dir.path().join("partitions/0"))
        .expect("partition dir")
        .filter_map(Result::ok)
        .find(|e| e.path().extension().is_some_and(|x| x == "log"))
        .expect("segment");
    let sent = &whole.body[16..];
    let mut stored = vec![0u8; sent.len()];
    std::io::Read::read_exact(
        &mut std::fs::File::open(segment.path()).expect("open segment"),
        &mut stored,
    )
    .expect("read segment");
    assert_eq!(sent, &stored[..], "poll bytes are the stored bytes");

    // Offsets 1..=2 of the 5-message batch: cut at both ends.
    let cut = raw.send(
        POLL_MESSAGES_CODE,
        &poll_request(WirePollingStrategy::offset(1), 2),
    );
    assert_eq!(cut.status, 0);
    assert_eq!(&cut.body[12..16], &2u32.to_le_bytes());
    let b = decode_batch_slice(&cut.body[16..]).expect("rewritten header verifies");
    assert_eq!(b.header.message_count, 2);
    assert_eq!(b.header.batch_length as usize, cut.body.len() - 16);
    let offsets: Vec<u64> = b
        .iter()
        .map(|m| b.header.base_offset + u64::from(m.header.offset_delta))
        .collect();
    assert_eq!(offsets, vec![1, 2]);

    // The first 3 of the batch: cut at the end only.
    let head = raw.send(
        POLL_MESSAGES_CODE,
        &poll_request(WirePollingStrategy::first(), 3),
    );
    assert_eq!(&head.body[12..16], &3u32.to_le_bytes());
    let b = decode_batch_slice(&head.body[16..]).expect("rewritten header verifies");
    assert_eq!(b.header.message_count, 3);
    assert_eq!(b.header.batch_length as usize, head.body.len() - 16);
    assert_eq!(b.iter().count(), 3);

    // From offset 2 on: cut at the start only.
    let tail = raw.send(
        POLL_MESSAGES_CODE,
        &poll_request(WirePollingStrategy::offset(2), 10),
    );
    assert_eq!(&tail.body[12..16], &3u32.to_le_bytes());
    let b = decode_batch_slice(&tail.body[16..]).expect("rewritten header verifies");
    let offsets: Vec<u64> = b
        .iter()
        .map(|m| b.header.base_offset + u64::from(m.header.offset_delta))
        .collect();
    assert_eq!(offsets, vec![2, 3, 4]);

    // Past the end: the prefix alone, with count 0.
    let empty = raw.send(
        POLL_MESSAGES_CODE,
        &poll_request(WirePollingStrategy::offset(5), 2),
    );
    assert_eq!(empty.body.len(), 16);
    assert_eq!(&empty.body[4..12], &4u64.to_le_bytes());
    assert_eq!(&empty.body[12..16], &0u32.to_le_bytes());
    server.shutdown().expect("shutdown");
}

/// Poll replies sent by reference (runs of stored bytes from the segment
/// files, `sendfile`) are byte for byte the replies sent from the mappings
/// (`writev`): one data directory served first with every stored run by
/// reference, then with none, over polls that start inside batches, end
/// inside them, and cross segments. (A run sent from a wrong offset, or a
/// byte lost at a run's edge, makes them differ.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn polls_sent_by_reference_are_byte_identical_to_polls_from_the_mappings() {
    let dir = tempfile::tempdir().expect("tempdir");
    let serve = |by_reference| {
        corelog_server::Server::start(corelog_server::ServerConfig {
            shards: Some(2),
            pin_threads: false,
            segment_bytes: 64 << 10,
            send_by_reference: by_reference,
            ..corelog_server::ServerConfig::new(dir.path(), "127.0.0.1:0".parse().expect("addr"))
        })
        .expect("server starts")
    };
    let server = serve(Some(0));
    let c = client(&server).await;
    stream_and_topic(&c, "s", "t", 1).await;
    let mut id = 0u128;
    for b in 0..40usize {
        let mut batch: Vec<IggyMessage> = (0..1 + b % 7)
            .map(|i| {
                id += 1;
                let payload = vec![(b * 7 + i) as u8; 1 + (b * 997 + i * 131) % 3000];
                message(id, &payload, (i % 2 == 0).then_some(("h", "v")))
            })
            .collect();
        c.send_messages(
            &named("s"),
            &named("t"),
            &Partitioning::partition_id(0),
            &mut batch,
        )
        .await
        .expect("send");
    }
    let total = id as u64;
    let polls: Vec<(u64, u32)> = vec![
        (0, 1_000),
        (0, 1),
        (3, 7),
        (17, 100),
        (55, 1),
        (total / 2, 1_000),
        (total - 1, 5),
        (1, (total - 2) as u32),
    ];
    let replies = |server: &corelog_server::Server| {
        let mut raw = Raw::connect(server.local_addr());
        assert_eq!(raw.login("iggy", "iggy"), 0);
        polls
            .iter()
            .map(|&(offset, count)| {
                let r = raw.send(
                    POLL_MESSAGES_CODE,
                    &poll_request(WirePollingStrategy::offset(offset), count),
                );
                assert_eq!(r.status, 0, "poll at {offset}");
                r.body
            })
            .collect::<Vec<_>>()
    };
    let by_reference = replies(&server);
    drop(c);
    server.shutdown().expect("shutdown");
    let server = serve(None);
    let from_mappings = replies(&server);
    server.shutdown().expect("shutdown");
    let segments = std::fs::read_dir(dir.path().join("partitions/0"))
        .expect("partition dir")
        .filter_map(Result::ok)
        .filter(|e| e.path().extension().is_some_and(|x| x == "log"))
        .count();
    assert!(segments > 2, "the polls cross segments ({segments})");
    assert!(by_reference[0].len() > 64 << 10, "a whole-log poll");
    for (i, (a, b)) in by_reference.iter().zip(&from_mappings).enumerate() {
        assert!(
            a == b,
            "poll {:?}: {} bytes by reference, {} from the mappings",
            polls[i],
            a.len(),
            b.len()
        );
    }
}

/// A client that asks for large polls and reads none of the replies: the
/// replies sent by reference fill its socket, the send waits for room on
/// the connection's runtime, and the connection is closed after the stall
/// timeout (counted as stalled), while another client on the same (only)
/// shard is answered meanwhile. (A send that blocked its thread on the
/// full socket would hold the other client's answers back, and never
/// time out.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_reads_no_reply_sent_by_reference_stalls_alone() {
    use std::io::Write;
    use std::time::{Duration, Instant};
    let dir = tempfile::tempdir().expect("tempdir");
    let server = corelog_server::Server::start(corelog_server::ServerConfig {
        shards: Some(1),
        pin_threads: false,
        send_by_reference: Some(0),
        limits: corelog_server::Limits {
            stall_timeout: Duration::from_millis(1_500),
            ..corelog_server::Limits::default()
        },
        ..corelog_server::ServerConfig::new(dir.path(), "127.0.0.1:0".parse().expect("addr"))
    })
    .expect("server starts");
    let c = client(&server).await;
    stream_and_topic(&c, "s", "t", 1).await;
    for b in 0..40u128 {
        let mut batch: Vec<IggyMessage> = (0..10u128)
            .map(|i| message(b * 10 + i + 1, &[b as u8; 5_000], None))
            .collect();
        c.send_messages(
            &named("s"),
            &named("t"),
            &Partitioning::partition_id(0),
            &mut batch,
        )
        .await
        .expect("send");
    }
    let mut hog = Raw::connect(server.local_addr());
    assert_eq!(hog.login("iggy", "iggy"), 0);
    let body = poll_request(WirePollingStrategy::first(), 1_000);
    for _ in 0..60 {
        let header = hog.header(POLL_MESSAGES_CODE, body.len());
        hog.stream.write_all(&header).expect("write");
        hog.stream.write_all(&body).expect("write");
    }
    // The hog's socket fills (60 replies of 2 MB); meanwhile another
    // client is answered at once, again and again.
    let mut other = Raw::connect(server.local_addr());
    assert_eq!(other.login("iggy", "iggy"), 0);
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_millis(1_000) {
        let asked = Instant::now();
        let r = other.send(
            POLL_MESSAGES_CODE,
            &poll_request(WirePollingStrategy::offset(7), 3),
        );
        assert_eq!(r.status, 0);
        assert!(
            asked.elapsed() < Duration::from_millis(500),
            "answered after {:?}",
            asked.elapsed()
        );
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while server
        .counters()
        .closed_for(corelog_server::CloseReason::Stalled)
        == 0
    {
        assert!(
            Instant::now() < deadline,
            "the hog was never closed for stalling"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    server.shutdown().expect("shutdown");
}
