//! Recovery over untrusted segment bytes: the scanner and
//! `PartitionLog::open` never panic, whatever the files hold, and when a
//! log opens, polls serve only valid batches, continuous from the first
//! segment's base offset, each holding the offset asked for; appends go on
//! at the recovered next offset.
//!
//! An input is two control bytes, then either
//!
//! * **raw** files: one segment file, optionally preceded by an index file
//!   (a `u16` length, then its bytes); or
//! * a **built** log: a few bytes per batch describe valid, stamped
//!   batches, cut into segments as rotation would (sealed indexes with seal
//!   records for all but the last), then edits (bit flips, overwrites,
//!   truncations, zero tails) damage chosen files at chosen positions. This
//!   reaches the recovery cases behind the checksums that random bytes
//!   never pass.
//!
//! The files go onto the simulated disk (`SimStorage`), which needs no
//! real I/O, in a monoio runtime with the legacy driver.

#![no_main]

use corelog_segment::io::{SimStorage, Storage};
use corelog_segment::log::index::{self, Seal};
use corelog_segment::log::scan::{scan, scan_with, ScanFrom, Stop};
use corelog_segment::log::{
    index_name, log_name, LogConfig, LogError, OpenCheck, OpenError, PartitionLog, PollFrom,
};
use corelog_segment::{check, stamp_in_place, BatchBuilder, Limits, MessageSpec, Stamp};
use libfuzzer_sys::fuzz_target;
use std::cell::RefCell;
use std::path::PathBuf;

const PARTITION: u64 = 9;
const LIMITS: Limits = Limits {
    max_batch_bytes: 2048,
};
const SEGMENT_BYTES: u64 = 4096;
const DIR: &str = "/data/partitions/9";

thread_local! {
    static RUNTIME: RefCell<monoio::Runtime<monoio::time::TimeDriver<monoio::LegacyDriver>>> = RefCell::new(
        monoio::RuntimeBuilder::<monoio::LegacyDriver>::new()
            .enable_timer()
            .build()
            .expect("a legacy monoio runtime"),
    );
}

/// One segment's files.
struct SegmentFiles {
    base: u64,
    log: Vec<u8>,
    index: Option<Vec<u8>>,
}

struct Case {
    segments: Vec<SegmentFiles>,
    config: LogConfig,
    /// An index file was damaged by an edit (see `KNOWN_INDEX_BUG`).
    index_edited: bool,
}

/// A tail open keeps index entries before the last valid one unchecked
/// when a segment's seal record fails, so a garbled entry can send a poll
/// past the offset asked for (engine/tests/corruption.rs,
/// `regression_a_tail_open_drops_a_garbled_index_entry_before_the_last`,
/// ignored as a known bug). Until it is fixed, that one check is skipped
/// for tail opens of logs whose index files were edited, so the fuzzer
/// looks for other bugs.
const KNOWN_INDEX_BUG: bool = false;

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let (ctl, rest) = (data[0], &data[1..]);
    let config = LogConfig {
        segment_bytes: SEGMENT_BYTES,
        index_interval_bytes: 64 << (rest[0] & 7),
        preallocate: ctl & 0x20 != 0,
        limits: LIMITS,
        open_check: if ctl & 0x40 != 0 {
            OpenCheck::Full
        } else {
            OpenCheck::Tail
        },
        ..LogConfig::default()
    };
    let rest = &rest[1..];
    let base = if ctl & 0x80 != 0 { 1000 } else { 0 };
    let case = if ctl & 1 == 0 {
        raw(rest, base, ctl & 2 != 0, config)
    } else {
        built(rest, base, config)
    };
    for s in &case.segments {
        check_scan(&s.log, s.base, case.config.index_interval_bytes);
    }
    RUNTIME.with(|rt| rt.borrow_mut().block_on(open_and_read(case)));
});

fn raw(rest: &[u8], base: u64, with_index: bool, config: LogConfig) -> Case {
    let (index, log) = if with_index && rest.len() >= 2 {
        let n = (usize::from(u16::from_le_bytes([rest[0], rest[1]])) % 1024).min(rest.len() - 2);
        (Some(rest[2..2 + n].to_vec()), rest[2 + n..].to_vec())
    } else {
        (None, rest.to_vec())
    };
    Case {
        segments: vec![SegmentFiles { base, log, index }],
        config,
        index_edited: with_index,
    }
}

/// Reads bytes off the front of the input.
struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn u8(&mut self) -> Option<u8> {
        let (&b, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(b)
    }

    fn u16(&mut self) -> Option<u16> {
        Some(u16::from_le_bytes([self.u8()?, self.u8()?]))
    }
}

