//! The TCP run against a corelog-server started here on loopback.

use super::client::Client;
use super::run::run_report;
use crate::args::Args;
use clap::Parser;
use corelog_server::{Server, ServerConfig};
use iggy_binary_protocol::codec::WireDecode;
use iggy_binary_protocol::codes::GET_STATS_CODE;
use iggy_binary_protocol::responses::system::get_stats::StatsResponse;
use serde_json::Value;

/// A server with two unpinned shards over a fresh directory (in memory
/// where /dev/shm exists).
fn start() -> (Server, tempfile::TempDir) {
    let dir = tempfile::tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .expect("temporary directory");
    let server = Server::start(ServerConfig {
        shards: Some(2),
        pin_threads: false,
        ..ServerConfig::new(dir.path(), "127.0.0.1:0".parse().expect("address"))
    })
    .expect("server starts");
    (server, dir)
}

fn bench(server: &Server, flags: &[&str]) -> Value {
    let target = format!("tcp://{}", server.local_addr());
    let args = Args::parse_from(
        ["corelog-bench", "--quiet", "--target", &target]
            .iter()
            .chain(flags),
    );
    run_report(&args, &target).expect("the run succeeds")
}

/// Messages the server says it stores.
fn stored_messages(server: &Server) -> u64 {
    let mut c = Client::connect(&server.local_addr().to_string(), "iggy", "iggy").expect("login");
    let body = c.call(GET_STATS_CODE, &[]).expect("stats");
    StatsResponse::decode_from(body)
        .expect("stats reply")
        .messages_count
}

fn num(v: &Value, path: &str) -> f64 {
    path.split('.')
        .fold(v, |v, k| &v[k])
        .as_f64()
        .unwrap_or_else(|| panic!("{path} in {v}"))
}

#[test]
fn a_fixed_rate_is_sent_at_that_rate_and_every_message_arrives() {
    let (server, _dir) = start();
    // 4 connections (2 producers x 2) sharing 20 MB/s of ~10 KB batches
    // for a measured second.
    let r = bench(
        &server,
        &[
            "--rate",
            "20",
            "--duration",
            "1",
            "--warmup",
            "0.2",
            "--producers",
            "2",
            "--inflight",
            "2",
            "--partitions",
            "4",
            "--consumers",
            "2",
            "--message-size",
            "1000",
            "--messages-per-batch",
            "10",
        ],
    );
    assert_eq!(r["rate"]["held"], Value::Bool(true), "{r}");
    let mb = num(&r, "append.bytes") / 1e6;
    assert!(
        (18.0..22.0).contains(&mb),
        "{mb} MB in the measured second at 20 MB/s"
    );
    let achieved = num(&r, "rate.achieved_mb_per_s");
    assert!((19.0..22.0).contains(&achieved), "{achieved} MB/s");
    // Every acknowledged message is stored, and read back verified.
    let sent = num(&r, "sent_messages") as u64;
    assert!(sent >= num(&r, "append.messages") as u64 && sent.is_multiple_of(10));
    assert_eq!(stored_messages(&server), sent);
    assert_eq!(num(&r, "poll.messages") as u64, sent);
    // One latency per measured batch, far below the interval's scale.
    assert_eq!(
        num(&r, "append.latency_us.count"),
        num(&r, "append.batches")
    );
    assert!(num(&r, "append.latency_us.p50") < 50_000.0, "{r}");
    server.shutdown().expect("shutdown");
}

#[test]
fn a_rate_the_server_cannot_hold_is_reported_and_its_wait_counted() {
    let (server, _dir) = start();
    // 1000 MB/s of 1.5 KB batches on one connection: far past what one
    // request in flight can carry, so sends fall further behind their
    // schedule all through the half second.
    let r = bench(
        &server,
        &[
            "--rate",
            "1000",
            "--duration",
            "0.5",
            "--warmup",
            "0",
            "--producers",
            "1",
            "--inflight",
            "1",
            "--partitions",
            "1",
            "--no-poll",
            "--message-size",
            "100",
            "--messages-per-batch",
            "10",
        ],
    );
    assert_eq!(r["rate"]["held"], Value::Bool(false), "{r}");
    assert!(num(&r, "rate.achieved_mb_per_s") < 950.0);
    assert!(num(&r, "rate.max_send_lag_us") > 200_000.0, "{r}");
    // Latency from the schedule carries the lag; from the send it would
    // be a loopback round trip.
    assert!(num(&r, "append.latency_us.max") > 200_000.0, "{r}");
    assert!(num(&r, "append.latency_us.p50") > 50_000.0, "{r}");
    assert_eq!(stored_messages(&server), num(&r, "sent_messages") as u64);
    server.shutdown().expect("shutdown");
}

#[test]
fn without_a_rate_the_loop_is_closed_and_no_rate_is_judged() {
    let (server, _dir) = start();
    let r = bench(
        &server,
        &[
            "--total-bytes",
            "2MB",
            "--warmup",
            "0",
            "--producers",
            "1",
            "--inflight",
            "1",
            "--partitions",
            "1",
            "--consumers",
            "1",
            "--message-size",
            "1000",
            "--messages-per-batch",
            "10",
        ],
    );
    assert!(r["rate"].is_null(), "{r}");
    let sent = num(&r, "sent_messages") as u64;
    // ~10.7 KB batches: the 2 MB budget is 187 of them.
    assert!((1800..=1900).contains(&sent), "{sent} messages for 2 MB");
    assert_eq!(stored_messages(&server), sent);
    assert_eq!(num(&r, "poll.messages") as u64, sent);
    server.shutdown().expect("shutdown");
}
