//! A deleted stream's or topic's id is given to the next one created, as
//! Iggy's server does (the lowest free id), and nothing of the deleted one
//! follows it there: not its messages, not its groups' members, not the
//! grants users had over it.

mod common;

use common::{client, fill, named, start, stream_and_topic};
use iggy::prelude::*;
use std::collections::BTreeMap;

fn numeric(id: u32) -> Identifier {
    Identifier::numeric(id).expect("id")
}

async fn topic_ids(c: &IggyClient, stream: &str) -> Vec<(u32, String, u64)> {
    c.get_topics(&named(stream))
        .await
        .expect("topics")
        .into_iter()
        .map(|t| (t.id, t.name, t.messages_count))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_topics_id_is_given_again_without_its_data_or_members() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start(dir.path());
    let admin = client(&server).await;
    stream_and_topic(&admin, "s", "old", 2).await;
    admin
        .create_topic(&named("s"), "kept", &TopicCreateOptions::default())
        .await
        .expect("topic kept");
    fill(&admin, "s", "old", 2, 5, 5).await;
    admin
        .create_consumer_group(&named("s"), &named("old"), "g")
        .await
        .expect("group");
    // A member that stays connected while its topic is deleted.
    let member = client(&server).await;
    member
        .join_consumer_group(&named("s"), &named("old"), &named("g"))
        .await
        .expect("join");

    admin
        .delete_topic(&named("s"), &numeric(0))
        .await
        .expect("delete topic 0");
    let new = admin
        .create_topic(
            &named("s"),
            "new",
            &TopicCreateOptions {
                partitions_count: Some(2),
                ..TopicCreateOptions::default()
            },
        )
        .await
        .expect("topic new");
    assert_eq!(new.id, 0, "the deleted topic's id is given again");
    assert_eq!(
        topic_ids(&admin, "s").await,
        vec![(0, "new".to_owned(), 0), (1, "kept".to_owned(), 0)],
        "listed in id order, the new topic empty"
    );
    let g = admin
        .create_consumer_group(&named("s"), &numeric(0), "g")
        .await
        .expect("group again");
    let details = admin
        .get_consumer_group(&named("s"), &numeric(0), &numeric(g.id))
        .await
        .expect("get group")
        .expect("the group");
    assert_eq!(
        (details.members_count, details.members.len()),
        (0, 0),
        "the old topic's member is not the new group's"
    );
    // The old member's SYNC finds no group of its own either: it joins anew.
    member
        .join_consumer_group(&named("s"), &numeric(0), &numeric(g.id))
        .await
        .expect("join the new group");
    let details = admin
        .get_consumer_group(&named("s"), &numeric(0), &numeric(g.id))
        .await
        .expect("get group")
        .expect("the group");
    assert_eq!(details.members_count, 1);
    assert_eq!(details.members[0].partitions, vec![0, 1]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_streams_id_is_given_again_without_the_grants_over_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start(dir.path());
    let admin = client(&server).await;
    stream_and_topic(&admin, "a", "t", 1).await;
    admin.create_stream("b").await.expect("stream b");
    let grants = Permissions {
        global: GlobalPermissions::default(),
        streams: Some(BTreeMap::from([(
            0,
            StreamPermissions {
                read_stream: true,
                ..StreamPermissions::default()
            },
        )])),
    };
    admin
        .create_user("user1", "secret-password", UserStatus::Active, Some(grants))
        .await
        .expect("user");

    admin.delete_stream(&numeric(0)).await.expect("delete a");
    let again = admin.create_stream("c").await.expect("stream c");
    assert_eq!(again.id, 0, "the deleted stream's id is given again");
    let c = admin
        .get_stream(&numeric(0))
        .await
        .expect("get stream 0")
        .expect("stream 0");
    assert_eq!((c.name.as_str(), c.topics_count), ("c", 0));
    let next = admin.create_stream("d").await.expect("stream d");
    assert_eq!(next.id, 2, "1 is still b's");
    let user = admin
        .get_user(&named("user1"))
        .await
        .expect("get user")
        .expect("the user");
    let streams = user.permissions.and_then(|p| p.streams);
    assert!(
        streams.as_ref().is_none_or(|s| s.is_empty()),
        "the grant over the deleted stream 0 does not pass to the new one: {streams:?}"
    );
}
