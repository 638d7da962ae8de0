//! Several clients at once, and sign-in.

mod common;

use common::{client, connect, message, named, start, stream_and_topic};
use iggy::prelude::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_clients_send_and_poll_at_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start(dir.path());
    let admin = client(&server).await;
    stream_and_topic(&admin, "s", "t", 2).await;
    let (a, b) = (client(&server).await, client(&server).await);
    let work = |c: IggyClient, p: u32| async move {
        for round in 0..20u128 {
            let mut batch: Vec<IggyMessage> = (0..10u128)
                .map(|i| {
                    message(
                        round * 10 + i + 1,
                        format!("{p}:{}", round * 10 + i).as_bytes(),
                        None,
                    )
                })
                .collect();
            c.send_messages(
                &named("s"),
                &named("t"),
                &Partitioning::partition_id(p),
                &mut batch,
            )
            .await
            .expect("send");
        }
        let polled = c
            .poll_messages(
                &named("s"),
                &named("t"),
                Some(p),
                &Consumer::new(named("c")),
                &PollingStrategy::first(),
                1000,
                false,
            )
            .await
            .expect("poll");
        assert_eq!(polled.messages.len(), 200);
        for (i, m) in polled.messages.iter().enumerate() {
            assert_eq!(&m.payload[..], format!("{p}:{i}").as_bytes());
        }
    };
    tokio::join!(work(a, 0), work(b, 1));
    let topic = admin
        .get_topic(&named("s"), &named("t"))
        .await
        .expect("get")
        .expect("topic");
    assert_eq!(topic.messages_count, 400);
    server.shutdown().expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_password_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start(dir.path());
    let c = connect(&server).await;
    let refused = c.login_user("iggy", "not-the-password").await;
    assert!(
        matches!(refused, Err(IggyError::InvalidCredentials)),
        "{refused:?}"
    );
    assert!(c.login_user("someone", "iggy").await.is_err());
    assert!(c.get_streams().await.is_err());
    c.login_user("iggy", "iggy").await.expect("right password");
    c.get_streams().await.expect("signed in");
    server.shutdown().expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logout_ends_the_session_and_login_opens_a_new_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start(dir.path());
    let c = client(&server).await;
    stream_and_topic(&c, "s", "t", 1).await;
    assert_eq!(c.get_topics(&named("s")).await.expect("topics").len(), 1);
    c.logout_user().await.expect("logout");
    assert!(c.get_topics(&named("s")).await.is_err());
    c.login_user("iggy", "iggy").await.expect("login again");
    assert_eq!(
        c.get_topics(&named("s")).await.expect("topics")[0].name,
        "t"
    );
    server.shutdown().expect("shutdown");
}
