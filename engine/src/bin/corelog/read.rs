//! The reading commands: `poll`, `verify`, `dump`. They change nothing in
//! the data directory: they take its lock shared (without writing it) and
//! read the files directly, never opening (recovering) a log.

use crate::args::{DumpArgs, PollArgs, VerifyArgs};
use crate::error::{CliError, Exit};
use corelog::cli::DirLock;
use corelog::{CleanClose, LogConfig, PollFrom};
use corelog_segment::log::inspect::{inspect_partition, PartitionSummary, Problem};
use corelog_segment::log::read_only::{read_batches, ReadError};
use corelog_segment::log::recovery::dry_run;
use std::io::Write;
use std::path::{Path, PathBuf};

pub(crate) fn poll(a: PollArgs) -> Result<Exit, CliError> {
    let from = match (a.offset, a.timestamp, a.first, a.last) {
        (Some(o), _, _, _) => PollFrom::Offset(o),
        (_, Some(t), _, _) => PollFrom::Timestamp(t),
        (_, _, true, _) => PollFrom::First,
        _ => PollFrom::Last,
    };
    let _lock = DirLock::acquire_shared(&a.dir)?;
    let dir = partition_dir(&a.dir, a.partition)?;
    let limits = LogConfig::default().limits;
    let mut out = std::io::stdout().lock();
    let result = read_batches(
        &dir,
        a.partition,
        &limits,
        from,
        a.max_bytes,
        !a.no_verify,
        |b| out.write_all(b),
    );
    out.flush()
        .map_err(|e| CliError::io("write", "standard output", e))?;
    match result {
        Ok(summary) => {
            if summary.torn_tail {
                tracing::info!(
                    "partition {}: the log ends in a torn tail, not served (recovery cuts it at the next open)",
                    a.partition
                );
            }
            Ok(Exit::Success)
        }
        Err(ReadError::Damaged {
            path,
            position,
            damage,
        }) => {
            eprintln!(
                "corelog poll: {} at byte {position}: {damage}; batches before it were written, nothing after it",
                path.display()
            );
            Ok(Exit::Damage)
        }
        Err(ReadError::Io { op, path, source }) => Err(CliError::io(op, path, source)),
        Err(e) => Err(CliError::Read(e)),
    }
}

fn partition_dir(dir: &Path, partition: u64) -> Result<PathBuf, CliError> {
    let d = dir.join("partitions").join(partition.to_string());
    if !d.is_dir() {
        return Err(CliError::NoPartition {
            partition,
            dir: dir.to_path_buf(),
        });
    }
    Ok(d)
}

/// The partition directories to look at, sorted by id.
pub(crate) fn partitions(dir: &Path, only: Option<u64>) -> Result<Vec<(u64, PathBuf)>, CliError> {
    let root = dir.join("partitions");
    if let Some(p) = only {
        let d = root.join(p.to_string());
        if !d.is_dir() {
            return Err(CliError::UnknownPartition { partition: p });
        }
        return Ok(vec![(p, d)]);
    }
    let mut out: Vec<(u64, PathBuf)> = std::fs::read_dir(&root)
        .map_err(|e| CliError::io("list", &root, e))?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            e.file_name()
                .to_str()
                .and_then(|n| n.parse().ok())
                .map(|id| (id, e.path()))
        })
        .collect();
    out.sort();
    Ok(out)
}

