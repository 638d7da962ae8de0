//! Iggy's heartbeat rule: a consumer-group member that sends nothing (no
//! request, no PING) for 1.2 heartbeat intervals is evicted: its partitions
//! move to the members left, it gets `Eviction(StaleClient)` and its
//! connection closes. A member that keeps sending requests, and a silent
//! connection that is no member, are left alone.

mod common;

use common::{fill, named, start_with, stream_and_topic};
use corelog_server::Limits;
use iggy::prelude::*;
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

const INTERVAL: Duration = Duration::from_millis(500);

/// A signed-in SDK client that pings every `heartbeat` (its own timer;
/// `1h`: never, in these tests).
async fn client_pinging(server: &corelog_server::Server, heartbeat: &str) -> IggyClient {
    let config = TcpClientConfig {
        server_address: server.local_addr().to_string(),
        heartbeat_interval: IggyDuration::from_str(heartbeat).expect("duration"),
        nodelay: true,
        reconnection: TcpClientReconnectionConfig {
            enabled: false,
            ..TcpClientReconnectionConfig::default()
        },
        ..TcpClientConfig::default()
    };
    let tcp = TcpClient::create(Arc::new(config)).expect("client");
    Client::connect(&tcp).await.expect("connect");
    let client = IggyClient::create(ClientWrapper::Tcp(tcp), None, None);
    client.login_user("iggy", "iggy").await.expect("login");
    client
}

async fn members(c: &IggyClient) -> Vec<(u32, Vec<u32>)> {
    common::group_members(c).await
}

async fn join(c: &IggyClient) {
    c.join_consumer_group(&named("s"), &named("t"), &named("g"))
        .await
        .expect("join");
}

async fn poll(c: &IggyClient) -> Result<PolledMessages, IggyError> {
    c.poll_messages(
        &named("s"),
        &named("t"),
        None,
        &Consumer::group(named("g")),
        &PollingStrategy::next(),
        1,
        true,
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_member_is_evicted_and_its_partitions_move() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start_with(
        dir.path(),
        Limits {
            heartbeat_interval: INTERVAL,
            ..Limits::default()
        },
    );
    // The admin pings often; it is no member anyway.
    let admin = client_pinging(&server, "100ms").await;
    stream_and_topic(&admin, "s", "t", 2).await;
    fill(&admin, "s", "t", 2, 4, 4).await;
    admin
        .create_consumer_group(&named("s"), &named("t"), "g")
        .await
        .expect("group");
    let silent = client_pinging(&server, "1h").await;
    let busy = client_pinging(&server, "1h").await;
    join(&silent).await;
    join(&busy).await;
    assert!(poll(&silent).await.is_ok());
    let before = members(&admin).await;
    assert_eq!(before.len(), 2);
    let busy_id = before[1].0;

    // `busy` keeps polling (any request is a sign of life), `silent` stops.
    let started = Instant::now();
    let moved = loop {
        assert!(poll(&busy).await.is_ok(), "the busy member is served");
        let now = members(&admin).await;
        if now.len() == 1 {
            break now;
        }
        assert!(
            started.elapsed() < INTERVAL * 8,
            "the silent member was not evicted: {now:?}"
        );
        tokio::time::sleep(INTERVAL / 5).await;
    };
    assert!(
        started.elapsed() >= INTERVAL,
        "evicted before its threshold"
    );
    assert_eq!(moved, vec![(busy_id, vec![0, 1])], "its partitions moved");
    // The evicted member's next request fails: its session is over.
    assert!(
        poll(&silent).await.is_err(),
        "the evicted member is refused"
    );
    // A silent connection that is no member stays.
    let idle = client_pinging(&server, "1h").await;
    let quiet = Instant::now();
    while quiet.elapsed() < INTERVAL * 3 {
        assert!(poll(&busy).await.is_ok());
        tokio::time::sleep(INTERVAL / 5).await;
    }
    assert!(
        idle.get_streams().await.is_ok(),
        "a silent non-member is kept"
    );
    assert_eq!(members(&admin).await, moved, "the busy member is kept");
    // And once the busy member goes quiet too, it goes the same way.
    tokio::time::sleep(INTERVAL * 3).await;
    assert!(members(&admin).await.is_empty());
}
