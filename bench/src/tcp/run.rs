//! The TCP run: set up a stream and topic, produce, consume, report.

use super::client::{Client, ClientError};
use super::consume::{consume, poll_count};
use super::produce::{pace, produce, Lane, Produced};
use super::rate::RateCheck;
use super::shared::{named, Login, Shared, STREAM, TOPIC};
use crate::args::Args;
use crate::live::Live;
use crate::report::{print_table, Phase};
use crate::schedule;
use crate::setup::budget_for_remote;
use crate::workload;
use iggy_binary_protocol::codec::WireEncode;
use iggy_binary_protocol::codes::{CREATE_STREAM_CODE, CREATE_TOPIC_CODE, DELETE_STREAM_CODE};
use iggy_binary_protocol::requests::streams::{CreateStreamRequest, DeleteStreamRequest};
use iggy_binary_protocol::requests::topics::CreateTopicRequest;
use iggy_binary_protocol::{WireName, WireOptions};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The run's shape against a server.
#[derive(Debug, Clone, Copy)]
struct Shape {
    partitions: u64,
    producers: usize,
    consumers: usize,
    /// Connections (lanes) per producer.
    inflight: usize,
}

impl Shape {
    fn new(args: &Args) -> Shape {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let shards = args.shards.unwrap_or(cores).max(1);
        Shape {
            partitions: args.partitions.unwrap_or(2 * shards as u64).max(1),
            producers: args.producers.unwrap_or(shards).max(1),
            consumers: args.consumers.unwrap_or(shards).max(1),
            inflight: args.inflight.max(1),
        }
    }

    /// The partitions worker `i` of `n` takes (at least one).
    fn share(&self, i: usize, n: usize) -> Vec<u32> {
        let mut parts: Vec<u32> = (0..self.partitions as u32)
            .filter(|p| (*p as usize) % n == i)
            .collect();
        if parts.is_empty() {
            parts.push((i as u64 % self.partitions) as u32);
        }
        parts
    }
}

/// Runs the workload against the server at `target` (`tcp://host:port`).
pub fn run(args: Args, target: &str) -> Result<(), String> {
    run_report(&args, target).map(|_| ())
}

