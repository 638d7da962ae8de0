//! Every limit of `corelog_server::Limits`, each against the client it is
//! there for: too many connections, a signed-out idler, a header that
//! stalls, a request trickled a byte at a time, an oversize request, a
//! client holding the in-flight budget, wrong passwords on one connection
//! and from one address.

mod common;

use common::raw::{send_payload_of, Raw};
use common::{client, named, start_with, stream_and_topic};
use corelog_server::Limits;
use corelog_server::{CloseReason, Refusal};
use iggy::prelude::*;
use iggy_binary_protocol::codes::{LOGIN_REGISTER_CODE, PING_CODE, SEND_MESSAGES_CODE};
use iggy_binary_protocol::requests::messages::RawMessage;
use std::io::{Read, Write};
use std::time::{Duration, Instant};

/// A SEND_MESSAGES payload for s/t partition 0: one message of `size` bytes.
fn send_payload(size: usize) -> Vec<u8> {
    let body = vec![7u8; size];
    send_payload_of(&[RawMessage {
        id: 1,
        origin_timestamp: 10,
        headers: None,
        payload: &body,
    }])
}

/// How long until the server closes `raw` (reads EOF or a reset), if it
/// does within `within`.
fn closed_within(raw: &mut Raw, within: Duration) -> Option<Duration> {
    let t0 = Instant::now();
    raw.stream.set_read_timeout(Some(within)).expect("timeout");
    let mut b = [0u8; 256];
    loop {
        match raw.stream.read(&mut b) {
            Ok(0) => return Some(t0.elapsed()),
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return Some(t0.elapsed()),
            Err(_) => return None,
        }
    }
}

