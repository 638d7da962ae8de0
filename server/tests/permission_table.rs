//! Every command that changes or reads what a user may not, sent by a
//! user that may only read streams (issue 30, finding 6): each is refused
//! with `Unauthorized`, and root then finds streams, topics, partitions,
//! segments, messages, groups, offsets and users unchanged.
//!
//! As in Iggy's permissioner, reading a topic is enough to create, delete,
//! join and leave its consumer groups, and polling is enough to store and
//! delete consumer offsets (a group's only by the member owning the
//! partition): those are not in the table.

mod common;

use common::{client, connect, fill, named, start_small_segments};
use iggy::prelude::*;
use std::future::Future;
use std::pin::Pin;

const UNAUTHORIZED: u32 = 41;

type Call<'a> = Pin<Box<dyn Future<Output = Result<(), IggyError>> + 'a>>;

/// The commands and how to send each.
fn commands<'a>(c: &'a IggyClient) -> Vec<(&'static str, Call<'a>)> {
    let mut out: Vec<(&'static str, Call<'a>)> = Vec::new();
    macro_rules! cmd {
        ($name:literal, $e:expr) => {
            out.push(($name, Box::pin(async move { $e.await.map(|_| ()) })))
        };
    }
    cmd!("CREATE_STREAM", c.create_stream("other"));
    cmd!(
        "UPDATE_STREAM",
        c.update_stream(&named("s"), "renamed", &StreamUpdateOptions::default())
    );
    cmd!("PURGE_STREAM", c.purge_stream(&named("s")));
    cmd!("DELETE_STREAM", c.delete_stream(&named("s")));
    cmd!(
        "CREATE_TOPIC",
        c.create_topic(&named("s"), "other", &TopicCreateOptions::default())
    );
    cmd!(
        "UPDATE_TOPIC",
        c.update_topic(
            &named("s"),
            &named("t"),
            "renamed",
            &TopicUpdateOptions::default()
        )
    );
    cmd!("PURGE_TOPIC", c.purge_topic(&named("s"), &named("t")));
    cmd!("DELETE_TOPIC", c.delete_topic(&named("s"), &named("t")));
    cmd!(
        "CREATE_PARTITIONS",
        c.create_partitions(&named("s"), &named("t"), 1)
    );
    cmd!(
        "DELETE_PARTITIONS",
        c.delete_partitions(&named("s"), &named("t"), 1)
    );
    cmd!(
        "DELETE_SEGMENTS",
        c.delete_segments(&named("s"), &named("t"), 0, 1)
    );
    cmd!("SEND_MESSAGES", async move {
        let mut batch = vec![common::message(9, b"sneaky", None)];
        c.send_messages(
            &named("s"),
            &named("t"),
            &Partitioning::partition_id(0),
            &mut batch,
        )
        .await
    });
    cmd!(
        "CREATE_USER",
        c.create_user("sneaky", "secret1", UserStatus::Active, None)
    );
    cmd!("DELETE_USER", c.delete_user(&named("other")));
    cmd!(
        "UPDATE_USER",
        c.update_user(
            &named("other"),
            Some("renamed"),
            None,
            &UserUpdateOptions::default()
        )
    );
    cmd!(
        "UPDATE_PERMISSIONS",
        c.update_permissions(&named("reader"), Some(Permissions::default()))
    );
    cmd!(
        "CHANGE_PASSWORD",
        c.change_password(&named("other"), "secret2", "changed")
    );
    cmd!("GET_STATS", c.get_stats());
    cmd!("GET_USERS", c.get_users());
    cmd!("GET_CLIENTS", c.get_clients());
    out
}

/// What root sees: (stream, topic, partitions, messages, segments per
/// partition, groups, the group's offset in partition 0, users).
async fn state(root: &IggyClient) -> String {
    let streams = root.get_streams().await.expect("streams");
    let topic = root
        .get_topic(&named("s"), &named("t"))
        .await
        .expect("topic")
        .expect("the topic is there");
    let segments: Vec<u32> = topic.partitions.iter().map(|p| p.segments_count).collect();
    let groups = root
        .get_consumer_groups(&named("s"), &named("t"))
        .await
        .expect("groups");
    let offset = root
        .get_consumer_offset(
            &Consumer::group(named("g")),
            &named("s"),
            &named("t"),
            Some(0),
        )
        .await
        .expect("offset")
        .map(|o| o.stored_offset);
    let mut users: Vec<(String, String)> = root
        .get_users()
        .await
        .expect("users")
        .into_iter()
        .map(|u| (u.username, format!("{:?}", u.status)))
        .collect();
    users.sort();
    let reader = root
        .get_user(&named("reader"))
        .await
        .expect("get reader")
        .expect("reader");
    format!(
        "streams {:?}; topic {} partitions {} messages {} segments {segments:?}; groups {:?}; offset {offset:?}; users {users:?}; reader {:?}",
        streams.iter().map(|s| (&s.name, s.topics_count)).collect::<Vec<_>>(),
        topic.name,
        topic.partitions_count,
        topic.messages_count,
        groups.iter().map(|g| &g.name).collect::<Vec<_>>(),
        reader.permissions,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_is_refused_every_change_and_nothing_changes() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Small segments, so that partition 0 has sealed segments to delete.
    let server = start_small_segments(dir.path(), 4096, std::time::Duration::from_secs(3600));
    let root = client(&server).await;
    common::stream_and_topic(&root, "s", "t", 2).await;
    fill(&root, "s", "t", 2, 60, 200).await;
    root.create_consumer_group(&named("s"), &named("t"), "g")
        .await
        .expect("group");
    let member = client(&server).await;
    member
        .join_consumer_group(&named("s"), &named("t"), &named("g"))
        .await
        .expect("join");
    member
        .store_consumer_offset(
            &Consumer::group(named("g")),
            &named("s"),
            &named("t"),
            Some(0),
            5,
        )
        .await
        .expect("member stores an offset");
    let reader = GlobalPermissions {
        read_streams: true,
        ..GlobalPermissions::default()
    };
    let perms = Permissions {
        global: reader,
        streams: None,
    };
    root.create_user("reader", "secret1", UserStatus::Active, Some(perms))
        .await
        .expect("reader");
    root.create_user("other", "secret2", UserStatus::Active, None)
        .await
        .expect("other");
    let before = state(&root).await;
    assert!(
        before.contains("segments [") && !before.contains("segments [1, 1]"),
        "partitions have sealed segments: {before}"
    );

    let c = connect(&server).await;
    c.login_user("reader", "secret1")
        .await
        .expect("reader signs in");
    // The reader may read what it was granted.
    assert_eq!(c.get_streams().await.expect("reader lists").len(), 1);
    let mut accepted = Vec::new();
    for (name, call) in commands(&c) {
        match call.await {
            Err(e) if e.as_code() == UNAUTHORIZED => {}
            other => accepted.push(format!("{name}: {other:?}")),
        }
    }
    assert!(
        accepted.is_empty(),
        "not refused as Unauthorized: {accepted:#?}"
    );
    assert_eq!(state(&root).await, before, "nothing changed");
}
