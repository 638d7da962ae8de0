//! The harness: its arguments, its state across cycles, and the cycles'
//! loop (a cycle in `child.rs`, a check in `check.rs`).

use crate::ack::Pending;
use crate::report::Totals;
use clap::Parser;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Parser, Debug)]
#[command(
    name = "corelog-crash",
    about = "SIGKILL `corelog append` at random moments; check nothing acknowledged is lost"
)]
pub(crate) struct Args {
    /// Crash cycles to run.
    #[arg(long, default_value_t = 20)]
    pub(crate) cycles: u64,
    /// Seed of every random choice (default: from the clock; printed).
    #[arg(long)]
    pub(crate) seed: Option<u64>,
    /// Data directory (default: a new temporary one, removed on success).
    #[arg(long)]
    pub(crate) dir: Option<PathBuf>,
    /// The corelog binary (default: next to this one).
    #[arg(long)]
    pub(crate) corelog: Option<PathBuf>,
    /// The partition appended to.
    #[arg(long, default_value_t = 7)]
    pub(crate) partition: u64,
    /// Most batches fed to one child.
    #[arg(long, default_value_t = 200)]
    pub(crate) max_batches: u64,
    /// Print a line per cycle.
    #[arg(long)]
    pub(crate) verbose: bool,
}

/// A child that makes no progress this long is hung: a failure.
pub(crate) const STALL: Duration = Duration::from_secs(120);

/// The harness's state across cycles.
pub(crate) struct Harness {
    pub(crate) args: Args,
    pub(crate) corelog: PathBuf,
    pub(crate) dir: PathBuf,
    pub(crate) rng: fastrand::Rng,
    pub(crate) known: Vec<Known>,
    pub(crate) pending: Vec<Pending>,
    pub(crate) totals: Totals,
}

/// A batch already checked in the log: it must stay exactly so.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Known {
    pub(crate) cycle: u64,
    pub(crate) seq: u64,
    pub(crate) base_offset: u64,
    pub(crate) base_timestamp: u64,
}

impl Harness {
    pub(crate) fn run(&mut self) -> Result<(), String> {
        for cycle in 0..self.args.cycles {
            self.cycle(cycle)?;
            self.totals.cycles += 1;
            let last = cycle + 1 == self.args.cycles;
            if last || self.rng.u32(0..4) != 0 {
                self.check(cycle)?;
            }
            if !self.args.verbose && (cycle + 1) % 100 == 0 {
                println!(
                    "corelog-crash: {} cycles, {} batches in the log, {} acknowledged, 0 lost",
                    cycle + 1,
                    self.known.len(),
                    self.totals.acked
                );
            }
        }
        Ok(())
    }
}
