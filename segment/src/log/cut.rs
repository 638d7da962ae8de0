//! Cutting a replicated log's uncommitted suffix, crash-safely.
//!
//! A Raft follower writes entries into its partition log before they are
//! committed. When a new leader's log disagrees, the follower must drop
//! everything from the first conflicting offset on. Those bytes lie past
//! the commit mark (see `commit.rs`), so no reader holds them; but the cut
//! touches several files (later segments removed, one truncated), and a
//! crash in the middle must not leave half a log.
//!
//! So the cut is recorded before it is made: the log is closed (all of it
//! durable), a small `CUT` record naming the offset is made durable, and
//! every open finishes a recorded
//! cut before it recovers anything (`recovery/cut.rs`, a row of the
//! recovery table). Finishing is idempotent: the record goes only once the
//! cut is durable, so a crash at any point is finished by the next open.
//!
//! | record | bytes |
//! |---|---|
//! | magic `CLGCUT01` | 8 |
//! | partition, u64 LE | 8 |
//! | first offset cut, u64 LE | 8 |
//! | XXH3-64 of the 24 bytes before, u64 LE | 8 |

use super::config::LogConfig;
use super::error::{LogError, OpenError};
use super::files::write_whole;
use super::partition::PartitionLog;
use super::recovery::RecoveryReport;
use super::scan::header_at;
use crate::format::layout::BATCH_HEADER_LEN;
use crate::io::Storage;
use std::path::{Path, PathBuf};
use xxhash_rust::xxh3::xxh3_64;

/// The record's file name, in the partition's directory.
pub const CUT_RECORD: &str = "CUT";

const MAGIC: &[u8; 8] = b"CLGCUT01";
const RECORD_LEN: usize = 32;

pub(crate) fn encode(partition: u64, from: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(RECORD_LEN);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&partition.to_le_bytes());
    out.extend_from_slice(&from.to_le_bytes());
    let sum = xxh3_64(&out);
    out.extend_from_slice(&sum.to_le_bytes());
    out
}

/// The first offset a well-formed record for `partition` cuts; `Err`
/// names what is wrong with it.
pub(crate) fn decode(partition: u64, bytes: &[u8]) -> Result<u64, &'static str> {
    let u64_at = |at: usize| -> u64 {
        bytes
            .get(at..at + 8)
            .and_then(|b| b.try_into().ok())
            .map_or(0, u64::from_le_bytes)
    };
    if bytes.len() != RECORD_LEN || &bytes[..8] != MAGIC {
        return Err("not a suffix-cut record");
    }
    if u64_at(24) != xxh3_64(&bytes[..24]) {
        return Err("record checksum mismatch");
    }
    if u64_at(8) != partition {
        return Err("record of another partition");
    }
    Ok(u64_at(16))
}

/// Where a cut from `from` leaves the log whose segments start at `bases`
/// (sorted): the segments kept, and the length the last kept one is cut
/// to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CutPlan {
    /// The first `keep` segments stay; the rest are removed.
    pub keep: usize,
    /// The length the last kept segment is truncated to, or `None` when it
    /// holds nothing at or past `from`.
    pub truncate_to: Option<u64>,
}

/// The segment holding `from`: the last whose base is at or below it.
/// `Err` when `from` is before the log's first offset.
pub(crate) fn containing(bases: &[u64], from: u64) -> Result<usize, &'static str> {
    bases
        .partition_point(|&b| b <= from)
        .checked_sub(1)
        .ok_or("the cut's offset is before the log's first segment")
}

/// The plan for cutting from `from`, given the index of the segment holding
/// it and that segment's bytes (`data`, read only when `from` is past its
/// base).
pub(crate) fn plan(
    bases: &[u64],
    at: usize,
    from: u64,
    data: &[u8],
) -> Result<CutPlan, &'static str> {
    if bases[at] == from {
        // The whole segment goes; the first one stays, empty, so the log
        // still continues at its base.
        return Ok(if at == 0 {
            CutPlan {
                keep: 1,
                truncate_to: Some(0),
            }
        } else {
            CutPlan {
                keep: at,
                truncate_to: None,
            }
        });
    }
    Ok(CutPlan {
        keep: at + 1,
        truncate_to: position_in(data, from)?,
    })
}

