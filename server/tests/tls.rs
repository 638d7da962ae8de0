//! TLS on the client port with Iggy's SDK and its TLS options: everything
//! works as over plain TCP (sends and polls byte-identical, polls larger
//! than one write chunk), and a plain client against the TLS port is
//! refused cleanly (the server answers its bytes with a TLS alert and
//! closes; nothing it sent is served).

mod common;

use common::raw::Raw;
use common::{message, named};
use corelog_server::CloseReason;
use corelog_server::TlsFiles;
use corelog_server::{Server, ServerConfig};
use iggy::prelude::*;
use iggy_binary_protocol::codes::PING_CODE;
use std::io::{Read, Write};
use std::time::Duration;

fn start_tls(dir: &std::path::Path, certs: &common::certs::Certs) -> Server {
    Server::start(ServerConfig {
        shards: Some(2),
        pin_threads: false,
        tls: Some(TlsFiles {
            cert: certs.cert.clone(),
            key: certs.key.clone(),
        }),
        ..ServerConfig::new(dir, "127.0.0.1:0".parse().expect("addr"))
    })
    .expect("server starts")
}

async fn tls_client(server: &Server, ca: &std::path::Path) -> IggyClient {
    let client = IggyClient::builder()
        .with_tcp()
        .with_server_address(server.local_addr().to_string())
        .with_tls_enabled(true)
        .with_tls_domain("localhost".to_owned())
        .with_tls_ca_file(ca.display().to_string())
        .build()
        .expect("client");
    client.connect().await.expect("connect over TLS");
    client.login_user("iggy", "iggy").await.expect("login");
    client
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn iggy_sdk_over_tls_sends_and_polls_byte_identical() {
    let dir = tempfile::tempdir().expect("tempdir");
    let certs = common::certs::make(dir.path());
    let data = dir.path().join("data");
    let server = start_tls(&data, &certs);
    let c = tls_client(&server, &certs.ca).await;
    common::stream_and_topic(&c, "s", "t", 1).await;
    // 3 batches of 200 messages of 4 KiB: 2.4 MB, several write chunks.
    let payload = |i: u128| -> Vec<u8> {
        (0..4096u32)
            .map(|j| (i as u32).wrapping_mul(31).wrapping_add(j) as u8)
            .collect()
    };
    for b in 0..3u128 {
        let mut batch: Vec<IggyMessage> = (0..200u128)
            .map(|j| {
                let i = b * 200 + j;
                message(7000 + i, &payload(i), Some(("n", &i.to_string())))
            })
            .collect();
        c.send_messages(
            &named("s"),
            &named("t"),
            &Partitioning::partition_id(0),
            &mut batch,
        )
        .await
        .expect("send over TLS");
    }
    let polled = c
        .poll_messages(
            &named("s"),
            &named("t"),
            Some(0),
            &Consumer::new(named("reader")),
            &PollingStrategy::offset(0),
            600,
            false,
        )
        .await
        .expect("poll over TLS");
    assert_eq!(polled.messages.len(), 600);
    for (k, m) in polled.messages.iter().enumerate() {
        let i = k as u128;
        assert_eq!(m.header.offset, k as u64);
        assert_eq!(m.header.id, 7000 + i);
        assert_eq!(&m.payload[..], &payload(i)[..]);
        let headers = m.user_headers_map().expect("headers").expect("some");
        let v = headers
            .get(&std::str::FromStr::from_str("n").expect("key"))
            .expect("header n");
        assert_eq!(v.as_str().expect("str"), i.to_string());
    }
    // A cut batch too (rewritten header), from the middle of the second.
    let polled = c
        .poll_messages(
            &named("s"),
            &named("t"),
            Some(0),
            &Consumer::new(named("reader")),
            &PollingStrategy::offset(250),
            10,
            false,
        )
        .await
        .expect("poll");
    let ids: Vec<u128> = polled.messages.iter().map(|m| m.header.id).collect();
    assert_eq!(ids, (7250..7260).collect::<Vec<_>>());
    server.shutdown().expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_client_against_the_tls_port_is_refused_cleanly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let certs = common::certs::make(dir.path());
    let server = start_tls(&dir.path().join("data"), &certs);
    // A raw plain request: answered with a TLS alert record, then closed.
    let mut raw = Raw::connect(server.local_addr());
    let header = raw.header(PING_CODE, 0);
    raw.stream.write_all(&header).expect("write");
    raw.stream
        .set_read_timeout(Some(Duration::from_secs(3)))
        .expect("timeout");
    let mut got = Vec::new();
    let _ = raw.stream.read_to_end(&mut got);
    assert!(!got.is_empty(), "an alert comes back");
    assert_eq!(got[0], 21, "a TLS alert record, not an Iggy reply: {got:?}");
    assert!(got.len() < 64);
    // Iggy's SDK without TLS fails instead of hanging.
    let plain = IggyClient::builder()
        .with_tcp()
        .with_server_address(server.local_addr().to_string())
        .with_reconnection_max_retries(Some(0))
        .build()
        .expect("client");
    let signed_in = tokio::time::timeout(Duration::from_secs(10), async {
        plain.connect().await?;
        plain.login_user("iggy", "iggy").await.map(|_| ())
    })
    .await
    .expect("the SDK gives up in time");
    assert!(signed_in.is_err());
    assert!(server.counters().closed_for(CloseReason::Tls) >= 2);
    // TLS clients are still served.
    let c = tls_client(&server, &certs.ca).await;
    c.ping().await.expect("ping");
    server.shutdown().expect("shutdown");
}