/// The run; returns its JSON report (also written to `--json`). Fails if
/// any producer or consumer failed.
pub fn run_report(args: &Args, target: &str) -> Result<Value, String> {
    let addr = target
        .strip_prefix("tcp://")
        .ok_or_else(|| format!("--target {target:?}: expected tcp://HOST:PORT"))?
        .to_owned();
    if args.tail {
        return Err("--tail is not supported with --target".into());
    }
    if let Some(r) = args.rate.filter(|r| !(r.is_finite() && *r > 0.0)) {
        return Err(format!("--rate {r}: expected MB/s above 0"));
    }
    let shape = Shape::new(args);
    let (total, duration) = budget_for_remote(args);
    let login = Login {
        addr,
        username: args.username.clone(),
        password: args.password.clone(),
    };
    setup(&mut login.connect()?, shape.partitions)?;
    let clients = login.connect_many(shape.producers * shape.inflight)?;
    let go_at = Instant::now() + Duration::from_millis(50);
    let shared = Arc::new(Shared {
        login,
        live: Live::default(),
        go_at,
        measure_from: go_at + Duration::from_secs_f64(args.warmup.max(0.0)),
        total,
        sent: (0..shape.partitions).map(|_| AtomicU64::new(0)).collect(),
    });
    println!(
        "corelog-bench: tcp://{}, stream {STREAM}, topic {TOPIC}: {} partitions, {} producers x {} connections, {} consumers, {}..{} B messages x {} per batch; {}",
        shared.login.addr,
        shape.partitions,
        shape.producers,
        shape.inflight,
        shape.consumers,
        args.message_size.min,
        args.message_size.max,
        args.messages_per_batch,
        schedule::describe(args.rate)
    );
    let lanes = spawn_lanes(args, &shape, &shared, clients);
    if let Some(d) = duration {
        stop_after(&shared, d);
    }
    let mut errors = Vec::new();
    let (append, max_lag) = join_lanes(lanes, &shared, &mut errors);
    let rate = args.rate.map(|target| RateCheck {
        target,
        achieved: append.mb_per_s(),
        max_lag,
    });
    let mut poll = Phase::new("poll");
    if !args.no_poll && errors.is_empty() {
        poll = read_back(args, &shape, &shared, &mut errors);
    }
    println!();
    let mut phases = vec![&append];
    if !args.no_poll {
        phases.push(&poll);
    }
    print_table(&phases);
    println!(
        "append latency: from each batch's scheduled send ({})",
        schedule::describe(args.rate)
    );
    if let Some(r) = &rate {
        println!("{}", r.describe());
        if !r.held() {
            eprintln!("corelog-bench: {}", r.describe());
        }
    }
    let sent: u64 = shared.sent.iter().map(|s| s.load(Ordering::Relaxed)).sum();
    let result = json!({
        "config": {
            "engine": "tcp",
            "target": target,
            "partitions": shape.partitions,
            "producers": shape.producers,
            "inflight": shape.inflight,
            "consumers": shape.consumers,
            "message_size": args.message_size,
            "messages_per_batch": args.messages_per_batch,
            "total_bytes": total,
            "duration": duration,
            "warmup": args.warmup,
            "rate_mb_per_s": args.rate,
            "verify": !args.no_verify,
        },
        "latency_from": schedule::LATENCY_FROM,
        "schedule": schedule::describe(args.rate),
        "append": append.json(),
        "rate": rate.map(|r| r.json()),
        "sent_messages": sent,
        "poll": if args.no_poll { Value::Null } else { poll.json() },
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
    Ok(result)
}

/// One thread and connection per lane: `--inflight` lanes per producer,
/// each over the producer's partitions from a different one.
fn spawn_lanes(
    args: &Args,
    shape: &Shape,
    shared: &Arc<Shared>,
    clients: Vec<Client>,
) -> Vec<JoinHandle<Result<Produced, String>>> {
    let count = clients.len();
    let mut clients = clients.into_iter();
    let mut lanes = Vec::with_capacity(count);
    for i in 0..shape.producers {
        let parts = shape.share(i, shape.producers);
        for l in 0..shape.inflight {
            let index = i * shape.inflight + l;
            let pool = workload::build_batches(
                (index as u64) << 8,
                args.message_size,
                args.messages_per_batch,
                2,
            );
            let mean = pool.iter().map(|b| b.len() as u64).sum::<u64>() / pool.len() as u64;
            let mut parts = parts.clone();
            let shift = l % parts.len();
            parts.rotate_left(shift);
            let Some(client) = clients.next() else {
                break;
            };
            let lane = Lane {
                client,
                parts,
                pool,
                per_batch: args.messages_per_batch as u32,
                pace: args.rate.map(|r| pace(r, count, index, mean, shared.go_at)),
            };
            let s = shared.clone();
            lanes.push(std::thread::spawn(move || produce(&s, lane)));
        }
    }
    lanes
}

/// Stops the run `seconds` after the warm-up.
fn stop_after(shared: &Arc<Shared>, seconds: f64) {
    let s = shared.clone();
    std::thread::spawn(move || {
        let end = s.measure_from + Duration::from_secs_f64(seconds);
        while Instant::now() < end && !s.live.stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(10));
        }
        s.live.stop.store(true, Ordering::Relaxed);
    });
}

/// The lanes' figures merged, and the furthest any send fell behind.
fn join_lanes(
    lanes: Vec<JoinHandle<Result<Produced, String>>>,
    shared: &Shared,
    errors: &mut Vec<String>,
) -> (Phase, Duration) {
    let mut append = Phase::new("append");
    let mut last_ack = shared.measure_from;
    let mut max_lag = Duration::ZERO;
    for lane in lanes {
        match lane.join() {
            Ok(Ok(p)) => {
                append.merge(&p.phase);
                last_ack = last_ack.max(p.last_ack.unwrap_or(last_ack));
                max_lag = max_lag.max(p.max_lag);
            }
            Ok(Err(e)) => {
                shared.live.stop.store(true, Ordering::Relaxed);
                errors.push(e);
            }
            Err(_) => errors.push("a producer thread panicked".into()),
        }
    }
    append.seconds = (last_ack - shared.measure_from).as_secs_f64();
    (append, max_lag)
}

/// Consumers read every partition back.
fn read_back(args: &Args, shape: &Shape, shared: &Arc<Shared>, errors: &mut Vec<String>) -> Phase {
    let mut poll = Phase::new("poll");
    let started = Instant::now();
    let per_poll = poll_count(args);
    let readers: Vec<_> = (0..shape.consumers)
        .map(|c| {
            let parts: Vec<u32> = (0..shape.partitions as u32)
                .filter(|p| (*p as usize) % shape.consumers == c)
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
    poll
}

/// A fresh stream and topic (an old stream of the same name is deleted).
fn setup(admin: &mut Client, partitions: u64) -> Result<(), String> {
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
