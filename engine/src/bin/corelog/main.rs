//! `corelog`: append, poll, verify and dump a corelog data directory.

mod error;

use clap::{Args, Parser, Subcommand};
use corelog::cli::{parse_size, DirLock};
use corelog::{Batch, Config, Engine, FsyncPolicy, LogConfig, PollFrom};
use corelog_segment::log::inspect::{inspect_partition, PartitionSummary};
use error::CliError;
use std::collections::VecDeque;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "corelog",
    version,
    about = "Inspect and drive a corelog data directory"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Append producer batches read from standard input (concatenated, as a
    /// stream); print one JSON line per stored batch.
    Append(AppendArgs),
    /// Write stored batches to standard output, byte for byte.
    Poll(PollArgs),
    /// Check every segment: layout, checksums, offset continuity, index
    /// agreement. Exit 0 when all is sound; otherwise name each bad file
    /// and byte position (nothing is repaired).
    Verify(VerifyArgs),
    /// Print segments, batches and (with --messages) messages for people.
    Dump(DumpArgs),
}

#[derive(Args)]
struct AppendArgs {
    /// Data directory.
    #[arg(long)]
    dir: PathBuf,
    /// Partition id (created if new).
    #[arg(long)]
    partition: u64,
    /// Seal segments at this size (e.g. 1GiB, 64MiB, 1048576).
    #[arg(long, value_parser = parse_size, default_value = "1GiB")]
    segment_bytes: u64,
    /// never | batch | interval:MS. With batch, a line is printed only once
    /// its batch is durable.
    #[arg(long, default_value = "never")]
    fsync: FsyncPolicy,
}

#[derive(Args)]
#[command(group(clap::ArgGroup::new("from").required(true).args(["offset", "timestamp", "first", "last"])))]
struct PollArgs {
    /// Data directory.
    #[arg(long)]
    dir: PathBuf,
    /// Partition id.
    #[arg(long)]
    partition: u64,
    /// Start at the batch holding this offset.
    #[arg(long)]
    offset: Option<u64>,
    /// Start at the first batch stamped at or after this time (µs).
    #[arg(long)]
    timestamp: Option<u64>,
    /// Start at the first batch.
    #[arg(long)]
    first: bool,
    /// Return the last batch.
    #[arg(long)]
    last: bool,
    /// Whole batches up to this many bytes (at least one).
    #[arg(long, value_parser = parse_size, default_value = "1MiB")]
    max_bytes: u64,
}

#[derive(Args)]
struct VerifyArgs {
    /// Data directory.
    #[arg(long)]
    dir: PathBuf,
    /// Only this partition.
    #[arg(long)]
    partition: Option<u64>,
}

#[derive(Args)]
struct DumpArgs {
    /// Data directory.
    #[arg(long)]
    dir: PathBuf,
    /// Only this partition.
    #[arg(long)]
    partition: Option<u64>,
    /// Print every message too.
    #[arg(long)]
    messages: bool,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Append(a) => append(a),
        Command::Poll(a) => poll(a),
        Command::Verify(a) => verify(a),
        Command::Dump(a) => dump(a),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("corelog: {e}");
            ExitCode::from(1)
        }
    }
}

fn open_engine(dir: &Path, log: LogConfig) -> Result<Engine, CliError> {
    Ok(Engine::open(Config {
        shards: Some(1),
        log,
        ..Config::new(dir)
    })?)
}

/// One batch read from standard input.
struct Incoming {
    index: u64,
    start: u64,
    bytes: Vec<u8>,
}

/// Reads the next batch of the stream: Ok(None) at a clean end.
fn read_batch(
    input: &mut impl Read,
    index: u64,
    start: u64,
    limits: &corelog::Limits,
) -> Result<Option<Incoming>, String> {
    let mut header = vec![0u8; corelog_segment::layout::BATCH_HEADER_LEN];
    let got = read_full(input, &mut header).map_err(|e| format!("reading standard input: {e}"))?;
    if got == 0 {
        return Ok(None);
    }
    if got < header.len() {
        return Err(format!("batch {index} (stdin byte {start}): the stream ends after {got} of the 256 header bytes"));
    }
    let declared = corelog_segment::declared_length(&header, limits)
        .map_err(|e| format!("batch {index} (stdin byte {start}): {e}"))?;
    let mut bytes = header;
    bytes.resize(declared as usize, 0);
    let body =
        read_full(input, &mut bytes[256..]).map_err(|e| format!("reading standard input: {e}"))?;
    if 256 + body < declared as usize {
        return Err(format!("batch {index} (stdin byte {start}): batch_length is {declared} but the stream ends after {} bytes", 256 + body));
    }
    Ok(Some(Incoming {
        index,
        start,
        bytes,
    }))
}

