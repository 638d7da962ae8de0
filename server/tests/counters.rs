//! What the server counts about its clients, and what GET_STATS says about
//! the process: connections opened and closed by reason, bytes in and
//! out, refused requests by kind; resident memory and threads.

mod common;

use common::raw::Raw;
use common::{client, start};
use corelog_server::{CloseReason, Refusal};
use iggy::prelude::*;
use iggy_binary_protocol::codes::{GET_STREAMS_CODE, PING_CODE};
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_bytes_and_refusals_are_counted_and_stats_show_the_process() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start(dir.path());
    let before = server.counters();
    let mut raw = Raw::connect(server.local_addr());
    assert_eq!(raw.send(PING_CODE, &[]).status, 0);
    assert_eq!(raw.send(GET_STREAMS_CODE, &[]).status, 40);
    drop(raw);
    let deadline = Instant::now() + Duration::from_secs(5);
    while server.counters().closed_for(CloseReason::ClientLeft) == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let after = server.counters();
    assert_eq!(after.opened - before.opened, 1);
    assert_eq!(after.open, 0);
    assert_eq!(after.closed_for(CloseReason::ClientLeft), 1);
    assert_eq!(after.refused_as(Refusal::Unauthenticated), 1);
    // Two 256-byte requests in, two 256-byte replies out.
    assert_eq!(after.bytes_in, 512);
    assert_eq!(after.bytes_out, 512);

    let c = client(&server).await;
    let stats = c.get_stats().await.expect("stats");
    // Two shards, the acceptor, the login and catalog threads at least.
    assert!(stats.threads_count >= 5, "{} threads", stats.threads_count);
    assert!(stats.memory_usage.as_bytes_u64() > 1 << 20);
    assert_eq!(stats.clients_count, 1);
    server.shutdown().expect("shutdown");
}
