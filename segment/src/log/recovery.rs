//! Opening a partition log: recovery as a table of cases.
//!
//! Segments are checked oldest first. A sealed segment whose index carries a
//! valid seal record is *confirmed*: it was durable before the record was
//! written, so it is trusted and only its tail (from its last index entry)
//! is verified (all of it under [`OpenCheck::Full`]). Any other segment (the
//! last one, or one whose sealing a crash interrupted) is *recovered*: every
//! batch after its last trustworthy index entry is verified (index entries
//! are only ever written for durable batches, so nothing before the last
//! one can be a hole a power cut left).
//!
//! | case | found in | what open does |
//! |---|---|---|
//! | whole tail | last segment | nothing to cut; offsets continue after its last batch |
//! | torn header | recovered segment | fewer than 256 header bytes: cut at the batch, reported |
//! | torn frame | recovered segment | `batch_length` runs past the data, or frames fail their checksums: cut at the batch, reported |
//! | zero-filled tail | recovered segment | zeros after the last batch (preallocation, unwritten pages): cut there, reported |
//! | checksum mismatch | recovered segment | cut at the batch, reported |
//! | checksum mismatch | confirmed segment | error naming file and position; nothing dropped |
//! | cut in a segment before the last | recovered segment | later segments removed (their data follows a hole), reported |
//! | index past the end | any segment | entries past the data, or not naming the batch at their position, dropped; the index rewritten, reported |
//! | missing index | any segment | rebuilt by scanning the segment, reported |
//! | empty segment | last segment | an empty log continuing at the segment's base offset |
//! | offset gap between segments | confirmed segments | error naming the file |
//!
//! A cut truncates the file at the last whole batch and syncs it, so no
//! stale batch past the cut can ever be read back as a continuation.
//!
//! After a run that was poisoned by a failed write or sync (its directory
//! holds a `POISONED` marker), recovery does not trust the page cache: Linux
//! marks pages whose write-back failed clean, so a read finds them but no
//! fdatasync writes them. It rewrites every byte it recovers past a
//! segment's durable point (its last index entry) before syncing.

use super::config::{LogConfig, OpenCheck};
use super::error::{Damage, OpenError};
use super::files::{preallocate, write_whole};
use super::index::{self, IndexEntry, Seal};
use super::partition::PartitionLog;
pub use super::scan::CutReason;
use super::scan::{scan, Scan, ScanFrom, Stop};
use super::segment::{index_name, log_name, parse_log_name, SegState, Segment};
use super::sync::POISON_MARKER;
use crate::format::{check, Limits};
use crate::io::{Storage, StorageFile};
use std::collections::VecDeque;
use std::path::PathBuf;

/// A cut made by recovery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TailCut {
    /// The segment file.
    pub path: PathBuf,
    /// Where it was cut (the end of the last whole batch).
    pub position: u64,
    /// Bytes dropped from this file.
    pub dropped: u64,
    /// Why.
    pub reason: CutReason,
}

/// What opening a log found and did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RecoveryReport {
    /// Segments in the log after recovery.
    pub segments: usize,
    /// The next offset.
    pub next_offset: u64,
    /// Batches verified while opening.
    pub batches_verified: u64,
    /// A cut of a torn or damaged tail (one at most).
    pub cut: Option<TailCut>,
    /// Segment files removed because they followed a cut.
    pub removed: Vec<PathBuf>,
    /// Index files rebuilt or trimmed.
    pub rebuilt_indexes: Vec<PathBuf>,
    /// Segments found whole whose sealing had been interrupted, now sealed.
    pub sealed: Vec<PathBuf>,
}

impl std::fmt::Display for RecoveryReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} segments, next offset {}, {} batches verified",
            self.segments, self.next_offset, self.batches_verified
        )?;
        if let Some(cut) = &self.cut {
            let why = match &cut.reason {
                CutReason::Zeros => "zero-filled tail".to_string(),
                CutReason::Damaged(d) => d.to_string(),
            };
            write!(
                f,
                "; cut {} at byte {} ({} bytes dropped: {why})",
                cut.path.display(),
                cut.position,
                cut.dropped
            )?;
        }
        for p in &self.removed {
            write!(f, "; removed {} (after the cut)", p.display())?;
        }
        for p in &self.rebuilt_indexes {
            write!(f, "; rebuilt {}", p.display())?;
        }
        Ok(())
    }
}

impl<S: Storage> PartitionLog<S> {
    /// Opens (creating if needed) the log of `partition` in `dir` (the
    /// partition's own directory) and recovers it: see [`recovery`].
    pub async fn open(
        storage: S,
        dir: impl Into<PathBuf>,
        partition: u64,
        config: LogConfig,
    ) -> Result<(PartitionLog<S>, RecoveryReport), OpenError> {
        open(storage, dir.into(), partition, config).await
    }
}

