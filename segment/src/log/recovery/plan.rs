//! What recovery will do, decided from the bytes alone: the table of cases
//! of the module doc, as one pure function. Opening a log applies the plan
//! (`apply.rs`); `verify` prints it; `repair` forces its set-aside.

use super::super::config::{LogConfig, OpenCheck};
use super::super::error::{Damage, OpenError};
use super::super::index::{self, IndexEntry, Seal};
use super::super::scan::{scan, CutReason, Scan, ScanFrom, Stop};
use crate::format::{check, declared_length, Limits};
use std::path::PathBuf;

/// One segment file as recovery finds it.
#[derive(Debug)]
pub(crate) struct SegmentFacts<'a> {
    /// Its base offset (from its name).
    pub base: u64,
    /// The segment file.
    pub path: PathBuf,
    /// The file's bytes, `[0, file length)`.
    pub data: &'a [u8],
    /// The entries its index file holds.
    pub stored_entries: Vec<IndexEntry>,
    /// Its seal record, if valid.
    pub seal: Option<Seal>,
}

/// What happens to one segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Step {
    /// A confirmed segment: trusted; its index rewritten if it was wrong.
    Trusted {
        /// The seal record.
        seal: Seal,
    },
    /// A segment whose sealing was interrupted after its data was whole:
    /// made durable and sealed now.
    SealNow,
    /// The end of the log: cut at `found.end` if anything follows it.
    Last {
        /// The cut, when bytes follow the last whole batch.
        cut: Option<Cut>,
    },
}

/// A cut of the last segment, at `position` (the end of its last whole
/// batch).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Cut {
    /// Where.
    pub position: u64,
    /// Why.
    pub reason: CutReason,
}

/// One segment's verdict.
#[derive(Debug, Clone)]
pub(crate) struct SegmentPlan {
    /// Which segment (index into the facts).
    pub segment: usize,
    /// What is done to it.
    pub step: Step,
    /// Where its verification started (bytes before were trusted).
    pub from: ScanFrom,
    /// What the scan found.
    pub found: Scan,
    /// Its index after recovery.
    pub entries: Vec<IndexEntry>,
    /// Whether the index file differs from `entries` (rewritten).
    pub index_rewritten: bool,
}

/// Whole batches that follow a torn tail: kept, out of the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SetAside {
    /// The bytes of the last segment after the cut (from the cut to its
    /// end), if any whole batch is among them.
    pub tail: Option<(usize, u64)>,
    /// Later segment files (indexes into the facts), moved as they are.
    pub later: Vec<usize>,
    /// Whole batches among all of it.
    pub whole_batches: u64,
}

/// Everything recovery will do to a partition.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    /// The kept segments, oldest first; the last is the active one.
    pub segments: Vec<SegmentPlan>,
    /// Later segments holding no whole batch: removed.
    pub remove: Vec<usize>,
    /// Whole batches past a torn tail, moved aside (never deleted).
    pub set_aside: Option<SetAside>,
}

