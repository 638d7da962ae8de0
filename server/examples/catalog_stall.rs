//! How long sends wait while the catalog is written: one producer sends
//! small batches in a closed loop on one connection while another
//! connection, served by the same shard, creates and deletes streams (each
//! a catalog write: temp file, fsync, rename, directory fsync). Prints the
//! producer's send latency (p50, p99, max) without and with the catalog
//! writes.
//!
//! `cargo run --release -p corelog-server --example catalog_stall [SECONDS]`
//! (the data directory is made under the current directory: a real disk,
//! not a tmpfs where fsync is free).

use corelog_server::{Server, ServerConfig};
use iggy::prelude::*;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let secs: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let dir = tempfile::tempdir_in(".").expect("tempdir");
    let server = Server::start(ServerConfig {
        shards: Some(1),
        pin_threads: false,
        ..ServerConfig::new(dir.path(), "127.0.0.1:0".parse().expect("addr"))
    })
    .expect("server");
    let addr = server.local_addr().to_string();
    let producer = client(&addr).await;
    producer.create_stream("s").await.expect("stream");
    producer
        .create_topic(
            &Identifier::named("s").expect("id"),
            "t",
            &TopicCreateOptions::default(),
        )
        .await
        .expect("topic");
    let alone = sends(&producer, Duration::from_secs(secs), None).await;
    let writer = client(&addr).await;
    let writes = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let churn = tokio::spawn({
        let (writes, stop) = (writes.clone(), stop.clone());
        async move {
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let name = format!("churn-{i}");
                writer.create_stream(&name).await.expect("create");
                writer
                    .delete_stream(&Identifier::named(&name).expect("id"))
                    .await
                    .expect("delete");
                writes.fetch_add(2, Ordering::Relaxed);
                i += 1;
            }
        }
    });
    let during = sends(&producer, Duration::from_secs(secs), Some(&writes)).await;
    stop.store(true, Ordering::Relaxed);
    churn.await.expect("churn");
    println!("catalog_stall: alone:                   {alone}");
    println!("catalog_stall: during catalog writes:   {during}");
    server.shutdown().expect("shutdown");
}

async fn client(addr: &str) -> IggyClient {
    let c = IggyClient::builder()
        .with_tcp()
        .with_server_address(addr.to_owned())
        .build()
        .expect("client");
    c.connect().await.expect("connect");
    c.login_user("iggy", "iggy").await.expect("login");
    c
}

/// Sends 10 × 100 B messages at a time for `time`; the latencies.
async fn sends(c: &IggyClient, time: Duration, writes: Option<&AtomicU64>) -> String {
    let (stream, topic) = (
        Identifier::named("s").expect("id"),
        Identifier::named("t").expect("id"),
    );
    let partitioning = Partitioning::partition_id(0);
    let mut lat = Vec::new();
    let before = writes.map(|w| w.load(Ordering::Relaxed));
    let t0 = Instant::now();
    while t0.elapsed() < time {
        let mut msgs: Vec<IggyMessage> = (0..10)
            .map(|_| {
                IggyMessage::builder()
                    .payload(vec![1u8; 100].into())
                    .build()
                    .expect("msg")
            })
            .collect();
        let s = Instant::now();
        c.send_messages(&stream, &topic, &partitioning, &mut msgs)
            .await
            .expect("send");
        lat.push(s.elapsed());
    }
    lat.sort_unstable();
    let q = |p: f64| lat[((lat.len() - 1) as f64 * p) as usize].as_micros();
    let writes = match (writes, before) {
        (Some(w), Some(b)) => format!(", {} catalog writes", w.load(Ordering::Relaxed) - b),
        _ => String::new(),
    };
    format!(
        "{} sends, p50 {} µs, p99 {} µs, max {} µs{writes}",
        lat.len(),
        q(0.5),
        q(0.99),
        lat.last().map_or(0, |d| d.as_micros())
    )
}
