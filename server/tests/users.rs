//! Users, permissions and personal access tokens with Iggy's own SDK: a
//! user without a grant is refused and nothing changes, grants per stream
//! and topic, tokens until they expire or are deleted, deleted users,
//! password changes, and all of it after a restart.

mod common;

use common::{client, connect, message, named, start, stream_and_topic};
use iggy::prelude::*;
use std::collections::BTreeMap;

fn code(e: IggyError) -> u32 {
    e.as_code()
}

const UNAUTHENTICATED: u32 = 40;
const UNAUTHORIZED: u32 = 41;
const INVALID_CREDENTIALS: u32 = 42;

/// A signed-in client for `user`/`password`.
async fn as_user(server: &corelog_server::Server, user: &str, password: &str) -> IggyClient {
    let c = connect(server).await;
    c.login_user(user, password).await.expect("user login");
    c
}

fn global(g: GlobalPermissions) -> Permissions {
    Permissions {
        global: g,
        streams: None,
    }
}

/// Grants on topic `topic` of stream `stream` only.
fn on_topic(stream: usize, topic: usize, t: TopicPermissions) -> Permissions {
    Permissions {
        global: GlobalPermissions::default(),
        streams: Some(BTreeMap::from([(
            stream,
            StreamPermissions {
                topics: Some(BTreeMap::from([(topic, t)])),
                ..StreamPermissions::default()
            },
        )])),
    }
}

async fn send_one(c: &IggyClient, stream: &str, topic: &str) -> Result<(), IggyError> {
    let mut batch = vec![message(1, b"x", None)];
    c.send_messages(
        &named(stream),
        &named(topic),
        &Partitioning::partition_id(0),
        &mut batch,
    )
    .await
    .map(|_| ())
}

