//! The other side of `permission_table.rs`: every command, sent by a user
//! holding only the narrowest grant Iggy's permissioner accepts for it, is
//! carried out, and the same user is refused the commands next to it that
//! need a broader grant. Together they pin what each request needs
//! (`commands/authz.rs`, `need`): a command that asked for less than Iggy
//! does is accepted there or here, one that asked for more is refused here.

mod common;

use common::{client, connect, fill, named, start_small_segments, stream_and_topic};
use iggy::prelude::*;
use std::collections::BTreeMap;

const UNAUTHORIZED: u32 = 41;

/// Creates `name` with `permissions` as root and signs it in.
async fn user(
    server: &corelog_server::Server,
    root: &IggyClient,
    name: &str,
    permissions: Permissions,
) -> IggyClient {
    root.create_user(name, "secret1", UserStatus::Active, Some(permissions))
        .await
        .expect("create user");
    let c = connect(server).await;
    c.login_user(name, "secret1").await.expect("user login");
    c
}

fn global(g: GlobalPermissions) -> Permissions {
    Permissions {
        global: g,
        streams: None,
    }
}

/// A grant on stream 0 ("s") only.
fn on_stream(s: StreamPermissions) -> Permissions {
    Permissions {
        global: GlobalPermissions::default(),
        streams: Some(BTreeMap::from([(0, s)])),
    }
}

