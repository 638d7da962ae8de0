//! Reading a partition directory without opening its log: what `corelog
//! poll` serves. Nothing is written: no recovery, no preallocation. A torn
//! tail (what recovery would cut: nothing whole after it) is simply not
//! served; damage with whole batches after it is an error naming file and
//! byte, once the read reaches it.

use super::error::Damage;
use super::poll::PollFrom;
use super::recovery::plan::whole_batches_after;
use super::scan::{scan_with, ScanFrom, Stop};
use super::segment::{log_name, parse_log_name};
use crate::format::{declared_length, BatchRef, Limits};
use crate::io::{map_file, Mapping};
use std::path::{Path, PathBuf};

/// Why a read-only poll failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReadError {
    /// A file could not be listed, mapped or read.
    #[error("{op} {path}: {source}", path = path.display())]
    Io {
        /// what was being done
        op: &'static str,
        /// the file or directory
        path: PathBuf,
        /// the error
        source: std::io::Error,
    },
    /// The read reached damaged bytes that are not a torn tail.
    #[error("{path} at byte {position}: {damage}", path = path.display())]
    Damaged {
        /// the file
        path: PathBuf,
        /// byte position in it
        position: u64,
        /// what is wrong
        damage: Damage,
    },
}

/// What a read-only poll served.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReadSummary {
    /// Batches served.
    pub batches: u64,
    /// Bytes served.
    pub bytes: u64,
    /// Whether the log ended in a torn tail that was not served.
    pub torn_tail: bool,
}

/// Serves whole batches of the log of `partition` in `dir` from `from`, up
/// to `max_bytes` (at least one), handing each to `out` as stored. With
/// `verify`, every served batch has passed admission's checks (layout and
/// both checksums); without, only its length, partition and offsets were
/// checked. Batches read before damaged bytes are served before the error.
pub fn read_batches(
    dir: &Path,
    partition: u64,
    limits: &Limits,
    from: PollFrom,
    max_bytes: u64,
    verify: bool,
    mut out: impl FnMut(&[u8]) -> std::io::Result<()>,
) -> Result<ReadSummary, ReadError> {
    let segments = map_segments(dir)?;
    let mut pick = Pick {
        from,
        max_bytes,
        picked: Vec::new(),
        last: None,
        bytes: 0,
        full: false,
    };
    let mut summary = ReadSummary::default();
    let mut failure = None;
    let (mut next_offset, mut last_ts) = (segments.first().map_or(0, |s| s.0), 0u64);
    for (k, (base, path, data)) in segments.iter().enumerate() {
        if *base != next_offset {
            failure = Some(ReadError::Damaged {
                path: path.clone(),
                position: 0,
                damage: Damage::SegmentGap {
                    expected: next_offset,
                    found: *base,
                },
            });
            break;
        }
        let stopped = walk(data, *base, partition, last_ts, limits, verify, |b| {
            pick.offer(b);
            next_offset = b.next_offset();
            last_ts = b.base_timestamp();
        });
        let Some((end, damage)) = stopped else {
            if pick.full {
                break;
            }
            continue;
        };
        if pick.full {
            break;
        }
        // A torn tail, what recovery cuts: nothing whole after it.
        let after = whole_batches_after(data, end, limits)
            + segments[k + 1..]
                .iter()
                .map(|(_, _, d)| whole_batches_after(d, 0, limits))
                .sum::<u64>();
        if after == 0 {
            summary.torn_tail = true;
        } else {
            failure = Some(ReadError::Damaged {
                path: path.clone(),
                position: end,
                damage: damage.unwrap_or(Damage::TornHeader { available: 0 }),
            });
        }
        break;
    }
    for b in pick.batches() {
        out(b).map_err(|source| ReadError::Io {
            op: "write",
            path: PathBuf::from("standard output"),
            source,
        })?;
        summary.batches += 1;
        summary.bytes += b.len() as u64;
    }
    match failure {
        Some(e) => Err(e),
        None => Ok(summary),
    }
}

