//! The baseline: a plain single-threaded `pwrite` append loop of the same
//! pre-built batches into one file (fdatasync after each write under
//! `--fsync batch`). No checksums, no shards, no io_uring: what the disk
//! and the page cache give one thread.

use crate::args::Args;
use crate::report::{print_table, Phase};
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
    let start = Instant::now();
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
            let _ = phase.latency.record((t1 - t0).as_nanos() as u64);
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
        let result = json!({ "config": { "engine": "pwrite", "fsync": args.fsync.to_string(), "message_size": args.message_size, "messages_per_batch": args.messages_per_batch, "total_bytes": total }, "append": phase.json() });
        std::fs::write(p, serde_json::to_string_pretty(&result).unwrap_or_default())
            .map_err(|e| format!("{}: {e}", p.display()))?;
    }
    drop(file);
    let _ = std::fs::remove_file(&path);
    Ok(())
}
