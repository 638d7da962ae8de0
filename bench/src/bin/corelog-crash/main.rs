//! `corelog-crash`: kills `corelog append --fsync batch` at random moments
//! and proves that nothing it acknowledged is ever lost.
//!
//! Every cycle starts `corelog append` on the same data directory, feeds it
//! a deterministic stream of producer batches (message ids say cycle,
//! sequence and index, so every stored batch names what it is), reads its
//! JSON acknowledgements and SIGKILLs it at a random moment: while it opens
//! (and recovers) the directory, mid-stream with writes and syncs in
//! flight, or idle. Then (in most cycles; in the others the next child
//! recovers the crashed directory itself) the directory is reopened with
//! [`corelog::Engine`] and checked:
//!
//! * every acknowledged batch is there, at the offset its acknowledgement
//!   gave, byte for byte (the producer's frames and header fields, the
//!   stamped `partition_id`, `base_offset`, and the `base_timestamp` and
//!   checksum seen the first time it was read);
//! * the log is the batches checked before, then a prefix of what each
//!   cycle since sent, in order: nothing reordered, duplicated or never
//!   sent; offsets continuous, timestamps never going back;
//! * appends go on: one more batch takes the next offset;
//! * after that clean close, `corelog verify` finds the directory sound.
//!
//! The seed drives every choice (stream, segment sizes, kill moments) and
//! is printed first; the timing of the kills is the machine's.
//!
//! ```text
//! corelog-crash --cycles 1000 [--seed S] [--dir DIR] [--corelog PATH]
//! ```

mod ack;
mod check;
mod child;
mod harness;
mod report;
mod stream;

use clap::Parser;
use harness::{Args, Harness};
use report::Totals;
use std::process::ExitCode;
use std::time::Instant;

fn main() -> ExitCode {
    corelog::cli::init_tracing();
    let args = Args::parse();
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1)
    });
    println!("corelog-crash: seed {seed} (replay the choices with --seed {seed})");
    let corelog = match &args.corelog {
        Some(p) => p.clone(),
        None => match std::env::current_exe() {
            Ok(exe) => exe.with_file_name("corelog"),
            Err(e) => {
                eprintln!("corelog-crash: cannot find my own path: {e}");
                return ExitCode::FAILURE;
            }
        },
    };
    if !corelog.is_file() {
        eprintln!(
            "corelog-crash: no corelog binary at {} (build it: cargo build -p corelog --bin corelog, or pass --corelog)",
            corelog.display()
        );
        return ExitCode::FAILURE;
    }
    let (tmp, dir) = match &args.dir {
        Some(d) => (None, d.clone()),
        None => match tempfile::Builder::new().prefix("corelog-crash.").tempdir() {
            Ok(t) => {
                let p = t.path().to_path_buf();
                (Some(t), p)
            }
            Err(e) => {
                eprintln!("corelog-crash: cannot make a temporary directory: {e}");
                return ExitCode::FAILURE;
            }
        },
    };
    println!(
        "corelog-crash: {} cycles on {} with {}",
        args.cycles,
        dir.display(),
        corelog.display()
    );
    let mut h = Harness {
        rng: fastrand::Rng::with_seed(seed),
        corelog,
        dir,
        args,
        known: Vec::new(),
        pending: Vec::new(),
        totals: Totals::default(),
    };
    let started = Instant::now();
    let result = h.run();
    println!("{}", h.totals.summary(seed, started.elapsed()));
    match result {
        Ok(()) => {
            drop(tmp);
            println!("corelog-crash: PASS: nothing acknowledged was lost");
            ExitCode::SUCCESS
        }
        Err(e) => {
            if let Some(t) = tmp {
                // Keep the evidence.
                let kept = t.keep();
                eprintln!("corelog-crash: data directory kept at {}", kept.display());
            }
            eprintln!("corelog-crash: FAIL (seed {seed}): {e}");
            ExitCode::FAILURE
        }
    }
}
