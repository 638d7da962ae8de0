//! `corelog`: append, poll, verify, dump and repair a corelog data
//! directory.

mod append;
mod error;
mod read;
mod repair;

use clap::{Args, Parser, Subcommand};
use corelog::cli::parse_size;
use corelog::FsyncPolicy;
use std::path::PathBuf;
use std::process::ExitCode;

/// What the exit codes mean (also in `corelog --help`).
const EXIT_CODES: &str = "Exit codes: 0 success; 1 failure (I/O, the engine, a lock held by \
another process); 2 usage error (bad arguments); 3 input refused (append: an invalid batch, \
nothing of it stored); 4 damage found (verify found problems, poll reached damaged bytes, \
repair refused).";

#[derive(Parser)]
#[command(
    name = "corelog",
    version,
    about = "Inspect and drive a corelog data directory",
    after_help = EXIT_CODES
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
    /// Write stored batches to standard output, byte for byte, each verified
    /// (layout and checksums) unless --no-verify. Reads only: nothing in the
    /// directory changes; a torn tail is not served; damaged bytes before
    /// whole batches fail the poll (exit 4), naming file and byte.
    Poll(PollArgs),
    /// Check every segment: layout, checksums, offset continuity, index
    /// agreement; then say exactly what recovery will do when the partition
    /// is next opened. Exit 0 when all is sound, 4 when anything is wrong
    /// (each bad file and byte named). Nothing is repaired.
    Verify(VerifyArgs),
    /// Print segments, batches and (with --messages) messages for people.
    Dump(DumpArgs),
    /// Open a partition that recovery refuses (damaged bytes followed by
    /// whole batches): cut at the damage and move everything after it into
    /// the partition's aside/ directory. Nothing is deleted; what moved
    /// where is printed.
    Repair(RepairArgs),
}

#[derive(Args)]
pub(crate) struct AppendArgs {
    /// Data directory.
    #[arg(long)]
    pub(crate) dir: PathBuf,
    /// Partition id (created if new).
    #[arg(long)]
    pub(crate) partition: u64,
    /// Seal segments at this size (e.g. 1GiB, 64MiB, 1048576).
    #[arg(long, value_parser = parse_size, default_value = "1GiB")]
    pub(crate) segment_bytes: u64,
    /// never | batch | interval:MS. With batch, a line is printed only once
    /// its batch is durable.
    #[arg(long, default_value = "never")]
    pub(crate) fsync: FsyncPolicy,
}

#[derive(Args)]
#[command(group(clap::ArgGroup::new("from").required(true).args(["offset", "timestamp", "first", "last"])))]
pub(crate) struct PollArgs {
    /// Data directory.
    #[arg(long)]
    pub(crate) dir: PathBuf,
    /// Partition id.
    #[arg(long)]
    pub(crate) partition: u64,
    /// Start at the batch holding this offset.
    #[arg(long)]
    pub(crate) offset: Option<u64>,
    /// Start at the first batch stamped at or after this time (µs).
    #[arg(long)]
    pub(crate) timestamp: Option<u64>,
    /// Start at the first batch.
    #[arg(long)]
    pub(crate) first: bool,
    /// Return the last batch.
    #[arg(long)]
    pub(crate) last: bool,
    /// Whole batches up to this many bytes (at least one).
    #[arg(long, value_parser = parse_size, default_value = "1MiB")]
    pub(crate) max_bytes: u64,
    /// Do not verify the batches served (only their lengths and offsets).
    #[arg(long)]
    pub(crate) no_verify: bool,
}

#[derive(Args)]
pub(crate) struct VerifyArgs {
    /// Data directory.
    #[arg(long)]
    pub(crate) dir: PathBuf,
    /// Only this partition.
    #[arg(long)]
    pub(crate) partition: Option<u64>,
}

#[derive(Args)]
pub(crate) struct DumpArgs {
    /// Data directory.
    #[arg(long)]
    pub(crate) dir: PathBuf,
    /// Only this partition.
    #[arg(long)]
    pub(crate) partition: Option<u64>,
    /// Print every message too.
    #[arg(long)]
    pub(crate) messages: bool,
}

#[derive(Args)]
pub(crate) struct RepairArgs {
    /// Data directory.
    #[arg(long)]
    pub(crate) dir: PathBuf,
    /// The partition to repair.
    #[arg(long)]
    pub(crate) partition: u64,
}

fn main() -> ExitCode {
    corelog::cli::init_tracing();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Append(a) => append::append(a),
        Command::Poll(a) => read::poll(a),
        Command::Verify(a) => read::verify(a),
        Command::Dump(a) => read::dump(a),
        Command::Repair(a) => repair::repair(a),
    };
    match result {
        Ok(exit) => exit.into(),
        Err(e) => {
            eprintln!("corelog: {e}");
            e.exit().into()
        }
    }
}
