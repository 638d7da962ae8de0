//! The corelog run: open an engine, append with producers (threads outside
//! the shards, or tasks on them with `--on-shard`), then poll everything
//! back with consumer threads that serve it through sockets.

use crate::args::Args;
use crate::consumer::{self, ConsumerResult};
use crate::lane::{LaneResult, RunCtx};
use crate::live::Live;
use crate::live::Series;
use crate::live::Totals;
use crate::on_shard;
use crate::producer_thread;
use crate::report::{histogram, Phase};
use crate::setup::budget;
use crate::setup::data_dir;
use crate::setup::progress;
use crate::setup::Budget;
use crate::shape::Shape;
use crate::sink::Serve;
use crate::summary::Summary;
use crate::workload;
use corelog::{Config, Engine, Handle, LogConfig, Preallocation};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

fn log_config(args: &Args) -> LogConfig {
    let largest = (args.message_size.max + 48) * args.messages_per_batch + 256;
    let mut log = LogConfig {
        segment_bytes: args.segment_bytes,
        fsync: args.fsync,
        preallocate: !args.no_preallocate,
        preallocation: Preallocation {
            step_min: args.prealloc_step_min,
            step_max: args.prealloc_step_max,
            budget: args.prealloc_budget,
        },
        syncs: args.syncs.into(),
        ..LogConfig::default()
    };
    log.limits.max_batch_bytes = log.limits.max_batch_bytes.max(largest as u64);
    log
}

fn open_engine(args: &Args, shape: &Shape, dir: &std::path::Path) -> Result<Engine, String> {
    let engine = Engine::open(Config {
        shards: Some(shape.shards),
        log: log_config(args),
        inline_writes: corelog::InlineWrites::up_to(
            args.inline_write_max
                .map_or(corelog::DEFAULT_INLINE_WRITE_MAX, |m| {
                    usize::try_from(m).unwrap_or(usize::MAX)
                }),
        ),
        ..Config::new(dir)
    })
    .map_err(|e| e.to_string())?;
    // All at once: each shard creates its partitions concurrently (a
    // broker's shape has thousands).
    let created: Vec<_> = (0..shape.partitions)
        .map(|p| engine.handle().create_partition(p))
        .collect();
    for c in created {
        c.wait().map_err(|e| e.to_string())?;
    }
    Ok(engine)
}

/// Refuses a poll phase that would read nothing but batch headers.
fn polls_move_data(args: &Args) -> Result<(), String> {
    if args.no_verify && args.serve == Serve::None && !args.no_poll {
        return Err("--no-verify with --serve none: polls would move no data (serve them through a socket, or verify them)".into());
    }
    Ok(())
}