async fn stored(c: &IggyClient) -> u64 {
    c.get_topic(&named("s"), &named("t"))
        .await
        .expect("get topic")
        .expect("topic")
        .messages_count
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_max_connections_new_ones_are_closed_at_once_and_counted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start_with(
        dir.path(),
        Limits {
            max_connections: 3,
            ..Limits::default()
        },
    );
    let mut held: Vec<Raw> = (0..3).map(|_| Raw::connect(server.local_addr())).collect();
    for r in &mut held {
        assert_eq!(r.send(PING_CODE, &[]).status, 0);
    }
    let mut fourth = Raw::connect(server.local_addr());
    let closed = closed_within(&mut fourth, Duration::from_secs(2));
    assert!(closed.is_some(), "a fourth connection is closed at once");
    assert_eq!(server.counters().refused, 1);
    drop(held.pop());
    // The server notices the close; then there is room again.
    let deadline = Instant::now() + Duration::from_secs(5);
    while server.counters().open > 2 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut again = Raw::connect(server.local_addr());
    assert_eq!(again.send(PING_CODE, &[]).status, 0);
    server.shutdown().expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_max_connections_per_address_new_ones_from_there_are_closed_others_served() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start_with(
        dir.path(),
        Limits {
            max_connections_per_address: 3,
            ..Limits::default()
        },
    );
    let (a, b) = (
        "127.0.0.2".parse().expect("ip"),
        "127.0.0.3".parse().expect("ip"),
    );
    let mut held: Vec<Raw> = (0..3)
        .map(|_| Raw::connect_from(a, server.local_addr()))
        .collect();
    for r in &mut held {
        assert_eq!(r.send(PING_CODE, &[]).status, 0);
    }
    let mut fourth = Raw::connect_from(a, server.local_addr());
    let closed = closed_within(&mut fourth, Duration::from_secs(2));
    assert!(
        closed.is_some(),
        "a fourth from the same address is closed at once"
    );
    assert_eq!(server.counters().refused, 1);
    let mut other = Raw::connect_from(b, server.local_addr());
    assert_eq!(
        other.send(PING_CODE, &[]).status,
        0,
        "another address is served"
    );
    drop(held.pop());
    // The server notices the close; then the address has room again.
    let deadline = Instant::now() + Duration::from_secs(5);
    while server.counters().open > 3 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut again = Raw::connect_from(a, server.local_addr());
    assert_eq!(again.send(PING_CODE, &[]).status, 0);
    server.shutdown().expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_out_connection_is_closed_after_the_login_timeout_a_signed_in_one_is_not() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start_with(
        dir.path(),
        Limits {
            login_timeout: Duration::from_millis(400),
            ..Limits::default()
        },
    );
    let mut signed_in = Raw::connect(server.local_addr());
    assert_eq!(signed_in.login("iggy", "iggy"), 0);
    let mut idle = Raw::connect(server.local_addr());
    // Pings do not keep a signed-out connection open.
    assert_eq!(idle.send(PING_CODE, &[]).status, 0);
    let closed = closed_within(&mut idle, Duration::from_secs(3)).expect("closed");
    assert!(
        closed < Duration::from_millis(1500),
        "closed after {closed:?}"
    );
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(signed_in.send(PING_CODE, &[]).status, 0, "signed in: stays");
    assert_eq!(server.counters().closed_for(CloseReason::LoginTimeout), 1);
    server.shutdown().expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_out_client_pinging_every_100_ms_is_closed_at_the_login_timeout() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start_with(
        dir.path(),
        Limits {
            login_timeout: Duration::from_millis(400),
            ..Limits::default()
        },
    );
    let mut pinger = Raw::connect(server.local_addr());
    pinger
        .stream
        .set_read_timeout(Some(Duration::from_secs(2)))
        .expect("timeout");
    let start = Instant::now();
    // A deadline that each request restarted would never close it.
    let closed = loop {
        let header = pinger.header(PING_CODE, 0);
        if pinger.stream.write_all(&header).is_err() {
            break start.elapsed();
        }
        match pinger.read_reply() {
            Ok(reply) => assert_eq!(reply.status, 0, "ping answered"),
            Err(_) => break start.elapsed(),
        }
        assert!(
            start.elapsed() < Duration::from_secs(3),
            "a pinging signed-out client is still open after 3 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(
        closed < Duration::from_millis(1400),
        "closed after {closed:?}"
    );
    assert_eq!(server.counters().closed_for(CloseReason::LoginTimeout), 1);
    server.shutdown().expect("shutdown");
}

/// Writes `bytes` one at a time, `every` apart, until the server closes
/// the connection or `within` passes; returns when it closed.
fn trickle(raw: &mut Raw, bytes: &[u8], every: Duration, within: Duration) -> Option<Duration> {
    let t0 = Instant::now();
    raw.stream
        .set_read_timeout(Some(Duration::from_millis(1)))
        .expect("timeout");
    for b in bytes.iter().cycle() {
        if t0.elapsed() > within {
            return None;
        }
        if raw.stream.write_all(std::slice::from_ref(b)).is_err() {
            return Some(t0.elapsed());
        }
        let mut buf = [0u8; 64];
        match raw.stream.read(&mut buf) {
            Ok(0) => return Some(t0.elapsed()),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return Some(t0.elapsed()),
            _ => {}
        }
        std::thread::sleep(every);
    }
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_out_client_trickling_a_request_is_closed_at_the_login_timeout() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start_with(
        dir.path(),
        Limits {
            login_timeout: Duration::from_millis(400),
            ..Limits::default()
        },
    );
    // A header trickled a byte every 50 ms (the stall timeout is 10 s,
    // the request deadline 30 s: only the login deadline is near).
    let mut raw = Raw::connect(server.local_addr());
    let header = raw.header(LOGIN_REGISTER_CODE, 1000);
    let closed = trickle(
        &mut raw,
        &header,
        Duration::from_millis(50),
        Duration::from_secs(5),
    );
    let closed = closed.expect("a trickled header is closed");
    assert!(
        closed < Duration::from_millis(1400),
        "closed after {closed:?}"
    );
    // A whole header, then its payload trickled.
    let mut raw = Raw::connect(server.local_addr());
    let header = raw.header(LOGIN_REGISTER_CODE, 1000);
    raw.stream.write_all(&header).expect("header");
    let closed = trickle(
        &mut raw,
        &[0u8; 1000],
        Duration::from_millis(50),
        Duration::from_secs(5),
    );
    let closed = closed.expect("a trickled payload is closed");
    assert!(
        closed < Duration::from_millis(1400),
        "closed after {closed:?}"
    );
    assert_eq!(server.counters().closed_for(CloseReason::LoginTimeout), 2);
    server.shutdown().expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn before_sign_in_a_request_larger_than_a_login_is_refused_at_its_header() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start_with(dir.path(), Limits::default());
    let mut raw = Raw::connect(server.local_addr());
    // A send's worth, declared before signing in: closed at the header,
    // before any of it is read or held.
    let header = raw.header(SEND_MESSAGES_CODE, 1 << 20);
    raw.stream.write_all(&header).expect("header");
    let closed = closed_within(&mut raw, Duration::from_secs(2)).expect("closed at once");
    assert!(
        closed < Duration::from_millis(1000),
        "closed after {closed:?}"
    );
    assert_eq!(server.counters().refused_as(Refusal::TooLarge), 1);
    // Signed in, the same request is read (and answered).
    let mut raw = Raw::connect(server.local_addr());
    assert_eq!(raw.login("iggy", "iggy"), 0);
    let reply = raw.send(SEND_MESSAGES_CODE, &vec![0u8; 1 << 20]);
    assert_ne!(reply.status, 0, "a malformed send, refused but answered");
    assert_eq!(
        raw.send(PING_CODE, &[]).status,
        0,
        "and the connection stays"
    );
    server.shutdown().expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn part_of_a_request_then_silence_is_closed_after_the_stall_timeout() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start_with(
        dir.path(),
        Limits {
            stall_timeout: Duration::from_millis(300),
            ..Limits::default()
        },
    );
    // 10 bytes of a header, signed in (no login deadline to hide behind).
    let mut raw = Raw::connect(server.local_addr());
    assert_eq!(raw.login("iggy", "iggy"), 0);
    let header = raw.header(PING_CODE, 0);
    raw.stream.write_all(&header[..10]).expect("write");
    let closed = closed_within(&mut raw, Duration::from_secs(3)).expect("closed");
    assert!(
        closed < Duration::from_millis(1200),
        "closed after {closed:?}"
    );
    // A whole header, then half the payload it declares.
    let mut raw = Raw::connect(server.local_addr());
    assert_eq!(raw.login("iggy", "iggy"), 0);
    let payload = send_payload(1000);
    let header = raw.header(SEND_MESSAGES_CODE, payload.len());
    raw.stream.write_all(&header).expect("write");
    raw.stream.write_all(&payload[..500]).expect("write");
    assert!(closed_within(&mut raw, Duration::from_secs(3)).is_some());
    assert_eq!(server.counters().closed_for(CloseReason::Stalled), 2);
    server.shutdown().expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_trickled_byte_by_byte_is_closed_at_its_deadline() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start_with(
        dir.path(),
        Limits {
            stall_timeout: Duration::from_secs(2),
            request_timeout: Duration::from_millis(800),
            ..Limits::default()
        },
    );
    let mut raw = Raw::connect(server.local_addr());
    assert_eq!(raw.login("iggy", "iggy"), 0);
    let payload = send_payload(1000);
    let header = raw.header(SEND_MESSAGES_CODE, payload.len());
    raw.stream.write_all(&header).expect("write");
    let t0 = Instant::now();
    let mut closed = false;
    for b in &payload {
        // Never silent for a stall timeout; the whole request takes ~100 s.
        std::thread::sleep(Duration::from_millis(100));
        if raw.stream.write_all(std::slice::from_ref(b)).is_err() {
            closed = true;
            break;
        }
        if t0.elapsed() > Duration::from_secs(4) {
            break;
        }
    }
    let closed = closed || closed_within(&mut raw, Duration::from_millis(100)).is_some();
    assert!(closed, "a trickle is closed at the request deadline");
    assert!(
        t0.elapsed() < Duration::from_secs(3),
        "after {:?}",
        t0.elapsed()
    );
    assert_eq!(server.counters().closed_for(CloseReason::TooSlow), 1);
    server.shutdown().expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_over_max_request_bytes_is_refused_and_nothing_stored() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start_with(
        dir.path(),
        Limits {
            max_request_bytes: Some(64 << 10),
            ..Limits::default()
        },
    );
    let c = client(&server).await;
    stream_and_topic(&c, "s", "t", 1).await;
    let mut raw = Raw::connect(server.local_addr());
    assert_eq!(raw.login("iggy", "iggy"), 0);
    let big = send_payload(70 << 10);
    let header = raw.header(SEND_MESSAGES_CODE, big.len());
    raw.stream.write_all(&header).expect("write");
    let _ = raw.stream.write_all(&big);
    assert!(closed_within(&mut raw, Duration::from_secs(3)).is_some());
    assert_eq!(server.counters().refused_as(Refusal::TooLarge), 1);
    assert_eq!(stored(&c).await, 0);
    let mut raw = Raw::connect(server.local_addr());
    assert_eq!(raw.login("iggy", "iggy"), 0);
    assert_eq!(
        raw.send(SEND_MESSAGES_CODE, &send_payload(32 << 10)).status,
        0
    );
    assert_eq!(stored(&c).await, 1);
    server.shutdown().expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_holding_the_inflight_budget_makes_others_wait_not_allocate() {
    let dir = tempfile::tempdir().expect("tempdir");
    let budget = 1u64 << 20;
    let server = start_with(
        dir.path(),
        Limits {
            max_request_bytes: Some(budget),
            max_inflight_bytes: budget,
            stall_timeout: Duration::from_millis(1500),
            ..Limits::default()
        },
    );
    let c = client(&server).await;
    stream_and_topic(&c, "s", "t", 1).await;
    // The hog declares all but 16 bytes of the budget and sends 900 KiB.
    let mut hog = Raw::connect(server.local_addr());
    assert_eq!(hog.login("iggy", "iggy"), 0);
    let overhead = send_payload(0).len();
    let hog_payload = send_payload(budget as usize - 256 - overhead - 16);
    let header = hog.header(SEND_MESSAGES_CODE, hog_payload.len());
    hog.stream.write_all(&header).expect("write");
    hog.stream
        .write_all(&hog_payload[..900 << 10])
        .expect("write");
    let deadline = Instant::now() + Duration::from_secs(5);
    while server.inflight_bytes() < hog_payload.len() as u64 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(server.inflight_bytes() <= budget);
    // A small send now waits for room...
    let mut small = Raw::connect(server.local_addr());
    assert_eq!(small.login("iggy", "iggy"), 0);
    let t0 = Instant::now();
    let reply = small.send(SEND_MESSAGES_CODE, &send_payload(100));
    let waited = t0.elapsed();
    assert_eq!(reply.status, 0);
    // ...until the hog is closed for stalling and its room given back.
    assert!(
        waited >= Duration::from_millis(800),
        "answered after {waited:?}"
    );
    assert!(closed_within(&mut hog, Duration::from_secs(3)).is_some());
    assert_eq!(server.counters().closed_for(CloseReason::Stalled), 1);
    assert_eq!(stored(&c).await, 1, "only the small send is stored");
    assert!(server.inflight_bytes() <= budget);
    server.shutdown().expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_logins_close_the_connection_and_throttle_the_address_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start_with(
        dir.path(),
        Limits {
            max_failed_logins: 2,
            login_failure_burst: 3,
            login_failure_rate: 0.01,
            ..Limits::default()
        },
    );
    let attacker: std::net::IpAddr = "127.0.0.2".parse().expect("ip");
    let mut raw = Raw::connect_from(attacker, server.local_addr());
    assert_eq!(raw.login("iggy", "wrong"), 42);
    assert_eq!(raw.login("iggy", "wrong"), 42);
    assert!(
        closed_within(&mut raw, Duration::from_secs(2)).is_some(),
        "closed after two failures"
    );
    let mut raw = Raw::connect_from(attacker, server.local_addr());
    assert_eq!(raw.login("iggy", "wrong"), 42);
    // The address has used its burst of 3: even the right password is
    // refused, at once and unchecked...
    let t0 = Instant::now();
    assert_eq!(raw.login("iggy", "iggy"), 42);
    assert!(t0.elapsed() < Duration::from_millis(500));
    // ...while another address signs in.
    let mut other = Raw::connect(server.local_addr());
    assert_eq!(other.login("iggy", "iggy"), 0);
    let counters = server.counters();
    assert_eq!(counters.logins_failed, 3);
    assert_eq!(counters.logins_throttled, 1);
    // Both attacker connections reached two failures (a throttled attempt
    // counts).
    assert_eq!(counters.closed_for(CloseReason::LoginFailures), 2);
    server.shutdown().expect("shutdown");
}

/// A client with the poll permission names consumers freely, and each
/// stored offset is a file: past `max_consumer_offsets` in a partition a
/// store for one more consumer is refused (and so is a poll that would
/// auto-commit one), nothing of it stored; consumers with an offset store
/// on, and a delete makes room.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_max_consumer_offsets_a_new_consumers_store_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start_with(
        dir.path(),
        Limits {
            max_consumer_offsets: 2,
            ..Limits::default()
        },
    );
    let c = client(&server).await;
    stream_and_topic(&c, "s", "t", 1).await;
    let mut batch = vec![common::message(1, b"m", None)];
    c.send_messages(
        &named("s"),
        &named("t"),
        &Partitioning::partition_id(0),
        &mut batch,
    )
    .await
    .expect("send");
    let (s, t) = (named("s"), named("t"));
    let consumer = |id: u32| Consumer::new(Identifier::numeric(id).expect("id"));
    let store = |id: u32| {
        let consumer = consumer(id);
        let (s, t, c) = (&s, &t, &c);
        async move { c.store_consumer_offset(&consumer, s, t, Some(0), 0).await }
    };
    let offset = |id: u32| {
        let consumer = consumer(id);
        let (s, t, c) = (&s, &t, &c);
        async move {
            c.get_consumer_offset(&consumer, s, t, Some(0))
                .await
                .expect("get")
        }
    };
    store(1).await.expect("first consumer");
    store(2).await.expect("second consumer");
    let refused = store(3).await;
    assert!(matches!(refused, Err(IggyError::Error)), "{refused:?}");
    assert!(offset(3).await.is_none(), "nothing stored for it");
    let polled = c
        .poll_messages(
            &s,
            &t,
            Some(0),
            &consumer(4),
            &PollingStrategy::offset(0),
            10,
            true,
        )
        .await;
    assert!(matches!(polled, Err(IggyError::Error)), "{polled:?}");
    assert!(offset(4).await.is_none(), "the poll committed nothing");
    store(2).await.expect("a consumer with an offset stores on");
    c.delete_consumer_offset(&consumer(1), &s, &t, Some(0))
        .await
        .expect("delete");
    store(3).await.expect("room after a delete");
    assert_eq!(offset(3).await.map(|o| o.stored_offset), Some(0));
}

/// A user that may read a topic may create consumer groups in it, and each
/// is in the catalog every change rewrites: past `max_consumer_groups` in
/// a topic the next is refused, nothing of it made; a delete makes room.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_max_consumer_groups_a_new_group_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start_with(
        dir.path(),
        Limits {
            max_consumer_groups: 2,
            ..Limits::default()
        },
    );
    let c = client(&server).await;
    stream_and_topic(&c, "s", "t", 1).await;
    let (s, t) = (named("s"), named("t"));
    c.create_consumer_group(&s, &t, "a").await.expect("first");
    c.create_consumer_group(&s, &t, "b").await.expect("second");
    let refused = c.create_consumer_group(&s, &t, "c").await;
    assert!(matches!(refused, Err(IggyError::Error)), "{refused:?}");
    let groups = c.get_consumer_groups(&s, &t).await.expect("groups");
    let names: Vec<_> = groups.iter().map(|g| g.name.as_str()).collect();
    assert_eq!(names, ["a", "b"]);
    c.delete_consumer_group(&s, &t, &named("a"))
        .await
        .expect("delete");
    c.create_consumer_group(&s, &t, "c")
        .await
        .expect("room after a delete");
}