pub(crate) fn verify(a: VerifyArgs) -> Result<Exit, CliError> {
    let _lock = DirLock::acquire_shared(&a.dir)?;
    let config = LogConfig::default();
    let mut bad = 0usize;
    let mut ids = Vec::new();
    for (id, dir) in partitions(&a.dir, a.partition)? {
        let summary: PartitionSummary = inspect_partition(&dir, &config.limits, |_, _, _| {});
        let (batches, messages): (u64, u64) = summary
            .segments
            .iter()
            .fold((0, 0), |(b, m), s| (b + s.batches, m + s.messages));
        let next = summary.segments.last().map(|s| s.next_offset).unwrap_or(0);
        println!("partition {id}: {} segments, {batches} batches, {messages} messages, next offset {next}", summary.segments.len());
        let outlook = dry_run(&dir, id, &config);
        for f in &summary.findings {
            println!("  BAD {f}");
            if let (Problem::Damaged { .. }, Ok(run)) = (&f.problem, &outlook) {
                let unchecked = run
                    .checked_from
                    .iter()
                    .find(|(p, _)| *p == f.path)
                    .filter(|(_, from)| f.position < *from);
                if let Some((_, from)) = unchecked {
                    if run.report.clean_close == CleanClose::Trusted {
                        println!("      recovery does not look here: the partition closed cleanly and opening trusts its clean-close record; polls reaching this batch fail naming it");
                    } else {
                        println!("      recovery does not look here: it trusts the index entry at byte {from} and verifies from there; polls reaching this batch fail naming it");
                    }
                }
            }
        }
        match &outlook {
            Ok(run)
                if run.report.changed_data()
                    || !run.report.sealed.is_empty()
                    || !run.report.rebuilt_indexes.is_empty() =>
            {
                println!("  recovery at the next open will: {}", run.report);
            }
            Ok(_) => println!("  recovery at the next open: nothing to do"),
            Err(e) => {
                println!("  recovery at the next open will refuse: {e}");
                println!("      `corelog repair --dir {} --partition {id}` cuts there and moves what follows to {}/aside/, deleting nothing", a.dir.display(), dir.display());
            }
        }
        bad += summary.findings.len() + usize::from(outlook.is_err());
        ids.push(id);
    }
    if let Some(tier) = &a.tier {
        bad += crate::tier::verify_store(&a.dir, tier, a.tier_endpoint.as_deref(), &ids)?;
    }
    if bad > 0 {
        println!("{bad} problem(s) found");
        return Ok(Exit::Damage);
    }
    println!("all sound");
    Ok(Exit::Success)
}

fn preview(bytes: &[u8]) -> String {
    let shown: String = String::from_utf8_lossy(&bytes[..bytes.len().min(32)])
        .chars()
        .flat_map(|c| c.escape_default())
        .collect();
    if bytes.len() > 32 {
        format!("\"{shown}\"…")
    } else {
        format!("\"{shown}\"")
    }
}

pub(crate) fn dump(a: DumpArgs) -> Result<Exit, CliError> {
    let _lock = DirLock::acquire_shared(&a.dir)?;
    let limits = LogConfig::default().limits;
    let mut out = std::io::stdout().lock();
    for (id, dir) in partitions(&a.dir, a.partition)? {
        let _ = writeln!(out, "partition {id} ({})", dir.display());
        let mut current: Option<PathBuf> = None;
        let summary = inspect_partition(&dir, &limits, |path, pos, b| {
            if current.as_deref() != Some(path) {
                let _ = writeln!(out, "  segment {}", path.display());
                current = Some(path.to_path_buf());
            }
            let _ = writeln!(
                out,
                "    batch @{pos}: offsets {}..={} ({} messages), {} bytes, base_timestamp {}, origin_timestamp {}, checksum {:#018x}",
                b.base_offset(),
                b.last_offset(),
                b.message_count(),
                b.batch_length(),
                b.base_timestamp(),
                b.origin_timestamp(),
                b.batch_checksum()
            );
            if a.messages {
                for m in b.messages() {
                    let _ = writeln!(
                        out,
                        "      offset {} time {} id {:#x} payload {}B headers {}B {}",
                        m.offset(),
                        m.timestamp(),
                        m.id(),
                        m.payload().len(),
                        m.user_headers().len(),
                        preview(m.payload())
                    );
                }
            }
        });
        for s in &summary.segments {
            let _ = writeln!(
                out,
                "  {}: {} of {} bytes in {} batches, offsets {}..{}{}",
                s.path.display(),
                s.data_len,
                s.file_len,
                s.batches,
                s.base_offset,
                s.next_offset,
                if s.sealed { ", sealed" } else { "" }
            );
        }
        for f in &summary.findings {
            let _ = writeln!(out, "  BAD {f}");
        }
    }
    Ok(Exit::Success)
}