/// A valid log from the input, cut into segments as rotation would cut
/// it, then damaged by the edits the rest of the input describes.
fn built(rest: &[u8], base: u64, config: LogConfig) -> Case {
    let mut input = Input(rest);
    let batches = input.u8().map_or(0, |n| n % 32);
    let mut segments: Vec<SegmentFiles> = vec![SegmentFiles {
        base,
        log: Vec::new(),
        index: None,
    }];
    let mut next = base;
    let mut ts = 1_700_000_000_000_000u64;
    for i in 0..batches {
        let (Some(shape), Some(len)) = (input.u8(), input.u16()) else {
            break;
        };
        let count = 1 + u64::from(shape % 4);
        let len = usize::from(len) % 500;
        let mut b = BatchBuilder::new();
        let payload: Vec<u8> = (0..len).map(|j| (j as u8) ^ shape).collect();
        for k in 0..count {
            b.push(MessageSpec {
                id: (u128::from(i) << 8) | u128::from(k),
                timestamp: ts + k,
                payload: &payload[..len / (k as usize + 1)],
                user_headers: if shape & 0x10 != 0 { b"h" } else { b"" },
            });
        }
        let Ok(mut bytes) = b.build() else { continue };
        if bytes.len() as u64 > LIMITS.max_batch_bytes {
            continue;
        }
        ts += u64::from(shape >> 5);
        let stamp = Stamp {
            partition_id: PARTITION,
            base_offset: next,
            base_timestamp: ts,
        };
        stamp_in_place(&mut bytes, stamp, &LIMITS).expect("a built batch stamps");
        if segments
            .last()
            .is_some_and(|s| s.log.len() as u64 >= SEGMENT_BYTES)
        {
            segments.push(SegmentFiles {
                base: next,
                log: Vec::new(),
                index: None,
            });
        }
        if let Some(s) = segments.last_mut() {
            s.log.extend_from_slice(&bytes);
        }
        next += count;
    }
    // Indexes as the log writes them: sealed for every segment but the
    // last, entries only (or none) for the last.
    let n = segments.len();
    let mut last_ts = 0;
    for (k, s) in segments.iter_mut().enumerate() {
        let found = scan(
            &s.log,
            start(s.base, last_ts),
            &LIMITS,
            config.index_interval_bytes,
        );
        last_ts = found.last_timestamp;
        s.index = if k + 1 < n {
            Some(index::encode_sealed(
                &found.entries,
                Seal {
                    data_len: found.end,
                    next_offset: found.next_offset,
                },
            ))
        } else if input.u8().is_some_and(|b| b & 1 == 1) {
            Some(index::encode_all(&found.entries))
        } else {
            None
        };
    }
    // Edits: [target, position u16, value].
    let mut index_edited = false;
    while let (Some(target), Some(pos), Some(value)) = (input.u8(), input.u16(), input.u8()) {
        let s = &mut segments[usize::from(target >> 1) % n];
        let file = if target & 1 == 0 {
            &mut s.log
        } else {
            index_edited = true;
            s.index.get_or_insert_with(Vec::new)
        };
        let pos = usize::from(pos);
        match value >> 6 {
            // Flip bits.
            0 | 1 => {
                if let Some(b) = file.get_mut(pos) {
                    *b ^= value | 1;
                }
            }
            // Overwrite a byte.
            2 => {
                if let Some(b) = file.get_mut(pos) {
                    *b = value;
                }
            }
            // Cut the file, or grow it with zeros.
            _ => {
                if value & 1 == 0 {
                    file.truncate(pos);
                } else {
                    file.resize(file.len() + pos % 2048, 0);
                }
            }
        }
    }
    Case {
        segments,
        config,
        index_edited,
    }
}

fn start(base: u64, last_timestamp: u64) -> ScanFrom {
    ScanFrom {
        position: 0,
        next_offset: base,
        last_timestamp,
        segment_base: base,
        last_indexed: None,
        partition: None,
    }
}

/// The scanner's own promises, on any bytes.
fn check_scan(data: &[u8], base: u64, interval: u64) {
    let mut seen = Vec::new();
    let s = scan_with(data, start(base, 0), &LIMITS, interval, |pos, b| {
        seen.push((pos, b.base_offset(), b.next_offset(), b.len() as u64));
        assert!(
            check(b.as_bytes(), &LIMITS).is_ok(),
            "the scanner passed an invalid batch"
        );
        assert_eq!(&data[pos as usize..pos as usize + b.len()], b.as_bytes());
    });
    assert!(s.end <= data.len() as u64);
    assert_eq!(s.batches, seen.len() as u64);
    let mut pos = 0;
    let mut next = base;
    for &(p, first, after, len) in &seen {
        assert_eq!(
            (p, first),
            (pos, next),
            "batches tile the data, offsets continuous"
        );
        pos += len;
        next = after;
    }
    assert_eq!((s.end, s.next_offset), (pos, next));
    match &s.stop {
        Stop::End => assert_eq!(s.end, data.len() as u64),
        Stop::Zeros => assert!(data[s.end as usize..].iter().take(256).all(|&b| b == 0)),
        Stop::Damaged(_) => assert!(s.end < data.len() as u64),
    }
    let mut prev: Option<u32> = None;
    for e in &s.entries {
        assert!(u64::from(e.position) < s.end);
        assert!(seen
            .iter()
            .any(|&(p, first, _, _)| p == u64::from(e.position)
                && first == base + u64::from(e.rel_offset)));
        assert!(prev.is_none_or(|p| p < e.position));
        prev = Some(e.position);
    }
    // The same scan from the batch after the first yields the same end.
    if let Some(&(_, _, after, len)) = seen.first() {
        let from = ScanFrom {
            position: len,
            next_offset: after,
            last_timestamp: 0,
            segment_base: base,
            last_indexed: Some(0),
            partition: None,
        };
        let again = scan(data, from, &LIMITS, interval);
        assert_eq!((again.end, again.next_offset), (s.end, s.next_offset));
    }
}

