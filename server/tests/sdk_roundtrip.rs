//! Iggy's own Rust SDK against corelog-server: streams, topics, sends and
//! polls with every strategy, consumer offsets, deletes.

mod common;

use common::{client, message, named, start, stream_and_topic};
use iggy::prelude::*;

/// Three batches of four messages to partition 0: offsets 0..12, message
/// `i` has id `1000 + i`, payload `payload-i`, header `n` = `i`.
async fn send_twelve(c: &IggyClient, stream: &str, topic: &str) {
    for b in 0..3u128 {
        let mut batch: Vec<IggyMessage> = (0..4u128)
            .map(|j| {
                let i = b * 4 + j;
                message(
                    1000 + i,
                    format!("payload-{i}").as_bytes(),
                    Some(("n", &i.to_string())),
                )
            })
            .collect();
        c.send_messages(
            &named(stream),
            &named(topic),
            &Partitioning::partition_id(0),
            &mut batch,
        )
        .await
        .expect("send");
    }
}

fn check(polled: &PolledMessages, offsets: std::ops::Range<u64>) {
    let got: Vec<u64> = polled.messages.iter().map(|m| m.header.offset).collect();
    assert_eq!(got, offsets.clone().collect::<Vec<_>>());
    assert_eq!(polled.count as usize, polled.messages.len());
    for m in &polled.messages {
        let i = m.header.offset;
        assert_eq!(m.header.id, 1000 + u128::from(i));
        assert_eq!(&m.payload[..], format!("payload-{i}").as_bytes());
        let headers = m
            .user_headers_map()
            .expect("headers")
            .expect("some headers");
        let v = headers
            .get(&std::str::FromStr::from_str("n").expect("key"))
            .expect("header n");
        assert_eq!(v.as_str().expect("str"), i.to_string());
    }
}

async fn poll(
    c: &IggyClient,
    strategy: PollingStrategy,
    count: u32,
    commit: bool,
) -> PolledMessages {
    c.poll_messages(
        &named("s"),
        &named("t"),
        Some(0),
        &Consumer::new(named("reader")),
        &strategy,
        count,
        commit,
    )
    .await
    .expect("poll")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_then_poll_with_every_strategy() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start(dir.path());
    let c = client(&server).await;
    stream_and_topic(&c, "s", "t", 2).await;
    send_twelve(&c, "s", "t").await;

    // Offset inside a batch: the first batch is cut at the front, the last
    // at `count`.
    let p = poll(&c, PollingStrategy::offset(5), 4, false).await;
    check(&p, 5..9);
    assert_eq!(p.current_offset, 11);
    assert_eq!(p.partition_id, 0);
    check(&poll(&c, PollingStrategy::first(), 3, false).await, 0..3);
    check(&poll(&c, PollingStrategy::last(), 2, false).await, 10..12);
    check(
        &poll(&c, PollingStrategy::timestamp(0.into()), 100, false).await,
        0..12,
    );
    check(
        &poll(&c, PollingStrategy::offset(0), 12, false).await,
        0..12,
    );
    let end = poll(&c, PollingStrategy::offset(12), 10, false).await;
    assert!(end.messages.is_empty());
    assert_eq!(end.count, 0);

    c.flush_unsaved_buffer(&named("s"), &named("t"), 0, true)
        .await
        .expect("flush");

    // Next with auto_commit walks the partition in steps of `count`.
    check(&poll(&c, PollingStrategy::next(), 5, true).await, 0..5);
    check(&poll(&c, PollingStrategy::next(), 5, true).await, 5..10);
    let offset = c
        .get_consumer_offset(
            &Consumer::new(named("reader")),
            &named("s"),
            &named("t"),
            Some(0),
        )
        .await
        .expect("get offset")
        .expect("stored");
    assert_eq!((offset.stored_offset, offset.current_offset), (9, 11));
    check(&poll(&c, PollingStrategy::next(), 5, true).await, 10..12);

    // A stored offset moves next.
    c.store_consumer_offset(
        &Consumer::new(named("reader")),
        &named("s"),
        &named("t"),
        Some(0),
        1,
    )
    .await
    .expect("store offset");
    check(&poll(&c, PollingStrategy::next(), 3, false).await, 2..5);
    server.shutdown().expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_and_topics_by_name_and_number() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start(dir.path());
    let c = client(&server).await;
    stream_and_topic(&c, "bench-stream-1", "topic-1", 3).await;
    let stream = c
        .get_stream(&named("bench-stream-1"))
        .await
        .expect("get stream")
        .expect("exists");
    let by_number = c
        .get_stream(&Identifier::numeric(stream.id).expect("id"))
        .await
        .expect("get stream")
        .expect("exists");
    assert_eq!(by_number.name, "bench-stream-1");
    assert_eq!(by_number.topics_count, 1);
    let topic = c
        .get_topic(
            &named("bench-stream-1"),
            &Identifier::numeric(stream.topics[0].id).expect("id"),
        )
        .await
        .expect("get topic")
        .expect("exists");
    assert_eq!(
        (topic.name.as_str(), topic.partitions_count),
        ("topic-1", 3)
    );
    assert!(c.get_stream(&named("nope")).await.expect("get").is_none());
    assert!(c.create_stream("bench-stream-1").await.is_err());
    assert_eq!(c.get_streams().await.expect("streams").len(), 1);
    let stats = c.get_stats().await.expect("stats");
    assert_eq!(
        (
            stats.streams_count,
            stats.topics_count,
            stats.partitions_count
        ),
        (1, 1, 3)
    );
    let cluster = c.get_cluster_metadata().await.expect("cluster metadata");
    assert_eq!(cluster.nodes.len(), 1);
    assert_eq!(cluster.nodes[0].endpoints.tcp, server.local_addr().port());

    // Balanced and keyed sends land in the topic's partitions.
    for i in 0..6u128 {
        let mut one = vec![message(i + 1, b"x", None)];
        let how = if i % 2 == 0 {
            Partitioning::balanced()
        } else {
            Partitioning::messages_key_str("key").expect("key")
        };
        c.send_messages(&named("bench-stream-1"), &named("topic-1"), &how, &mut one)
            .await
            .expect("send");
    }
    let topic = c
        .get_topic(&named("bench-stream-1"), &named("topic-1"))
        .await
        .expect("get topic")
        .expect("exists");
    assert_eq!(topic.messages_count, 6);
    server.shutdown().expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_topic_or_stream_deletes_its_data() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start(dir.path());
    let c = client(&server).await;
    stream_and_topic(&c, "s", "t", 2).await;
    send_twelve(&c, "s", "t").await;
    let partitions = dir.path().join("partitions");
    let count = || std::fs::read_dir(&partitions).expect("dir").count();
    assert_eq!(count(), 2);
    c.delete_topic(&named("s"), &named("t"))
        .await
        .expect("delete topic");
    assert_eq!(count(), 0);
    assert!(c
        .get_topic(&named("s"), &named("t"))
        .await
        .expect("get")
        .is_none());

    // A new topic of the same name starts empty, on new partitions.
    c.create_topic(&named("s"), "t", &TopicCreateOptions::default())
        .await
        .expect("create again");
    let p = poll(&c, PollingStrategy::first(), 10, false).await;
    assert!(p.messages.is_empty());
    c.delete_stream(&named("s")).await.expect("delete stream");
    assert_eq!(count(), 0);
    assert!(c.get_streams().await.expect("streams").is_empty());
    server.shutdown().expect("shutdown");
}

