//! `corelog-powercut`: the two halves of the power-cut suite on real
//! filesystems (`scripts/powercut-test.sh` is the orchestrator).
//!
//! * `write` opens a [`corelog::Engine`] on a filesystem under test and
//!   appends a deterministic stream to several partitions (every byte of
//!   batch `seq` of partition `p` is a function of `(p, seq)`, see
//!   `corelog-crash/stream.rs`), recording every acknowledgement (partition,
//!   sequence, base offset, digest, time) as one line of a journal that
//!   lives OUTSIDE the filesystem under test. Meanwhile the orchestrator
//!   clones the filesystem's image (`cp --reflink=always`: atomic, it holds
//!   what the device had received, so the page cache is lost as in a power
//!   cut), noting the journal's length and the time just before each clone.
//! * `check` opens an engine on a mounted clone (recovery runs) and checks
//!   it against the journal: every acknowledgement the policy makes durable
//!   and that was journaled before the clone is there, byte-exact, at its
//!   offset; each partition's log is a prefix of what was sent (offsets
//!   continuous, no foreign bytes); appends resume.
//!
//! ```text
//! corelog-powercut write --dir D --journal J --fsync batch --seconds 10
//! corelog-powercut check --dir D --journal J --fsync batch --upto BYTES --clone-ns T
//! ```
//!
//! `check` exits 0 when nothing required is lost, 1 when acknowledged
//! batches are lost (the expected outcome of the `fsync=never` control),
//! 2 on any other failure (a log that is not a prefix of what was sent, an
//! append that fails after recovery, a bad journal).

mod args;
mod check;
mod journal;
mod raw;
#[allow(dead_code)] // shared with corelog-crash, which uses all of it
#[path = "../corelog-crash/stream.rs"]
mod stream;
mod write;

use args::{CheckArgs, WriteArgs};
use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser, Debug)]
#[command(
    name = "corelog-powercut",
    about = "Append and journal acknowledgements, or check a power-cut image against the journal"
)]
struct Cli {
    #[command(subcommand)]
    mode: Mode,
}

#[derive(Subcommand, Debug)]
enum Mode {
    /// Append to several partitions, journaling every acknowledgement.
    Write(WriteArgs),
    /// Recover a cloned image's data directory and check it.
    Check(CheckArgs),
}

fn main() -> ExitCode {
    match Cli::parse().mode {
        Mode::Write(a) => match write::run(&a) {
            Ok(summary) => {
                println!("{summary}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("corelog-powercut write: FAIL: {e}");
                ExitCode::from(2)
            }
        },
        Mode::Check(a) => check::run(&a),
    }
}
