//! Starting a server in-process on an ephemeral loopback port, and Iggy
//! SDK clients for it.
#![allow(dead_code)]

use corelog_server::{Server, ServerConfig};
use iggy::prelude::*;
use std::path::Path;
use std::str::FromStr;

/// A server over `dir` on 127.0.0.1:0 with two unpinned shards.
pub fn start(dir: &Path) -> Server {
    let listen = "127.0.0.1:0".parse().expect("address");
    Server::start(ServerConfig {
        shards: Some(2),
        pin_threads: false,
        ..ServerConfig::new(dir, listen)
    })
    .expect("server starts")
}

/// A server over `dir` with these limits.
pub fn start_with(dir: &Path, limits: corelog_server::Limits) -> Server {
    let listen = "127.0.0.1:0".parse().expect("address");
    Server::start(ServerConfig {
        shards: Some(2),
        pin_threads: false,
        limits,
        ..ServerConfig::new(dir, listen)
    })
    .expect("server starts")
}

/// An SDK client, connected but not signed in.
pub async fn connect(server: &Server) -> IggyClient {
    let client = IggyClient::builder()
        .with_tcp()
        .with_server_address(server.local_addr().to_string())
        .build()
        .expect("client");
    client.connect().await.expect("connect");
    client
}

/// An SDK client signed in as iggy/iggy.
pub async fn client(server: &Server) -> IggyClient {
    let client = connect(server).await;
    client.login_user("iggy", "iggy").await.expect("login");
    client
}

/// A message with `id`, `payload` and one user header `k` = `v`.
pub fn message(id: u128, payload: &[u8], header: Option<(&str, &str)>) -> IggyMessage {
    let headers = header.map(|(k, v)| {
        std::collections::BTreeMap::from([(
            HeaderKey::from_str(k).expect("key"),
            HeaderValue::from_str(v).expect("value"),
        )])
    });
    let b = IggyMessage::builder()
        .id(id)
        .payload(bytes::Bytes::copy_from_slice(payload));
    match headers {
        Some(h) => b.user_headers(h).build(),
        None => b.build(),
    }
    .expect("message")
}

/// Creates stream `stream` and topic `topic` with `partitions` partitions.
pub async fn stream_and_topic(client: &IggyClient, stream: &str, topic: &str, partitions: u32) {
    client.create_stream(stream).await.expect("create stream");
    client
        .create_topic(
            &Identifier::named(stream).expect("id"),
            topic,
            &TopicCreateOptions {
                partitions_count: Some(partitions),
                ..TopicCreateOptions::default()
            },
        )
        .await
        .expect("create topic");
}

pub mod certs;
pub mod raw;

pub fn named(s: &str) -> Identifier {
    Identifier::named(s).expect("identifier")
}

/// A server over `dir` like [`start`], with `segment_bytes` segments
/// sealed as soon as they are full (`fsync=batch`: under `never` a segment
/// is deletable 30 s after its rotation) and retention applied every
/// `retention_check`.
pub fn start_small_segments(
    dir: &Path,
    segment_bytes: u64,
    retention_check: std::time::Duration,
) -> Server {
    let listen = "127.0.0.1:0".parse().expect("address");
    Server::start(ServerConfig {
        shards: Some(2),
        pin_threads: false,
        fsync: corelog::FsyncPolicy::Batch,
        segment_bytes,
        retention_check,
        ..ServerConfig::new(dir, listen)
    })
    .expect("server starts")
}

/// Sends `per_partition` messages to each of `partitions` partitions of
/// `stream`/`topic`, in batches of 10; message `i` of partition `p` has
/// id [`fill_id`]`(p, i)`.
pub async fn fill(
    client: &IggyClient,
    stream: &str,
    topic: &str,
    partitions: u32,
    per_partition: u32,
    payload: usize,
) {
    for p in 0..partitions {
        for chunk in (0..per_partition).collect::<Vec<_>>().chunks(10) {
            let mut batch: Vec<IggyMessage> = chunk
                .iter()
                .map(|i| message(fill_id(p, *i), &vec![b'x'; payload], None))
                .collect();
            client
                .send_messages(
                    &named(stream),
                    &named(topic),
                    &Partitioning::partition_id(p),
                    &mut batch,
                )
                .await
                .expect("send");
        }
    }
}

/// The id [`fill`] gives message `i` of partition `p` (never 0: the SDK
/// replaces id 0 with a random one).
pub fn fill_id(p: u32, i: u32) -> u128 {
    u128::from(p) * 1_000_000 + u128::from(i) + 1
}

/// The partition of a message [`fill`] sent.
pub fn fill_partition(id: u128) -> u32 {
    ((id - 1) / 1_000_000) as u32
}

/// The members of consumer group `g` of topic `t` in stream `s`, as the
/// server's GET_CONSUMER_GROUP lists them: (member id, its partitions).
pub async fn group_members(c: &IggyClient) -> Vec<(u32, Vec<u32>)> {
    let g = c
        .get_consumer_group(&named("s"), &named("t"), &named("g"))
        .await
        .expect("get group")
        .expect("the group");
    g.members
        .iter()
        .map(|m| (m.id, m.partitions.clone()))
        .collect()
}

/// A free port on `ip` for a node's listener, below the kernel's
/// ephemeral range (32768–60999 by default): a node that stops and starts
/// again binds the same port, and an outgoing connection's source port,
/// taken from the ephemeral range meanwhile, must not be able to hold it
/// (it did once: "Address already in use" at a restart). Spread by the
/// process id and handed out once per process; each is checked free.
pub fn listen_port(ip: &str) -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    const LOW: u32 = 20_000;
    const SPAN: u32 = 12_000;
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let start = (std::process::id().wrapping_mul(7_919)) % SPAN;
    for _ in 0..SPAN {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = (LOW + (start + n) % SPAN) as u16;
        if std::net::TcpListener::bind(format!("{ip}:{port}")).is_ok() {
            return port;
        }
    }
    panic!("no free port on {ip} in {LOW}..{}", LOW + SPAN)
}
