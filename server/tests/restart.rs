//! Everything a client stored is there again after the server restarts on
//! the same directory: the catalog, the messages, the consumer offsets.

mod common;

use common::{client, message, named, start, stream_and_topic};
use iggy::prelude::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_topics_messages_and_offsets_survive_a_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start(dir.path());
    let c = client(&server).await;
    stream_and_topic(&c, "keep", "t", 2).await;
    stream_and_topic(&c, "drop", "t", 1).await;
    c.delete_stream(&named("drop")).await.expect("delete");
    for p in 0..2u32 {
        let mut batch: Vec<IggyMessage> = (0..50u128)
            .map(|i| message(i + 1, format!("p{p}-{i}").as_bytes(), Some(("k", "v"))))
            .collect();
        c.send_messages(
            &named("keep"),
            &named("t"),
            &Partitioning::partition_id(p),
            &mut batch,
        )
        .await
        .expect("send");
    }
    let consumer = Consumer::new(Identifier::numeric(7).expect("id"));
    c.store_consumer_offset(&consumer, &named("keep"), &named("t"), Some(1), 41)
        .await
        .expect("store offset");
    let before = c
        .get_stream(&named("keep"))
        .await
        .expect("get")
        .expect("stream");
    drop(c);
    server.shutdown().expect("shutdown");

    let server = start(dir.path());
    let c = client(&server).await;
    let after = c
        .get_stream(&named("keep"))
        .await
        .expect("get")
        .expect("stream");
    assert_eq!(
        (after.id, after.created_at, after.messages_count),
        (before.id, before.created_at, 100)
    );
    assert_eq!(c.get_streams().await.expect("streams").len(), 1);
    for p in 0..2u32 {
        let polled = c
            .poll_messages(
                &named("keep"),
                &named("t"),
                Some(p),
                &consumer,
                &PollingStrategy::first(),
                100,
                false,
            )
            .await
            .expect("poll");
        assert_eq!(polled.messages.len(), 50);
        for (i, m) in polled.messages.iter().enumerate() {
            assert_eq!(m.header.offset, i as u64);
            assert_eq!(&m.payload[..], format!("p{p}-{i}").as_bytes());
        }
    }
    let next = c
        .poll_messages(
            &named("keep"),
            &named("t"),
            Some(1),
            &consumer,
            &PollingStrategy::next(),
            1,
            false,
        )
        .await
        .expect("poll next");
    assert_eq!(next.messages[0].header.offset, 42);
    // The deleted stream's id is the lowest free one after a restart too,
    // and a topic there gets fresh engine partitions, empty.
    let fresh = c.create_stream("fresh").await.expect("create");
    assert_eq!(fresh.id, 1);
    let t = c
        .create_topic(&named("fresh"), "t", &TopicCreateOptions::default())
        .await
        .expect("topic");
    assert_eq!((t.id, t.messages_count), (0, 0));
    server.shutdown().expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitions_no_topic_holds_are_deleted_at_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start(dir.path());
    let c = client(&server).await;
    stream_and_topic(&c, "s", "t", 2).await;
    drop(c);
    server.shutdown().expect("shutdown");
    // What a crash between creating a topic's partitions and recording the
    // topic leaves: a partition in the engine that no topic holds.
    let engine = corelog::Engine::open(corelog::Config::new(dir.path())).expect("engine");
    engine.handle().create_partition(77).wait().expect("orphan");
    engine.shutdown().expect("shutdown");
    assert!(dir.path().join("partitions/77").exists());

    let server = start(dir.path());
    assert!(!dir.path().join("partitions/77").exists());
    assert!(dir.path().join("partitions/0").exists());
    assert!(dir.path().join("partitions/1").exists());
    server.shutdown().expect("shutdown");
}