/// The byte position of the batch starting at `from` in a segment's bytes,
/// walking its headers from the start: `None` when the batches end before
/// it (a cut already made), so nothing there is cut; `Err` when `from`
/// falls inside a batch, or when a batch before it is not whole with bytes
/// after it (the log was durable when the cut was recorded, so this is
/// damage: what lies past it may be the suffix, and is never served
/// unchecked).
///
/// Once the batches walked end right before `from`, the batch at `from`
/// starts there, whatever the bytes there now hold: a truncation at that
/// position that a power cut interrupted leaves them zeroed up to the end
/// of their file system block (the file system writes the zeroed block
/// back before it commits the new length: xfs's fdatasync does), with the
/// old length and the old bytes after that block. That is a cut half made,
/// not damage before the offset: everything there is cut anyway.
pub(crate) fn position_in(data: &[u8], from: u64) -> Result<Option<u64>, &'static str> {
    let mut pos = 0u64;
    let mut at_from = false;
    while let Some(p) = header_at(data, pos) {
        if at_from || p.base_offset == from {
            return Ok(Some(pos));
        }
        if p.base_offset > from || p.next_offset() > from {
            return Err("the cut's offset is not the first offset of a batch");
        }
        match pos.checked_add(p.batch_length) {
            Some(end) if p.batch_length >= BATCH_HEADER_LEN as u64 && end <= data.len() as u64 => {
                pos = end;
                at_from = p.next_offset() == from;
            }
            _ => return Err("a batch before the cut's offset is not whole"),
        }
    }
    if pos == data.len() as u64 {
        Ok(None)
    } else if at_from {
        // Fewer than a header's bytes left at `from`.
        Ok(Some(pos))
    } else {
        Err("a batch before the cut's offset is not whole")
    }
}

/// Why a suffix was not cut.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum CutError {
    /// The log serves everything acknowledged, so nothing in it may be
    /// cut.
    #[error("partition {partition} has no commit mark (opened without commit_gate): its suffix cannot be cut")]
    NotGated {
        /// The partition.
        partition: u64,
    },
    /// The offset is below the commit mark: committed messages are never
    /// cut.
    #[error("partition {partition}: offset {from} is below the commit mark {commit}; committed messages are never cut")]
    Committed {
        /// The partition.
        partition: u64,
        /// The offset asked for.
        from: u64,
        /// The commit mark.
        commit: u64,
    },
    /// The offset is not where a batch starts.
    #[error("partition {partition}: offset {from} cannot be cut at: {why}")]
    NotABatchStart {
        /// The partition.
        partition: u64,
        /// The offset asked for.
        from: u64,
        /// What is there.
        why: &'static str,
    },
    /// Flushing, recording the cut or closing the log failed. If the
    /// record was made durable, the next open finishes the cut.
    #[error("partition {partition}: cutting from offset {from}: {source}")]
    Log {
        /// The partition.
        partition: u64,
        /// The offset asked for.
        from: u64,
        /// The failure (boxed: a request error carries this one).
        source: Box<LogError>,
    },
    /// The cut is recorded and the log closed, but reopening it (which
    /// finishes the cut) failed; the next open finishes it.
    #[error("partition {partition}: reopening after the cut from offset {from}: {source}")]
    Reopen {
        /// The partition.
        partition: u64,
        /// The offset asked for.
        from: u64,
        /// The failure (boxed: a request error carries this one).
        source: Box<OpenError>,
    },
}

