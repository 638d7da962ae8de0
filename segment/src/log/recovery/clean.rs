//! The clean-close record: what a log that closed cleanly leaves in its
//! directory (`CLEAN`) so the next open can trust it without scanning or
//! syncing anything.
//!
//! `close` writes it once every byte of the log is durable: the segments'
//! data synced and trimmed to their exact lengths, every index file synced,
//! every segment name in a synced directory. It describes each segment
//! (base, data length, next offset, last batch, last timestamp and a hash
//! of its index file); opening trusts it only if the directory still holds
//! exactly those segments, each file exactly that long, each index exactly
//! those bytes, every segment but the last sealed. Anything else makes the
//! record *stale*: it is removed and the log recovered as after a crash.
//!
//! The first change to the log after such an open (an append, a retention
//! removal) unlinks the record before it touches a file, and the directory
//! sync of the next sync round makes that unlink durable before anything
//! is acknowledged. If a crash comes first and the unlink is lost, the
//! record describes a file that grew (every write past a segment's end
//! changes its length), a segment that appeared or went, or an index that
//! changed, and is found stale; or nothing changed on disk and it is still
//! true. Bytes below a segment's recorded length are never rewritten.

use super::super::config::{LogConfig, OpenCheck};
use super::super::index::{self, Seal};
use super::super::map_slot::mapper;
use super::super::partition::PartitionLog;
use super::super::prealloc::Prealloc;
use super::super::scan::{Scan, Stop};
use super::super::segment::{index_name, log_name, SegState, Segment};
use super::apply::fill;
use super::report::{CleanClose, RecoveryReport};
use crate::io::{Storage, StorageFile, WriteBufs};
use bytes::Bytes;
use std::collections::VecDeque;
use std::path::Path;
use xxhash_rust::xxh3::xxh3_64;

/// The record's file name, in the partition's directory.
pub const CLEAN_RECORD: &str = "CLEAN";

const MAGIC: &[u8; 8] = b"CLGCLEAN";
const VERSION: u32 = 1;
/// magic, partition, version, segment count.
const HEAD_LEN: usize = 8 + 8 + 4 + 4;
/// base, data length, next offset, last batch, last timestamp, index hash.
const SEGMENT_LEN: usize = 6 * 8;
/// The XXH3-64 of everything before it.
const CHECKSUM_LEN: usize = 8;
const NO_BATCH: u64 = u64::MAX;

/// One segment as the record describes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CleanSegment {
    pub base: u64,
    pub data_len: u64,
    pub next_offset: u64,
    pub last_batch: Option<u64>,
    pub last_timestamp: u64,
    pub index_hash: u64,
}

pub(crate) fn encode(partition: u64, segments: &[CleanSegment]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEAD_LEN + segments.len() * SEGMENT_LEN + CHECKSUM_LEN);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&partition.to_le_bytes());
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&(segments.len() as u32).to_le_bytes());
    for s in segments {
        for v in [
            s.base,
            s.data_len,
            s.next_offset,
            s.last_batch.unwrap_or(NO_BATCH),
            s.last_timestamp,
            s.index_hash,
        ] {
            out.extend_from_slice(&v.to_le_bytes());
        }
    }
    let sum = xxh3_64(&out);
    out.extend_from_slice(&sum.to_le_bytes());
    out
}

/// The segments a well-formed record for `partition` describes; `Err`
/// names what is wrong with it.
pub(crate) fn decode(partition: u64, bytes: &[u8]) -> Result<Vec<CleanSegment>, &'static str> {
    let u64_at = |at: usize| -> Option<u64> {
        bytes
            .get(at..at + 8)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_le_bytes)
    };
    let u32_at = |at: usize| -> Option<u32> {
        bytes
            .get(at..at + 4)
            .and_then(|b| b.try_into().ok())
            .map(u32::from_le_bytes)
    };
    if bytes.len() < HEAD_LEN + CHECKSUM_LEN || &bytes[..8] != MAGIC {
        return Err("not a clean-close record");
    }
    let body = bytes.len() - CHECKSUM_LEN;
    if u64_at(body) != Some(xxh3_64(&bytes[..body])) {
        return Err("record checksum mismatch");
    }
    if u32_at(16) != Some(VERSION) {
        return Err("unknown record version");
    }
    if u64_at(8) != Some(partition) {
        return Err("record of another partition");
    }
    let count = u32_at(20).unwrap_or(0) as usize;
    if count == 0 || body != HEAD_LEN + count * SEGMENT_LEN {
        return Err("record length does not match its segment count");
    }
    let mut out = Vec::with_capacity(count);
    for i in 0..count {
        let at = HEAD_LEN + i * SEGMENT_LEN;
        let v = |k: usize| u64_at(at + 8 * k).unwrap_or(0);
        out.push(CleanSegment {
            base: v(0),
            data_len: v(1),
            next_offset: v(2),
            last_batch: Some(v(3)).filter(|&b| b != NO_BATCH),
            last_timestamp: v(4),
            index_hash: v(5),
        });
    }
    Ok(out)
}

