//! `corelog-journal-powercut`: the replication journal under the power-cut
//! suite (`scripts/powercut-test.sh`, policies `journal-batch` and the
//! control `journal-never`).
//!
//! * `write` drives a replica group's journal (`corelog_replica::journal`)
//!   as a Raft follower would: entries appended at the end, and now and
//!   then a conflicting suffix replaced by a new term's entries (the
//!   crash-safe truncate-suffix), each step followed by `sync` (unless
//!   `--no-sync`, the control). After each synced step it records one line
//!   in a history OUTSIDE the filesystem under test: `ns from term count`
//!   (the log was cut to `from - 1`, then `count` entries of `term`
//!   appended). Every entry's data is a function of its index and term:
//!   at even indexes a stamped batch (stamped with the term, so a
//!   replaced entry's batch differs from the one it replaces), written as
//!   a batch record (`append_verified`: its checksum stops at the batch
//!   header, recovery verifies the batch), at odd ones plain bytes.
//! * `--target log` drives a replicated partition log instead (the one
//!   log of issue 28, `log_target.rs`): the same steps as stamped batches,
//!   each replaced suffix cut with `PartitionLog::cut_suffix` (its `CUT`
//!   record finished by recovery), policies `cut-batch` and the control
//!   `cut-never`.
//! * `check` opens the journal of a clone (recovery runs) and checks it
//!   against the history, with S_k the log after the last step recorded
//!   before the clone: the recovered log must be a prefix of some log
//!   S_j, j >= k, the writer went through, at least as long as what S_k
//!   and S_j share (what was synced and not since replaced), with every
//!   entry's data intact.
//!
//! ```text
//! corelog-journal-powercut write --dir D --history H --seconds 6
//! corelog-journal-powercut check --dir D --history H --clone-ns T --label ext4/clone0
//! ```
//!
//! `check` prints `corelog-powercut check LABEL: acked-before-clone=N
//! required=N LOST=N` and exits 0 when nothing required is lost, 1 when
//! synced entries are lost (the control's expected outcome), 2 on any
//! other failure (a recovered log that mixes logs, damaged data).

mod log_target;
mod steps;

use steps::{now_ns, payload};

use bytes::Bytes;
use clap::{Parser, Subcommand, ValueEnum};
use corelog_replica::journal::Journal;
use raft::eraftpb::{ConfState, Entry};
use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

#[derive(Parser, Debug)]
#[command(name = "corelog-journal-powercut")]
struct Cli {
    #[command(subcommand)]
    mode: Mode,
}

/// What the steps are written to.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Target {
    /// A replica group's journal (`corelog_replica::journal`).
    Journal,
    /// A replicated partition log (`LogConfig::commit_gate`).
    Log,
}

#[derive(Subcommand, Debug)]
enum Mode {
    /// Append and replace suffixes, recording each synced step.
    Write {
        #[arg(long)]
        dir: PathBuf,
        #[arg(long)]
        history: PathBuf,
        #[arg(long, default_value_t = 6.0)]
        seconds: f64,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Never sync (the control: it must lose entries).
        #[arg(long)]
        no_sync: bool,
        #[arg(long, value_enum, default_value = "journal")]
        target: Target,
    },
    /// Recover a clone's journal and check it against the history.
    Check {
        #[arg(long)]
        dir: PathBuf,
        #[arg(long)]
        history: PathBuf,
        /// Wall-clock time (ns since the epoch) just before the clone.
        #[arg(long)]
        clone_ns: u64,
        /// A name for this check in the summary line.
        #[arg(long, default_value = "clone")]
        label: String,
        #[arg(long, value_enum, default_value = "journal")]
        target: Target,
    },
}

/// Entry `index` of `term`'s data, all a function of both: at odd
/// indexes its payload; at even ones a stamped batch of one message of
/// it (a batch record's data).
fn data(index: u64, term: u64) -> Vec<u8> {
    let bytes = payload(index, term);
    if !is_batch(index) {
        return bytes;
    }
    let mut b = corelog::BatchBuilder::new();
    b.push(corelog::MessageSpec {
        id: u128::from(index),
        timestamp: 1_000,
        payload: &bytes,
        user_headers: &[],
    });
    let built = b.build().unwrap_or_default();
    match corelog::Batch::admit(built, &corelog::Limits::default()) {
        Ok(batch) => batch.into_stamped(corelog::Stamp {
            partition_id: 1,
            base_offset: index,
            base_timestamp: term,
        }),
        Err(_) => Bytes::new(), // never: the builder's batches are valid
    }
    .to_vec()
}

