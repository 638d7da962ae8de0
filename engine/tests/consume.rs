//! `Handle::consume`: a stream of polls from an exact offset that waits for
//! data. Every message from the offset asked for is given once, in order,
//! while a producer appends on another thread, on tokio and on a plain
//! thread; an error ends the stream once; a small `max_bytes` still moves
//! a batch at a time.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use futures::StreamExt;
use std::time::Duration;

const BATCHES: u64 = 40;

/// The `(seq, index)` of every message of a stream's batches, in order.
fn all_messages() -> Vec<(u64, u64)> {
    (0..BATCHES)
        .flat_map(|seq| (0..messages_in(seq)).map(move |i| (seq, i)))
        .collect()
}

fn producer(engine: corelog::Handle, p: u64) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        for seq in 0..BATCHES {
            engine.append(p, batch(p, seq)).wait().unwrap();
            if seq % 8 == 0 {
                // Let the consumer catch up and wait.
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    })
}

fn ids(reply: &corelog::PollReply) -> Vec<(u64, u64)> {
    reply
        .messages()
        .map(|m| {
            let (_, seq, i) = decode_id(m.id());
            assert_eq!(m.offset(), base_offset_of(seq) + i, "offset of {seq}.{i}");
            (seq, i)
        })
        .collect()
}

#[test]
fn a_consumer_on_tokio_gets_every_message_from_inside_a_batch_once_as_they_land() {
    let _dog = Watchdog::arm("consume on tokio", Duration::from_secs(60));
    let dir = tempfile::tempdir().unwrap();
    let engine = open(dir.path(), 2, small_segments());
    let p = 5;
    engine.handle().create_partition(p).wait().unwrap();
    // Batch 3 holds 4 messages from offset base_offset_of(3); start at its
    // third message.
    let from = base_offset_of(3) + 2;
    let expected: Vec<_> = all_messages()
        .into_iter()
        .filter(|&(seq, i)| base_offset_of(seq) + i >= from)
        .collect();
    let writer = producer(engine.handle(), p);
    let consumer = engine
        .handle()
        .consume(p, from, 2_000)
        .max_wait(Duration::from_millis(200));
    let rt = tokio::runtime::Runtime::new().unwrap();
    let want = expected.len();
    let got = rt.block_on(async move {
        let mut consumer = consumer;
        let mut got = Vec::new();
        while got.len() < want {
            let reply = consumer.next().await.unwrap().unwrap();
            assert_eq!(reply.start_offset(), from + got.len() as u64);
            got.extend(ids(&reply));
            assert_eq!(consumer.next_offset(), from + got.len() as u64);
        }
        got
    });
    writer.join().unwrap();
    assert_eq!(got, expected);
    engine.shutdown().unwrap();
}

#[test]
fn a_consumer_on_a_thread_blocks_for_data_and_ends_once_on_shutdown() {
    let _dog = Watchdog::arm("consume blocking", Duration::from_secs(60));
    let dir = tempfile::tempdir().unwrap();
    let engine = open(dir.path(), 1, small_segments());
    let p = 2;
    engine.handle().create_partition(p).wait().unwrap();
    let writer = producer(engine.handle(), p);
    let mut consumer = engine.handle().consume(p, 0, 1 << 20);
    assert_eq!(consumer.partition(), p);
    let mut got = Vec::new();
    while got.len() < all_messages().len() {
        got.extend(ids(&consumer.next_blocking().unwrap().unwrap()));
    }
    writer.join().unwrap();
    assert_eq!(got, all_messages());
    // What a log line of it says: where it is.
    let shown = format!("{consumer:?}");
    let next = format!("next_offset: {}", consumer.next_offset());
    assert!(
        shown.contains("partition: 2") && shown.contains(&next),
        "{shown}"
    );
    // Caught up: the next reply waits; shutdown ends it with one error.
    let handle = engine.handle();
    let waiter = std::thread::spawn(move || {
        let first = consumer.next_blocking();
        (first, consumer.next_blocking())
    });
    std::thread::sleep(Duration::from_millis(50));
    engine.shutdown().unwrap();
    let (first, then) = waiter.join().unwrap();
    assert!(
        matches!(first, Some(Err(corelog::RequestError::ShuttingDown))),
        "{first:?}"
    );
    assert!(then.is_none(), "the stream ended: {then:?}");
    drop(handle);
}

#[test]
fn a_consumer_that_asks_for_empty_replies_gets_one_per_max_wait() {
    let _dog = Watchdog::arm("consume yield_empty", Duration::from_secs(60));
    let dir = tempfile::tempdir().unwrap();
    let engine = open(dir.path(), 1, small_segments());
    engine.handle().append(1, batch(1, 0)).wait().unwrap();
    let mut consumer = engine
        .handle()
        .consume(1, 0, 1 << 20)
        .max_wait(Duration::from_millis(20))
        .yield_empty();
    let first = consumer.next_blocking().unwrap().unwrap();
    assert_eq!(ids(&first).len() as u64, messages_in(0));
    // Caught up: an empty reply at each max_wait, the position kept.
    for _ in 0..3 {
        let started = std::time::Instant::now();
        let r = consumer.next_blocking().unwrap().unwrap();
        assert!(r.is_empty() && r.messages().next().is_none());
        assert!(
            started.elapsed() >= Duration::from_millis(15),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(consumer.next_offset(), messages_in(0));
    }
    engine.handle().append(1, batch(1, 1)).wait().unwrap();
    let r = consumer.next_blocking().unwrap().unwrap();
    assert_eq!(
        ids(&r),
        (0..messages_in(1)).map(|i| (1, i)).collect::<Vec<_>>()
    );
    engine.shutdown().unwrap();
}

/// Without `yield_empty` the stream yields only replies with messages: a
/// caught-up consumer's polls that time out (here every 10 ms, 30 times
/// over before the next append) are asked again, never handed out.
#[test]
fn a_consumer_that_does_not_ask_for_empty_replies_gets_none() {
    let _dog = Watchdog::arm("consume without yield_empty", Duration::from_secs(60));
    let dir = tempfile::tempdir().unwrap();
    let engine = open(dir.path(), 1, small_segments());
    engine.handle().create_partition(1).wait().unwrap();
    let mut consumer = engine
        .handle()
        .consume(1, 0, 1 << 20)
        .max_wait(Duration::from_millis(10));
    let handle = engine.handle();
    let writer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        handle.append(1, batch(1, 0)).wait().unwrap();
    });
    let first = consumer.next_blocking().unwrap().unwrap();
    assert_eq!(ids(&first).len() as u64, messages_in(0), "the first reply");
    writer.join().unwrap();
    engine.shutdown().unwrap();
}