/// The segment files of `dir`, oldest first: base offset, path, bytes.
fn map_segments(dir: &Path) -> Result<Vec<(u64, PathBuf, Mapped)>, ReadError> {
    let mut bases: Vec<u64> = std::fs::read_dir(dir)
        .map_err(|source| ReadError::Io {
            op: "list",
            path: dir.to_path_buf(),
            source,
        })?
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str().and_then(parse_log_name))
        .collect();
    bases.sort_unstable();
    bases
        .into_iter()
        .map(|b| {
            let path = dir.join(log_name(b));
            let map = map_file(&path).map_err(|source| ReadError::Io {
                op: "map",
                path: path.clone(),
                source,
            })?;
            Ok((b, path, Mapped(map)))
        })
        .collect()
}

/// A whole file's mapping, read as bytes.
struct Mapped(Mapping);

impl std::ops::Deref for Mapped {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.0.slice(0..self.0.capacity()).unwrap_or(&[])
    }
}

/// The batches a poll picks, in order.
struct Pick<'a> {
    from: PollFrom,
    max_bytes: u64,
    picked: Vec<&'a [u8]>,
    last: Option<&'a [u8]>,
    bytes: u64,
    full: bool,
}

impl<'a> Pick<'a> {
    fn offer(&mut self, b: BatchRef<'a>) {
        let wanted = match self.from {
            PollFrom::Offset(o) => b.next_offset() > o,
            PollFrom::Timestamp(t) => b.base_timestamp() >= t,
            PollFrom::First => true,
            PollFrom::Last => {
                self.last = Some(b.as_bytes());
                false
            }
        };
        if !wanted || self.full {
            return;
        }
        let len = b.len() as u64;
        if !self.picked.is_empty() && self.bytes + len > self.max_bytes {
            self.full = true;
            return;
        }
        self.bytes += len;
        self.picked.push(b.as_bytes());
    }

    fn batches(&self) -> impl Iterator<Item = &'a [u8]> + '_ {
        self.picked.iter().copied().chain(self.last)
    }
}

/// Walks the batches of one segment's `data`, verifying each (without
/// `verify`, only its length, partition and offsets), handing each to
/// `visit`. Returns where it stopped short of the end of the data, and the
/// damage there (`None`: zeros).
fn walk<'a>(
    data: &'a [u8],
    base: u64,
    partition: u64,
    last_ts: u64,
    limits: &Limits,
    verify: bool,
    mut visit: impl FnMut(BatchRef<'a>),
) -> Option<(u64, Option<Damage>)> {
    if verify {
        let from = ScanFrom {
            position: 0,
            next_offset: base,
            last_timestamp: last_ts,
            segment_base: base,
            last_indexed: None,
            partition: Some(partition),
        };
        let found = scan_with(data, from, limits, u64::MAX, |_, b| visit(b));
        return match found.stop {
            Stop::End => None,
            Stop::Zeros => Some((found.end, None)),
            Stop::Damaged(d) => Some((found.end, Some(d))),
        };
    }
    let (mut pos, mut next) = (0usize, base);
    while let Some(rest) = data.get(pos..).filter(|r| !r.is_empty()) {
        let at = pos as u64;
        let len = match declared_length(rest, limits) {
            Ok(l) => l,
            Err(_) if rest.iter().all(|&b| b == 0) => return Some((at, None)),
            Err(e) => return Some((at, Some(Damage::Batch(e)))),
        };
        let Some(bytes) = rest.get(..len as usize) else {
            let available = rest.len() as u64;
            let torn = Damage::TornBatch {
                declared: len,
                available,
            };
            return Some((at, Some(torn)));
        };
        // Not verified: the caller asked for that; the view only reads
        // lengths it bounds-checks.
        let view = BatchRef::new_checked(bytes);
        if view.partition_id() != partition {
            let found = view.partition_id();
            return Some((
                at,
                Some(Damage::WrongPartition {
                    expected: partition,
                    found,
                }),
            ));
        }
        if view.base_offset() != next {
            let found = view.base_offset();
            return Some((
                at,
                Some(Damage::OffsetGap {
                    expected: next,
                    found,
                }),
            ));
        }
        visit(view);
        next = view.next_offset();
        pos += len as usize;
    }
    None
}