pub(crate) async fn open<S: Storage>(
    storage: S,
    dir: PathBuf,
    partition: u64,
    config: LogConfig,
) -> Result<(PartitionLog<S>, RecoveryReport), OpenError> {
    config
        .validate()
        .map_err(|reason| OpenError::InvalidConfig { reason })?;
    let existed = storage.list_dir(&dir).is_ok();
    storage
        .create_dir_all(&dir)
        .map_err(|e| OpenError::io("create directory", &dir, e))?;
    if !existed {
        if let Some(parent) = dir.parent() {
            storage
                .sync_dir(parent)
                .await
                .map_err(|e| OpenError::io("directory sync", parent, e))?;
        }
    }
    let names = storage
        .list_dir(&dir)
        .map_err(|e| OpenError::io("list", &dir, e))?;
    let mut bases: Vec<u64> = names.iter().filter_map(|n| parse_log_name(n)).collect();
    // A write or sync failed in an earlier run of this boot: the bytes it
    // could not write back may sit clean in the page cache, where reads find
    // them but no fdatasync writes them. Recovery rewrites what it reads past
    // each recovered segment's durable point before syncing it.
    let after_poison = names.iter().any(|n| n == POISON_MARKER);
    bases.sort_unstable();
    // Index files whose segment is gone (a removal interrupted between
    // the two files) and temporary files are leftovers.
    let orphan = |n: &String| {
        n.strip_suffix(".index")
            .and_then(|b| parse_log_name(&format!("{b}.log")))
            .map(|b| !bases.contains(&b))
            .unwrap_or(false)
    };
    for n in names.iter().filter(|n| orphan(n)) {
        let _ = storage.remove_file(&dir.join(n));
    }
    for n in names.iter().filter(|n| n.ends_with(".tmp")) {
        let _ = storage.remove_file(&dir.join(n));
    }
    if let Ok(consumers) = storage.list_dir(&dir.join("consumers")) {
        for n in consumers.iter().filter(|n| n.ends_with(".tmp")) {
            let _ = storage.remove_file(&dir.join("consumers").join(n));
        }
    }

    if !bases.is_empty() {
        // The files found may be names only the page cache holds (the
        // process died before a directory sync). Recovery serves what it
        // finds and writes seal records that vouch for the next segment's
        // name, so make the names durable first.
        storage
            .sync_dir(&dir)
            .await
            .map_err(|e| OpenError::io("directory sync", &dir, e))?;
    }

    let mut report = RecoveryReport::default();
    let mut segments: VecDeque<Segment<S::File>> = VecDeque::new();
    let mut last_timestamp = 0u64;
    let capacity = usize::try_from(config.segment_capacity()).unwrap_or(usize::MAX);

    if bases.is_empty() {
        let path = dir.join(log_name(0));
        let file = storage
            .open(&path, true)
            .map_err(|e| OpenError::io("create segment", &path, e))?;
        let map = file
            .map(capacity)
            .map_err(|e| OpenError::io("map", &path, e))?;
        storage
            .sync_dir(&dir)
            .await
            .map_err(|e| OpenError::io("directory sync", &dir, e))?;
        let mut seg = Segment::new(&dir, 0, map, Some(file.clone()));
        if config.preallocate {
            seg.allocated = Some(preallocate(&file, config.segment_bytes, &path));
        }
        segments.push_back(seg);
    }

    let mut i = 0;
    while i < bases.len() {
        let base = bases[i];
        let is_last = i + 1 == bases.len();
        let next_base = bases.get(i + 1).copied();
        let path = dir.join(log_name(base));
        let index_path = dir.join(index_name(base));
        if let Some(prev) = segments.back() {
            if prev.next_offset != base {
                return Err(OpenError::Corrupt {
                    path,
                    position: 0,
                    damage: Damage::SegmentGap {
                        expected: prev.next_offset,
                        found: base,
                    },
                });
            }
        }
        let file = storage
            .open(&path, false)
            .map_err(|e| OpenError::io("open segment", &path, e))?;
        let file_len = file.len().map_err(|e| OpenError::io("stat", &path, e))?;
        let index_bytes = match storage.open(&index_path, false) {
            Ok(f) => {
                let n = f.len().map_err(|e| OpenError::io("stat", &index_path, e))?;
                f.read_at(0, n as usize)
                    .await
                    .map_err(|e| OpenError::io("read", &index_path, e))?
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(OpenError::io("open index", &index_path, e)),
        };
        let (stored_entries, seal) = index::decode_file(&index_bytes);
        let confirmed = !is_last && seal.is_some();
        let map_len = if is_last {
            capacity.max(file_len as usize)
        } else {
            file_len as usize
        };
        let map = file
            .map(map_len)
            .map_err(|e| OpenError::io("map", &path, e))?;
        let data = map.slice(0..file_len as usize).unwrap_or(&[]);
        let start_ts = segments.back().map(|s| s.last_timestamp).unwrap_or(0);

        let (kept, from) = if config.open_check == OpenCheck::Full {
            (Vec::new(), start_of_segment(base, start_ts))
        } else {
            best_entry(
                data,
                base,
                &stored_entries,
                file_len,
                start_ts,
                &config.limits,
            )
        };
        let found = scan(data, from, &config.limits, config.index_interval_bytes);
        report.batches_verified += found.batches;
        let mut entries = kept;
        entries.extend_from_slice(&found.entries);
        if entries.len() != stored_entries.len()
            || entries.iter().zip(&stored_entries).any(|(a, b)| a != b)
        {
            report.rebuilt_indexes.push(index_path.clone());
        }

        let whole = found.stop == Stop::End && found.end == file_len;
        if confirmed {
            let seal = seal.unwrap_or(Seal {
                data_len: 0,
                next_offset: 0,
            });
            let damage = match &found.stop {
                Stop::Damaged(d) => Some(d.clone()),
                Stop::Zeros => Some(Damage::TornHeader {
                    available: file_len - found.end,
                }),
                Stop::End
                    if found.end != seal.data_len || found.next_offset != seal.next_offset =>
                {
                    Some(Damage::SegmentGap {
                        expected: seal.next_offset,
                        found: found.next_offset,
                    })
                }
                Stop::End => None,
            };
            if let Some(damage) = damage {
                return Err(OpenError::Corrupt {
                    path,
                    position: found.end,
                    damage,
                });
            }
            if report.rebuilt_indexes.last() == Some(&index_path) {
                let bytes = index::encode_sealed(&entries, seal);
                write_whole(&storage, &index_path, bytes)
                    .await
                    .map_err(|e| OpenError::io("write index", &index_path, e))?;
            }
            segments.push_back(sealed_segment(&dir, base, map, &found, entries, start_ts));
            i += 1;
            continue;
        }

        if after_poison {
            rewrite(&file, data, from.position, found.end, &path).await?;
        }
        if !is_last && whole && Some(found.next_offset) == next_base {
            // Sealing was interrupted after the data was complete: make it
            // durable and seal it now.
            file.sync_data()
                .await
                .map_err(|e| OpenError::io("fdatasync", &path, e))?;
            let seal = Seal {
                data_len: found.end,
                next_offset: found.next_offset,
            };
            write_whole(&storage, &index_path, index::encode_sealed(&entries, seal))
                .await
                .map_err(|e| OpenError::io("write index", &index_path, e))?;
            report.sealed.push(path.clone());
            segments.push_back(sealed_segment(&dir, base, map, &found, entries, start_ts));
            i += 1;
            continue;
        }

        // This segment is the end of the log: cut it if needed and remove
        // any later segment.
        if !whole {
            let reason = match &found.stop {
                Stop::Damaged(d) => CutReason::Damaged(d.clone()),
                Stop::End if !is_last => CutReason::Damaged(Damage::SegmentGap {
                    expected: next_base.unwrap_or(found.next_offset),
                    found: found.next_offset,
                }),
                _ => CutReason::Zeros,
            };
            file.truncate(found.end)
                .await
                .map_err(|e| OpenError::io("truncate", &path, e))?;
            report.cut = Some(TailCut {
                path: path.clone(),
                position: found.end,
                dropped: file_len - found.end,
                reason,
            });
        } else if !is_last {
            report.cut = Some(TailCut {
                path: path.clone(),
                position: found.end,
                dropped: 0,
                reason: CutReason::Damaged(Damage::SegmentGap {
                    expected: next_base.unwrap_or(found.next_offset),
                    found: found.next_offset,
                }),
            });
        }
        for later in bases.iter().skip(i + 1) {
            let p = dir.join(log_name(*later));
            storage
                .remove_file(&p)
                .map_err(|e| OpenError::io("remove segment", &p, e))?;
            let _ = storage.remove_file(&dir.join(index_name(*later)));
            report.removed.push(p);
        }
        if !report.removed.is_empty() {
            storage
                .sync_dir(&dir)
                .await
                .map_err(|e| OpenError::io("directory sync", &dir, e))?;
        }
        // What was read back may still be only in the page cache (after a
        // process crash): make it durable before index entries point at it.
        file.sync_data()
            .await
            .map_err(|e| OpenError::io("fdatasync", &path, e))?;
        let map = if is_last {
            map
        } else {
            file.map(capacity)
                .map_err(|e| OpenError::io("map", &path, e))?
        };
        if report.rebuilt_indexes.last() == Some(&index_path)
            || !entries.is_empty() && stored_entries.is_empty()
        {
            write_whole(&storage, &index_path, index::encode_all(&entries))
                .await
                .map_err(|e| OpenError::io("write index", &index_path, e))?;
        }
        let mut seg = Segment::new(&dir, base, map, Some(file.clone()));
        fill(&mut seg, &found, entries, start_ts);
        seg.state = SegState::Active;
        seg.index_durable = seg.index.len();
        seg.index_written = seg.index.len();
        if config.preallocate && found.end < config.segment_bytes {
            seg.allocated = Some(preallocate(&file, config.segment_bytes, &path));
        }
        segments.push_back(seg);
        break;
    }
    if let Some(s) = segments.back() {
        last_timestamp = s.last_timestamp;
        report.next_offset = s.next_offset;
    }
    if after_poison {
        // Everything recovered is durable now.
        let marker = dir.join(POISON_MARKER);
        storage
            .remove_file(&marker)
            .map_err(|e| OpenError::io("remove", &marker, e))?;
        storage
            .sync_dir(&dir)
            .await
            .map_err(|e| OpenError::io("directory sync", &dir, e))?;
    }
    report.segments = segments.len();
    let log = PartitionLog::from_parts(storage, dir, partition, config, segments, last_timestamp);
    Ok((log, report))
}

/// Writes `data[from..to]` back over itself, so the page cache holds those
/// bytes dirty again and the next fdatasync really writes them.
async fn rewrite<F: StorageFile>(
    file: &F,
    data: &[u8],
    from: u64,
    to: u64,
    path: &std::path::Path,
) -> Result<(), OpenError> {
    let Some(bytes) = data
        .get(from as usize..to as usize)
        .filter(|b| !b.is_empty())
    else {
        return Ok(());
    };
    file.write_all_at(
        from,
        crate::io::WriteBufs::one(bytes::Bytes::copy_from_slice(bytes)),
    )
    .await
    .map_err(|e| OpenError::io("rewrite after a failed sync", path, e))
}

fn start_of_segment(base: u64, last_timestamp: u64) -> ScanFrom {
    ScanFrom {
        position: 0,
        next_offset: base,
        last_timestamp,
        segment_base: base,
        last_indexed: None,
    }
}

/// The last stored index entry that is well formed and names the valid
/// batch at its position, with every entry before it; the scan starts
/// there.
fn best_entry(
    data: &[u8],
    base: u64,
    stored: &[IndexEntry],
    file_len: u64,
    start_ts: u64,
    limits: &Limits,
) -> (Vec<IndexEntry>, ScanFrom) {
    let n = index::well_formed_prefix(stored, file_len);
    for k in (0..n).rev() {
        let e = stored[k];
        let pos = u64::from(e.position);
        let Some(rest) = data.get(e.position as usize..) else {
            continue;
        };
        let Ok(len) = crate::format::declared_length(rest, limits) else {
            continue;
        };
        let Some(one) = rest.get(..len as usize) else {
            continue;
        };
        let Ok(view) = check(one, limits) else {
            continue;
        };
        if view.base_offset() != base + u64::from(e.rel_offset)
            || view.base_timestamp() != e.timestamp
            || e.timestamp < start_ts
        {
            continue;
        }
        return (
            stored[..k].to_vec(),
            ScanFrom {
                position: pos,
                next_offset: view.base_offset(),
                last_timestamp: e.timestamp,
                segment_base: base,
                last_indexed: None,
            },
        );
    }
    (Vec::new(), start_of_segment(base, start_ts))
}

fn fill<F>(seg: &mut Segment<F>, found: &Scan, entries: Vec<IndexEntry>, start_ts: u64) {
    seg.len = found.end;
    seg.next_offset = found.next_offset;
    seg.last_batch = found.last_batch;
    seg.last_timestamp = found.last_timestamp.max(start_ts);
    seg.first_timestamp = entries.first().map(|e| e.timestamp);
    seg.last_indexed = entries.last().map(|e| u64::from(e.position));
    seg.index = entries;
    seg.visible = seg.fully_visible();
}

fn sealed_segment<F>(
    dir: &std::path::Path,
    base: u64,
    map: crate::io::Mapping,
    found: &Scan,
    entries: Vec<IndexEntry>,
    start_ts: u64,
) -> Segment<F> {
    let mut seg = Segment::new(dir, base, map, None);
    fill(&mut seg, found, entries, start_ts);
    seg.state = SegState::Sealed;
    seg.index_durable = seg.index.len();
    seg.index_written = seg.index.len();
    seg.drained.set();
    seg
}
