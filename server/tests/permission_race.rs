//! The permission race (issue 30, finding 1): a signed-in user without
//! grants loops deletes on the ids root will create next. A check against
//! an older catalog than the one the change resolves its target in lets a
//! delete of a stream or topic that did not exist at the check through,
//! data and all. Every delete here must be refused, and everything root
//! created must still be there, with its messages.

mod common;

use common::{client, connect, message, named};
use iggy::prelude::*;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;

/// Topics (and streams) root creates while the attackers loop.
const CREATED: u32 = 20;
/// Attacker connections.
const ATTACKERS: usize = 4;

async fn nobody(server: &corelog_server::Server) -> IggyClient {
    let c = connect(server).await;
    c.login_user("nobody", "secret1")
        .await
        .expect("nobody signs in");
    c
}

fn id(n: u32) -> Identifier {
    Identifier::numeric(n).expect("numeric id")
}

async fn send_one(root: &IggyClient, stream: &Identifier, topic: &Identifier) {
    let mut batch = vec![message(1, b"kept", None)];
    root.send_messages(stream, topic, &Partitioning::partition_id(0), &mut batch)
        .await
        .expect("root sends");
}

/// Loops `attack` on `ATTACKERS` connections until `done`; counts the
/// attempts that were accepted.
fn spawn_attackers<F, Fut>(
    server: &corelog_server::Server,
    done: &Arc<AtomicBool>,
    accepted: &Arc<AtomicU32>,
    attack: F,
) -> Vec<tokio::task::JoinHandle<u32>>
where
    F: Fn(IggyClient, u32) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = (IggyClient, bool)> + Send,
{
    let addr = server.local_addr();
    (0..ATTACKERS)
        .map(|i| {
            let (done, accepted, attack) = (done.clone(), accepted.clone(), attack.clone());
            tokio::spawn(async move {
                let c = IggyClient::builder()
                    .with_tcp()
                    .with_server_address(addr.to_string())
                    .build()
                    .expect("client");
                c.connect().await.expect("connect");
                c.login_user("nobody", "secret1").await.expect("login");
                let mut c = Some(c);
                let mut tries = 0u32;
                let mut n = i as u32;
                while !done.load(Ordering::Relaxed) {
                    // Every id root will create, round and round.
                    let target = 1 + n % (CREATED + 1);
                    n += 1;
                    let (back, ok) = attack(c.take().expect("client"), target).await;
                    c = Some(back);
                    tries += 1;
                    if ok {
                        accepted.fetch_add(1, Ordering::Relaxed);
                    }
                }
                tries
            })
        })
        .collect()
}

async fn no_grant_user(root: &IggyClient) {
    root.create_user("nobody", "secret1", UserStatus::Active, None)
        .await
        .expect("create user");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_without_grants_cannot_delete_topics_root_creates_meanwhile() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = common::start(dir.path());
    let root = client(&server).await;
    root.create_stream("s").await.expect("create stream");
    no_grant_user(&root).await;
    // Refused outright while the target is there.
    nobody(&server)
        .await
        .delete_stream(&named("s"))
        .await
        .expect_err("refused");

    let done = Arc::new(AtomicBool::new(false));
    let accepted = Arc::new(AtomicU32::new(0));
    let attackers = spawn_attackers(&server, &done, &accepted, |c, target| async move {
        let ok = match target % 3 {
            0 => c.delete_topic(&named("s"), &id(target)).await.is_ok(),
            1 => c.purge_topic(&named("s"), &id(target)).await.is_ok(),
            _ => c
                .delete_partitions(&named("s"), &id(target), 1)
                .await
                .is_ok(),
        };
        (c, ok)
    });
    for i in 0..CREATED {
        let topic = root
            .create_topic(
                &named("s"),
                &format!("t{i}"),
                &TopicCreateOptions {
                    partitions_count: Some(2),
                    ..TopicCreateOptions::default()
                },
            )
            .await
            .expect("root creates a topic");
        send_one(&root, &named("s"), &id(topic.id)).await;
    }
    done.store(true, Ordering::Relaxed);
    let mut tries = 0;
    for a in attackers {
        tries += a.await.expect("attacker");
    }
    assert!(tries > 0, "the attackers tried");
    let topics = root.get_topics(&named("s")).await.expect("topics");
    assert_eq!(
        topics.len() as u32,
        CREATED,
        "every topic root created is there"
    );
    for t in &topics {
        assert_eq!(
            t.partitions_count, 2,
            "topic {} keeps its partitions",
            t.name
        );
        assert_eq!(t.messages_count, 1, "topic {} keeps its message", t.name);
    }
    assert_eq!(
        accepted.load(Ordering::Relaxed),
        0,
        "no change by a user without grants was accepted ({tries} tries)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_without_grants_cannot_delete_streams_root_creates_meanwhile() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = common::start(dir.path());
    let root = client(&server).await;
    no_grant_user(&root).await;

    let done = Arc::new(AtomicBool::new(false));
    let accepted = Arc::new(AtomicU32::new(0));
    let attackers = spawn_attackers(&server, &done, &accepted, |c, target| async move {
        let ok = match target % 3 {
            0 => c.delete_stream(&id(target)).await.is_ok(),
            1 => c.purge_stream(&id(target)).await.is_ok(),
            _ => c
                .update_stream(
                    &id(target),
                    &format!("taken{target}"),
                    &StreamUpdateOptions::default(),
                )
                .await
                .is_ok(),
        };
        (c, ok)
    });
    for i in 0..CREATED {
        let stream = root
            .create_stream(&format!("s{i}"))
            .await
            .expect("root creates a stream");
        root.create_topic(
            &id(stream.id),
            "t",
            &TopicCreateOptions {
                partitions_count: Some(1),
                ..TopicCreateOptions::default()
            },
        )
        .await
        .expect("root creates a topic");
        send_one(&root, &id(stream.id), &named("t")).await;
    }
    done.store(true, Ordering::Relaxed);
    let mut tries = 0;
    for a in attackers {
        tries += a.await.expect("attacker");
    }
    assert!(tries > 0, "the attackers tried");
    let streams = root.get_streams().await.expect("streams");
    assert_eq!(
        streams.len() as u32,
        CREATED,
        "every stream root created is there"
    );
    for s in &streams {
        assert!(s.name.starts_with('s'), "stream {} was not renamed", s.name);
        assert_eq!(s.messages_count, 1, "stream {} keeps its message", s.name);
    }
    assert_eq!(
        accepted.load(Ordering::Relaxed),
        0,
        "no change by a user without grants was accepted ({tries} tries)"
    );
}