/// One segment file as an open finds it, for [`check`].
pub(crate) struct Found<'a> {
    pub base: u64,
    pub len: u64,
    pub index: &'a [u8],
}

/// Whether a record (`record`, the bytes of `CLEAN`) may be trusted for
/// the segment files found (oldest first): the same verdict for `open` and
/// for `verify`'s dry run. `Err` says why not.
pub(crate) fn check(
    partition: u64,
    record: &[u8],
    found: &[Found<'_>],
) -> Result<Vec<CleanSegment>, &'static str> {
    let record = decode(partition, record)?;
    if record.len() != found.len() || record.iter().zip(found).any(|(r, f)| r.base != f.base) {
        return Err("segment files differ from the record");
    }
    for (i, (r, f)) in record.iter().zip(found).enumerate() {
        if f.len != r.data_len {
            return Err("segment length differs from the record");
        }
        if xxh3_64(f.index) != r.index_hash {
            return Err("index differs from the record");
        }
        let (entries, seal) = index::decode_file(f.index);
        let ends = Seal {
            data_len: r.data_len,
            next_offset: r.next_offset,
        };
        let next_base = record.get(i + 1).map(|n| n.base);
        if next_base.is_some() && (seal != Some(ends) || next_base != Some(r.next_offset)) {
            return Err("a segment before the last is not sealed where the next begins");
        }
        if index::well_formed_prefix(&entries, r.data_len) != entries.len() {
            return Err("index entries past the segment's end");
        }
    }
    Ok(record)
}

/// Why an open would not even look at a record, if it would not.
pub(crate) fn distrust(
    config: &LogConfig,
    force: bool,
    after_poison: bool,
) -> Option<&'static str> {
    if after_poison {
        Some("a failed write or sync poisoned the last run")
    } else if force {
        Some("repair checks everything")
    } else if config.open_check == OpenCheck::Full {
        Some("a full check was asked for")
    } else {
        None
    }
}

