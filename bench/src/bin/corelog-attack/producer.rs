//! The well-behaved producer: batches of `batch` messages of
//! `message_bytes` to `load`/`t` partition 0, one request in flight (as
//! Iggy's SDK sends), at a fixed rate. Latency counts from each batch's
//! scheduled time (open loop: a late batch is charged its wait), so a
//! server that stalls shows it. `rate` 0: as fast as replies come.
//! Consecutive batches differ (a ring of [`RING`] batches, each with its
//! own message ids): a cluster answers a send byte-identical to the
//! session's one before it as a repeat of it, from the first, and stores
//! nothing (`replica/src/group/repeats.rs`), so identical batches would
//! measure the repeat table, not replication.

use crate::client::{tcp, Client, Tls};
use hdrhistogram::Histogram;
use iggy_binary_protocol::codec::WireEncode;
use iggy_binary_protocol::codes::{CREATE_STREAM_CODE, CREATE_TOPIC_CODE, SEND_MESSAGES_CODE};
use iggy_binary_protocol::requests::messages::{RawMessage, SendMessagesEncoder};
use iggy_binary_protocol::requests::streams::CreateStreamRequest;
use iggy_binary_protocol::requests::topics::CreateTopicRequest;
use iggy_binary_protocol::{WireIdentifier, WireName, WireOptions, WirePartitioning};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

pub const STREAM: &str = "load";
pub const TOPIC: &str = "t";
/// Distinct batches the producer cycles through.
const RING: usize = 4;

/// What to send.
pub struct Plan {
    pub addr: SocketAddr,
    pub tls: Option<Tls>,
    pub password: String,
    /// MB/s (10^6 bytes of messages); 0: closed loop.
    pub rate: f64,
    pub seconds: f64,
    pub message_bytes: usize,
    pub batch: usize,
}

/// Creates `load`/`t` (1 partition) unless they exist.
pub fn setup(addr: SocketAddr, tls: Option<&Tls>, password: &str) -> Result<(), String> {
    let mut c = signed_in(addr, tls, password)?;
    let name = |s: &str| WireName::new(s).map_err(|e| e.to_string());
    let create = CreateStreamRequest {
        name: name(STREAM)?,
        options: WireOptions::empty(),
    };
    c.call(CREATE_STREAM_CODE, &create.to_bytes())
        .map_err(|e| e.to_string())?;
    let topic = CreateTopicRequest {
        stream_id: WireIdentifier::named(STREAM).map_err(|e| e.to_string())?,
        partitions_count: 1,
        name: name(TOPIC)?,
        options: WireOptions::empty(),
    };
    c.call(CREATE_TOPIC_CODE, &topic.to_bytes())
        .map_err(|e| e.to_string())?;
    Ok(())
}

pub fn signed_in(addr: SocketAddr, tls: Option<&Tls>, password: &str) -> Result<Client, String> {
    let stream = tcp(addr, None).map_err(|e| format!("connect {addr}: {e}"))?;
    let mut c = Client::over(stream, tls).map_err(|e| e.to_string())?;
    match c.login("iggy", password) {
        Ok(0) => Ok(c),
        Ok(s) => Err(format!("login: status {s}")),
        Err(e) => Err(format!("login: {e}")),
    }
}

/// A SEND_MESSAGES payload for `load`/`t` partition 0.
pub fn send_payload(messages: usize, bytes: usize) -> Result<Vec<u8>, String> {
    send_payload_from(messages, bytes, 1)
}

/// A SEND_MESSAGES payload whose message ids start at `first_id`.
fn send_payload_from(messages: usize, bytes: usize, first_id: u128) -> Result<Vec<u8>, String> {
    let body = vec![0x5au8; bytes];
    let msgs: Vec<RawMessage<'_>> = (0..messages)
        .map(|i| RawMessage {
            id: first_id + i as u128,
            origin_timestamp: 1,
            headers: None,
            payload: &body,
        })
        .collect();
    let mut buf = bytes::BytesMut::new();
    SendMessagesEncoder::encode(
        &mut buf,
        &WireIdentifier::named(STREAM).map_err(|e| e.to_string())?,
        &WireIdentifier::named(TOPIC).map_err(|e| e.to_string())?,
        &WirePartitioning::PartitionId(0),
        &msgs,
    )
    .map_err(|e| e.to_string())?;
    Ok(buf.to_vec())
}

/// Runs the plan; one JSON line.
pub fn run(plan: &Plan) -> Result<String, String> {
    let mut c = signed_in(plan.addr, plan.tls.as_ref(), &plan.password)?;
    let payloads = (0..RING)
        .map(|k| send_payload_from(plan.batch, plan.message_bytes, (k * plan.batch) as u128 + 1))
        .collect::<Result<Vec<_>, _>>()?;
    let batch_bytes = (plan.batch * plan.message_bytes) as f64;
    let interval = if plan.rate > 0.0 {
        Some(Duration::from_secs_f64(batch_bytes / (plan.rate * 1e6)))
    } else {
        None
    };
    let mut hist =
        Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).map_err(|e| e.to_string())?;
    let (mut sent, mut errors) = (0u64, 0u64);
    let start = Instant::now();
    let end = start + Duration::from_secs_f64(plan.seconds);
    let mut due = start;
    while Instant::now() < end {
        if interval.is_some() {
            let now = Instant::now();
            if due > now {
                std::thread::sleep(due - now);
            }
        } else {
            due = Instant::now();
        }
        let reply = c
            .call(
                SEND_MESSAGES_CODE,
                &payloads[(sent + errors) as usize % RING],
            )
            .map_err(|e| format!("send: {e}"))?;
        if reply.status == 0 {
            sent += 1;
        } else {
            errors += 1;
        }
        let _ = hist.record(due.elapsed().as_micros().max(1) as u64);
        if let Some(step) = interval {
            due += step;
        }
    }
    let secs = start.elapsed().as_secs_f64();
    Ok(format!(
        "{{\"batches\":{sent},\"messages\":{},\"errors\":{errors},\"seconds\":{secs:.3},\"mb_per_s\":{:.3},\"p50_us\":{},\"p99_us\":{},\"max_us\":{}}}",
        sent * plan.batch as u64,
        sent as f64 * batch_bytes / 1e6 / secs,
        hist.value_at_quantile(0.5),
        hist.value_at_quantile(0.99),
        hist.max()
    ))
}
