//! Peers a user might pick instead of corelog, on the same batches and
//! bytes: walrus-rust (an io_uring-accelerated WAL with topics) and the
//! commitlog crate (segmented log with a memory-mapped index). Each
//! partition is one topic / one log written by its own thread (one producer
//! per partition); every batch is one entry. Then every entry is read back
//! and checked as a batch (layout and checksums), like corelog's consumers.
//!
//! Built only with `--features peers`, so their dependencies stay out of
//! the default build.

use crate::args::{Args, EngineKind};
use crate::report::{print_table, Phase};
use corelog::FsyncPolicy;
use serde_json::json;
use std::path::Path;
use std::time::{Duration, Instant};

/// One peer's write and read side for one partition.
trait PeerLog: Send {
    fn append(&mut self, batch: &[u8]) -> Result<(), String>;
    /// Reads the next entries (up to about `max` bytes); empty at the end.
    fn read(&mut self, max: usize) -> Result<Vec<Vec<u8>>, String>;
}

struct Walrus {
    wal: std::sync::Arc<walrus_rust::Walrus>,
    topic: String,
}

impl PeerLog for Walrus {
    fn append(&mut self, batch: &[u8]) -> Result<(), String> {
        self.wal
            .append_for_topic(&self.topic, batch)
            .map_err(|e| format!("walrus append: {e}"))
    }

    fn read(&mut self, max: usize) -> Result<Vec<Vec<u8>>, String> {
        let entries = self
            .wal
            .batch_read_for_topic(&self.topic, max, true)
            .map_err(|e| format!("walrus read: {e}"))?;
        Ok(entries.into_iter().map(|e| e.data).collect())
    }
}

struct CommitLog {
    log: commitlog::CommitLog,
    sync: bool,
    next: u64,
    dir: std::path::PathBuf,
    /// The newest segment file, synced after each append under
    /// `--fsync batch`.
    active: Option<(std::ffi::OsString, std::fs::File)>,
}

impl CommitLog {
    /// commitlog 0.2's `flush` writes its buffers and the index mapping but
    /// never fsyncs the segment (`File::flush` is a no-op), so it is not a
    /// durable append. The peer syncs the newest segment file itself, and
    /// the one before it when the log rolled since the last sync.
    fn sync_segments(&mut self) -> Result<(), String> {
        let err = |e: std::io::Error| format!("commitlog sync: {e}");
        let newest = std::fs::read_dir(&self.dir)
            .map_err(err)?
            .filter_map(|e| e.ok().map(|e| e.file_name()))
            .filter(|n| n.to_string_lossy().ends_with(".log"))
            .max()
            .ok_or_else(|| "commitlog sync: no segment file".to_string())?;
        if self.active.as_ref().map(|(n, _)| n) != Some(&newest) {
            if let Some((_, old)) = self.active.take() {
                old.sync_data().map_err(err)?;
            }
            let f = std::fs::File::open(self.dir.join(&newest)).map_err(err)?;
            self.active = Some((newest, f));
        }
        match &self.active {
            Some((_, f)) => f.sync_data().map_err(err),
            None => Ok(()),
        }
    }
}

impl PeerLog for CommitLog {
    fn append(&mut self, batch: &[u8]) -> Result<(), String> {
        self.log
            .append_msg(batch)
            .map_err(|e| format!("commitlog append: {e:?}"))?;
        if self.sync {
            self.log
                .flush()
                .map_err(|e| format!("commitlog flush: {e}"))?;
            self.sync_segments()?;
        }
        Ok(())
    }

    fn read(&mut self, max: usize) -> Result<Vec<Vec<u8>>, String> {
        use commitlog::message::MessageSet;
        if self.next >= self.log.next_offset() {
            return Ok(Vec::new());
        }
        let buf = self
            .log
            .read(self.next, commitlog::ReadLimit::max_bytes(max))
            .map_err(|e| format!("commitlog read: {e:?}"))?;
        let mut out = Vec::new();
        for m in buf.iter() {
            self.next = m.offset() + 1;
            out.push(m.payload().to_vec());
        }
        Ok(out)
    }
}

/// A partition's append phase, when its last append ended, and its log.
type Written = (Phase, Instant, Box<dyn PeerLog>);

fn open(
    kind: EngineKind,
    dir: &Path,
    partition: u64,
    args: &Args,
    wal: &Option<std::sync::Arc<walrus_rust::Walrus>>,
) -> Result<Box<dyn PeerLog>, String> {
    match (kind, wal) {
        (EngineKind::Walrus, Some(wal)) => Ok(Box::new(Walrus {
            wal: wal.clone(),
            topic: format!("p{partition}"),
        })),
        (EngineKind::Commitlog, _) => {
            let log_dir = dir.join(format!("p{partition}"));
            let mut opts = commitlog::LogOptions::new(&log_dir);
            opts.segment_max_bytes(args.segment_bytes.min(u32::MAX as u64) as usize);
            opts.message_max_bytes(64 << 20);
            let log =
                commitlog::CommitLog::new(opts).map_err(|e| format!("commitlog open: {e}"))?;
            Ok(Box::new(CommitLog {
                log,
                sync: matches!(args.fsync, FsyncPolicy::Batch),
                next: 0,
                dir: log_dir,
                active: None,
            }))
        }
        _ => Err("no such peer".into()),
    }
}