/// Opens the log from its clean-close record without scanning or syncing;
/// `Err` says why the record cannot be trusted (the caller recovers).
pub(super) async fn open_clean<S: Storage>(
    storage: &S,
    dir: &Path,
    partition: u64,
    config: &LogConfig,
    bases: &[u64],
) -> Result<(PartitionLog<S>, RecoveryReport), &'static str> {
    let bytes = read_all(storage, &dir.join(CLEAN_RECORD))
        .await
        .ok_or("record unreadable")?;
    let mut files = Vec::with_capacity(bases.len());
    let mut indexes = Vec::with_capacity(bases.len());
    for &base in bases {
        let file = storage
            .open(&dir.join(log_name(base)), false)
            .map_err(|_| "segment unreadable")?;
        let len = file.len().map_err(|_| "segment unreadable")?;
        let index = read_all(storage, &dir.join(index_name(base)))
            .await
            .unwrap_or_default();
        files.push((file, len));
        indexes.push(index);
    }
    let found: Vec<Found<'_>> = bases
        .iter()
        .zip(&files)
        .zip(&indexes)
        .map(|((&base, (_, len)), index)| Found {
            base,
            len: *len,
            index,
        })
        .collect();
    let record = check(partition, &bytes, &found)?;
    let capacity = usize::try_from(config.segment_capacity()).unwrap_or(usize::MAX);
    let mut segments = VecDeque::with_capacity(record.len());
    let mut start_ts = 0;
    let mapper = mapper(storage);
    for (i, (r, ((file, _), stored))) in record.iter().zip(files.iter().zip(&indexes)).enumerate() {
        let is_last = i + 1 == record.len();
        // The active segment is mapped for its appends; sealed ones by the
        // first read that needs them.
        let map = match is_last {
            true => Some(
                file.map(capacity.max(r.data_len as usize))
                    .map_err(|_| "segment cannot be mapped")?,
            ),
            false => None,
        };
        let mut seg = Segment::new(
            dir,
            r.base,
            map,
            mapper.clone(),
            is_last.then(|| file.clone()),
        );
        let found = Scan {
            end: r.data_len,
            next_offset: r.next_offset,
            last_timestamp: r.last_timestamp,
            last_batch: r.last_batch,
            batches: 0,
            entries: Vec::new(),
            stop: Stop::End,
        };
        fill(&mut seg, &found, index::decode_file(stored).0, start_ts);
        seg.index_durable = seg.index.len();
        seg.index_written = seg.index.len();
        // The record hashed these bytes after the close that wrote it had
        // synced them.
        seg.index_synced = true;
        if is_last {
            seg.state = SegState::Active;
            seg.prealloc = Prealloc::at(r.data_len);
        } else {
            seg.state = SegState::Sealed;
            seg.drained.set();
        }
        start_ts = seg.last_timestamp;
        segments.push_back(seg);
    }
    let report = trusted_report(&record);
    let log = PartitionLog::from_parts(
        storage.clone(),
        dir.to_path_buf(),
        partition,
        config.clone(),
        segments,
        start_ts,
    );
    log.inner.st.borrow_mut().clean_record = true;
    Ok((log, report))
}

/// What an open from a trusted record reports.
pub(crate) fn trusted_report(record: &[CleanSegment]) -> RecoveryReport {
    RecoveryReport {
        segments: record.len(),
        next_offset: record.last().map_or(0, |s| s.next_offset),
        clean_close: CleanClose::Trusted,
        ..RecoveryReport::default()
    }
}

/// What `close` records: every segment of a log whose bytes are all
/// durable, with the hash of the index bytes it wrote.
pub(crate) fn describe<F>(
    segments: &VecDeque<Segment<F>>,
    index_bytes: &[Vec<u8>],
) -> Vec<CleanSegment> {
    segments
        .iter()
        .zip(index_bytes)
        .map(|(s, idx)| CleanSegment {
            base: s.base_offset,
            data_len: s.len,
            next_offset: s.next_offset,
            last_batch: s.last_batch,
            last_timestamp: s.last_timestamp,
            index_hash: xxh3_64(idx),
        })
        .collect()
}

/// Writes the record durably: a temporary file, synced, renamed over the
/// old one, the directory synced.
pub(crate) async fn write<S: Storage>(
    storage: &S,
    dir: &Path,
    bytes: Vec<u8>,
) -> std::io::Result<()> {
    let tmp = dir.join(format!("{CLEAN_RECORD}.tmp"));
    let file = storage.open(&tmp, true)?;
    let len = bytes.len() as u64;
    file.write_all_at(0, WriteBufs::one(Bytes::from(bytes)))
        .await?;
    if file.len()? > len {
        file.truncate(len).await?;
    }
    file.sync_data().await?;
    drop(file);
    storage.rename(&tmp, &dir.join(CLEAN_RECORD))?;
    storage.sync_dir(dir).await
}