impl<S: Storage> PartitionLog<S> {
    /// Removes every message from `from` on (the offset where a batch
    /// starts, at or above the commit mark), crash-safely: this log is
    /// closed (every byte durable; every clone of it refuses appends from
    /// then on), the cut recorded durably, and the log reopened, which makes the cut
    /// and reports it ([`RecoveryReport::suffix_cut`]). Returns the
    /// reopened log, or `None` when nothing lies at or past `from` (this
    /// log then stays open, unchanged).
    ///
    /// Refused, with nothing changed, for a log without a commit mark, an
    /// offset below it, or one inside a batch. A reopened log's commit mark
    /// starts at its first offset: its owner sets it again, from its own
    /// record of what was committed, before it cuts anything.
    /// `RecoveryReport::suffix_cut` of the open says what a recorded cut
    /// removed.
    pub async fn cut_suffix(
        &self,
        from: u64,
    ) -> Result<Option<(PartitionLog<S>, RecoveryReport)>, CutError> {
        let partition = self.inner.partition;
        let log_err = |source| CutError::Log {
            partition,
            from,
            source: Box::new(source),
        };
        self.check_cut(from)?;
        if from >= self.stats().end_offset {
            return Ok(None);
        }
        self.flush().await.map_err(log_err)?;
        // Appends that arrived while the flush waited are cut too (they are
        // past the commit mark); check again, on the bytes now written.
        self.check_cut(from)?;
        // Closed first: every byte of the log durable, sealing segments
        // included (under `fsync=never` a flush does not wait for them),
        // so that the record is written over a log that a power cut leaves
        // whole, and the walk to the cut's batch never meets a hole.
        self.close().await.map_err(log_err)?;
        let dir = self.inner.dir.clone();
        record(&self.inner.storage, &dir, partition, from)
            .await
            .map_err(log_err)?;
        let config: LogConfig = self.inner.config.clone();
        let (log, report) = PartitionLog::open(self.inner.storage.clone(), dir, partition, config)
            .await
            .map_err(|source| CutError::Reopen {
                partition,
                from,
                source: Box::new(source),
            })?;
        Ok(Some((log, report)))
    }

    /// Refuses a cut from `from` that is not allowed on this log as it is.
    fn check_cut(&self, from: u64) -> Result<(), CutError> {
        let partition = self.inner.partition;
        let st = self.inner.st.borrow();
        let Some(commit) = st.commit else {
            return Err(CutError::NotGated { partition });
        };
        if from < commit {
            return Err(CutError::Committed {
                partition,
                from,
                commit,
            });
        }
        if from >= st.next_offset {
            return Ok(());
        }
        let bases: Vec<u64> = st.segments.iter().map(|s| s.base_offset).collect();
        let not_at = |why| CutError::NotABatchStart {
            partition,
            from,
            why,
        };
        let at = containing(&bases, from).map_err(not_at)?;
        let seg = &st.segments[at];
        if seg.base_offset == from {
            return Ok(());
        }
        // Bytes past the visible end may still be in flight; only the
        // written ones are walked, and a cut past them waits for the flush.
        let written = match st.written.segment.cmp(&seg.base_offset) {
            std::cmp::Ordering::Equal => st.written.end,
            std::cmp::Ordering::Greater => seg.len,
            std::cmp::Ordering::Less => 0,
        };
        let map = seg
            .mapping()
            .map_err(|_| not_at("its segment could not be mapped"))?;
        let data = usize::try_from(written)
            .ok()
            .and_then(|n| map.slice(0..n))
            .unwrap_or(&[]);
        position_in(data, from).map_err(not_at)?;
        Ok(())
    }
}