/// Decides what opening the log of `partition` does with `facts` (its
/// segments, oldest first). With `force_set_aside` (what `repair` does),
/// damage followed by whole batches is set aside like a torn tail instead
/// of refusing to open.
pub(crate) fn plan(
    partition: u64,
    facts: &[SegmentFacts<'_>],
    config: &LogConfig,
    force_set_aside: bool,
) -> Result<Plan, OpenError> {
    let mut out = Plan {
        segments: Vec::new(),
        remove: Vec::new(),
        set_aside: None,
    };
    let mut prev: Option<(u64, u64)> = None; // (next offset, last timestamp)
    for (i, f) in facts.iter().enumerate() {
        let is_last = i + 1 == facts.len();
        let next_base = facts.get(i + 1).map(|n| n.base);
        if let Some((expected, _)) = prev {
            if expected != f.base {
                return Err(OpenError::Corrupt {
                    path: f.path.clone(),
                    position: 0,
                    damage: Damage::SegmentGap {
                        expected,
                        found: f.base,
                    },
                });
            }
        }
        let start_ts = prev.map(|p| p.1).unwrap_or(0);
        let file_len = f.data.len() as u64;
        let (kept, from) = if config.open_check == OpenCheck::Full {
            (Vec::new(), start_of_segment(partition, f.base, start_ts))
        } else {
            best_entry(partition, f, start_ts, &config.limits)
        };
        let found = scan(f.data, from, &config.limits, config.index_interval_bytes);
        let mut entries = kept;
        entries.extend_from_slice(&found.entries);
        let index_rewritten = entries != f.stored_entries;
        let whole = found.stop == Stop::End && found.end == file_len;
        let seg = |step| SegmentPlan {
            segment: i,
            step,
            from,
            found: found.clone(),
            entries: entries.clone(),
            index_rewritten,
        };
        if let (false, Some(seal)) = (is_last, f.seal) {
            if let Some(damage) = sealed_damage(&found, seal, file_len) {
                return Err(OpenError::Corrupt {
                    path: f.path.clone(),
                    position: found.end,
                    damage,
                });
            }
            out.segments.push(seg(Step::Trusted { seal }));
            prev = Some((found.next_offset, found.last_timestamp.max(start_ts)));
            continue;
        }
        if !is_last && whole && Some(found.next_offset) == next_base {
            out.segments.push(seg(Step::SealNow));
            prev = Some((found.next_offset, found.last_timestamp.max(start_ts)));
            continue;
        }
        // This segment is the end of the log.
        let cut = end_of_log_cut(&found, whole, is_last, next_base);
        let later = (i + 1..facts.len()).collect::<Vec<_>>();
        let tail_whole = match &cut {
            Some(c) => whole_batches_after(f.data, c.position, &config.limits),
            None => 0,
        };
        let later_whole: u64 = later
            .iter()
            .map(|&k| whole_batches_after(facts[k].data, 0, &config.limits))
            .sum();
        if tail_whole + later_whole > 0 {
            let torn = match &cut {
                Some(c) => torn_shaped(f.data, c, &config.limits),
                None => true,
            };
            if !torn && !force_set_aside {
                let Some(c) = cut else {
                    unreachable!("whole batches after a segment with no cut are later segments, set aside as torn");
                };
                return Err(OpenError::DamageBeforeData {
                    path: f.path.clone(),
                    position: c.position,
                    damage: match c.reason {
                        CutReason::Damaged(d) => d,
                        CutReason::Zeros => Damage::TornHeader { available: 0 },
                    },
                    whole_batches: tail_whole + later_whole,
                });
            }
            out.set_aside = Some(SetAside {
                tail: (tail_whole > 0)
                    .then(|| (i, cut.as_ref().map(|c| c.position).unwrap_or(file_len))),
                later: later.clone(),
                whole_batches: tail_whole + later_whole,
            });
        } else {
            out.remove = later;
        }
        out.segments.push(seg(Step::Last { cut }));
        return Ok(out);
    }
    Ok(out)
}

/// Where a scan starts that trusts nothing in the segment.
pub(crate) fn start_of_segment(partition: u64, base: u64, last_timestamp: u64) -> ScanFrom {
    ScanFrom {
        position: 0,
        next_offset: base,
        last_timestamp,
        segment_base: base,
        last_indexed: None,
        partition: Some(partition),
    }
}

/// What is wrong with a confirmed segment whose scan found `found`.
fn sealed_damage(found: &Scan, seal: Seal, file_len: u64) -> Option<Damage> {
    match &found.stop {
        Stop::Damaged(d) => Some(d.clone()),
        Stop::Zeros => Some(Damage::TornHeader {
            available: file_len - found.end,
        }),
        Stop::End if found.end != seal.data_len || found.next_offset != seal.next_offset => {
            Some(Damage::SealMismatch {
                sealed_len: seal.data_len,
                sealed_next: seal.next_offset,
                next: found.next_offset,
            })
        }
        Stop::End => None,
    }
}

/// The cut of the segment that ends the log, if anything follows its last
/// whole batch (bytes, or a later segment its offsets do not reach).
fn end_of_log_cut(found: &Scan, whole: bool, is_last: bool, next_base: Option<u64>) -> Option<Cut> {
    let gap = || {
        CutReason::Damaged(Damage::EndsShort {
            ends: found.next_offset,
            next: next_base.unwrap_or(found.next_offset),
        })
    };
    if !whole {
        let reason = match &found.stop {
            Stop::Damaged(d) => CutReason::Damaged(d.clone()),
            Stop::End if !is_last => gap(),
            _ => CutReason::Zeros,
        };
        return Some(Cut {
            position: found.end,
            reason,
        });
    }
    (!is_last).then(|| Cut {
        position: found.end,
        reason: gap(),
    })
}

/// Whether the damage at a cut looks like a write a power cut tore rather
/// than bytes that changed after they were written.
///
/// A torn write lands a prefix of itself, or some of its pages (a batch's
/// header and frames may even land apart); what did not land reads as
/// what the file held before, zeros, since appends go to fresh or
/// preallocated space. Bytes that changed after landing leave the batch's
/// shape intact. So the damage is *not* torn only when the batch at the
/// cut has a readable length, lies whole within the data, is followed
/// right at its end by a whole batch (or by the end of the data), ends in
/// a non-zero byte and holds no zero-filled sector (512 bytes, aligned in
/// the file). A batch stamped for another partition, or a whole batch
/// whose offsets do not continue, is never torn.
fn torn_shaped(data: &[u8], cut: &Cut, limits: &Limits) -> bool {
    const SECTOR: usize = 512;
    let damage = match &cut.reason {
        CutReason::Zeros => return true,
        CutReason::Damaged(d) => d,
    };
    match damage {
        Damage::TornHeader { .. }
        | Damage::TornBatch { .. }
        | Damage::SegmentGap { .. }
        | Damage::EndsShort { .. }
        | Damage::SealMismatch { .. } => true,
        Damage::Batch(_) => {
            let start = usize::try_from(cut.position).unwrap_or(usize::MAX);
            let Some(rest) = data.get(start..) else {
                return true;
            };
            let Some(len) = declared_length(rest, limits)
                .ok()
                .and_then(|l| usize::try_from(l).ok())
                .filter(|&l| l <= rest.len())
            else {
                return true;
            };
            let end = start + len;
            let continues = end == data.len() || next_whole_batch(data, end, limits) == Some(end);
            let zero_sector = (start.div_ceil(SECTOR) * SECTOR..end)
                .step_by(SECTOR)
                .filter_map(|s| data.get(s..s + SECTOR))
                .any(|sector| sector.iter().all(|&b| b == 0));
            !continues || rest[len - 1] == 0 || zero_sector
        }
        _ => false,
    }
}

/// How many whole, valid batches (any partition, any offsets) lie in
/// `data` at or after `from`: the batches a cut there would drop.
pub(crate) fn whole_batches_after(data: &[u8], from: u64, limits: &Limits) -> u64 {
    let mut count = 0;
    let mut pos = usize::try_from(from).unwrap_or(usize::MAX);
    while let Some(at) = next_whole_batch(data, pos, limits) {
        count += 1;
        pos = at + declared_length(&data[at..], limits).map_or(1, |l| l as usize);
    }
    count
}

/// Where the first whole, valid batch at or after `from` starts. Every
/// byte position is a candidate (batches are not aligned); runs of zeros
/// are skipped a word at a time, so a preallocated tail costs little.
fn next_whole_batch(data: &[u8], from: usize, limits: &Limits) -> Option<usize> {
    use crate::format::layout::{batch, BATCH_HEADER_LEN};
    // A stored batch's `batch_length` (bytes 32..40) is never zero, so its
    // first non-zero byte is at most this far into it.
    const LEAD: usize = batch::BATCH_LENGTH.end - 1;
    let mut pos = from;
    while pos.saturating_add(BATCH_HEADER_LEN) <= data.len() {
        let q = next_nonzero(data, pos)?;
        pos = pos.max(q.saturating_sub(LEAD));
        let rest = data.get(pos..)?;
        if rest.len() < BATCH_HEADER_LEN {
            return None;
        }
        let whole = rest[batch::RESERVED].iter().all(|&b| b == 0)
            && declared_length(rest, limits)
                .ok()
                .and_then(|l| rest.get(..usize::try_from(l).ok()?))
                .is_some_and(|b| check(b, limits).is_ok());
        if whole {
            return Some(pos);
        }
        pos += 1;
    }
    None
}

/// The position of the first non-zero byte at or after `from`.
fn next_nonzero(data: &[u8], from: usize) -> Option<usize> {
    let rest = data.get(from..)?;
    let mut words = rest.chunks_exact(64);
    let mut at = from;
    for w in &mut words {
        let any = w.chunks_exact(8).fold(0u64, |acc, b| {
            acc | u64::from_ne_bytes(b.try_into().unwrap_or([0; 8]))
        });
        if any != 0 {
            return w.iter().position(|&b| b != 0).map(|i| at + i);
        }
        at += 64;
    }
    words
        .remainder()
        .iter()
        .position(|&b| b != 0)
        .map(|i| at + i)
}

/// The last stored index entry that is well formed and names the valid
/// batch at its position, with every entry before it; the scan starts
/// there.
fn best_entry(
    partition: u64,
    f: &SegmentFacts<'_>,
    start_ts: u64,
    limits: &Limits,
) -> (Vec<IndexEntry>, ScanFrom) {
    let stored = &f.stored_entries;
    let n = index::well_formed_prefix(stored, f.data.len() as u64);
    for k in (0..n).rev() {
        let e = stored[k];
        let Some(rest) = f.data.get(e.position as usize..) else {
            continue;
        };
        let Ok(len) = declared_length(rest, limits) else {
            continue;
        };
        let Some(one) = rest.get(..len as usize) else {
            continue;
        };
        let Ok(view) = check(one, limits) else {
            continue;
        };
        if view.base_offset() != f.base + u64::from(e.rel_offset)
            || view.partition_id() != partition
            || view.base_timestamp() != e.timestamp
            || e.timestamp < start_ts
        {
            continue;
        }
        return (
            stored[..k].to_vec(),
            ScanFrom {
                position: u64::from(e.position),
                next_offset: view.base_offset(),
                last_timestamp: e.timestamp,
                segment_base: f.base,
                last_indexed: None,
                partition: Some(partition),
            },
        );
    }
    (Vec::new(), start_of_segment(partition, f.base, start_ts))
}
