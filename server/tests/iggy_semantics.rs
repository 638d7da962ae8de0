//! Answers that must be the ones Iggy's server gives (its integration suite
//! checks them): the status codes of a missing topic or consumer group, a
//! consumer offset past the partition's end refused, and the system stats'
//! message and segment counts.

mod common;

use common::{client, fill, named, start, stream_and_topic};
use iggy::prelude::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_topic_or_group_answers_iggys_id_not_found_codes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start(dir.path());
    let c = client(&server).await;
    c.create_stream("s").await.expect("stream");
    // A topic named, not numbered, that is not there: TopicIdNotFound (2010)
    // all the same, on a poll and on a join.
    let poll = c
        .poll_messages(
            &named("s"),
            &named("nope"),
            Some(0),
            &Consumer::new(named("r")),
            &PollingStrategy::offset(0),
            1,
            false,
        )
        .await;
    assert!(
        matches!(poll, Err(IggyError::TopicIdNotFound(..))),
        "{poll:?}"
    );
    let join = c
        .join_consumer_group(&named("s"), &named("nope"), &named("g"))
        .await;
    assert!(
        matches!(join, Err(IggyError::TopicIdNotFound(..))),
        "{join:?}"
    );
    // A group named that is not there: ConsumerGroupIdNotFound (5000) on
    // join, leave and delete.
    c.create_topic(&named("s"), "t", &TopicCreateOptions::default())
        .await
        .expect("topic");
    let join = c
        .join_consumer_group(&named("s"), &named("t"), &named("g"))
        .await;
    assert!(
        matches!(join, Err(IggyError::ConsumerGroupIdNotFound(..))),
        "{join:?}"
    );
    let leave = c
        .leave_consumer_group(&named("s"), &named("t"), &named("g"))
        .await;
    assert!(
        matches!(leave, Err(IggyError::ConsumerGroupIdNotFound(..))),
        "{leave:?}"
    );
    let delete = c
        .delete_consumer_group(&named("s"), &named("t"), &named("g"))
        .await;
    assert!(
        matches!(delete, Err(IggyError::ConsumerGroupIdNotFound(..))),
        "{delete:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_offset_past_the_partitions_end_is_refused_and_not_stored() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start(dir.path());
    let c = client(&server).await;
    stream_and_topic(&c, "s", "t", 1).await;
    let consumer = Consumer::new(named("r"));
    let (s, t) = (named("s"), named("t"));
    let store = |offset| c.store_consumer_offset(&consumer, &s, &t, Some(0), offset);
    // An empty partition takes no offset, not even 0 (the SDK decodes the
    // status alone: the offset in the variant is not the server's).
    for offset in [0, 1] {
        let r = store(offset).await;
        assert!(
            matches!(r, Err(IggyError::InvalidOffset(_))),
            "{offset}: {r:?}"
        );
    }
    let none = c
        .get_consumer_offset(&consumer, &named("s"), &named("t"), Some(0))
        .await
        .expect("get");
    assert!(none.is_none(), "{none:?}");
    fill(&c, "s", "t", 1, 5, 10).await;
    store(4).await.expect("the last offset");
    let r = store(5).await;
    assert!(matches!(r, Err(IggyError::InvalidOffset(_))), "{r:?}");
    let kept = c
        .get_consumer_offset(&consumer, &named("s"), &named("t"), Some(0))
        .await
        .expect("get")
        .expect("an offset");
    assert_eq!(kept.stored_offset, 4);
    // The same for a group's offset, stored by the partition's owner.
    c.create_consumer_group(&named("s"), &named("t"), "g")
        .await
        .expect("group");
    c.join_consumer_group(&named("s"), &named("t"), &named("g"))
        .await
        .expect("join");
    let group = Consumer::group(named("g"));
    let r = c
        .store_consumer_offset(&group, &named("s"), &named("t"), Some(0), 5)
        .await;
    assert!(matches!(r, Err(IggyError::InvalidOffset(_))), "{r:?}");
    c.store_consumer_offset(&group, &named("s"), &named("t"), Some(0), 4)
        .await
        .expect("the group's last offset");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stats_count_messages_bytes_and_segments() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start(dir.path());
    let c = client(&server).await;
    stream_and_topic(&c, "s", "t", 3).await;
    let empty = c.get_stats().await.expect("stats");
    assert_eq!(empty.partitions_count, 3);
    // Every partition has its (empty) active segment, as in Iggy.
    assert_eq!(empty.segments_count, 3);
    assert_eq!(empty.messages_count, 0);
    assert_eq!(empty.messages_size_bytes.as_bytes_u64(), 0);
    fill(&c, "s", "t", 2, 7, 10).await;
    let stats = c.get_stats().await.expect("stats");
    assert_eq!(stats.messages_count, 14);
    assert_eq!(stats.segments_count, 3);
    let topic = c
        .get_topic(&named("s"), &named("t"))
        .await
        .expect("topic")
        .expect("the topic");
    assert!(topic.size.as_bytes_u64() > 0);
    assert_eq!(stats.messages_size_bytes, topic.size);
}
