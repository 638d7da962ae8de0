//! The scanner's verdict on what follows the last good batch: the end, a
//! zero tail (preallocated space, pages a power cut never wrote), or
//! damage. A cut is made either way; the verdict is what recovery's report
//! and `corelog verify` say, so a zero header with bytes behind it must not
//! be called a zero tail.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use corelog_segment::log::scan::{scan, Scan, ScanFrom, Stop};
use corelog_segment::log::Damage;
use corelog_segment::Limits;

const P: u64 = 4;

fn from_start() -> ScanFrom {
    ScanFrom {
        position: 0,
        next_offset: 0,
        last_timestamp: 0,
        segment_base: 0,
        last_indexed: None,
        partition: Some(P),
    }
}

/// The scan of `data` from its start.
fn scan_all(data: &[u8]) -> Scan {
    scan(data, from_start(), &Limits::default(), 4096)
}

/// Two good batches (offsets 0..3), then `tail`.
fn two_batches_then(tail: &[u8]) -> (Vec<u8>, u64) {
    let mut data = stamped(1, 2, 100, P, 0, 1_000).bytes().to_vec();
    data.extend_from_slice(stamped(2, 1, 100, P, 2, 1_001).bytes());
    let good = data.len() as u64;
    data.extend_from_slice(tail);
    (data, good)
}

#[test]
fn the_data_ending_after_a_batch_is_the_end() {
    let (data, good) = two_batches_then(&[]);
    let s = scan_all(&data);
    assert_eq!(s.stop, Stop::End);
    assert_eq!((s.end, s.next_offset, s.batches), (good, 3, 2));
}

#[test]
fn only_zeros_after_the_last_batch_are_a_zero_tail() {
    // Shorter than a header, a header and more, and far past the probe.
    for len in [1usize, 255, 256, 4096, (64 << 10) + 4096] {
        let (data, good) = two_batches_then(&vec![0u8; len]);
        let s = scan_all(&data);
        assert_eq!(s.stop, Stop::Zeros, "{len} zero bytes");
        assert_eq!((s.end, s.next_offset), (good, 3), "{len} zero bytes");
    }
}

#[test]
fn a_zero_header_with_bytes_behind_it_is_damage_not_a_zero_tail() {
    // A whole page of zeros (a lost page write), then bytes: within the
    // scanner's probe, so it says what it saw. Not only past the header:
    // a word's remainder counts too.
    for at in [256usize, 300, 4096, 4096 + 7, (64 << 10) - 1] {
        let mut tail = vec![0u8; (64 << 10) + 512];
        tail[at] = 0x5a;
        let (data, good) = two_batches_then(&tail);
        let s = scan_all(&data);
        assert!(
            matches!(s.stop, Stop::Damaged(Damage::Batch(_))),
            "a non-zero byte {at} bytes after the last batch: {:?}",
            s.stop
        );
        assert_eq!((s.end, s.next_offset), (good, 3), "the good batches stay");
    }
    // Past the probe, the rest is not read: called a zero tail (the cut
    // is the same).
    let mut tail = vec![0u8; (64 << 10) + 512];
    tail[(64 << 10) + 8] = 0x5a;
    let (data, _) = two_batches_then(&tail);
    let s = scan_all(&data);
    assert_eq!(s.stop, Stop::Zeros);
}

#[test]
fn a_short_non_zero_remainder_is_a_torn_header() {
    let mut tail = vec![0u8; 100];
    tail[99] = 1;
    let (data, good) = two_batches_then(&tail);
    let s = scan_all(&data);
    assert_eq!(s.stop, Stop::Damaged(Damage::TornHeader { available: 100 }));
    assert_eq!(s.end, good);
}

#[test]
fn a_whole_header_of_garbage_is_a_damaged_batch_however_short_the_rest() {
    // Exactly a header's bytes, and a header's bytes and one: both are
    // read as a header (its length field zero), not as a torn one.
    for len in [256usize, 257] {
        let mut tail = vec![0u8; len];
        tail[100] = 7;
        let (data, good) = two_batches_then(&tail);
        let s = scan_all(&data);
        assert!(
            matches!(s.stop, Stop::Damaged(Damage::Batch(_))),
            "{len} bytes: {:?}",
            s.stop
        );
        assert_eq!(s.end, good);
    }
}