async fn read_all<S: Storage>(storage: &S, path: &Path) -> Option<Vec<u8>> {
    let f = storage.open(path, false).ok()?;
    let n = f.len().ok()?;
    f.read_at(0, usize::try_from(n).ok()?).await.ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(base: u64) -> CleanSegment {
        CleanSegment {
            base,
            data_len: 4096,
            next_offset: base + 10,
            last_batch: Some(3000),
            last_timestamp: 77,
            index_hash: 0xfeed,
        }
    }

    #[test]
    fn round_trips() {
        let segs = vec![seg(0), seg(10)];
        assert_eq!(decode(3, &encode(3, &segs)), Ok(segs));
        let none = vec![CleanSegment {
            last_batch: None,
            ..seg(0)
        }];
        assert_eq!(decode(3, &encode(3, &none)), Ok(none));
    }

    #[test]
    fn any_damage_or_another_partition_is_refused() {
        let bytes = encode(3, &[seg(0), seg(10)]);
        assert_eq!(decode(4, &bytes), Err("record of another partition"));
        for i in 0..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 0x40;
            assert!(decode(3, &b).is_err(), "flip at {i} accepted");
        }
        for n in 0..bytes.len() {
            assert!(decode(3, &bytes[..n]).is_err(), "prefix of {n} accepted");
        }
    }

    /// A record whose checksum holds (written by a bug, or by hand) but
    /// whose segment count disagrees with its length, or is zero, is
    /// refused: it would otherwise describe segments from bytes it lacks.
    #[test]
    fn a_count_that_disagrees_with_the_length_is_refused() {
        let with_count = |segments: &[CleanSegment], count: u32| {
            let mut b = encode(3, segments);
            let body = b.len() - CHECKSUM_LEN;
            b[20..24].copy_from_slice(&count.to_le_bytes());
            let sum = xxh3_64(&b[..body]);
            b[body..].copy_from_slice(&sum.to_le_bytes());
            b
        };
        let two = [seg(0), seg(10)];
        assert_eq!(decode(3, &with_count(&two, 2)), Ok(two.to_vec()));
        for count in [1, 3] {
            assert_eq!(
                decode(3, &with_count(&two, count)),
                Err("record length does not match its segment count"),
                "count {count} for two segments"
            );
        }
        assert_eq!(
            decode(3, &with_count(&[], 0)),
            Err("record length does not match its segment count"),
            "a record of no segment"
        );
    }

    /// `check` trusts a record only for exactly the files it names: a
    /// segment file more or fewer, a segment before the last not sealed
    /// where the record says, or one the next does not continue, is
    /// refused.
    #[test]
    fn check_refuses_files_the_record_does_not_describe() {
        let sealed = |data_len: u64, next_offset: u64| {
            index::encode_sealed(
                &[],
                Seal {
                    data_len,
                    next_offset,
                },
            )
        };
        let record_of = |idx: &[(u64, u64, u64, &[u8])]| {
            let segs: Vec<CleanSegment> = idx
                .iter()
                .map(|&(base, data_len, next_offset, bytes)| CleanSegment {
                    base,
                    data_len,
                    next_offset,
                    last_batch: None,
                    last_timestamp: 0,
                    index_hash: xxh3_64(bytes),
                })
                .collect();
            encode(3, &segs)
        };
        fn found<'a>(files: &[(u64, u64, &'a [u8])]) -> Vec<Found<'a>> {
            files
                .iter()
                .map(|&(base, len, index)| Found { base, len, index })
                .collect()
        }
        let first = &sealed(4096, 10)[..];
        let last: &[u8] = &[];
        let record = record_of(&[(0, 4096, 10, first), (10, 100, 12, last)]);
        let files = found(&[(0, 4096, first), (10, 100, last)]);
        assert!(check(3, &record, &files).is_ok());

        let differ = Err("segment files differ from the record");
        let more = found(&[(0, 4096, first), (10, 100, last), (12, 0, last)]);
        assert_eq!(check(3, &record, &more), differ, "a file more");
        assert_eq!(check(3, &record, &files[..1]), differ, "a file fewer");

        let not_sealed = Err("a segment before the last is not sealed where the next begins");
        // The first segment's index sealed at another length, the next
        // segment continuing where the record says.
        let short = &sealed(4000, 10)[..];
        let record = record_of(&[(0, 4096, 10, short), (10, 100, 12, last)]);
        let files = found(&[(0, 4096, short), (10, 100, last)]);
        assert_eq!(check(3, &record, &files), not_sealed, "sealed elsewhere");
        // Sealed where the record says, and the next segment starting past
        // it: offsets 10 and 11 in no segment.
        let record = record_of(&[(0, 4096, 10, first), (12, 100, 14, last)]);
        let files = found(&[(0, 4096, first), (12, 100, last)]);
        assert_eq!(check(3, &record, &files), not_sealed, "a gap");
    }
}
