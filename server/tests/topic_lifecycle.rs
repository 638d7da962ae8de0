//! A topic's life with Iggy's SDK: renames, purges (fresh partitions, the
//! old ones' data gone), partitions added and removed, DELETE_SEGMENTS,
//! retention driven by `message_expiry` and `max_topic_size`, and polls
//! that return `count` messages.

mod common;

use common::{client, fill, fill_id, named, start, start_small_segments, stream_and_topic};
use iggy::prelude::*;
use std::path::Path;
use std::str::FromStr;
use std::time::{Duration, Instant};

/// Engine partition directories under the data directory.
fn partition_dirs(dir: &Path) -> usize {
    std::fs::read_dir(dir.join("partitions"))
        .map(|rd| rd.count())
        .unwrap_or(0)
}

async fn topic(c: &IggyClient, stream: &str, topic: &str) -> TopicDetails {
    c.get_topic(&named(stream), &named(topic))
        .await
        .expect("get topic")
        .expect("the topic")
}

async fn poll_first(c: &IggyClient, partition: u32, count: u32) -> PolledMessages {
    c.poll_messages(
        &named("s"),
        &named("t"),
        Some(partition),
        &Consumer::new(named("reader")),
        &PollingStrategy::first(),
        count,
        false,
    )
    .await
    .expect("poll")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn purge_empties_topics_and_deletes_their_old_partitions() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start(dir.path());
    let c = client(&server).await;
    stream_and_topic(&c, "s", "t", 2).await;
    c.create_topic(&named("s"), "u", &TopicCreateOptions::default())
        .await
        .expect("topic u");
    fill(&c, "s", "t", 2, 10, 10).await;
    fill(&c, "s", "u", 1, 10, 10).await;
    c.store_consumer_offset(
        &Consumer::new(named("reader")),
        &named("s"),
        &named("t"),
        Some(0),
        5,
    )
    .await
    .expect("offset");
    assert_eq!(partition_dirs(dir.path()), 3);
    c.purge_topic(&named("s"), &named("t"))
        .await
        .expect("purge topic");
    assert_eq!(topic(&c, "s", "t").await.messages_count, 0);
    assert_eq!(
        topic(&c, "s", "u").await.messages_count,
        10,
        "the other topic kept"
    );
    assert!(poll_first(&c, 0, 10).await.messages.is_empty());
    assert!(
        c.get_consumer_offset(
            &Consumer::new(named("reader")),
            &named("s"),
            &named("t"),
            Some(0)
        )
        .await
        .expect("offset")
        .is_none(),
        "offsets went with the data"
    );
    assert_eq!(
        partition_dirs(dir.path()),
        3,
        "old partitions deleted, new ones in place"
    );
    // Sends start over at offset 0.
    fill(&c, "s", "t", 1, 3, 10).await;
    let polled = poll_first(&c, 0, 10).await;
    assert_eq!(
        polled
            .messages
            .iter()
            .map(|m| m.header.offset)
            .collect::<Vec<_>>(),
        vec![0, 1, 2]
    );
    c.purge_stream(&named("s")).await.expect("purge stream");
    assert_eq!(topic(&c, "s", "t").await.messages_count, 0);
    assert_eq!(topic(&c, "s", "u").await.messages_count, 0);
    assert!(matches!(
        c.purge_topic(&named("s"), &named("nope")).await,
        Err(IggyError::TopicIdNotFound(..))
    ));
    // The purge survives a restart.
    drop(c);
    server.shutdown().expect("shutdown");
    let server = start(dir.path());
    let c = client(&server).await;
    assert_eq!(topic(&c, "s", "t").await.partitions_count, 2);
    assert_eq!(topic(&c, "s", "t").await.messages_count, 0);
    assert_eq!(partition_dirs(dir.path()), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitions_are_added_and_removed_with_their_data() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start(dir.path());
    let c = client(&server).await;
    stream_and_topic(&c, "s", "t", 1).await;
    c.create_partitions(&named("s"), &named("t"), 2)
        .await
        .expect("create");
    assert_eq!(topic(&c, "s", "t").await.partitions_count, 3);
    assert_eq!(partition_dirs(dir.path()), 3);
    fill(&c, "s", "t", 3, 4, 10).await;
    assert_eq!(
        poll_first(&c, 2, 10).await.messages.len(),
        4,
        "the new partition takes sends"
    );
    c.delete_partitions(&named("s"), &named("t"), 2)
        .await
        .expect("delete");
    let t = topic(&c, "s", "t").await;
    assert_eq!((t.partitions_count, t.messages_count), (1, 4));
    assert_eq!(
        partition_dirs(dir.path()),
        1,
        "the deleted partitions' data is gone"
    );
    assert!(matches!(
        c.poll_messages(
            &named("s"),
            &named("t"),
            Some(1),
            &Consumer::new(named("r")),
            &PollingStrategy::first(),
            1,
            false
        )
        .await,
        Err(IggyError::PartitionNotFound(..))
    ));
    assert!(matches!(
        c.delete_partitions(&named("s"), &named("t"), 2).await,
        Err(IggyError::InvalidPartitionsCount)
    ));
    // Added again: fresh and empty, not the old ones back.
    c.create_partitions(&named("s"), &named("t"), 1)
        .await
        .expect("create");
    assert!(poll_first(&c, 1, 10).await.messages.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_and_topics_are_renamed_and_topic_settings_updated() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start(dir.path());
    let c = client(&server).await;
    stream_and_topic(&c, "s", "t", 1).await;
    c.create_stream("other").await.expect("stream");
    c.update_stream(&named("s"), "s2", &StreamUpdateOptions::default())
        .await
        .expect("rename stream");
    assert!(c.get_stream(&named("s")).await.expect("get").is_none());
    assert!(matches!(
        c.update_stream(&named("s2"), "other", &StreamUpdateOptions::default())
            .await,
        Err(IggyError::StreamNameAlreadyExists(..))
    ));
    let options = TopicUpdateOptions {
        message_expiry: Some(IggyExpiry::ExpireDuration(
            IggyDuration::from_str("1h").expect("d"),
        )),
        // At least one segment (1 GiB here), as Iggy requires.
        max_topic_size: Some(MaxTopicSize::from(2 << 30)),
        ..TopicUpdateOptions::default()
    };
    c.update_topic(&named("s2"), &named("t"), "t2", &options)
        .await
        .expect("update topic");
    let t = topic(&c, "s2", "t2").await;
    assert_eq!(u64::from(t.message_expiry), 3_600_000_000);
    assert_eq!(u64::from(t.max_topic_size), 2 << 30);
    drop(c);
    server.shutdown().expect("shutdown");
    let server = start(dir.path());
    let c = client(&server).await;
    assert_eq!(
        u64::from(topic(&c, "s2", "t2").await.message_expiry),
        3_600_000_000
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_segments_removes_the_oldest_sealed_segments() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start_small_segments(dir.path(), 16 << 10, Duration::from_secs(3600));
    let c = client(&server).await;
    stream_and_topic(&c, "s", "t", 1).await;
    fill(&c, "s", "t", 1, 200, 500).await;
    let before = topic(&c, "s", "t").await.partitions[0].segments_count;
    assert!(before >= 4, "{before} segments");
    c.delete_segments(&named("s"), &named("t"), 0, 2)
        .await
        .expect("delete segments");
    let p = &topic(&c, "s", "t").await.partitions[0];
    assert_eq!(p.segments_count, before - 2);
    let first = poll_first(&c, 0, 1).await;
    assert!(
        first.messages[0].header.offset > 0,
        "the oldest messages are gone"
    );
    assert_eq!(p.current_offset, 199);
    c.delete_segments(&named("s"), &named("t"), 0, 1000)
        .await
        .expect("delete all");
    assert_eq!(
        topic(&c, "s", "t").await.partitions[0].segments_count,
        1,
        "the active one stays"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn message_expiry_and_max_topic_size_drive_retention() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start_small_segments(dir.path(), 16 << 10, Duration::from_millis(100));
    let c = client(&server).await;
    c.create_stream("s").await.expect("stream");
    let expiring = TopicCreateOptions {
        partitions_count: Some(1),
        message_expiry: Some(IggyExpiry::ExpireDuration(
            IggyDuration::from_str("1s").expect("d"),
        )),
        ..TopicCreateOptions::default()
    };
    c.create_topic(&named("s"), "t", &expiring)
        .await
        .expect("topic");
    let capped = TopicCreateOptions {
        partitions_count: Some(2),
        max_topic_size: Some(MaxTopicSize::from(100_000)),
        ..TopicCreateOptions::default()
    };
    c.create_topic(&named("s"), "capped", &capped)
        .await
        .expect("topic");
    c.create_topic(&named("s"), "kept", &TopicCreateOptions::default())
        .await
        .expect("topic");
    for t in ["t", "capped", "kept"] {
        fill(&c, "s", t, if t == "capped" { 2 } else { 1 }, 300, 500).await;
    }
    // Capped: 100,000 bytes shared by 2 partitions, whole sealed segments.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let t = topic(&c, "s", "capped").await;
        if t.partitions
            .iter()
            .all(|p| p.size.as_bytes_u64() <= 50_000 + (20 << 10))
        {
            assert!(t.partitions.iter().all(|p| p.segments_count >= 1));
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the size cap is applied: {:?}",
            t.partitions
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Expiring: after a second, every sealed segment goes.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let t = topic(&c, "s", "t").await;
        if t.partitions[0].segments_count == 1 {
            assert!(poll_first(&c, 0, 1).await.messages[0].header.offset > 0);
            break;
        }
        assert!(Instant::now() < deadline, "expired segments are deleted");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let kept = topic(&c, "s", "kept").await;
    assert!(
        kept.partitions[0].segments_count > 4,
        "no limits, nothing deleted"
    );
    assert_eq!(kept.messages_count, 300);
    // A limit set later by UPDATE_TOPIC applies too.
    let options = TopicUpdateOptions {
        max_topic_size: Some(MaxTopicSize::from(40_000)),
        ..TopicUpdateOptions::default()
    };
    c.update_topic(&named("s"), &named("kept"), "kept", &options)
        .await
        .expect("update");
    let deadline = Instant::now() + Duration::from_secs(10);
    while topic(&c, "s", "kept").await.partitions[0]
        .size
        .as_bytes_u64()
        > 40_000 + (20 << 10)
    {
        assert!(Instant::now() < deadline, "the updated cap is applied");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poll_returns_count_messages_whatever_their_size() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start(dir.path());
    let c = client(&server).await;
    stream_and_topic(&c, "s", "t", 1).await;
    // 300 messages of about 1.3 KB: more than count × 1 KiB holds.
    fill(&c, "s", "t", 1, 300, 1300).await;
    let polled = poll_first(&c, 0, 100).await;
    assert_eq!(polled.messages.len(), 100);
    let ids: Vec<u128> = polled.messages.iter().map(|m| m.header.id).collect();
    assert_eq!(ids, (0..100).map(|i| fill_id(0, i)).collect::<Vec<_>>());
    // Large messages too.
    c.create_topic(&named("s"), "big", &TopicCreateOptions::default())
        .await
        .expect("topic");
    fill(&c, "s", "big", 1, 40, 100_000).await;
    let big = c
        .poll_messages(
            &named("s"),
            &named("big"),
            Some(0),
            &Consumer::new(named("r")),
            &PollingStrategy::offset(3),
            30,
            false,
        )
        .await
        .expect("poll");
    assert_eq!(big.messages.len(), 30);
    assert_eq!(big.messages[0].header.offset, 3);
    // Fewer only when the partition holds fewer.
    let rest = c
        .poll_messages(
            &named("s"),
            &named("big"),
            Some(0),
            &Consumer::new(named("r")),
            &PollingStrategy::offset(25),
            30,
            false,
        )
        .await
        .expect("poll");
    assert_eq!(rest.messages.len(), 15);
}

/// The offset a `next` poll of one message by `consumer` starts at.
async fn next(c: &IggyClient, consumer: &Consumer) -> u64 {
    c.poll_messages(
        &named("s"),
        &named("t"),
        Some(0),
        consumer,
        &PollingStrategy::next(),
        1,
        false,
    )
    .await
    .expect("poll")
    .messages[0]
        .header
        .offset
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumer_offsets_by_number_and_by_name_are_deleted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start(dir.path());
    let c = client(&server).await;
    stream_and_topic(&c, "s", "t", 1).await;
    fill(&c, "s", "t", 1, 10, 10).await;
    let named_reader = Consumer::new(named("reader"));
    let numbered = Consumer::new(Identifier::numeric(7).expect("id"));
    for (consumer, offset) in [(&named_reader, 3), (&numbered, 6)] {
        c.store_consumer_offset(consumer, &named("s"), &named("t"), Some(0), offset)
            .await
            .expect("store");
    }
    assert_eq!(
        next(&c, &named_reader).await,
        4,
        "a named consumer continues after its offset"
    );
    assert_eq!(next(&c, &numbered).await, 7);
    c.delete_consumer_offset(&named_reader, &named("s"), &named("t"), Some(0))
        .await
        .expect("delete");
    assert!(c
        .get_consumer_offset(&named_reader, &named("s"), &named("t"), Some(0))
        .await
        .expect("get")
        .is_none());
    assert_eq!(next(&c, &named_reader).await, 0, "from the start again");
    assert_eq!(
        c.get_consumer_offset(&numbered, &named("s"), &named("t"), Some(0))
            .await
            .expect("get")
            .map(|o| o.stored_offset),
        Some(6),
        "the other consumer's offset stays"
    );
    assert!(matches!(
        c.delete_consumer_offset(&named_reader, &named("s"), &named("t"), Some(0))
            .await,
        Err(IggyError::ConsumerOffsetNotFound(..))
    ));
    c.delete_consumer_offset(&numbered, &named("s"), &named("t"), Some(0))
        .await
        .expect("delete");
    drop(c);
    server.shutdown().expect("shutdown");
    let server = start(dir.path());
    let c = client(&server).await;
    assert!(
        c.get_consumer_offset(&numbered, &named("s"), &named("t"), Some(0))
            .await
            .expect("get")
            .is_none(),
        "deleted for good"
    );
}