async fn open_and_read(case: Case) {
    let dir = PathBuf::from(DIR);
    let capacity = case.config.segment_capacity() as usize;
    let disk = SimStorage::new(7, capacity);
    disk.create_dir_all(&dir).expect("a directory");
    for s in &case.segments {
        if s.log.len() > capacity {
            return;
        }
        if disk.put_file(&dir.join(log_name(s.base)), &s.log).is_err() {
            return;
        }
        if let Some(ix) = &s.index {
            if ix.len() > capacity || disk.put_file(&dir.join(index_name(s.base)), ix).is_err() {
                return;
            }
        }
    }
    let full = case.config.open_check == OpenCheck::Full;
    let first_base = case.segments[0].base;
    let opened = PartitionLog::open(disk.clone(), &dir, PARTITION, case.config.clone()).await;
    let (log, report) = match opened {
        Ok(x) => x,
        Err(OpenError::Corrupt { path, .. } | OpenError::DamageBeforeData { path, .. }) => {
            assert!(path.starts_with(&dir), "{}", path.display());
            return;
        }
        Err(e) => panic!("open failed other than with a corruption: {e}"),
    };
    let check_offsets = full || !case.index_edited || !KNOWN_INDEX_BUG;
    let next = read_all(&log, first_base, report.next_offset, full, check_offsets);
    if full {
        assert_eq!(
            next,
            Some(report.next_offset),
            "a full open serves every batch it kept"
        );
    }
    // Appends go on at the recovered next offset.
    let mut b = BatchBuilder::new();
    b.push(MessageSpec {
        id: 1,
        timestamp: 1,
        payload: b"after recovery",
        user_headers: b"",
    });
    let batch = corelog_segment::Batch::admit(b.build().expect("a batch"), &LIMITS).expect("valid");
    let ack = log.append(batch).await.expect("an append after recovery");
    assert_eq!(ack.base_offset, report.next_offset);
    let reply = log
        .poll(PollFrom::Last, 1 << 20)
        .expect("a poll of the last batch");
    reply.verify(&LIMITS).expect("the new batch verifies");
    assert_eq!(reply.first_offset(), ack.base_offset);
    let _ = log.close().await;
}

/// Polls the log from its first batch with small replies, and from chosen
/// offsets: every reply that verifies holds only valid batches, continuous,
/// each from the batch holding the offset asked for. A reply that does not
/// verify must name a segment of the log. Returns where the walk ended,
/// or None when a reply did not verify (allowed only for tail opens).
fn read_all(
    log: &PartitionLog<SimStorage>,
    first_base: u64,
    end: u64,
    full: bool,
    check_offsets: bool,
) -> Option<u64> {
    let mut next = first_base;
    let mut from = PollFrom::First;
    let mut starts = Vec::new();
    loop {
        let reply = match log.poll(from, 1500) {
            Ok(r) => r,
            Err(e) => {
                assert!(!full, "a poll of a fully verified log failed: {e}");
                assert!(matches!(e, LogError::Corrupt { .. }), "{e}");
                return None;
            }
        };
        if reply.is_empty() {
            assert_eq!(reply.next_offset(), next, "an empty reply at the end");
            break;
        }
        if let Err(e) = reply.verify(&LIMITS) {
            assert!(!full, "a fully verified log served a batch that fails: {e}");
            assert!(matches!(e, LogError::Corrupt { .. }), "{e}");
            return None;
        }
        assert_eq!(reply.first_offset(), next, "replies continue each other");
        for b in reply.batches() {
            assert_eq!(b.base_offset(), next);
            assert_eq!(b.partition_id(), PARTITION);
            starts.push((b.base_offset(), b.next_offset()));
            next = b.next_offset();
        }
        assert_eq!(reply.next_offset(), next);
        from = PollFrom::Offset(next);
    }
    assert!(next <= end, "served past the next offset");
    if check_offsets {
        for &(first, after) in starts.iter().step_by(3) {
            for o in [first, after - 1] {
                let reply = match log.poll(PollFrom::Offset(o), 1) {
                    Ok(r) if r.verify(&LIMITS).is_ok() => r,
                    Ok(_) | Err(_) => {
                        assert!(!full, "a poll from {o} of a fully verified log failed");
                        continue;
                    }
                };
                assert_eq!(
                    reply.first_offset(),
                    first,
                    "a poll from {o} starts at the batch holding it"
                );
            }
        }
    }
    Some(next)
}