/// Whether entry `index` holds a batch (a batch record).
fn is_batch(index: u64) -> bool {
    index.is_multiple_of(2)
}

// raft-rs's protobuf types are built field by field, as its own examples do.
#[allow(clippy::field_reassign_with_default)]
fn entry(index: u64, term: u64) -> Entry {
    let mut e = Entry::default();
    e.index = index;
    e.term = term;
    e.data = Bytes::from(data(index, term));
    e
}

fn conf() -> ConfState {
    ConfState::from((vec![1], vec![]))
}

fn write(
    dir: PathBuf,
    history: PathBuf,
    seconds: f64,
    seed: u64,
    no_sync: bool,
) -> Result<String, String> {
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let (mut j, _) = Journal::open(&dir, &conf()).map_err(|e| e.to_string())?;
    let mut hist = std::io::BufWriter::new(
        std::fs::File::create(&history).map_err(|e| format!("{}: {e}", history.display()))?,
    );
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut term = 1u64;
    let (mut steps, mut cuts) = (0u64, 0u64);
    let deadline = Instant::now() + Duration::from_secs_f64(seconds);
    while Instant::now() < deadline {
        let last = j.last_index();
        // One step in six replaces a suffix of up to 8 entries with a new
        // term's (a new leader's conflicting entries); the others append.
        let from = if last > 0 && rng.u8(..6) == 0 {
            term += 1;
            cuts += 1;
            last + 1 - rng.u64(1..=last.min(8))
        } else {
            last + 1
        };
        let count = rng.u64(1..=8);
        let ents: Vec<Entry> = (from..from + count).map(|i| entry(i, term)).collect();
        j.append_as(&ents, |e| {
            if is_batch(e.index) {
                corelog_replica::journal::Kind::VerifiedBatch
            } else {
                corelog_replica::journal::Kind::Plain
            }
        })
        .map_err(|e| e.to_string())?;
        if !no_sync {
            j.sync().map_err(|e| e.to_string())?;
        }
        writeln!(hist, "{} {from} {term} {count}", now_ns()).map_err(|e| e.to_string())?;
        hist.flush().map_err(|e| e.to_string())?;
        steps += 1;
    }
    Ok(format!(
        "corelog-journal-powercut write: {steps} steps ({cuts} suffixes replaced), last index {}, term {term}",
        j.last_index()
    ))
}

/// One recorded step.
struct Step {
    ns: u64,
    from: u64,
    term: u64,
    count: u64,
}

fn read_history(path: &PathBuf) -> Result<Vec<Step>, String> {
    let f = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut out = Vec::new();
    for (n, line) in std::io::BufReader::new(f).lines().enumerate() {
        let line = line.map_err(|e| e.to_string())?;
        let v: Vec<u64> = line.split(' ').filter_map(|x| x.parse().ok()).collect();
        let [ns, from, term, count] = v[..] else {
            return Err(format!("history line {}: {line:?}", n + 1));
        };
        out.push(Step {
            ns,
            from,
            term,
            count,
        });
    }
    Ok(out)
}

/// Applies `s` to `log` (terms of entries 1..), keeping `agree` (the length
/// `log` shares with `other`) up to date.
fn apply(log: &mut Vec<u64>, s: &Step, agree: &mut usize, other: &[u64]) {
    let keep = (s.from - 1) as usize;
    log.truncate(keep);
    *agree = (*agree).min(keep);
    log.extend(std::iter::repeat_n(s.term, s.count as usize));
    while *agree < log.len() && *agree < other.len() && log[*agree] == other[*agree] {
        *agree += 1;
    }
}

