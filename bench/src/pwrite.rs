//! The baseline: a plain single-threaded `pwrite` append loop of the same
//! pre-built batches into one file (fdatasync after each write under
//! `--fsync batch`). No checksums, no shards, no io_uring: what the disk
//! and the page cache give one thread.
//!
//! Under `--rate` it keeps the producers' open-loop schedule
//! (`schedule.rs`): each write is due at its slot, sent then or as soon as
//! the one before it returns, and its latency counts from the slot, as
//! corelog's appends do, split the same way (`append_split`: how late it
//! was sent, and the call itself). One write in flight: a slow write or
//! sync delays every write due behind it, as it would any writer that
//! waits for its data to be durable before it goes on.

use crate::args::Args;
use crate::report::{latency_json, print_table, Phase};
use crate::schedule::Schedule;
use corelog::FsyncPolicy;
use serde_json::json;
use std::os::unix::fs::FileExt;
use std::time::{Duration, Instant};

pub fn run(args: Args) -> Result<(), String> {
    let (dir, _tmp) = crate::setup::data_dir(&args)?;
    let crate::setup::Budget { total, duration } = crate::setup::budget(&args, &dir)?;
    let pool = crate::workload::build_batches(7, args.message_size, args.messages_per_batch, 2);
    let path = dir.join("pwrite.log");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .open(&path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    println!(
        "corelog-bench --engine pwrite: one thread, {}..{} B messages x {} per batch, fsync {} ({})",
        args.message_size.min,
        args.message_size.max,
        args.messages_per_batch,
        args.fsync,
        path.display()
    );
    let sync = matches!(args.fsync, FsyncPolicy::Batch);
    let mut phase = Phase::new("pwrite");
    let (mut late, mut call) = (crate::report::histogram(), crate::report::histogram());
    let _ = crate::schedule::precise_sleeps();
    let start = Instant::now();
    let mut schedule = Schedule::new(args.rate.map(|r| r * 1e6), start);
    let measure_from = start + Duration::from_secs_f64(args.warmup.max(0.0));
    let stop_at = duration.map(|d| measure_from + Duration::from_secs_f64(d));
    let mut pos = 0u64;
    let mut i = 0usize;
    let mut last = measure_from;
    loop {
        let batch = &pool[i % pool.len()];
        i += 1;
        let now = Instant::now();
        let measured = now >= measure_from;
        if measured {
            if let Some(t) = total {
                if phase.bytes >= t {
                    break;
                }
            }
            if stop_at.map(|s| now >= s).unwrap_or(false) {
                break;
            }
        }
        let due = schedule.take(batch.len() as u64, now);
        let ahead = due.saturating_duration_since(Instant::now());
        if !ahead.is_zero() {
            std::thread::sleep(ahead);
        }
        let t0 = Instant::now();
        file.write_all_at(batch, pos)
            .map_err(|e| format!("pwrite {}: {e}", path.display()))?;
        if sync {
            file.sync_data()
                .map_err(|e| format!("fdatasync {}: {e}", path.display()))?;
        }
        let t1 = Instant::now();
        pos += batch.len() as u64;
        if measured {
            let _ = phase
                .latency
                .record(t1.saturating_duration_since(due).as_nanos() as u64);
            let _ = late.record(t0.saturating_duration_since(due).as_nanos() as u64);
            let _ = call.record((t1 - t0).as_nanos() as u64);
            phase.bytes += batch.len() as u64;
            phase.messages += args.messages_per_batch as u64;
            phase.batches += 1;
            last = t1;
        }
    }
    phase.seconds = (last - measure_from).as_secs_f64();
    println!();
    print_table(&[&phase]);
    if let Some(p) = &args.json {
        let result = json!({ "config": { "engine": "pwrite", "fsync": args.fsync.to_string(), "message_size": args.message_size, "messages_per_batch": args.messages_per_batch, "total_bytes": total, "rate_mb_per_s": args.rate, "latency_from": crate::schedule::LATENCY_FROM }, "append": phase.json(), "append_split": { "sent_late_us": latency_json(&late), "call_to_ack_us": latency_json(&call) } });
        std::fs::write(p, serde_json::to_string_pretty(&result).unwrap_or_default())
            .map_err(|e| format!("{}: {e}", p.display()))?;
    }
    drop(file);
    let _ = std::fs::remove_file(&path);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::run;
    use crate::args::Args;
    use clap::Parser;
    use std::time::Instant;

    /// Runs 1 MB of 10 x 1000 B batches at `rate` MB/s, `fsync=never`;
    /// returns its report and how long it took (s).
    fn paced(rate: &str) -> (serde_json::Value, f64) {
        let dir = tempfile::tempdir().expect("tempdir");
        let json = dir.path().join("r.json");
        let mut args = Args::parse_from([
            "corelog-bench",
            "--engine",
            "pwrite",
            "--messages-per-batch",
            "10",
            "--fsync",
            "never",
            "--rate",
            rate,
            "--total-bytes",
            "1MB",
            "--warmup",
            "0",
        ]);
        args.data_dir = Some(dir.path().join("data"));
        args.json = Some(json.clone());
        let started = Instant::now();
        run(args).expect("run");
        let took = started.elapsed().as_secs_f64();
        let r = serde_json::from_slice(&std::fs::read(&json).expect("report")).expect("json");
        (r, took)
    }

    fn us(r: &serde_json::Value, path: &[&str]) -> f64 {
        path.iter()
            .fold(r, |v, k| &v[*k])
            .as_f64()
            .unwrap_or_else(|| panic!("{path:?} in {r}"))
    }

    /// Under `--rate` the loop keeps the schedule: it cannot finish
    /// before its bytes at the rate (a sleep never returns early). Each
    /// write is counted from its slot, as corelog's appends are: a loop
    /// driven past what it can do sends later and later, and its
    /// latency carries that lateness, which the report splits from the
    /// call itself.
    #[test]
    fn a_paced_loop_keeps_its_schedule_and_counts_from_each_slot() {
        let (r, took) = paced("4");
        let bytes = us(&r, &["append", "bytes"]);
        let batches = us(&r, &["append", "batches"]);
        assert!(bytes >= 1e6, "{bytes} bytes");
        let last_due = (bytes - bytes / batches) / 4e6;
        assert!(took >= last_due, "{took:.3} s for {bytes} B at 4 MB/s");
        for k in ["sent_late_us", "call_to_ack_us"] {
            assert_eq!(us(&r, &["append_split", k, "count"]), batches, "{k}");
        }
        // Every slot due at once: the last write goes after all the others.
        let (r, _) = paced("1000000000");
        let late = us(&r, &["append_split", "sent_late_us", "max"]);
        let call = us(&r, &["append_split", "call_to_ack_us", "p50"]);
        let from_slot = us(&r, &["append", "latency_us", "max"]);
        // The last of about 100 writes waited for the 99 before it, at
        // least half of them no quicker than the median call.
        assert!(
            late > 10.0 * call,
            "sent {late} µs late, the median call {call} µs"
        );
        assert!(
            from_slot >= late,
            "from the slot {from_slot} µs, sent {late} µs late"
        );
    }
}
