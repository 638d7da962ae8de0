//! Answers that must be the ones Iggy's server gives (its integration suite
//! checks them): the status codes of a missing topic or consumer group, a
//! consumer offset past the partition's end refused, and the system stats'
//! message and segment counts, and the topic option catalog (DESCRIBE_OPTIONS).

mod common;

use common::{client, fill, named, start, start_small_segments, stream_and_topic};
use iggy::prelude::*;
use std::str::FromStr;

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
    // corelog-server's own version, in Iggy's numeric form.
    let semver = stats.iggy_server_semver.expect("a version");
    let v = env!("CARGO_PKG_VERSION")
        .parse::<iggy_common::SemanticVersion>()
        .expect("version");
    assert_eq!(semver, v.get_numeric_version().expect("numeric"));
    assert!(semver > 0);
    // The data directory's file system, and the host's memory (Iggy's CLI
    // `stats` test asserts the disk fields).
    let (free, total) = (
        stats.free_disk_space.as_bytes_u64(),
        stats.total_disk_space.as_bytes_u64(),
    );
    let expected = fs4::total_space(dir.path()).expect("statvfs");
    assert_eq!(total, expected, "the data directory's file system");
    assert!(free > 0 && free <= total, "{free} of {total}");
    let memory = stats.total_memory.as_bytes_u64();
    assert!(memory > 0 && stats.available_memory.as_bytes_u64() <= memory);
}

fn option(t: &TopicDetails, key: &str) -> Option<OptionValue> {
    t.options
        .get(&HeaderKey::from_str(key).expect("key"))
        .cloned()
}