/// The recovered journal's terms, entry 1 first, each entry's data
/// checked.
fn recovered_journal(dir: &std::path::Path) -> Result<Vec<u64>, String> {
    let (j, rec) = Journal::open(dir, &conf()).map_err(|e| format!("recovery: {e}"))?;
    if let Some(cut) = &rec.cut {
        println!("    recovery cut: {cut}");
    }
    if j.first_index() != 1 {
        return Err(format!("first index {}, not 1", j.first_index()));
    }
    let mut r = Vec::new();
    for i in 1..=j.last_index() {
        let Some(e) = j.entry(i) else {
            return Err(format!(
                "entry {i} missing below the last {}",
                j.last_index()
            ));
        };
        if e.data.as_ref() != data(i, e.term).as_slice() {
            return Err(format!("entry {i} (term {}): data not as written", e.term));
        }
        r.push(e.term);
    }
    Ok(r)
}

fn check(dir: PathBuf, history: PathBuf, clone_ns: u64, label: String, target: Target) -> ExitCode {
    let fail = |why: String| {
        eprintln!("corelog-journal-powercut check {label}: FAIL: {why}");
        ExitCode::from(2)
    };
    let steps = match read_history(&history) {
        Ok(s) => s,
        Err(e) => return fail(e),
    };
    let recovered = match target {
        Target::Journal => recovered_journal(&dir),
        Target::Log => log_target::recovered(&dir),
    };
    let r = match recovered {
        Ok(r) => r,
        Err(e) => return fail(e),
    };
    // S_k: the log after the last step recorded before the clone.
    let k = steps.iter().take_while(|s| s.ns < clone_ns).count();
    let mut s_k = Vec::new();
    let mut agree_r = 0usize;
    // Whether R is some S_j, j < k: without a sync, a filesystem may hold
    // an older state of the file (btrfs keeps a file's last committed
    // extents while later writes sit in the page cache).
    let mut older = agree_r == r.len();
    for s in &steps[..k] {
        apply(&mut s_k, s, &mut agree_r, &r);
        older |= agree_r == r.len();
    }
    let shared_k = agree_r;
    // Some S_j, j >= k (within 5 s of the clone), must have R as a prefix,
    // and R must hold what S_k and S_j share.
    let mut cur = s_k.clone();
    let mut agree_k = cur.len();
    // (missing, required) of the best candidate.
    let mut best: Option<(usize, usize)> = None;
    let mut j_at = k;
    loop {
        if agree_r == r.len() {
            let missing = agree_k.saturating_sub(r.len());
            if best.is_none_or(|(m, _)| missing < m) {
                best = Some((missing, agree_k));
            }
        }
        let Some(s) = steps.get(j_at) else { break };
        if s.ns > clone_ns + 5_000_000_000 {
            break;
        }
        apply(&mut cur, s, &mut agree_r, &r);
        // `agree_k` is how much `cur` still shares with S_k.
        agree_k = agree_k.min((s.from - 1) as usize).min(cur.len());
        j_at += 1;
    }
    // An older state: everything of S_k it does not share is lost (so a
    // synced policy, which requires all of S_k, fails on it).
    let best = best.or(older.then(|| (s_k.len() - shared_k, s_k.len())));
    let Some((lost, required)) = best else {
        // Recovery must never mix logs, synced or not.
        return fail("the recovered log is no prefix of a log the writer went through".into());
    };
    println!(
        "corelog-powercut check {label}: acked-before-clone={} required={required} LOST={lost} recovered={}",
        s_k.len(),
        r.len()
    );
    if lost > 0 {
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}

fn main() -> ExitCode {
    match Cli::parse().mode {
        Mode::Write {
            dir,
            history,
            seconds,
            seed,
            no_sync,
            target,
        } => match match target {
            Target::Journal => write(dir, history, seconds, seed, no_sync),
            Target::Log => log_target::write(&dir, &history, seconds, seed, no_sync),
        } {
            Ok(summary) => {
                println!("{summary}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("corelog-journal-powercut write: FAIL: {e}");
                ExitCode::from(2)
            }
        },
        Mode::Check {
            dir,
            history,
            clone_ns,
            label,
            target,
        } => check(dir, history, clone_ns, label, target),
    }
}