pub fn run(args: Args) -> Result<(), String> {
    polls_move_data(&args)?;
    let args = Arc::new(args);
    let (dir, _tmp) = data_dir(&args)?;
    let Budget { total, duration } = budget(&args, &dir)?;
    let shape = Shape::new(&args);
    let engine = open_engine(&args, &shape, &dir)?;
    println!(
        "corelog-bench: {} shards, {} partitions, {} producers {} x {} in flight, {} consumer threads serving through {}{}, {}..{} B messages x {} per batch, fsync {}, checksums {} ({})",
        shape.shards,
        shape.partitions,
        shape.producers,
        if args.on_shard { "on the shards" } else { "(threads)" },
        shape.inflight,
        shape.consumers,
        args.serve,
        if args.no_verify { "" } else { " after verifying" },
        args.message_size.min,
        args.message_size.max,
        args.messages_per_batch,
        args.fsync,
        corelog::testing::segment::checksum::simd_path(),
        dir.display()
    );

    let live = Arc::new(Live::default());
    let totals = Arc::new(Totals::default());
    let go_at = Instant::now() + Duration::from_millis(300);
    let measure_from = go_at + Duration::from_secs_f64(args.warmup.max(0.0));
    let ctx = Arc::new(RunCtx {
        live: live.clone(),
        go_at,
        measure_from,
        total,
        per_producer_rate: args.rate.map(|mbps| mbps * 1e6 / shape.producers as f64),
        retime: !args.no_poll && shape.consumers > 0,
        spin: Duration::from_micros(args.spin_us),
    });
    let handle = engine.handle();
    let prx = start_producers(&args, &shape, &ctx, &handle)?;
    let started = Instant::now();
    let start_consumers = || -> Result<Vec<JoinHandle<ConsumerResult>>, String> {
        (0..shape.consumers)
            .map(|c| shape.share(c, shape.consumers))
            .filter(|parts| !parts.is_empty())
            .enumerate()
            .map(|(c, parts)| {
                let (h, a, l, t) = (handle.clone(), args.clone(), live.clone(), totals.clone());
                std::thread::Builder::new()
                    .name(format!("consumer-{c}"))
                    .spawn(move || consumer::run(h, parts, a, l, t))
            })
            .collect::<Result<_, _>>()
            .map_err(|e| format!("consumer thread: {e}"))
    };
    let mut consumers = Vec::new();
    if args.tail && !args.no_poll {
        consumers = start_consumers()?;
    }

    // Sample throughput, drive the progress bar, stop a timed run.
    let pb = progress(&args, total, duration);
    pb.set_message("append");
    let sampler_stop = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (live, stop, pb) = (live.clone(), sampler_stop.clone(), pb.clone());
        std::thread::spawn(move || {
            let mut series: Series = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(100));
                let now = Instant::now();
                series.push((
                    (now - started).as_secs_f64(),
                    live.appended.load(Ordering::Relaxed),
                    live.polled.load(Ordering::Relaxed),
                ));
                match duration {
                    Some(d) => {
                        let t = now.saturating_duration_since(measure_from).as_secs_f64();
                        pb.set_position((t * 10.0) as u64);
                        if t >= d {
                            live.stop.store(true, Ordering::Relaxed);
                        }
                    }
                    None => pb.set_position(live.claimed.load(Ordering::Relaxed)),
                }
            }
            series
        })
    };

    let mut appended = LaneResult::new();
    let mut errors = Vec::new();
    for r in prx {
        errors.extend(r.error.clone());
        appended.merge(r);
    }
    let split = (appended.late, appended.service);
    let mut append = appended.phase;
    append.seconds = (appended.last_ack.unwrap_or(measure_from) - measure_from).as_secs_f64();
    let mut targets = HashMap::new();
    let mut stored = 0;
    for p in 0..shape.partitions {
        let s = engine.handle().stats(p).wait().map_err(|e| e.to_string())?;
        targets.insert(p, s.next_offset);
        stored += s.bytes;
    }
    let _ = totals.targets.set(targets);

    let mut poll = Phase::new("poll");
    let mut e2e = histogram();
    let mut served: Option<u64> = None;
    let mut xxh3 = 0.0;
    let mut read_only = 0.0;
    let verify_cores = shape.consumers.min(shape.shards).min(shape.cores);
    if !args.no_poll {
        if args.settle && !args.tail {
            pb.set_message("settle");
            engine
                .handle()
                .flush_all()
                .wait()
                .map_err(|e| format!("flush before the polls: {e}"))?;
        }
        pb.set_message("poll");
        let poll_start = Instant::now();
        if !args.tail {
            consumers = start_consumers()?;
        }
        for c in consumers {
            let r = c
                .join()
                .map_err(|_| "a consumer thread panicked".to_string())?;
            poll.merge(&r.phase);
            let _ = e2e.add(&r.end_to_end);
            errors.extend(r.error);
            if let Some(m) = r.moved {
                if m.sent != m.received {
                    errors.push(format!(
                        "a consumer wrote {} bytes to its socket but {} arrived",
                        m.sent, m.received
                    ));
                }
                *served.get_or_insert(0) += m.received;
            }
        }
        let from = if args.tail { measure_from } else { poll_start };
        poll.seconds = (Instant::now() - from).as_secs_f64();
        if poll.bytes != stored && errors.is_empty() {
            errors.push(format!(
                "consumers read {} bytes but the partitions hold {stored}",
                poll.bytes
            ));
        }
        if served.is_some_and(|s| s != poll.bytes) && errors.is_empty() {
            errors.push(format!(
                "consumers polled {} bytes but served {:?}",
                poll.bytes, served
            ));
        }
        if !args.no_verify {
            xxh3 = crate::xxh3::rate(verify_cores, 1.0);
            let limits = engine.handle().limits();
            match crate::xxh3::read_only_rate(&dir, shape.partitions, verify_cores, &limits) {
                Ok(rate) => read_only = rate,
                Err(e) => errors.push(e),
            }
        }
    }
    sampler_stop.store(true, Ordering::Relaxed);
    let series = sampler.join().unwrap_or_default();
    pb.finish_and_clear();
    let metrics = engine.handle().metrics();
    let on_shard = metrics.append_latency();
    let writes = [
        metrics.writes_inline(),
        metrics.writes_inline_slow(),
        metrics.writes_by_ring(),
    ];
    engine.shutdown().map_err(|e| e.to_string())?;
    let reopen = match args.reopen {
        true => Some(crate::reopen::measure(
            &dir,
            shape.shards,
            &log_config(&args),
        )?),
        false => None,
    };

    let summary = Summary {
        args: &args,
        shape,
        total,
        duration,
        append,
        append_late: split.0,
        append_service: split.1,
        on_shard,
        writes,
        poll,
        e2e,
        served,
        xxh3,
        read_only,
        verify_cores,
        reopen,
        errors,
    };
    summary.print();
    summary.write(&series)
}

