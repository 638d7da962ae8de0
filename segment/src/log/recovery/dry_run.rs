//! What opening a log would do, worked out without doing it: `corelog
//! verify` prints it, so it says exactly what recovery will do (the same
//! plan, from the same bytes).

use super::super::config::LogConfig;
use super::super::cut::{CutPlan, CUT_RECORD};
use super::super::error::OpenError;
use super::super::index;
use super::super::segment::{index_name, log_name, parse_log_name};
use super::super::sync::POISON_MARKER;
use super::clean::{self, CLEAN_RECORD};
use super::cut;
use super::opened::ASIDE_DIR;
use super::plan::{self, SegmentFacts, Step};
use super::report::{CleanClose, RecoveryReport, SetAsideFile, TailCut};
use crate::io::{map_file, Mapping};
use std::path::{Path, PathBuf};

/// What opening a partition's log would do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DryRun {
    /// The report an open would give (set-aside destinations name the
    /// `aside/` directory only: the files are named when they are moved).
    pub report: RecoveryReport,
    /// Where recovery starts verifying each segment it keeps (it trusts
    /// the bytes before: an index entry that names a valid batch).
    pub checked_from: Vec<(PathBuf, u64)>,
}

/// Works out what [`PartitionLog::open`](super::super::PartitionLog::open)
/// would do to the log of `partition` in `dir`, reading the files and
/// writing nothing. The error is the one open would return.
pub fn dry_run(dir: &Path, partition: u64, config: &LogConfig) -> Result<DryRun, OpenError> {
    let names: Vec<String> = std::fs::read_dir(dir)
        .map_err(|e| OpenError::io("list", dir, e))?
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str().map(str::to_owned))
        .collect();
    let mut bases: Vec<u64> = names.iter().filter_map(|n| parse_log_name(n)).collect();
    bases.sort_unstable();
    let mut maps: Vec<(u64, PathBuf, Mapping, Vec<u8>, usize)> = Vec::with_capacity(bases.len());
    for base in bases {
        let path = dir.join(log_name(base));
        let map = map_file(&path).map_err(|e| OpenError::io("map", &path, e))?;
        let index_path = dir.join(index_name(base));
        let stored = match std::fs::read(&index_path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(OpenError::io("read", &index_path, e)),
        };
        let len = map.capacity();
        maps.push((base, path, map, stored, len));
    }
    // A recorded suffix cut is finished before anything else: look at the
    // segments as it leaves them.
    let mut suffix_cut = None;
    if names.iter().any(|n| n == CUT_RECORD) {
        let path = dir.join(CUT_RECORD);
        let record = std::fs::read(&path).map_err(|e| OpenError::io("read", &path, e))?;
        let bases: Vec<u64> = maps.iter().map(|m| m.0).collect();
        let map = |base: u64| {
            let m = maps.iter().find(|m| m.0 == base).map(|m| m.2.clone());
            m.map(|m| {
                let len = m.capacity() as u64;
                (m, len)
            })
            .ok_or(OpenError::CutRecord {
                path: path.clone(),
                why: "its segment vanished",
            })
        };
        let (from, plan) = cut::plan_from_record(dir, partition, &record, &bases, map)?;
        if let Some(CutPlan { keep, truncate_to }) = plan {
            maps.truncate(keep);
            if let (Some(last), Some(len)) = (maps.last_mut(), truncate_to) {
                last.3 = Vec::new();
                last.4 = usize::try_from(len).unwrap_or(0);
            }
        }
        suffix_cut = Some(from);
    }
    let facts: Vec<SegmentFacts<'_>> = maps
        .iter()
        .map(|(base, path, map, stored, len)| {
            let (stored_entries, seal) = index::decode_file(stored);
            SegmentFacts {
                base: *base,
                path: path.clone(),
                data: map.slice(0..*len).unwrap_or(&[]),
                stored_entries,
                seal,
            }
        })
        .collect();
    let mut clean_close = CleanClose::NotFound;
    if suffix_cut.is_none() && names.iter().any(|n| n == CLEAN_RECORD) {
        let after_poison = names.iter().any(|n| n == POISON_MARKER);
        let why = match clean::distrust(config, false, after_poison) {
            Some(why) => why,
            None => {
                let record = std::fs::read(dir.join(CLEAN_RECORD)).unwrap_or_default();
                let found: Vec<clean::Found<'_>> = maps
                    .iter()
                    .map(|(base, _, map, stored, _)| clean::Found {
                        base: *base,
                        len: map.capacity() as u64,
                        index: stored,
                    })
                    .collect();
                match clean::check(partition, &record, &found) {
                    Ok(record) => {
                        // Opening trusts every byte below the recorded ends.
                        let checked_from = facts
                            .iter()
                            .map(|f| (f.path.clone(), f.data.len() as u64))
                            .collect();
                        return Ok(DryRun {
                            report: clean::trusted_report(&record),
                            checked_from,
                        });
                    }
                    Err(why) => why,
                }
            }
        };
        clean_close = CleanClose::NotTrusted(why);
    }
    let plan = plan::plan(partition, &facts, config, false)?;
    let mut report = RecoveryReport {
        segments: plan.segments.len().max(1),
        clean_close,
        suffix_cut,
        ..RecoveryReport::default()
    };
    let mut checked_from = Vec::new();
    for sp in &plan.segments {
        let f = &facts[sp.segment];
        report.batches_verified += sp.found.batches;
        report.next_offset = sp.found.next_offset;
        checked_from.push((f.path.clone(), sp.from.position));
        if sp.index_rewritten {
            report.rebuilt_indexes.push(dir.join(index_name(f.base)));
        }
        match &sp.step {
            Step::Trusted { .. } => {}
            Step::SealNow => report.sealed.push(f.path.clone()),
            Step::Last { cut } => {
                if let Some(c) = cut {
                    report.cut = Some(TailCut {
                        path: f.path.clone(),
                        position: c.position,
                        dropped: f.data.len() as u64 - c.position,
                        reason: c.reason.clone(),
                    });
                }
            }
        }
    }
    report.removed = plan.remove.iter().map(|&k| facts[k].path.clone()).collect();
    if let Some(aside) = &plan.set_aside {
        let to = dir.join(ASIDE_DIR);
        if let Some((k, from)) = aside.tail {
            report.set_aside.push(SetAsideFile {
                from: facts[k].path.clone(),
                to: to.clone(),
                bytes: facts[k].data.len() as u64 - from,
            });
        }
        for &k in &aside.later {
            report.set_aside.push(SetAsideFile {
                from: facts[k].path.clone(),
                to: to.clone(),
                bytes: facts[k].data.len() as u64,
            });
        }
        report.set_aside_batches = aside.whole_batches;
    }
    Ok(DryRun {
        report,
        checked_from,
    })
}