/// A grant on topic 0 ("t") of stream 0 ("s") only.
fn on_topic(t: TopicPermissions) -> Permissions {
    on_stream(StreamPermissions {
        topics: Some(BTreeMap::from([(0, t)])),
        ..StreamPermissions::default()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_command_is_carried_out_for_a_user_holding_just_its_grant() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Small segments, so that partition 0 has sealed segments to delete.
    let server = start_small_segments(dir.path(), 4096, std::time::Duration::from_secs(3600));
    let root = client(&server).await;
    stream_and_topic(&root, "s", "t", 2).await;
    fill(&root, "s", "t", 2, 60, 200).await;
    let s = named("s");
    let t = named("t");
    let mut wrong: Vec<String> = Vec::new();
    macro_rules! carried_out {
        ($name:literal, $e:expr) => {
            if let Err(e) = $e.await {
                wrong.push(format!("{} refused: {e}", $name));
            }
        };
    }
    macro_rules! refused {
        ($name:literal, $e:expr) => {
            match $e.await {
                Err(e) if e.as_code() == UNAUTHORIZED => {}
                other => wrong.push(format!("{} not refused: {:?}", $name, other.map(|_| ()))),
            }
        };
    }

    // Reading streams (its consumer groups below).
    let r = user(
        &server,
        &root,
        "reader",
        global(GlobalPermissions {
            read_streams: true,
            ..GlobalPermissions::default()
        }),
    )
    .await;
    carried_out!("GET_STREAMS", r.get_streams());
    carried_out!("GET_STREAM", r.get_stream(&s));
    carried_out!("GET_TOPICS", r.get_topics(&s));
    carried_out!("GET_TOPIC", r.get_topic(&s, &t));

    // Polling one topic: the messages and the consumer offsets, nothing
    // more.
    let p = user(
        &server,
        &root,
        "poller",
        on_topic(TopicPermissions {
            poll_messages: true,
            ..TopicPermissions::default()
        }),
    )
    .await;
    let me = Consumer::new(Identifier::numeric(1).expect("id"));
    carried_out!(
        "POLL_MESSAGES",
        p.poll_messages(&s, &t, Some(0), &me, &PollingStrategy::offset(0), 10, false)
    );
    carried_out!(
        "STORE_CONSUMER_OFFSET",
        p.store_consumer_offset(&me, &s, &t, Some(0), 3)
    );
    carried_out!(
        "GET_CONSUMER_OFFSET",
        p.get_consumer_offset(&me, &s, &t, Some(0))
    );
    carried_out!(
        "DELETE_CONSUMER_OFFSET",
        p.delete_consumer_offset(&me, &s, &t, Some(0))
    );
    refused!("GET_TOPIC (poller)", p.get_topic(&s, &t));
    refused!(
        "CREATE_CONSUMER_GROUP (poller)",
        p.create_consumer_group(&s, &t, "g0")
    );
    refused!(
        "GET_CONSUMER_GROUPS (poller)",
        p.get_consumer_groups(&s, &t)
    );
    refused!(
        "FLUSH_UNSAVED_BUFFER (poller)",
        p.flush_unsaved_buffer(&s, &t, 0, false)
    );

    // The reader's consumer groups: reading a topic is enough for them.
    carried_out!(
        "CREATE_CONSUMER_GROUP",
        r.create_consumer_group(&s, &t, "g")
    );
    carried_out!("GET_CONSUMER_GROUPS", r.get_consumer_groups(&s, &t));
    carried_out!(
        "GET_CONSUMER_GROUP",
        r.get_consumer_group(&s, &t, &named("g"))
    );
    carried_out!(
        "JOIN_CONSUMER_GROUP",
        r.join_consumer_group(&s, &t, &named("g"))
    );
    carried_out!(
        "LEAVE_CONSUMER_GROUP",
        r.leave_consumer_group(&s, &t, &named("g"))
    );
    carried_out!(
        "DELETE_CONSUMER_GROUP",
        r.delete_consumer_group(&s, &t, &named("g"))
    );

    // Reading the server.
    let ops = user(
        &server,
        &root,
        "ops",
        global(GlobalPermissions {
            read_servers: true,
            ..GlobalPermissions::default()
        }),
    )
    .await;
    carried_out!("GET_STATS", ops.get_stats());
    carried_out!("GET_CLIENTS", ops.get_clients());
    let root_client = root.get_me().await.expect("root's session").client_id;
    carried_out!("GET_CLIENT", ops.get_client(root_client));

    // Reading users: another user than itself.
    let auditor = user(
        &server,
        &root,
        "auditor",
        global(GlobalPermissions {
            read_users: true,
            ..GlobalPermissions::default()
        }),
    )
    .await;
    carried_out!("GET_USERS", auditor.get_users());
    carried_out!("GET_USER", auditor.get_user(&named("reader")));

    // Sending to one topic.
    let w = user(
        &server,
        &root,
        "writer",
        on_topic(TopicPermissions {
            send_messages: true,
            ..TopicPermissions::default()
        }),
    )
    .await;
    carried_out!("SEND_MESSAGES", async {
        let mut batch = vec![common::message(7, b"granted", None)];
        w.send_messages(&s, &t, &Partitioning::partition_id(0), &mut batch)
            .await
    });
    carried_out!(
        "FLUSH_UNSAVED_BUFFER",
        w.flush_unsaved_buffer(&s, &t, 0, true)
    );
    refused!(
        "POLL_MESSAGES (writer)",
        w.poll_messages(&s, &t, Some(0), &me, &PollingStrategy::offset(0), 10, false)
    );
    refused!(
        "STORE_CONSUMER_OFFSET (writer)",
        w.store_consumer_offset(&me, &s, &t, Some(0), 3)
    );

    // Managing users.
    let admin = user(
        &server,
        &root,
        "admin",
        global(GlobalPermissions {
            manage_users: true,
            ..GlobalPermissions::default()
        }),
    )
    .await;
    carried_out!(
        "CREATE_USER",
        admin.create_user("temp", "secret1", UserStatus::Active, None)
    );
    carried_out!(
        "UPDATE_USER",
        admin.update_user(
            &named("temp"),
            Some("temp2"),
            None,
            &UserUpdateOptions::default()
        )
    );
    carried_out!(
        "UPDATE_PERMISSIONS",
        admin.update_permissions(&named("temp2"), Some(Permissions::default()))
    );
    carried_out!(
        "CHANGE_PASSWORD",
        admin.change_password(&named("temp2"), "secret1", "changed1")
    );
    carried_out!("DELETE_USER", admin.delete_user(&named("temp2")));

    // Managing one stream's topics: its topics, partitions and segments,
    // not the stream.
    let tm = user(
        &server,
        &root,
        "topics",
        on_stream(StreamPermissions {
            manage_topics: true,
            ..StreamPermissions::default()
        }),
    )
    .await;
    carried_out!(
        "CREATE_TOPIC",
        tm.create_topic(&s, "t2", &TopicCreateOptions::default())
    );
    carried_out!(
        "UPDATE_TOPIC",
        tm.update_topic(&s, &named("t2"), "t3", &TopicUpdateOptions::default())
    );
    carried_out!("CREATE_PARTITIONS", tm.create_partitions(&s, &t, 1));
    carried_out!("DELETE_PARTITIONS", tm.delete_partitions(&s, &t, 1));
    carried_out!("DELETE_SEGMENTS", tm.delete_segments(&s, &t, 0, 1));
    carried_out!("PURGE_TOPIC", tm.purge_topic(&s, &t));
    carried_out!("DELETE_TOPIC", tm.delete_topic(&s, &named("t3")));
    refused!("PURGE_STREAM (topics)", tm.purge_stream(&s));
    refused!(
        "UPDATE_STREAM (topics)",
        tm.update_stream(&s, "s1", &StreamUpdateOptions::default())
    );
    refused!("DELETE_STREAM (topics)", tm.delete_stream(&s));
    refused!("CREATE_STREAM (topics)", tm.create_stream("s9"));

    // Managing the stream itself.
    let owner = user(
        &server,
        &root,
        "owner",
        on_stream(StreamPermissions {
            manage_stream: true,
            ..StreamPermissions::default()
        }),
    )
    .await;
    carried_out!("PURGE_STREAM", owner.purge_stream(&s));
    carried_out!(
        "UPDATE_STREAM",
        owner.update_stream(&s, "s2", &StreamUpdateOptions::default())
    );
    carried_out!("DELETE_STREAM", owner.delete_stream(&named("s2")));

    // Creating streams.
    let maker = user(
        &server,
        &root,
        "maker",
        global(GlobalPermissions {
            manage_streams: true,
            ..GlobalPermissions::default()
        }),
    )
    .await;
    carried_out!("CREATE_STREAM", maker.create_stream("fresh"));

    assert!(wrong.is_empty(), "{wrong:#?}");
    // And they happened.
    let streams: Vec<String> = root
        .get_streams()
        .await
        .expect("streams")
        .into_iter()
        .map(|s| s.name)
        .collect();
    assert_eq!(streams, ["fresh"]);
    let mut users: Vec<String> = root
        .get_users()
        .await
        .expect("users")
        .into_iter()
        .map(|u| u.username)
        .collect();
    users.sort();
    assert_eq!(
        users,
        [
            "admin", "auditor", "iggy", "maker", "ops", "owner", "poller", "reader", "topics",
            "writer"
        ]
    );
}
