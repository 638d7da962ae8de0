//! Read-only inspection of a partition directory: what `corelog verify`
//! and `corelog dump` show. Nothing is repaired; every problem is reported
//! with its file and byte position.

use super::error::Damage;
use super::index::{self, IndexEntry};
use super::offsets::{read_record, Record};
use super::scan::{scan_with, ScanFrom, Stop};
use super::segment::{index_name, parse_log_name};
use crate::format::{BatchRef, Limits};
use crate::io::map_file;
use std::fmt;
use std::path::{Path, PathBuf};

/// One segment file as found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentSummary {
    /// The file.
    pub path: PathBuf,
    /// Its base offset (from its name).
    pub base_offset: u64,
    /// Its length.
    pub file_len: u64,
    /// Bytes of whole, valid batches from its start.
    pub data_len: u64,
    /// Valid batches.
    pub batches: u64,
    /// Messages in them.
    pub messages: u64,
    /// Offset after the last valid batch.
    pub next_offset: u64,
    /// Whether its index carries a valid seal record.
    pub sealed: bool,
    /// Entries in its index file.
    pub index_entries: usize,
}

/// What is wrong, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// Damaged bytes. What recovery does about them is the dry run's to
    /// say (see [`dry_run`](super::recovery::dry_run)): a torn tail it cuts,
    /// damage before whole batches it refuses, damage before the index
    /// entry it trusts it does not see.
    Damaged {
        /// what is wrong
        damage: Damage,
    },
    /// Non-zero bytes after a run of zeros that ended the batches.
    DataAfterZeros {
        /// where the first non-zero byte is
        at: u64,
    },
    /// Zeros after the batches of a sealed segment.
    ZerosInSealed,
    /// An index entry that names no batch of the segment.
    IndexEntry {
        /// entry number
        entry: usize,
        /// what it says
        stored: IndexEntry,
    },
    /// An index entry (or the seal record at its place) that fails its
    /// checksum: the index is garbled from there on.
    IndexChecksum {
        /// entry number
        entry: usize,
    },
    /// An index file that cannot be decoded (length not a whole number of
    /// entries, and no seal record).
    IndexTorn {
        /// its length
        len: usize,
    },
    /// The seal record disagrees with the data.
    Seal {
        /// sealed length
        data_len: u64,
        /// sealed next offset
        next_offset: u64,
    },
    /// The segment does not start where the previous one ended.
    Gap {
        /// expected base offset
        expected: u64,
    },
    /// A file could not be read.
    Io(String),
    /// A consumer offset file is damaged (not a shape a power cut leaves):
    /// reading the offset is an error until a store replaces it.
    OffsetFile,
    /// A consumer offset file is torn, as a power cut under `fsync=never`
    /// leaves it: read as no stored offset (the consumer starts again from
    /// the partition's first message).
    OffsetFileTorn,
}

/// A problem at a file and byte position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The file.
    pub path: PathBuf,
    /// Byte position in it.
    pub position: u64,
    /// What is wrong.
    pub problem: Problem,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at byte {}: ", self.path.display(), self.position)?;
        match &self.problem {
            Problem::Damaged { damage } => write!(f, "damaged: {damage}"),
            Problem::DataAfterZeros { at } => write!(f, "batches end in zeros but non-zero bytes follow at byte {at}"),
            Problem::ZerosInSealed => f.write_str("zeros after the last batch of a sealed segment"),
            Problem::IndexEntry { entry, stored } => write!(
                f,
                "index entry {entry} (relative offset {}, position {}, timestamp {}) names no batch",
                stored.rel_offset, stored.position, stored.timestamp
            ),
            Problem::IndexChecksum { entry } => write!(f, "index entry {entry} (or the seal record there) fails its checksum"),
            Problem::IndexTorn { len } => write!(f, "index file of {len} bytes is not a whole number of entries"),
            Problem::Seal { data_len, next_offset } => write!(f, "seal record says {data_len} bytes up to offset {next_offset}, the data disagrees"),
            Problem::Gap { expected } => write!(f, "segment should start at offset {expected}"),
            Problem::Io(e) => write!(f, "cannot read: {e}"),
            Problem::OffsetFile => f.write_str("consumer offset file is damaged (fails its checksum, its magic or its consumer id)"),
            Problem::OffsetFileTorn => f.write_str("consumer offset file is torn (a power cut under fsync=never): read as no stored offset, the consumer starts again from the first message"),
        }
    }
}

/// A whole partition directory, checked.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PartitionSummary {
    /// Its segments, oldest first.
    pub segments: Vec<SegmentSummary>,
    /// Everything wrong with it.
    pub findings: Vec<Finding>,
}

