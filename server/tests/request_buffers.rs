//! Request buffers reused across sends (`request_buffers.rs`): producers on
//! several connections send large batches at once, each batch's payload
//! unlike any other's; every message polled back must be the one sent. A
//! buffer handed to a new request while an append still held it would
//! store the new request's bytes (or a mix) under the old batch.

mod common;

use common::{client, message, named, start, stream_and_topic};
use iggy::prelude::*;

const PRODUCERS: u32 = 4;
const BATCHES: u32 = 12;
const PER_BATCH: u32 = 100;
const SIZE: usize = 1000;

/// The payload of message `i` of batch `b` from producer `p`.
fn payload(p: u32, b: u32, i: u32) -> Vec<u8> {
    let seed = (p * 1_000_000 + b * 1000 + i).to_le_bytes();
    (0..SIZE).map(|k| seed[k % 4] ^ (k as u8)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_large_sends_store_every_batch_as_sent_with_buffers_reused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start(dir.path());
    let admin = client(&server).await;
    stream_and_topic(&admin, "s", "t", PRODUCERS).await;
    let mut tasks = Vec::new();
    for p in 0..PRODUCERS {
        let c = client(&server).await;
        tasks.push(tokio::spawn(async move {
            for b in 0..BATCHES {
                let mut batch: Vec<IggyMessage> = (0..PER_BATCH)
                    .map(|i| message(u128::from(b * PER_BATCH + i + 1), &payload(p, b, i), None))
                    .collect();
                c.send_messages(
                    &named("s"),
                    &named("t"),
                    &Partitioning::partition_id(p),
                    &mut batch,
                )
                .await
                .expect("send");
            }
        }));
    }
    for t in tasks {
        tokio::time::timeout(std::time::Duration::from_secs(60), t)
            .await
            .expect("sends finish in time")
            .expect("producer");
    }
    let (reused, fresh) = server.request_buffers();
    assert_eq!(
        reused + fresh,
        u64::from(PRODUCERS * BATCHES),
        "every send of about {} KB is a pooled request",
        PER_BATCH as usize * SIZE / 1000
    );
    assert!(
        reused >= u64::from(PRODUCERS * (BATCHES - 2)),
        "most sends reuse a buffer: {reused} reused, {fresh} fresh"
    );
    for p in 0..PRODUCERS {
        let mut next = 0u64;
        let total = u64::from(BATCHES * PER_BATCH);
        while next < total {
            let polled = admin
                .poll_messages(
                    &named("s"),
                    &named("t"),
                    Some(p),
                    &Consumer::new(named("reader")),
                    &PollingStrategy::offset(next),
                    PER_BATCH * 3,
                    false,
                )
                .await
                .expect("poll");
            assert!(!polled.messages.is_empty(), "partition {p} ends at {next}");
            for m in &polled.messages {
                let n = m.header.offset as u32;
                let (b, i) = (n / PER_BATCH, n % PER_BATCH);
                assert_eq!(m.header.offset, next, "partition {p}: offsets in order");
                assert_eq!(
                    m.header.id,
                    u128::from(n + 1),
                    "partition {p} offset {n}: id"
                );
                assert!(
                    m.payload[..] == payload(p, b, i)[..],
                    "partition {p} offset {n}: payload differs from what was sent"
                );
                next += 1;
            }
        }
    }
    server.shutdown().expect("shutdown");
}
