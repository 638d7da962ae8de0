//! `corelog`: append, poll, verify, dump and repair a corelog data
//! directory.

mod append;
mod args;
mod error;
mod read;
mod repair;
mod tier;

use args::{AppendArgs, DumpArgs, PollArgs, RepairArgs, TierStatusArgs, VerifyArgs};
use clap::{Parser, Subcommand};
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
    /// (each bad file and byte named). Nothing is repaired. With --tier,
    /// the object store's segments too (each downloaded and checked whole)
    /// and that its log meets the local one.
    Verify(VerifyArgs),
    /// Print segments, batches and (with --messages) messages for people.
    Dump(DumpArgs),
    /// Open a partition that recovery refuses (damaged bytes followed by
    /// whole batches): cut at the damage and move everything after it into
    /// the partition's aside/ directory. Nothing is deleted; what moved
    /// where is printed.
    Repair(RepairArgs),
    /// Tiered storage: what the object store holds beside the directory.
    #[command(subcommand)]
    Tier(TierCommand),
}

#[derive(Subcommand)]
enum TierCommand {
    /// Per partition: the local segments, the store's (its manifest), and
    /// the sealed segments waiting to be copied. Reads only, here and in
    /// the store. With --verify, every remote segment is downloaded and
    /// checked (exit 4 when one is damaged, named).
    Status(TierStatusArgs),
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
        Command::Tier(TierCommand::Status(a)) => tier::status(a),
    };
    match result {
        Ok(exit) => exit.into(),
        Err(e) => {
            eprintln!("corelog: {e}");
            e.exit().into()
        }
    }
}
