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