/// A topic asking for an fsync per write (`enforce_fsync`) is refused by a
/// server that acknowledges before syncing, and nothing of it is created;
/// a server running `--fsync batch` gives it what it asks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enforce_fsync_is_given_or_refused_never_dropped() {
    for (fsync, accepted) in [
        (corelog::FsyncPolicy::Never, false),
        (corelog::FsyncPolicy::Batch, true),
    ] {
        let tmp = tempfile::tempdir().expect("tempdir");
        let server = corelog_server::Server::start(corelog_server::ServerConfig {
            shards: Some(2),
            pin_threads: false,
            fsync,
            ..corelog_server::ServerConfig::new(tmp.path(), "127.0.0.1:0".parse().expect("addr"))
        })
        .expect("server starts");
        let c = client(&server).await;
        c.create_stream("s").await.expect("create stream");
        let created = c
            .create_topic(
                &named("s"),
                "t",
                &TopicCreateOptions {
                    partitions_count: Some(1),
                    enforce_fsync: Some(true),
                    ..TopicCreateOptions::default()
                },
            )
            .await;
        assert_eq!(created.is_ok(), accepted, "fsync {fsync}: {created:?}");
        let topic = c
            .get_topic(&named("s"), &named("t"))
            .await
            .expect("get topic");
        assert_eq!(topic.is_some(), accepted, "fsync {fsync}");
        if !accepted {
            let err = created.expect_err("refused");
            assert!(
                matches!(err, IggyError::InvalidOptionValue(_)),
                "refused as an invalid option: {err:?}"
            );
            // Asked for as the string "true" (any case), refused the same.
            let mut raw = std::collections::BTreeMap::new();
            raw.insert("enforce_fsync".to_owned(), "True".to_owned());
            let as_string = c
                .create_topic(
                    &named("s"),
                    "t2",
                    &TopicCreateOptions {
                        partitions_count: Some(1),
                        raw,
                        ..TopicCreateOptions::default()
                    },
                )
                .await;
            assert!(
                matches!(as_string, Err(IggyError::InvalidOptionValue(_))),
                "fsync {fsync}, enforce_fsync \"True\": {as_string:?}"
            );
        }
        server.shutdown().expect("shutdown");
    }
}
