//! `--target log`: a replicated partition log (`LogConfig::commit_gate`)
//! driven as a Raft follower will drive it once the partition logs are the
//! replicated log (issue 28): entries appended at the end as stamped
//! batches, and now and then an uncommitted suffix cut
//! (`PartitionLog::cut_suffix`, the crash-safe `CUT` record) and replaced
//! by a new term's batches.
//!
//! Entry `i` (from 1, as in the journal) is the batch at offset `i - 1`:
//! one message whose payload is a function of `i` and the term, stamped
//! with the term as its `base_timestamp` (terms only grow, as timestamps
//! must), so the checker reads each batch's term back from its header.
//! The commit mark trails the end by up to 8 offsets and only grows; the
//! writer cuts only above it.

use crate::steps::{now_ns, payload};
use corelog::testing::segment::io::UringStorage;
use corelog::testing::segment::log::PartitionLog;
use corelog::{Batch, FsyncPolicy, Limits, LogConfig, PollFrom, Stamp};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How far the commit mark trails the end (the longest suffix replaced).
const UNCOMMITTED: u64 = 8;

fn config(no_sync: bool) -> LogConfig {
    LogConfig {
        fsync: if no_sync {
            FsyncPolicy::Never
        } else {
            FsyncPolicy::Batch
        },
        commit_gate: true,
        // Small segments, so cuts cross files and remove whole segments.
        segment_bytes: 64 << 10,
        ..LogConfig::default()
    }
}

fn log_dir(dir: &Path) -> PathBuf {
    dir.join("partition-1")
}

/// Entry `index` of `term` as the stamped batch a follower stores.
pub fn batch(index: u64, term: u64) -> Result<Batch, String> {
    let payload = payload(index, term);
    let mut b = corelog::BatchBuilder::new();
    b.push(corelog::MessageSpec {
        id: u128::from(index),
        timestamp: 1_000,
        payload: &payload,
        user_headers: &[],
    });
    let built = b.build().map_err(|e| e.to_string())?;
    let stamped = Batch::admit(built, &Limits::default())
        .map_err(|e| e.to_string())?
        .into_stamped(Stamp {
            partition_id: 1,
            base_offset: index - 1,
            base_timestamp: term,
        });
    Batch::admit(stamped, &Limits::default()).map_err(|e| e.to_string())
}

fn runtime() -> Result<monoio::Runtime<monoio::time::TimeDriver<monoio::IoUringDriver>>, String> {
    monoio::RuntimeBuilder::<monoio::IoUringDriver>::new()
        .enable_timer()
        .build()
        .map_err(|e| format!("io_uring runtime: {e}"))
}

/// How long the control (`no_sync`) cuts suffixes after it starts.
const CONTROL_CUTS_FOR: Duration = Duration::from_millis(500);

pub fn write(
    dir: &Path,
    history: &Path,
    seconds: f64,
    seed: u64,
    no_sync: bool,
) -> Result<String, String> {
    runtime()?.block_on(async {
        let storage = UringStorage::new(256).map_err(|e| format!("ring: {e}"))?;
        let (mut log, _) = PartitionLog::open(storage, log_dir(dir), 1, config(no_sync))
            .await
            .map_err(|e| e.to_string())?;
        let mut hist = std::io::BufWriter::new(
            std::fs::File::create(history).map_err(|e| format!("{}: {e}", history.display()))?,
        );
        let mut rng = fastrand::Rng::with_seed(seed);
        let (mut term, mut commit) = (1u64, 0u64);
        let (mut steps, mut cuts) = (0u64, 0u64);
        let start = Instant::now();
        let deadline = start + Duration::from_secs_f64(seconds);
        while Instant::now() < deadline {
            let last = log.stats().end_offset;
            // Only what lies past the commit mark may be replaced. Every
            // cut makes the log durable (it closes it), so the control
            // cuts only in its first half second, where the clones'
            // slack already forgives every loss: after that it has all
            // its unsynced batches to lose (cutting one step in 60, it
            // cut many times a second and lost nothing on ext4 and xfs).
            let may_cut = !no_sync || start.elapsed() < CONTROL_CUTS_FOR;
            let from = if may_cut && last > commit && rng.u8(..6) == 0 {
                term += 1;
                cuts += 1;
                last + 1 - rng.u64(1..=(last - commit).min(UNCOMMITTED))
            } else {
                last + 1
            };
            if from <= last {
                if let Some((cut, _)) = log
                    .cut_suffix(from - 1)
                    .await
                    .map_err(|e| e.to_string())?
                {
                    log = cut;
                    // A reopened log's mark starts at its first offset.
                    log.set_commit_mark(commit).map_err(|e| e.to_string())?;
                }
            }
            let count = rng.u64(1..=8);
            let mut acks = Vec::with_capacity(count as usize);
            for i in from..from + count {
                acks.push(log.append_stamped(batch(i, term)?));
            }
            for a in acks {
                a.await.map_err(|e| e.to_string())?;
            }
            // The mark only grows, also past a cut that shortened the log.
            commit = commit.max((from + count - 1).saturating_sub(UNCOMMITTED));
            log.set_commit_mark(commit).map_err(|e| e.to_string())?;
            writeln!(hist, "{} {from} {term} {count}", now_ns())
                .map_err(|e| e.to_string())?;
            hist.flush().map_err(|e| e.to_string())?;
            steps += 1;
        }
        let end = log.stats().end_offset;
        log.close().await.map_err(|e| e.to_string())?;
        Ok(format!(
            "corelog-journal-powercut write --target log: {steps} steps ({cuts} suffixes cut), last index {end}, term {term}"
        ))
    })
}

/// The recovered log's terms, entry 1 first, each batch checked to be the
/// one written at its offset for its term.
pub fn recovered(dir: &Path) -> Result<Vec<u64>, String> {
    runtime()?.block_on(async {
        let storage = UringStorage::new(256).map_err(|e| format!("ring: {e}"))?;
        let (log, report) = PartitionLog::open(storage, log_dir(dir), 1, config(false))
            .await
            .map_err(|e| format!("recovery: {e}"))?;
        if report.changed_data() {
            println!("    recovery: {report}");
        }
        log.set_commit_mark(u64::MAX).map_err(|e| e.to_string())?;
        let mut terms = Vec::new();
        let mut from = PollFrom::First;
        loop {
            let reply = log.poll(from, 1 << 20).map_err(|e| format!("poll: {e}"))?;
            if reply.is_empty() {
                break;
            }
            reply
                .verify(&Limits::default())
                .map_err(|e| format!("verify: {e}"))?;
            for b in reply.batches() {
                let index = terms.len() as u64 + 1;
                if b.base_offset() != index - 1 {
                    return Err(format!(
                        "offset {} where entry {index} (offset {}) belongs",
                        b.base_offset(),
                        index - 1
                    ));
                }
                let term = b.base_timestamp();
                let want = batch(index, term)?;
                if b.as_bytes() != want.bytes().as_ref() {
                    return Err(format!("entry {index} (term {term}): batch not as written"));
                }
                terms.push(term);
            }
            from = PollFrom::Offset(reply.next_offset());
        }
        log.close().await.map_err(|e| e.to_string())?;
        Ok(terms)
    })
}