/// Verifies every segment of the partition in `dir` (layout, both
/// checksums, offset continuity, index agreement, seal records, consumer
/// offset files), calling `visit` for every valid batch in order.
pub fn inspect_partition(
    dir: &Path,
    limits: &Limits,
    mut visit: impl FnMut(&Path, u64, BatchRef<'_>),
) -> PartitionSummary {
    let mut out = PartitionSummary::default();
    // Partition directories are named by their id (`partitions/<id>`).
    let partition = dir
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.parse::<u64>().ok());
    let mut bases: Vec<u64> = match std::fs::read_dir(dir) {
        Ok(rd) => rd
            .filter_map(|e| e.ok())
            .filter_map(|e| e.file_name().to_str().and_then(parse_log_name))
            .collect(),
        Err(e) => {
            out.findings.push(Finding {
                path: dir.to_path_buf(),
                position: 0,
                problem: Problem::Io(e.to_string()),
            });
            return out;
        }
    };
    bases.sort_unstable();
    let mut expected: Option<u64> = None;
    let mut last_ts = 0u64;
    for (i, &base) in bases.iter().enumerate() {
        let is_last = i + 1 == bases.len();
        let path = dir.join(super::log_name(base));
        let finding = |position, problem| Finding {
            path: path.clone(),
            position,
            problem,
        };
        if let Some(exp) = expected {
            if exp != base {
                out.findings
                    .push(finding(0, Problem::Gap { expected: exp }));
            }
        }
        let map = match map_file(&path) {
            Ok(m) => m,
            Err(e) => {
                out.findings.push(finding(0, Problem::Io(e.to_string())));
                continue;
            }
        };
        let data = map.slice(0..map.capacity()).unwrap_or(&[]);
        let mut starts: Vec<(u64, u64, u64)> = Vec::new();
        let mut messages = 0u64;
        let found = scan_with(
            data,
            ScanFrom {
                position: 0,
                next_offset: base,
                last_timestamp: last_ts,
                segment_base: base,
                last_indexed: None,
                partition,
            },
            limits,
            u64::MAX,
            |pos, b| {
                starts.push((pos, b.base_offset(), b.base_timestamp()));
                messages += u64::from(b.message_count());
                visit(&path, pos, b);
            },
        );
        match &found.stop {
            Stop::End => {}
            Stop::Zeros => {
                let rest = &data[found.end as usize..];
                if let Some(nz) = rest.iter().position(|&b| b != 0) {
                    out.findings.push(finding(
                        found.end,
                        Problem::DataAfterZeros {
                            at: found.end + nz as u64,
                        },
                    ));
                } else if !is_last {
                    out.findings
                        .push(finding(found.end, Problem::ZerosInSealed));
                }
            }
            Stop::Damaged(d) => out
                .findings
                .push(finding(found.end, Problem::Damaged { damage: d.clone() })),
        }
        let index_path = dir.join(index_name(base));
        let (entries, seal) = match std::fs::read(&index_path) {
            Ok(bytes) => {
                let (entries, seal) = index::decode_file(&bytes);
                if seal.is_none() {
                    if let (_, Some(entry)) = index::decode_prefix(&bytes) {
                        out.findings.push(Finding {
                            path: index_path.clone(),
                            position: (entry * index::ENTRY_LEN) as u64,
                            problem: Problem::IndexChecksum { entry },
                        });
                    }
                }
                if seal.is_none() && !bytes.len().is_multiple_of(index::ENTRY_LEN) {
                    out.findings.push(Finding {
                        path: index_path.clone(),
                        position: 0,
                        problem: Problem::IndexTorn { len: bytes.len() },
                    });
                }
                (entries, seal)
            }
            Err(_) => (Vec::new(), None),
        };
        for (n, e) in entries.iter().enumerate() {
            let ok = starts
                .binary_search_by_key(&u64::from(e.position), |s| s.0)
                .ok()
                .map(|k| {
                    starts[k].1 == base + u64::from(e.rel_offset) && starts[k].2 == e.timestamp
                })
                .unwrap_or(false);
            if !ok {
                out.findings.push(Finding {
                    path: index_path.clone(),
                    position: (n * index::ENTRY_LEN) as u64,
                    problem: Problem::IndexEntry {
                        entry: n,
                        stored: *e,
                    },
                });
            }
        }
        if let Some(s) = seal {
            if s.data_len != data.len() as u64
                || s.next_offset != found.next_offset
                || found.stop != Stop::End
            {
                out.findings.push(Finding {
                    path: index_path.clone(),
                    position: (entries.len() * index::ENTRY_LEN) as u64,
                    problem: Problem::Seal {
                        data_len: s.data_len,
                        next_offset: s.next_offset,
                    },
                });
            }
        }
        out.segments.push(SegmentSummary {
            path: path.clone(),
            base_offset: base,
            file_len: data.len() as u64,
            data_len: found.end,
            batches: found.batches,
            messages,
            next_offset: found.next_offset,
            sealed: seal.is_some(),
            index_entries: entries.len(),
        });
        expected = Some(found.next_offset);
        last_ts = found.last_timestamp;
    }
    check_offsets(dir, &mut out.findings);
    out
}

fn check_offsets(dir: &Path, findings: &mut Vec<Finding>) {
    let Ok(rd) = std::fs::read_dir(dir.join("consumers")) else {
        return;
    };
    for e in rd.filter_map(|e| e.ok()) {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(id) = name
            .strip_suffix(".offset")
            .and_then(|n| n.parse::<u64>().ok())
        else {
            continue;
        };
        let path = e.path();
        let problem = match std::fs::read(&path) {
            Ok(b) => match read_record(id, &b) {
                Record::Stored(_) => continue,
                Record::Torn => Problem::OffsetFileTorn,
                Record::Damaged => Problem::OffsetFile,
            },
            Err(e) => Problem::Io(e.to_string()),
        };
        findings.push(Finding {
            path,
            position: 0,
            problem,
        });
    }
}