/// Makes the record of a cut from `from` durable in `dir`: written beside
/// it, synced, renamed over it, the directory synced.
async fn record<S: Storage>(
    storage: &S,
    dir: &Path,
    partition: u64,
    from: u64,
) -> Result<(), LogError> {
    let tmp: PathBuf = dir.join(format!("{CUT_RECORD}.tmp"));
    let path = dir.join(CUT_RECORD);
    write_whole(storage, &tmp, encode(partition, from))
        .await
        .map_err(|e| LogError::io("write", &tmp, e))?;
    let file = storage
        .open(&tmp, false)
        .map_err(|e| LogError::io("open", &tmp, e))?;
    crate::io::StorageFile::sync_data(&file)
        .await
        .map_err(|e| LogError::io("sync", &tmp, e))?;
    storage
        .replace_file(&tmp, &path)
        .await
        .map_err(|e| LogError::io("rename", &path, e))?;
    storage
        .sync_dir(dir)
        .await
        .map_err(|e| LogError::io("directory sync", dir, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_names_its_partition_and_offset_and_any_damage_is_refused() {
        let r = encode(7, 1234);
        assert_eq!(r.len(), RECORD_LEN);
        assert_eq!(decode(7, &r), Ok(1234));
        assert_eq!(decode(8, &r), Err("record of another partition"));
        for i in 0..r.len() {
            let mut bad = r.clone();
            bad[i] ^= 1;
            assert!(decode(7, &bad).is_err(), "byte {i} flipped");
        }
        assert!(decode(7, &r[..31]).is_err());
        assert!(decode(7, &[]).is_err());
    }

    #[test]
    fn the_containing_segment_is_the_last_at_or_below_the_offset() {
        assert_eq!(containing(&[0, 10, 20], 0), Ok(0));
        assert_eq!(containing(&[0, 10, 20], 15), Ok(1));
        assert_eq!(containing(&[0, 10, 20], 20), Ok(2));
        assert!(containing(&[10, 20], 5).is_err());
    }

    /// A segment of stamped headers only: batches at `bases`, each
    /// `len` bytes long and holding `count` messages.
    fn headers(bases: &[u64], count: u32, len: u64) -> Vec<u8> {
        use crate::format::layout::batch;
        let mut out = Vec::new();
        for &b in bases {
            let mut h = vec![0u8; len as usize];
            h[batch::BASE_OFFSET].copy_from_slice(&b.to_le_bytes());
            h[batch::BATCH_LENGTH].copy_from_slice(&len.to_le_bytes());
            h[batch::MESSAGE_COUNT].copy_from_slice(&count.to_le_bytes());
            out.extend_from_slice(&h);
        }
        out
    }

    #[test]
    fn a_truncation_at_the_cut_that_a_power_cut_interrupted_is_finished() {
        // Batches at 10, 12, 14 and 16, 300 bytes each; the cut is at 14.
        let data = headers(&[10, 12, 14, 16], 2, 300);
        assert_eq!(position_in(&data, 14), Ok(Some(600)));
        // The truncation at 600 zeroed the rest of its block and the length
        // was not committed: old bytes after the zeros.
        let mut torn = data.clone();
        torn[600..1000].fill(0);
        assert_eq!(position_in(&torn, 14), Ok(Some(600)));
        // Fewer than a header's bytes left at the cut.
        assert_eq!(position_in(&torn[..700], 14), Ok(Some(600)));
        // The cut already made.
        assert_eq!(position_in(&data[..600], 14), Ok(None));
        // Damage before the cut's offset is still refused.
        let mut hole = data.clone();
        hole[300..600].fill(0);
        assert_eq!(
            position_in(&hole, 14),
            Err("a batch before the cut's offset is not whole")
        );
        assert_eq!(
            position_in(&data[..450], 14),
            Err("a batch before the cut's offset is not whole")
        );
        assert!(position_in(&data, 15).is_err());
    }

    #[test]
    fn a_cut_at_a_segment_base_removes_it_but_never_the_first() {
        let p = plan(&[0, 10, 20], 1, 10, &[]).expect("a plan");
        assert_eq!(
            p,
            CutPlan {
                keep: 1,
                truncate_to: None
            }
        );
        let p = plan(&[0, 10], 0, 0, &[]).expect("a plan");
        assert_eq!(
            p,
            CutPlan {
                keep: 1,
                truncate_to: Some(0)
            }
        );
    }
}