async fn topic(c: &IggyClient, name: &str) -> TopicDetails {
    c.get_topic(&named("s"), &named(name))
        .await
        .expect("get topic")
        .expect("the topic")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topic_options_are_checked_and_answered_with_their_provenance() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start(dir.path());
    let c = client(&server).await;
    c.create_stream("s").await.expect("stream");
    let create = |name: &'static str, o: TopicCreateOptions| {
        let c = &c;
        async move { c.create_topic(&named("s"), name, &o).await }
    };
    // Out of Iggy's bounds: refused, nothing created.
    let small_segment = create(
        "a",
        TopicCreateOptions {
            segment_size: Some(IggyByteSize::from(1024u64)),
            ..TopicCreateOptions::default()
        },
    )
    .await;
    assert!(
        matches!(small_segment, Err(IggyError::InvalidOptionValue(_))),
        "{small_segment:?}"
    );
    let zero_threshold = create(
        "a",
        TopicCreateOptions {
            messages_required_to_save: Some(0),
            ..TopicCreateOptions::default()
        },
    )
    .await;
    assert!(zero_threshold.is_err(), "{zero_threshold:?}");
    let tiny = create(
        "a",
        TopicCreateOptions {
            max_topic_size: Some(MaxTopicSize::from(10_240u64)),
            ..TopicCreateOptions::default()
        },
    )
    .await;
    assert!(
        matches!(tiny, Err(IggyError::InvalidTopicSize(..))),
        "{tiny:?}"
    );
    assert!(c.get_topics(&named("s")).await.expect("topics").is_empty());
    // Zero sentinels: the resolved values, derived, never a stored 0.
    create(
        "zeros",
        TopicCreateOptions {
            message_expiry: Some(IggyExpiry::from(0u64)),
            max_topic_size: Some(MaxTopicSize::from(0u64)),
            segment_size: Some(IggyByteSize::from(0u64)),
            ..TopicCreateOptions::default()
        },
    )
    .await
    .expect("sentinels");
    let t = topic(&c, "zeros").await;
    for key in ["message_expiry", "max_topic_size", "segment_size"] {
        let o = option(&t, key).unwrap_or_else(|| panic!("{key} answered"));
        assert!(!o.explicit, "{key} derived");
        assert_ne!(o.value.as_bytes(), 0u64.to_le_bytes(), "{key} resolved");
    }
    // What the client sent is explicit; the rest derived.
    create(
        "t",
        TopicCreateOptions {
            compression_algorithm: Some(CompressionAlgorithm::Gzip),
            message_expiry: Some(IggyExpiry::from(5_000_000u64)),
            ..TopicCreateOptions::default()
        },
    )
    .await
    .expect("topic");
    let t = topic(&c, "t").await;
    assert!(option(&t, "message_expiry").expect("expiry").explicit);
    assert!(!option(&t, "max_topic_size").expect("size").explicit);
    assert_eq!(t.compression_algorithm, CompressionAlgorithm::Gzip);
    // An update: storage settings are create-only, a cap below one segment
    // is refused, a sentinel keeps the stored value, a rename keeps all.
    let mut raw = std::collections::BTreeMap::new();
    raw.insert("segment_size".to_owned(), "2MiB".to_owned());
    let create_only = c
        .update_topic(
            &named("s"),
            &named("t"),
            "t",
            &TopicUpdateOptions {
                raw,
                ..TopicUpdateOptions::default()
            },
        )
        .await;
    assert!(
        matches!(create_only, Err(IggyError::UnsupportedOptionKey(_))),
        "{create_only:?}"
    );
    let update = |max: u64| {
        let c = &c;
        async move {
            let o = TopicUpdateOptions {
                max_topic_size: Some(MaxTopicSize::from(max)),
                ..TopicUpdateOptions::default()
            };
            c.update_topic(&named("s"), &named("t"), "t", &o).await
        }
    };
    let below = update(4 << 20).await;
    assert!(
        matches!(below, Err(IggyError::InvalidTopicSize(..))),
        "{below:?}"
    );
    update(2 << 30).await.expect("two segments");
    update(0).await.expect("a sentinel");
    c.update_topic(
        &named("s"),
        &named("t"),
        "t2",
        &TopicUpdateOptions::default(),
    )
    .await
    .expect("rename");
    let t = topic(&c, "t2").await;
    assert_eq!(u64::from(t.max_topic_size), 2 << 30);
    assert_eq!(u64::from(t.message_expiry), 5_000_000);
    assert_eq!(t.compression_algorithm, CompressionAlgorithm::Gzip);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_take_no_option_keys_and_partition_counts_are_bounded() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start(dir.path());
    let c = client(&server).await;
    // A stream that is not there lists no topics.
    assert!(c
        .get_topics(&named("nope"))
        .await
        .expect("topics")
        .is_empty());
    stream_and_topic(&c, "s", "t", 2).await;
    let mut raw = std::collections::BTreeMap::new();
    raw.insert("future_key".to_owned(), "1".to_owned());
    let refused = c
        .update_stream(&named("s"), "s2", &StreamUpdateOptions { raw })
        .await;
    assert!(
        matches!(refused, Err(IggyError::UnsupportedOptionKey(_))),
        "{refused:?}"
    );
    assert!(c.get_stream(&named("s")).await.expect("get").is_some());
    for n in [0, 1001] {
        let r = c.delete_partitions(&named("s"), &named("t"), n).await;
        assert!(matches!(r, Err(IggyError::TooManyPartitions)), "{n}: {r:?}");
        let r = c.create_partitions(&named("s"), &named("t"), n).await;
        assert!(matches!(r, Err(IggyError::TooManyPartitions)), "{n}: {r:?}");
    }
    let too_many = c
        .create_topic(
            &named("s"),
            "t1001",
            &TopicCreateOptions {
                partitions_count: Some(1001),
                ..TopicCreateOptions::default()
            },
        )
        .await;
    assert!(
        matches!(too_many, Err(IggyError::TooManyPartitions)),
        "a topic of 1001 partitions: {:?}",
        too_many.map(|t| t.partitions_count)
    );
    let r = c.delete_partitions(&named("s"), &named("t"), 3).await;
    assert!(matches!(r, Err(IggyError::InvalidPartitionsCount)), "{r:?}");
    assert_eq!(topic(&c, "t").await.partitions_count, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_options_lists_iggys_topic_keys_with_this_servers_defaults() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start_small_segments(dir.path(), 4 << 20, std::time::Duration::from_secs(30));
    let c = client(&server).await;
    let specs = c
        .describe_options(OptionsScope::Topic)
        .await
        .expect("topic");
    let mut keys: Vec<&str> = specs.iter().map(|s| s.key.as_str()).collect();
    keys.sort_unstable();
    let mut accepted = iggy_common::TOPIC_OPTION_KEYS.to_vec();
    accepted.sort_unstable();
    assert_eq!(keys, accepted, "exactly the keys a topic takes");
    let default = |key: &str| {
        let s = specs.iter().find(|s| s.key == key).expect("listed");
        (s.kind, s.default_value.clone())
    };
    let segment = (4u64 << 20).to_le_bytes().to_vec();
    assert_eq!(default("segment_size"), (HeaderKind::Uint64, segment));
    // Under --fsync batch a send is acknowledged once synced.
    assert_eq!(default("enforce_fsync"), (HeaderKind::Bool, vec![1]));
    assert_eq!(default("messages_required_to_save").1, Vec::<u8>::new());
    for scope in [OptionsScope::Stream, OptionsScope::User] {
        assert!(c.describe_options(scope).await.expect("scope").is_empty());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_is_a_zip_of_the_sections_asked_for_and_needs_read_servers() {
    use std::io::Read;
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start(dir.path());
    let c = client(&server).await;
    stream_and_topic(&c, "s", "t", 1).await;
    fill(&c, "s", "t", 1, 3, 3).await;
    let zip = c
        .snapshot(
            SnapshotCompression::Deflated,
            vec![SystemSnapshotType::Test],
        )
        .await
        .expect("snapshot");
    let mut zip = zip::ZipArchive::new(std::io::Cursor::new(zip.0)).expect("a zip");
    let mut text = String::new();
    zip.by_name("test.txt")
        .expect("test.txt")
        .read_to_string(&mut text)
        .expect("read");
    assert_eq!(text.trim(), "test");
    let all = c
        .snapshot(SnapshotCompression::Stored, vec![SystemSnapshotType::All])
        .await
        .expect("all");
    let mut zip = zip::ZipArchive::new(std::io::Cursor::new(all.0)).expect("a zip");
    assert_eq!(zip.len(), 5);
    let mut files = String::new();
    zip.by_name("filesystem_overview.txt")
        .expect("listing")
        .read_to_string(&mut files)
        .expect("read");
    assert!(files.contains("partitions/"), "the data directory: {files}");
    // The engine's metrics and the client counters, which GET_STATS has no
    // field for: the send above counted.
    let mut usage = String::new();
    zip.by_name("resource_usage.txt")
        .expect("resource usage")
        .read_to_string(&mut usage)
        .expect("read");
    let engine = usage
        .lines()
        .find_map(|l| l.strip_prefix("engine: "))
        .unwrap_or_else(|| panic!("no engine metrics: {usage}"));
    let appends: u64 = engine
        .split("; ")
        .map(|shard| {
            let n = shard.split(" appends (").next().unwrap_or_default();
            n.rsplit(' ')
                .next()
                .unwrap_or_default()
                .parse::<u64>()
                .expect("a count")
        })
        .sum();
    assert!(appends >= 1, "the send above is counted: {engine}");
    assert!(usage.lines().any(|l| l.starts_with("clients: ")), "{usage}");
    // Iggy's rule: a snapshot needs read_servers.
    c.create_user("reader1", "secret-password", UserStatus::Active, None)
        .await
        .expect("user");
    let r = common::connect(&server).await;
    r.login_user("reader1", "secret-password")
        .await
        .expect("login");
    let refused = r
        .snapshot(
            SnapshotCompression::Deflated,
            vec![SystemSnapshotType::Test],
        )
        .await;
    assert_eq!(
        refused.map(|_| ()).map_err(|e| e.as_code()),
        Err(IggyError::Unauthorized.as_code())
    );
}