fn read_full(input: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match input.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

fn append(a: AppendArgs) -> Result<ExitCode, CliError> {
    let log = LogConfig {
        segment_bytes: a.segment_bytes,
        fsync: a.fsync,
        ..LogConfig::default()
    };
    let limits = log.limits;
    let engine = open_engine(&a.dir, log)?;
    // Batches are read on a thread, so appends stream while input arrives.
    let (tx, rx) = std::sync::mpsc::sync_channel::<Result<Incoming, String>>(64);
    std::thread::spawn(move || {
        let mut stdin = std::io::stdin().lock();
        let (mut index, mut pos) = (0u64, 0u64);
        loop {
            match read_batch(&mut stdin, index, pos, &limits) {
                Ok(Some(b)) => {
                    pos += b.bytes.len() as u64;
                    index += 1;
                    if tx.send(Ok(b)).is_err() {
                        return;
                    }
                }
                Ok(None) => return,
                Err(e) => {
                    let _ = tx.send(Err(e));
                    return;
                }
            }
        }
    });
    let stdout = std::io::stdout();
    let mut pending: VecDeque<(u64, corelog::Reply<corelog::AppendAck>)> = VecDeque::new();
    let mut refused = None;
    let print = |ack: corelog::AppendAck| -> std::io::Result<()> {
        let mut out = stdout.lock();
        writeln!(
            out,
            "{{\"partition\":{},\"base_offset\":{},\"messages\":{},\"bytes\":{}}}",
            a.partition, ack.base_offset, ack.message_count, ack.bytes
        )?;
        out.flush()
    };
    let mut storage_error = None;
    // Up to IN_FLIGHT appends stay in flight while input keeps arriving;
    // when it pauses, every stored batch is reported before waiting for
    // more, so a producer that waits for an acknowledgement gets it.
    const IN_FLIGHT: usize = 32;
    let settle = |pending: &mut VecDeque<(u64, corelog::Reply<corelog::AppendAck>)>,
                  keep: usize|
     -> Result<Option<String>, CliError> {
        while pending.len() > keep {
            let Some((index, reply)) = pending.pop_front() else {
                break;
            };
            match reply.wait() {
                Ok(ack) => print(ack).map_err(|e| CliError::io("write", "standard output", e))?,
                Err(e) => return Ok(Some(format!("batch {index}: {e}"))),
            }
        }
        Ok(None)
    };
    loop {
        let item = match rx.try_recv() {
            Ok(item) => item,
            Err(std::sync::mpsc::TryRecvError::Disconnected) => break,
            Err(std::sync::mpsc::TryRecvError::Empty) => {
                storage_error = settle(&mut pending, 0)?;
                if storage_error.is_some() {
                    break;
                }
                match rx.recv() {
                    Ok(item) => item,
                    Err(_) => break,
                }
            }
        };
        let incoming = match item {
            Ok(b) => b,
            Err(e) => {
                refused = Some(e);
                break;
            }
        };
        let end = incoming.start + incoming.bytes.len() as u64;
        match Batch::admit(incoming.bytes, &limits) {
            Ok(batch) => {
                pending.push_back((incoming.index, engine.append_admitted(a.partition, batch)))
            }
            Err(e) => {
                refused = Some(format!(
                    "batch {} (stdin bytes {}..{end}): {e}",
                    incoming.index, incoming.start
                ));
                break;
            }
        }
        storage_error = settle(&mut pending, IN_FLIGHT)?;
        if storage_error.is_some() {
            break;
        }
    }
    for (index, reply) in pending {
        match reply.wait() {
            Ok(ack) if storage_error.is_none() => {
                print(ack).map_err(|e| CliError::io("write", "standard output", e))?
            }
            Ok(_) => {}
            Err(e) => {
                storage_error.get_or_insert(format!("batch {index}: {e}"));
            }
        }
    }
    engine.shutdown()?;
    if let Some(e) = storage_error {
        eprintln!("corelog append: {e}");
        return Ok(ExitCode::from(1));
    }
    if let Some(e) = refused {
        eprintln!("corelog append: refused {e}; nothing of it was stored");
        return Ok(ExitCode::from(2));
    }
    Ok(ExitCode::SUCCESS)
}

fn poll(a: PollArgs) -> Result<ExitCode, CliError> {
    let from = match (a.offset, a.timestamp, a.first, a.last) {
        (Some(o), _, _, _) => PollFrom::Offset(o),
        (_, Some(t), _, _) => PollFrom::Timestamp(t),
        (_, _, true, _) => PollFrom::First,
        _ => PollFrom::Last,
    };
    if !a
        .dir
        .join("partitions")
        .join(a.partition.to_string())
        .is_dir()
    {
        eprintln!(
            "corelog poll: partition {} does not exist in {}",
            a.partition,
            a.dir.display()
        );
        return Ok(ExitCode::from(1));
    }
    let engine = open_engine(&a.dir, LogConfig::default())?;
    let reply = engine.poll(a.partition, from, a.max_bytes).wait()?;
    let mut out = std::io::stdout().lock();
    reply
        .write_to(&mut out)
        .map_err(|e| CliError::io("write", "standard output", e))?;
    out.flush()
        .map_err(|e| CliError::io("write", "standard output", e))?;
    drop(reply);
    engine.shutdown()?;
    Ok(ExitCode::SUCCESS)
}

/// The partition directories to look at, sorted by id.
fn partitions(dir: &Path, only: Option<u64>) -> Result<Vec<(u64, PathBuf)>, CliError> {
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

fn verify(a: VerifyArgs) -> Result<ExitCode, CliError> {
    let _lock = DirLock::acquire(&a.dir)?;
    let limits = LogConfig::default().limits;
    let mut bad = 0usize;
    for (id, dir) in partitions(&a.dir, a.partition)? {
        let summary: PartitionSummary = inspect_partition(&dir, &limits, |_, _, _| {});
        let (batches, messages): (u64, u64) = summary
            .segments
            .iter()
            .fold((0, 0), |(b, m), s| (b + s.batches, m + s.messages));
        let next = summary.segments.last().map(|s| s.next_offset).unwrap_or(0);
        println!("partition {id}: {} segments, {batches} batches, {messages} messages, next offset {next}", summary.segments.len());
        for f in &summary.findings {
            println!("  BAD {f}");
        }
        bad += summary.findings.len();
    }
    if bad > 0 {
        println!("{bad} problem(s) found");
        return Ok(ExitCode::from(1));
    }
    println!("all sound");
    Ok(ExitCode::SUCCESS)
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

fn dump(a: DumpArgs) -> Result<ExitCode, CliError> {
    let _lock = DirLock::acquire(&a.dir)?;
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
    Ok(ExitCode::SUCCESS)
}