pub fn run(args: Args) -> Result<(), String> {
    let kind = args.engine;
    let (dir, _tmp) = crate::setup::data_dir(&args)?;
    let crate::setup::Budget { total, duration } = crate::setup::budget(&args, &dir)?;
    let partitions = args.partitions.unwrap_or(2).max(1);
    let wal = if kind == EngineKind::Walrus {
        std::env::set_var("WALRUS_DATA_DIR", dir.join("walrus"));
        std::env::set_var("WALRUS_QUIET", "1");
        let schedule = match args.fsync {
            FsyncPolicy::Never => walrus_rust::FsyncSchedule::NoFsync,
            FsyncPolicy::Batch => walrus_rust::FsyncSchedule::SyncEach,
            FsyncPolicy::Interval(d) => {
                walrus_rust::FsyncSchedule::Milliseconds(d.as_millis() as u64)
            }
        };
        let w = walrus_rust::Walrus::with_consistency_and_schedule(
            walrus_rust::ReadConsistency::AtLeastOnce {
                persist_every: 100_000,
            },
            schedule,
        )
        .map_err(|e| format!("walrus: {e}"))?;
        Some(std::sync::Arc::new(w))
    } else {
        None
    };
    println!(
        "corelog-bench --engine {kind:?}: {partitions} partitions, one thread each, {}..{} B messages x {} per batch, fsync {} ({})",
        args.message_size.min,
        args.message_size.max,
        args.messages_per_batch,
        args.fsync,
        dir.display()
    );
    let per_partition = total.map(|t| t / partitions);
    let started = Instant::now();
    let measure_from = started + Duration::from_secs_f64(args.warmup.max(0.0));
    let stop_at = duration.map(|d| measure_from + Duration::from_secs_f64(d));
    let mut logs = Vec::new();
    for p in 0..partitions {
        logs.push(open(kind, &dir, p, &args, &wal)?);
    }
    let results: Vec<Result<Written, String>> = std::thread::scope(|s| {
        let handles: Vec<_> = logs
            .into_iter()
            .enumerate()
            .map(|(p, mut log)| {
                let args = &args;
                s.spawn(move || {
                    let pool = crate::workload::build_batches(
                        p as u64 + 1,
                        args.message_size,
                        args.messages_per_batch,
                        2,
                    );
                    let mut phase = Phase::new("append");
                    let mut last = measure_from;
                    let mut i = 0usize;
                    loop {
                        let now = Instant::now();
                        let measured = now >= measure_from;
                        if measured
                            && (per_partition.map(|t| phase.bytes >= t).unwrap_or(false)
                                || stop_at.map(|t| now >= t).unwrap_or(false))
                        {
                            break;
                        }
                        let batch = &pool[i % pool.len()];
                        i += 1;
                        let t0 = Instant::now();
                        log.append(batch)?;
                        let t1 = Instant::now();
                        if measured {
                            let _ = phase.latency.record((t1 - t0).as_nanos() as u64);
                            phase.bytes += batch.len() as u64;
                            phase.messages += args.messages_per_batch as u64;
                            phase.batches += 1;
                            last = t1;
                        }
                    }
                    Ok((phase, last, log))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("producer thread panicked".into()))
            })
            .collect()
    });
    let mut append = Phase::new("append");
    let mut last = measure_from;
    let mut logs = Vec::new();
    for r in results {
        let (phase, l, log) = r?;
        append.merge(&phase);
        last = last.max(l);
        logs.push(log);
    }
    append.seconds = (last - measure_from).as_secs_f64();

    // Read everything back, checking each entry as a batch.
    let limits = corelog::Limits::default();
    let read_start = Instant::now();
    let reads: Vec<Result<Phase, String>> = std::thread::scope(|s| {
        let handles: Vec<_> = logs
            .into_iter()
            .map(|mut log| {
                let limits = &limits;
                s.spawn(move || {
                    let mut phase = Phase::new("poll");
                    loop {
                        let t0 = Instant::now();
                        let entries = log.read(4 << 20)?;
                        let t1 = Instant::now();
                        if entries.is_empty() {
                            return Ok(phase);
                        }
                        let _ = phase.latency.record((t1 - t0).as_nanos() as u64);
                        for e in entries {
                            let b = corelog::testing::segment::check(&e, limits)
                                .map_err(|err| format!("read back a bad batch: {err}"))?;
                            phase.bytes += e.len() as u64;
                            phase.messages += u64::from(b.message_count());
                            phase.batches += 1;
                        }
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("consumer thread panicked".into()))
            })
            .collect()
    });
    let mut poll = Phase::new("poll");
    for r in reads {
        poll.merge(&r?);
    }
    poll.seconds = read_start.elapsed().as_secs_f64();
    println!();
    print_table(&[&append, &poll]);
    if poll.batches < append.batches {
        return Err(format!(
            "read back {} batches of the {} appended (and measured)",
            poll.batches, append.batches
        ));
    }
    if let Some(p) = &args.json {
        let result = json!({
            "config": { "engine": format!("{kind:?}").to_lowercase(), "partitions": partitions, "fsync": args.fsync.to_string(), "message_size": args.message_size, "messages_per_batch": args.messages_per_batch, "total_bytes": total },
            "append": append.json(),
            "poll": poll.json(),
        });
        std::fs::write(p, serde_json::to_string_pretty(&result).unwrap_or_default())
            .map_err(|e| format!("{}: {e}", p.display()))?;
    }
    Ok(())
}