/// Starts the producers; their results arrive on the returned channel,
/// which closes once all are done.
fn start_producers(
    args: &Args,
    shape: &Shape,
    ctx: &Arc<RunCtx>,
    handle: &Handle,
) -> Result<mpsc::Receiver<LaneResult>, String> {
    let (tx, rx) = mpsc::channel::<LaneResult>();
    for i in 0..shape.producers {
        let mut parts = shape.share(i, shape.producers);
        if parts.is_empty() {
            parts.push(i as u64 % shape.partitions);
        }
        let pools: Vec<_> = (0..shape.inflight)
            .map(|lane| {
                workload::build_batches(
                    ((i * shape.inflight + lane) as u64) << 8,
                    args.message_size,
                    args.messages_per_batch,
                    2,
                )
            })
            .collect();
        let (h, c, tx) = (handle.clone(), ctx.clone(), tx.clone());
        if args.on_shard {
            handle
                .spawn_on(handle.shard_of(parts[0]), move || {
                    on_shard::producer(c, h, parts, pools, tx)
                })
                .wait()
                .map_err(|e| e.to_string())?;
        } else {
            std::thread::Builder::new()
                .name(format!("producer-{i}"))
                .spawn(move || {
                    let _ = tx.send(producer_thread::run(c, h, parts, pools));
                })
                .map_err(|e| format!("producer thread: {e}"))?;
        }
    }
    Ok(rx)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn args(flags: &[&str]) -> Args {
        Args::parse_from(std::iter::once("corelog-bench").chain(flags.iter().copied()))
    }

    #[test]
    fn polls_that_move_no_data_are_refused() {
        assert!(polls_move_data(&args(&["--no-verify", "--serve", "none"])).is_err());
        assert!(polls_move_data(&args(&["--no-verify"])).is_ok());
        assert!(polls_move_data(&args(&["--serve", "none"])).is_ok());
        assert!(polls_move_data(&args(&["--no-verify", "--serve", "none", "--no-poll"])).is_ok());
    }

    #[test]
    fn defaults_serve_through_tcp_from_producer_threads() {
        let a = args(&[]);
        assert_eq!(a.serve, Serve::Tcp);
        assert!(!a.on_shard);
        assert!(!a.no_verify);
    }
}
