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
pub fn start_with(dir: &Path, limits: corelog_server::limits::Limits) -> Server {
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

pub mod raw;

pub fn named(s: &str) -> Identifier {
    Identifier::named(s).expect("identifier")
}
