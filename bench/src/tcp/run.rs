//! The TCP run: set up a stream and topic, produce, consume, report.

use super::client::{Client, ClientError};
use crate::args::Args;
use crate::report::{print_table, Phase};
use crate::{budget_for_remote, workload, Live};
use bytes::BytesMut;
use iggy_binary_protocol::codec::WireEncode;
use iggy_binary_protocol::codes::{
    CREATE_STREAM_CODE, CREATE_TOPIC_CODE, DELETE_STREAM_CODE, POLL_MESSAGES_CODE,
    SEND_MESSAGES_CODE,
};
use iggy_binary_protocol::requests::messages::{PollMessagesRequest, SendMessagesHeader};
use iggy_binary_protocol::requests::streams::{CreateStreamRequest, DeleteStreamRequest};
use iggy_binary_protocol::requests::topics::CreateTopicRequest;
use iggy_binary_protocol::{
    WireConsumer, WireIdentifier, WireName, WireOptions, WirePartitioning, WirePollingStrategy,
};
use serde_json::json;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const STREAM: &str = "bench-stream-1";
const TOPIC: &str = "topic-1";

fn named(s: &str) -> Result<WireIdentifier, String> {
    WireIdentifier::named(s).map_err(|e| e.to_string())
}

/// What every thread of the run shares.
struct Shared {
    addr: String,
    username: String,
    password: String,
    live: Live,
    go_at: Instant,
    measure_from: Instant,
    total: Option<u64>,
    /// Messages acknowledged per partition (warm-up included).
    sent: Vec<AtomicU64>,
}

impl Shared {
    fn connect(&self) -> Result<Client, String> {
        Client::connect(&self.addr, &self.username, &self.password)
            .map_err(|e| format!("connect to {}: {e}", self.addr))
    }
}

/// Runs the workload against the server at `target` (`tcp://host:port`).
pub fn run(args: Args, target: &str) -> Result<(), String> {
    let addr = target
        .strip_prefix("tcp://")
        .ok_or_else(|| format!("--target {target:?}: expected tcp://HOST:PORT"))?
        .to_owned();
    if args.tail || args.rate.is_some() {
        return Err("--tail and --rate are not supported with --target".into());
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let shards = args.shards.unwrap_or(cores).max(1);
    let partitions = args.partitions.unwrap_or(2 * shards as u64).max(1);
    let producers = args.producers.unwrap_or(shards).max(1);
    let consumers = args.consumers.unwrap_or(shards).max(1);
    let inflight = args.inflight.max(1);
    let (total, duration) = budget_for_remote(&args);
    let go_at = Instant::now() + Duration::from_millis(300);
    let shared = Arc::new(Shared {
        addr,
        username: args.username.clone(),
        password: args.password.clone(),
        live: Live::default(),
        go_at,
        measure_from: go_at + Duration::from_secs_f64(args.warmup.max(0.0)),
        total,
        sent: (0..partitions).map(|_| AtomicU64::new(0)).collect(),
    });
    setup(&shared, partitions)?;
    println!(
        "corelog-bench: tcp://{}, stream {STREAM}, topic {TOPIC}: {partitions} partitions, {producers} producers x {inflight} connections, {consumers} consumers, {}..{} B messages x {} per batch",
        shared.addr, args.message_size.min, args.message_size.max, args.messages_per_batch
    );

    let mut lanes = Vec::new();
    for i in 0..producers {
        let mut parts: Vec<u32> = (0..partitions as u32)
            .filter(|p| (*p as usize) % producers == i)
            .collect();
        if parts.is_empty() {
            parts.push((i as u64 % partitions) as u32);
        }
        for lane in 0..inflight {
            let pool = workload::build_batches(
                ((i * inflight + lane) as u64) << 8,
                args.message_size,
                args.messages_per_batch,
                2,
            );
            let mut parts = parts.clone();
            let shift = lane % parts.len();
            parts.rotate_left(shift);
            let (s, per_batch) = (shared.clone(), args.messages_per_batch as u32);
            lanes.push(std::thread::spawn(move || {
                produce(&s, &parts, pool, per_batch)
            }));
        }
    }
    if let Some(d) = duration {
        let s = shared.clone();
        std::thread::spawn(move || {
            let end = s.measure_from + Duration::from_secs_f64(d);
            while Instant::now() < end && !s.live.stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(10));
            }
            s.live.stop.store(true, Ordering::Relaxed);
        });
    }
    let mut append = Phase::new("append");
    let mut last_ack = shared.measure_from;
    let mut errors = Vec::new();
    for lane in lanes {
        match lane.join() {
            Ok(Ok((phase, ack))) => {
                append.merge(&phase);
                last_ack = last_ack.max(ack.unwrap_or(last_ack));
            }
            Ok(Err(e)) => errors.push(e),
            Err(_) => errors.push("a producer thread panicked".into()),
        }
    }
    append.seconds = (last_ack - shared.measure_from).as_secs_f64();

    let mut poll = Phase::new("poll");
    if !args.no_poll && errors.is_empty() {
        let started = Instant::now();
        let per_poll = poll_count(&args);
        let readers: Vec<_> = (0..consumers)
            .map(|c| {
                let parts: Vec<u32> = (0..partitions as u32)
                    .filter(|p| (*p as usize) % consumers == c)
                    .collect();
                let (s, verify) = (shared.clone(), !args.no_verify);
                std::thread::spawn(move || consume(&s, &parts, per_poll, verify))
            })
            .collect();
        for r in readers {
            match r.join() {
                Ok(Ok(phase)) => poll.merge(&phase),
                Ok(Err(e)) => errors.push(e),
                Err(_) => errors.push("a consumer thread panicked".into()),
            }
        }
        poll.seconds = started.elapsed().as_secs_f64();
    }
    println!();
    let mut phases = vec![&append];
    if !args.no_poll {
        phases.push(&poll);
    }
    print_table(&phases);
    let result = json!({
        "config": {
            "engine": "tcp",
            "target": target,
            "partitions": partitions,
            "producers": producers,
            "inflight": inflight,
            "consumers": consumers,
            "message_size": args.message_size,
            "messages_per_batch": args.messages_per_batch,
            "total_bytes": total,
            "duration": duration,
            "warmup": args.warmup,
            "verify": !args.no_verify,
        },
        "append": append.json(),
        "poll": if args.no_poll { serde_json::Value::Null } else { poll.json() },
        "errors": errors,
    });
    if let Some(path) = &args.json {
        std::fs::write(
            path,
            serde_json::to_string_pretty(&result).unwrap_or_default(),
        )
        .map_err(|e| format!("{}: {e}", path.display()))?;
    }
    if !errors.is_empty() {
        return Err(errors.join("; "));
    }
    Ok(())
}