async fn poll_count(c: &IggyClient, stream: &str, topic: &str) -> Result<u32, IggyError> {
    c.poll_messages(
        &named(stream),
        &named(topic),
        Some(0),
        &Consumer::new(Identifier::numeric(1).expect("id")),
        &PollingStrategy::offset(0),
        100,
        false,
    )
    .await
    .map(|p| p.count)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_without_a_permission_is_refused_and_nothing_changes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start(dir.path());
    let root = client(&server).await;
    stream_and_topic(&root, "s", "t", 1).await;
    send_one(&root, "s", "t").await.expect("root sends");
    let reader = GlobalPermissions {
        read_streams: true,
        ..GlobalPermissions::default()
    };
    root.create_user(
        "reader",
        "secret1",
        UserStatus::Active,
        Some(global(reader)),
    )
    .await
    .expect("create user");

    let r = as_user(&server, "reader", "secret1").await;
    assert_eq!(poll_count(&r, "s", "t").await.expect("reader polls"), 1);
    let streams = r.get_streams().await.expect("reader lists streams");
    assert_eq!(streams.len(), 1);
    assert_eq!(
        send_one(&r, "s", "t").await.map_err(code),
        Err(UNAUTHORIZED)
    );
    let deleted = r.delete_topic(&named("s"), &named("t")).await;
    assert_eq!(deleted.map_err(code), Err(UNAUTHORIZED));
    let created = r.create_stream("other").await;
    assert_eq!(created.map(|_| ()).map_err(code), Err(UNAUTHORIZED));
    let user = r
        .create_user("sneaky", "secret1", UserStatus::Active, None)
        .await;
    assert_eq!(user.map(|_| ()).map_err(code), Err(UNAUTHORIZED));
    let perms = r
        .update_permissions(&named("reader"), Some(Permissions::default()))
        .await;
    assert_eq!(perms.map_err(code), Err(UNAUTHORIZED));
    assert_eq!(
        r.get_stats().await.map(|_| ()).map_err(code),
        Err(UNAUTHORIZED)
    );
    // Not implemented, but refused first to a user without `read_servers`.
    let snapshot = r
        .snapshot(
            SnapshotCompression::Deflated,
            vec![SystemSnapshotType::Test],
        )
        .await;
    assert_eq!(snapshot.map(|_| ()).map_err(code), Err(UNAUTHORIZED));

    // Nothing of it happened.
    let topic = root
        .get_topic(&named("s"), &named("t"))
        .await
        .expect("get topic")
        .expect("the topic is still there");
    assert_eq!(topic.messages_count, 1);
    assert_eq!(root.get_streams().await.expect("streams").len(), 1);
    let users = root.get_users().await.expect("users");
    let names: Vec<_> = users.iter().map(|u| u.username.as_str()).collect();
    assert_eq!(names, ["iggy", "reader"]);
    let reader_now = root
        .get_user(&named("reader"))
        .await
        .expect("get user")
        .expect("reader");
    assert_eq!(
        reader_now.permissions.map(|p| p.global.read_streams),
        Some(true)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permissions_per_stream_and_topic() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start(dir.path());
    let root = client(&server).await;
    stream_and_topic(&root, "a", "t0", 1).await;
    root.create_topic(&named("a"), "t1", &TopicCreateOptions::default())
        .await
        .expect("topic a/t1");
    stream_and_topic(&root, "b", "t0", 1).await;
    let (a, b) = (0usize, 1usize);
    assert_eq!(
        root.get_stream(&named("b")).await.expect("b").map(|s| s.id),
        Some(b as u32)
    );
    let send_only = TopicPermissions {
        send_messages: true,
        ..TopicPermissions::default()
    };
    root.create_user(
        "writer",
        "secret1",
        UserStatus::Active,
        Some(on_topic(a, 0, send_only)),
    )
    .await
    .expect("create user");
    let w = as_user(&server, "writer", "secret1").await;
    send_one(&w, "a", "t0").await.expect("send to a/t0");
    assert_eq!(
        send_one(&w, "a", "t1").await.map_err(code),
        Err(UNAUTHORIZED)
    );
    assert_eq!(
        send_one(&w, "b", "t0").await.map_err(code),
        Err(UNAUTHORIZED)
    );
    assert_eq!(
        poll_count(&w, "a", "t0").await.map_err(code),
        Err(UNAUTHORIZED)
    );
    let topic = w.get_topic(&named("a"), &named("t0")).await;
    assert_eq!(topic.map(|_| ()).map_err(code), Err(UNAUTHORIZED));

    // manage_stream on b: b's topics may be deleted, a's still may not.
    let manage_b = Permissions {
        global: GlobalPermissions::default(),
        streams: Some(BTreeMap::from([(
            b,
            StreamPermissions {
                manage_stream: true,
                ..StreamPermissions::default()
            },
        )])),
    };
    root.update_permissions(&named("writer"), Some(manage_b))
        .await
        .expect("update permissions");
    let deleted = w.delete_topic(&named("a"), &named("t1")).await;
    assert_eq!(deleted.map_err(code), Err(UNAUTHORIZED));
    assert_eq!(
        send_one(&w, "a", "t0").await.map_err(code),
        Err(UNAUTHORIZED)
    );
    send_one(&w, "b", "t0")
        .await
        .expect("manage_stream implies send");
    w.delete_topic(&named("b"), &named("t0"))
        .await
        .expect("delete b/t0");
    let topics = root.get_topics(&named("b")).await.expect("topics of b");
    assert!(topics.is_empty());
    assert_eq!(root.get_topics(&named("a")).await.expect("a").len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_personal_access_token_signs_in_until_it_expires_or_is_deleted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start(dir.path());
    let root = client(&server).await;
    root.create_user("tok", "secret1", UserStatus::Active, None)
        .await
        .expect("create user");
    let u = as_user(&server, "tok", "secret1").await;
    let short = u
        .create_personal_access_token(
            "short",
            IggyExpiry::ExpireDuration(IggyDuration::from(2_000_000u64)),
        )
        .await
        .expect("short token");
    let long = u
        .create_personal_access_token("long", PersonalAccessTokenExpiry::NeverExpire)
        .await
        .expect("long token");
    let dup = u
        .create_personal_access_token("long", PersonalAccessTokenExpiry::NeverExpire)
        .await;
    assert_eq!(dup.map(|_| ()).map_err(code), Err(51));
    let listed = u.get_personal_access_tokens().await.expect("list");
    let names: Vec<_> = listed.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["long", "short"]);
    assert!(root
        .get_personal_access_tokens()
        .await
        .expect("root's")
        .is_empty());

    let by_token = connect(&server).await;
    let who = by_token
        .login_with_personal_access_token(&short.token)
        .await
        .expect("short token signs in");
    assert_eq!(Some(who.user_id), u.get_me().await.expect("me").user_id);

    tokio::time::sleep(std::time::Duration::from_millis(2_200)).await;
    // A session signed in with the token ends when it expires.
    let ended = by_token.get_me().await;
    assert_eq!(ended.map(|_| ()).map_err(code), Err(UNAUTHENTICATED));
    let late = connect(&server).await;
    let expired = late.login_with_personal_access_token(&short.token).await;
    assert_eq!(expired.map(|_| ()).map_err(code), Err(54));
    let names: Vec<_> = u
        .get_personal_access_tokens()
        .await
        .expect("list")
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(names, ["long"]);

    let with_long = connect(&server).await;
    with_long
        .login_with_personal_access_token(&long.token)
        .await
        .expect("long token signs in");
    with_long
        .get_me()
        .await
        .expect("signed in with the long token");
    u.delete_personal_access_token("long")
        .await
        .expect("delete token");
    // ... and when it is deleted.
    let ended = with_long.get_me().await;
    assert_eq!(ended.map(|_| ()).map_err(code), Err(UNAUTHENTICATED));
    u.get_me().await.expect("a password's session goes on");
    let after = connect(&server).await;
    let refused = after.login_with_personal_access_token(&long.token).await;
    assert_eq!(refused.map(|_| ()).map_err(code), Err(53));
    let wrong = connect(&server).await;
    let forged = format!("{}{}", &long.token[..12], "0".repeat(36));
    let forged = wrong.login_with_personal_access_token(&forged).await;
    assert!(forged.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn users_permissions_and_tokens_survive_a_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start(dir.path());
    let root = client(&server).await;
    stream_and_topic(&root, "s", "t", 1).await;
    let poller = on_topic(
        0,
        0,
        TopicPermissions {
            poll_messages: true,
            ..TopicPermissions::default()
        },
    );
    root.create_user("kept", "secret1", UserStatus::Active, Some(poller))
        .await
        .expect("create user");
    let u = as_user(&server, "kept", "secret1").await;
    let token = u
        .create_personal_access_token("tok1", PersonalAccessTokenExpiry::NeverExpire)
        .await
        .expect("token");
    drop((u, root));
    server.shutdown().expect("shutdown");

    let meta = std::fs::read_to_string(dir.path().join("iggy-metadata")).unwrap_or_default();
    assert!(
        !meta.contains("secret1"),
        "a password is stored in the clear"
    );
    assert!(
        !meta.contains(&token.token),
        "a token is stored in the clear"
    );

    let server = start(dir.path());
    let u = as_user(&server, "kept", "secret1").await;
    assert_eq!(poll_count(&u, "s", "t").await.expect("poll"), 0);
    assert_eq!(
        send_one(&u, "s", "t").await.map_err(code),
        Err(UNAUTHORIZED)
    );
    let by_token = connect(&server).await;
    by_token
        .login_with_personal_access_token(&token.token)
        .await
        .expect("token signs in after a restart");
    let root = client(&server).await;
    let again = root
        .create_user("kept2", "secret1", UserStatus::Active, None)
        .await
        .expect("another user");
    assert_eq!(again.id, 2, "user ids are not reused after a restart");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_user_cannot_sign_in_and_its_session_ends() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start(dir.path());
    let root = client(&server).await;
    let everything = GlobalPermissions {
        read_streams: true,
        ..GlobalPermissions::default()
    };
    root.create_user(
        "gone",
        "secret1",
        UserStatus::Active,
        Some(global(everything)),
    )
    .await
    .expect("create user");
    let g = as_user(&server, "gone", "secret1").await;
    g.get_streams().await.expect("lists while it exists");
    let token = g
        .create_personal_access_token("tok", PersonalAccessTokenExpiry::NeverExpire)
        .await
        .expect("token");
    root.delete_user(&named("gone")).await.expect("delete");
    assert!(g.get_streams().await.is_err(), "its open session goes on");
    let again = connect(&server).await;
    let login = again.login_user("gone", "secret1").await;
    assert_eq!(login.map(|_| ()).map_err(code), Err(INVALID_CREDENTIALS));
    let by_token = connect(&server).await;
    assert!(by_token
        .login_with_personal_access_token(&token.token)
        .await
        .is_err());
    assert_eq!(
        root.delete_user(&Identifier::numeric(0).expect("id"))
            .await
            .map_err(code),
        Err(48)
    );
    assert_eq!(root.get_users().await.expect("users").len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_changes_its_own_password_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start(dir.path());
    let root = client(&server).await;
    for name in ["alice", "bob"] {
        root.create_user(name, "secret1", UserStatus::Active, None)
            .await
            .expect("create user");
    }
    let alice = as_user(&server, "alice", "secret1").await;
    let wrong = alice
        .change_password(&named("alice"), "nope1", "secret2")
        .await;
    assert_eq!(wrong.map_err(code), Err(INVALID_CREDENTIALS));
    let other = alice
        .change_password(&named("bob"), "secret1", "secret2")
        .await;
    assert_eq!(other.map_err(code), Err(UNAUTHORIZED));
    alice
        .change_password(&named("alice"), "secret1", "secret2")
        .await
        .expect("own password");
    let old = connect(&server).await;
    assert_eq!(
        old.login_user("alice", "secret1")
            .await
            .map(|_| ())
            .map_err(code),
        Err(INVALID_CREDENTIALS)
    );
    as_user(&server, "alice", "secret2").await;
    as_user(&server, "bob", "secret1").await;

    // An inactive user cannot sign in; activated again, it can.
    root.update_user(
        &named("bob"),
        None,
        Some(UserStatus::Inactive),
        &Default::default(),
    )
    .await
    .expect("deactivate");
    let inactive = connect(&server).await;
    assert_eq!(
        inactive
            .login_user("bob", "secret1")
            .await
            .map(|_| ())
            .map_err(code),
        Err(47)
    );
    root.update_user(
        &named("bob"),
        Some("robert"),
        Some(UserStatus::Active),
        &Default::default(),
    )
    .await
    .expect("rename and activate");
    as_user(&server, "robert", "secret1").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_are_listed_with_who_is_signed_in() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start(dir.path());
    let root = client(&server).await;
    root.create_user("plain", "secret1", UserStatus::Active, None)
        .await
        .expect("create user");
    let plain = as_user(&server, "plain", "secret1").await;
    let anonymous = connect(&server).await;
    anonymous.ping().await.expect("ping");
    let me = plain.get_me().await.expect("me");
    assert_eq!(me.user_id, Some(1));
    let clients = root.get_clients().await.expect("clients");
    assert_eq!(clients.len(), 3);
    let mut users: Vec<Option<u32>> = clients.iter().map(|c| c.user_id).collect();
    users.sort_unstable();
    assert_eq!(users, [None, Some(0), Some(1)]);
    let one = root
        .get_client(me.client_id)
        .await
        .expect("client")
        .expect("connected");
    assert_eq!((one.user_id, one.transport.as_str()), (Some(1), "TCP"));
    assert_eq!(
        plain.get_clients().await.map(|_| ()).map_err(code),
        Err(UNAUTHORIZED)
    );
    drop(anonymous);
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert_eq!(root.get_clients().await.expect("clients").len(), 2);
}