/// A fresh stream and topic (an old stream of the same name is deleted).
fn setup(shared: &Shared, partitions: u64) -> Result<(), String> {
    let mut admin = shared.connect()?;
    let stream = named(STREAM)?;
    let delete = DeleteStreamRequest {
        stream_id: stream.clone(),
    }
    .to_bytes();
    match admin.call(DELETE_STREAM_CODE, &[&delete]) {
        Ok(_) | Err(ClientError::Status(_)) => {}
        Err(e) => return Err(format!("delete stream: {e}")),
    }
    let name = |s: &str| WireName::new(s).map_err(|e| e.to_string());
    let create = CreateStreamRequest {
        name: name(STREAM)?,
        options: WireOptions::empty(),
    };
    admin
        .call(CREATE_STREAM_CODE, &[&create.to_bytes()])
        .map_err(|e| format!("create stream: {e}"))?;
    let topic = CreateTopicRequest {
        stream_id: stream,
        partitions_count: u32::try_from(partitions).map_err(|e| e.to_string())?,
        name: name(TOPIC)?,
        options: WireOptions::empty(),
    };
    admin
        .call(CREATE_TOPIC_CODE, &[&topic.to_bytes()])
        .map_err(|e| format!("create topic: {e}"))?;
    Ok(())
}

/// The SEND_MESSAGES prefix for `partition`: `[metadata_length]` + metadata.
fn send_prefix(partition: u32, messages: u32) -> Result<Vec<u8>, String> {
    let header = SendMessagesHeader {
        stream_id: named(STREAM)?,
        topic_id: named(TOPIC)?,
        partitioning: WirePartitioning::PartitionId(partition),
        messages_count: messages,
    };
    let meta = header.to_bytes();
    let mut out = (meta.len() as u32).to_le_bytes().to_vec();
    out.extend_from_slice(&meta);
    Ok(out)
}

type Produced = (Phase, Option<Instant>);

/// One producer lane: sends its pool's batches round robin over `parts`.
fn produce(
    s: &Shared,
    parts: &[u32],
    pool: Vec<BytesMut>,
    per_batch: u32,
) -> Result<Produced, String> {
    let mut client = s.connect()?;
    let prefixes: Vec<Vec<u8>> = parts
        .iter()
        .map(|p| send_prefix(*p, per_batch))
        .collect::<Result<_, _>>()?;
    let mut phase = Phase::new("append");
    let mut last_ack = None;
    while Instant::now() < s.go_at {
        std::thread::sleep(Duration::from_millis(1));
    }
    for n in 0usize.. {
        if s.live.stop.load(Ordering::Relaxed) {
            break;
        }
        let batch = &pool[n % pool.len()];
        let len = batch.len() as u64;
        let measured = Instant::now() >= s.measure_from;
        if measured {
            if let Some(total) = s.total {
                if s.live.claimed.fetch_add(len, Ordering::Relaxed) >= total {
                    break;
                }
            }
        }
        let k = n % parts.len();
        let started = Instant::now();
        client
            .call(SEND_MESSAGES_CODE, &[&prefixes[k], batch])
            .map_err(|e| format!("send to partition {}: {e}", parts[k]))?;
        let ended = Instant::now();
        s.sent[parts[k] as usize].fetch_add(u64::from(per_batch), Ordering::Relaxed);
        if measured {
            let _ = phase.latency.record((ended - started).as_nanos() as u64);
            phase.bytes += len;
            phase.messages += u64::from(per_batch);
            phase.batches += 1;
            last_ack = Some(ended);
        }
    }
    Ok((phase, last_ack))
}

/// Messages per poll: about `--poll-bytes`, whole batches.
fn poll_count(args: &Args) -> u32 {
    let per_message = (args.message_size.min + args.message_size.max) / 2 + 48;
    let batches =
        (args.poll_bytes as usize / (per_message * args.messages_per_batch).max(1)).max(1);
    u32::try_from(batches * args.messages_per_batch).unwrap_or(u32::MAX)
}

/// One consumer: polls `parts` from offset 0 to what producers sent.
fn consume(s: &Shared, parts: &[u32], count: u32, verify: bool) -> Result<Phase, String> {
    let mut client = s.connect()?;
    let limits = corelog::Limits {
        max_batch_bytes: u64::MAX,
    };
    let mut phase = Phase::new("poll");
    for &p in parts {
        let target = s.sent[p as usize].load(Ordering::Relaxed);
        let mut next = 0u64;
        while next < target {
            let request = PollMessagesRequest {
                consumer: WireConsumer::consumer(WireIdentifier::numeric(1)),
                stream_id: named(STREAM)?,
                topic_id: named(TOPIC)?,
                partition_id: Some(p),
                strategy: WirePollingStrategy::offset(next),
                count,
                auto_commit: false,
            }
            .to_bytes();
            let started = Instant::now();
            let body = client
                .call(POLL_MESSAGES_CODE, &[&request])
                .map_err(|e| format!("poll partition {p}: {e}"))?;
            let got = Instant::now();
            let batches = body.get(16..).ok_or("poll reply shorter than its prefix")?;
            let (messages, count_batches, after) = walk(batches, verify, &limits)
                .map_err(|e| format!("partition {p} at offset {next}: {e}"))?;
            if messages == 0 {
                return Err(format!("partition {p}: empty poll at {next} of {target}"));
            }
            let _ = phase.latency.record((got - started).as_nanos() as u64);
            phase.bytes += batches.len() as u64;
            phase.messages += messages;
            phase.batches += count_batches;
            next = after;
        }
    }
    Ok(phase)
}

/// Walks the batches of a poll reply (verifying them when asked); returns
/// messages, batches and the offset after the last message.
fn walk(
    mut rest: &[u8],
    verify: bool,
    limits: &corelog::Limits,
) -> Result<(u64, u64, u64), String> {
    let (mut messages, mut batches, mut after) = (0u64, 0u64, 0u64);
    while !rest.is_empty() {
        let len =
            corelog::testing::segment::declared_length(rest, limits).map_err(|e| e.to_string())?;
        let one = rest.get(..len as usize).ok_or("torn batch in the reply")?;
        if verify {
            corelog::testing::segment::check(one, limits).map_err(|e| e.to_string())?;
        }
        let field = |at: usize, n: usize| {
            one.get(at..at + n).map(|b| {
                let mut v = [0u8; 8];
                v[..n].copy_from_slice(b);
                u64::from_le_bytes(v)
            })
        };
        let base = field(8, 8).ok_or("short batch header")?;
        let count = field(48, 4).ok_or("short batch header")?;
        messages += count;
        batches += 1;
        after = base + count;
        rest = &rest[len as usize..];
    }
    Ok((messages, batches, after))
}
