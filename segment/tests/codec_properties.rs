//! Property tests of the batch codec: what the builder writes, admission
//! accepts and reads back exactly; stamping changes only the server fields;
//! every single-bit flip, truncation and extension of a valid batch is
//! refused; no input makes `check` panic; and every `BatchError` variant is
//! reachable, with the fields it reports.
//!
//! The checksums are recomputed here from the spec (one-shot XXH3 over the
//! gathered bytes), independently of the crate's streaming gather.

#![allow(clippy::unwrap_used)]

use corelog_segment::checksum::xxh3;
use corelog_segment::layout::{
    batch, frame, BATCH_HEADER_LEN, CHECKSUMMED_HEADER_LEN, FRAME_HEADER_LEN,
};
use corelog_segment::{
    check, declared_length, stamp_in_place, stamped_header, Batch, BatchBuilder, BatchError,
    BatchRef, BuildError, Limits, MessageSpec, Stamp,
};
use proptest::prelude::*;
use std::ops::Range;

// ---------------------------------------------------------------------------
// Helpers: an owned message, deterministic filler bytes, raw field access.
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq, Eq)]
struct Msg {
    id: u128,
    timestamp: u64,
    payload: Vec<u8>,
    user_headers: Vec<u8>,
}

impl Msg {
    fn spec(&self) -> MessageSpec<'_> {
        MessageSpec {
            id: self.id,
            timestamp: self.timestamp,
            payload: &self.payload,
            user_headers: &self.user_headers,
        }
    }
}

/// `len` bytes from splitmix64(`seed`): cheap to make, so large payloads do
/// not cost a proptest strategy call per byte.
fn filler(len: usize, seed: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 8);
    let mut s = seed;
    while out.len() < len {
        s = s.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = s;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        out.extend_from_slice(&(z ^ (z >> 31)).to_le_bytes());
    }
    out.truncate(len);
    out
}

fn build(msgs: &[Msg]) -> Vec<u8> {
    let mut b = BatchBuilder::new();
    for m in msgs {
        b.push(m.spec());
    }
    b.build().unwrap()
}

fn get_u64(bytes: &[u8], at: Range<usize>) -> u64 {
    u64::from_le_bytes(bytes[at].try_into().unwrap())
}

fn get_u32(bytes: &[u8], at: Range<usize>) -> u32 {
    u32::from_le_bytes(bytes[at].try_into().unwrap())
}

fn put_u64(bytes: &mut [u8], at: Range<usize>, v: u64) {
    bytes[at].copy_from_slice(&v.to_le_bytes());
}

fn put_u32(bytes: &mut [u8], at: Range<usize>, v: u32) {
    bytes[at].copy_from_slice(&v.to_le_bytes());
}

/// `range` shifted to start at `base` (a frame's position in the batch).
fn at(base: usize, range: Range<usize>) -> Range<usize> {
    base + range.start..base + range.end
}

/// Frame checksum from the spec: XXH3-64 over frame bytes 8.. (header tail,
/// payload, user headers).
fn spec_frame_checksum(frame_bytes: &[u8]) -> u64 {
    xxh3(&frame_bytes[frame::CHECKSUMMED_FROM..])
}

/// Batch checksum from the spec, in one shot: the header fields (0..40 and
/// `message_count`) followed by each frame checksum, little-endian.
fn spec_batch_checksum(header: &[u8], frame_checksums: &[u64]) -> u64 {
    let mut gathered = Vec::with_capacity(CHECKSUMMED_HEADER_LEN + 8 * frame_checksums.len());
    gathered.extend_from_slice(&header[..batch::BATCH_CHECKSUM.start]);
    gathered.extend_from_slice(&header[batch::MESSAGE_COUNT]);
    assert_eq!(gathered.len(), CHECKSUMMED_HEADER_LEN);
    for c in frame_checksums {
        gathered.extend_from_slice(&c.to_le_bytes());
    }
    xxh3(&gathered)
}

/// `(position, length)` of each frame, walking the stored lengths of a batch
/// whose frames tile.
fn frame_spans(bytes: &[u8]) -> Vec<(usize, usize)> {
    let count = get_u32(bytes, batch::MESSAGE_COUNT);
    let mut spans = Vec::new();
    let mut pos = BATCH_HEADER_LEN;
    for _ in 0..count {
        let len = FRAME_HEADER_LEN
            + get_u32(bytes, at(pos, frame::PAYLOAD_LENGTH)) as usize
            + get_u32(bytes, at(pos, frame::USER_HEADERS_LENGTH)) as usize;
        spans.push((pos, len));
        pos += len;
    }
    spans
}

/// Rewrites every frame checksum and the batch checksum so that they match
/// the bytes, as a producer that hashed its own mistake would. The frames
/// must tile within the buffer.
fn reseal(bytes: &mut [u8]) {
    let mut sums = Vec::new();
    for (pos, len) in frame_spans(bytes) {
        let c = spec_frame_checksum(&bytes[pos..pos + len]);
        put_u64(bytes, at(pos, frame::CHECKSUM), c);
        sums.push(c);
    }
    let c = spec_batch_checksum(bytes, &sums);
    put_u64(bytes, batch::BATCH_CHECKSUM, c);
}

/// Rewrites only the batch checksum, over the frame checksums as stored.
fn reseal_batch_checksum(bytes: &mut [u8], frame_positions: &[usize]) {
    let sums: Vec<u64> = frame_positions
        .iter()
        .map(|&p| get_u64(bytes, at(p, frame::CHECKSUM)))
        .collect();
    let c = spec_batch_checksum(bytes, &sums);
    put_u64(bytes, batch::BATCH_CHECKSUM, c);
}

/// Reads every field of every message of an accepted batch, and checks the
/// invariants a validated view promises: the frames tile the blob exactly.
fn read_everything(b: BatchRef<'_>) {
    let mut total = 0usize;
    let mut n = 0u32;
    for (i, m) in b.messages().enumerate() {
        let _ = (m.id(), m.timestamp(), m.timestamp_delta(), m.checksum());
        assert_eq!(m.offset_delta() as usize, i);
        assert_eq!(m.offset(), b.base_offset().saturating_add(i as u64));
        assert_eq!(
            m.frame_bytes().len(),
            FRAME_HEADER_LEN + m.payload().len() + m.user_headers().len()
        );
        assert_eq!(m.checksum(), spec_frame_checksum(m.frame_bytes()));
        total += m.frame_bytes().len();
        n += 1;
    }
    assert_eq!(n, b.message_count());
    assert_eq!(total, b.blob().len());
    assert_eq!(b.len() as u64, b.batch_length());
}

fn default_limits() -> Limits {
    Limits::default()
}

// ---------------------------------------------------------------------------
// Strategies.
// ---------------------------------------------------------------------------

/// Payload lengths: many empty and small, some medium, a few up to 256 KiB.
fn payload_len() -> impl Strategy<Value = usize> {
    prop_oneof![
        4 => Just(0usize),
        6 => 1usize..256,
        2 => 256usize..8192,
        1 => 65_536usize..=262_144,
    ]
}

fn user_headers_len() -> impl Strategy<Value = usize> {
    prop_oneof![2 => Just(0usize), 1 => 1usize..128]
}

/// Timestamp deltas against a random origin: often close together, often
/// spread over the whole `u32` of microseconds a batch may span.
fn timestamp_delta() -> impl Strategy<Value = u32> {
    prop_oneof![Just(0u32), 0u32..1_000_000, any::<u32>(), Just(u32::MAX)]
}

fn messages(
    max: usize,
    payload: impl Strategy<Value = usize>,
    headers: impl Strategy<Value = usize>,
) -> impl Strategy<Value = Vec<Msg>> {
    let origin = prop_oneof![
        0u64..1_000_000,
        0u64..=u64::MAX - u64::from(u32::MAX),
        Just(u64::MAX - u64::from(u32::MAX)),
    ];
    let one = (
        any::<u128>(),
        timestamp_delta(),
        payload,
        headers,
        any::<u64>(),
    );
    (origin, prop::collection::vec(one, 1..=max)).prop_map(|(origin, raw)| {
        raw.into_iter()
            .map(|(id, delta, pl, hl, seed)| Msg {
                id,
                timestamp: origin + u64::from(delta),
                payload: filler(pl, seed),
                user_headers: filler(hl, !seed),
            })
            .collect()
    })
}

fn small_messages() -> impl Strategy<Value = Vec<Msg>> {
    messages(4, 0usize..40, prop_oneof![Just(0usize), 1usize..16])
}

fn stamps() -> impl Strategy<Value = Stamp> {
    // base_offset leaves room for 2^32 messages: offsets never saturate.
    (any::<u64>(), 0u64..=u64::MAX - (1 << 32), any::<u64>()).prop_map(
        |(partition_id, base_offset, base_timestamp)| Stamp {
            partition_id,
            base_offset,
            base_timestamp,
        },
    )
}

// ---------------------------------------------------------------------------
// Round trips: build -> check -> stamp -> check.
// ---------------------------------------------------------------------------

/// Every field read through the views equals what was put in.
fn assert_reads_back(b: BatchRef<'_>, msgs: &[Msg], base_offset: u64) {
    let earliest = msgs.iter().map(|m| m.timestamp).min().unwrap();
    assert_eq!(b.message_count() as usize, msgs.len());
    assert_eq!(b.origin_timestamp(), earliest);
    assert_eq!(b.base_offset(), base_offset);
    assert_eq!(b.last_offset(), base_offset + msgs.len() as u64 - 1);
    assert_eq!(b.next_offset(), base_offset + msgs.len() as u64);
    let expected_len: usize = BATCH_HEADER_LEN
        + msgs
            .iter()
            .map(|m| FRAME_HEADER_LEN + m.payload.len() + m.user_headers.len())
            .sum::<usize>();
    assert_eq!(b.len(), expected_len);
    assert_eq!(b.batch_length(), expected_len as u64);

    let mut seen = 0;
    for (i, (m, want)) in b.messages().zip(msgs).enumerate() {
        assert_eq!(m.id(), want.id, "message {i}: id");
        assert_eq!(m.payload(), &want.payload[..], "message {i}: payload");
        assert_eq!(
            m.user_headers(),
            &want.user_headers[..],
            "message {i}: headers"
        );
        assert_eq!(m.timestamp(), want.timestamp, "message {i}: timestamp");
        assert_eq!(
            u64::from(m.timestamp_delta()),
            want.timestamp - earliest,
            "message {i}: timestamp_delta"
        );
        assert_eq!(m.offset_delta() as usize, i, "message {i}: offset_delta");
        assert_eq!(m.offset(), base_offset + i as u64, "message {i}: offset");
        assert_eq!(m.checksum(), spec_frame_checksum(m.frame_bytes()));
        seen += 1;
    }
    assert_eq!(seen, msgs.len(), "the iterator yields every message");

    let sums: Vec<u64> = b.frame_checksums().collect();
    assert_eq!(sums.len(), msgs.len());
    assert_eq!(b.batch_checksum(), spec_batch_checksum(b.header(), &sums));
}

fn round_trip(msgs: &[Msg], stamp: Stamp, restamp: Stamp) {
    let limits = default_limits();
    let producer = build(msgs);

    // A producer batch: server fields zero, everything reads back.
    let b = check(&producer, &limits).unwrap();
    assert_eq!(b.as_bytes(), &producer[..]);
    assert_eq!(
        (b.partition_id(), b.base_offset(), b.base_timestamp()),
        (0, 0, 0)
    );
    assert_reads_back(b, msgs, 0);
    let owned = Batch::admit(producer.clone(), &limits).unwrap();
    assert_eq!(owned.as_ref(), b);
    assert_eq!(owned.len(), producer.len());

    // Header-only stamping: a new header in front of the untouched blob.
    let header = stamped_header(b, stamp);
    // An admitted batch stamps from the frame checksums it gathered: the
    // same header, also when stamped again with another stamp.
    let mut owned = owned;
    assert_eq!(owned.stamped_header(stamp), header);
    assert_eq!(owned.stamped_header(restamp), stamped_header(b, restamp));
    assert_eq!(owned.stamped_header(stamp), header);
    let mut stamped = header.0.to_vec();
    stamped.extend_from_slice(b.blob());
    // In-place stamping writes the same bytes.
    let mut in_place = producer.clone();
    stamp_in_place(&mut in_place, stamp, &limits).unwrap();
    assert_eq!(in_place, stamped, "stamp_in_place == stamped_header + blob");
    // Only partition_id, base_offset, base_timestamp and batch_checksum move.
    assert_eq!(
        stamped[batch::ORIGIN_TIMESTAMP.start..batch::BATCH_CHECKSUM.start],
        producer[batch::ORIGIN_TIMESTAMP.start..batch::BATCH_CHECKSUM.start]
    );
    assert_eq!(
        stamped[batch::MESSAGE_COUNT.start..],
        producer[batch::MESSAGE_COUNT.start..],
        "message_count, reserved bytes and blob unchanged by stamping"
    );

    let s = Batch::admit(stamped.clone(), &limits).unwrap();
    let s = s.as_ref();
    assert_eq!(s.partition_id(), stamp.partition_id);
    assert_eq!(s.base_offset(), stamp.base_offset);
    assert_eq!(s.base_timestamp(), stamp.base_timestamp);
    assert_eq!(s.blob(), b.blob());
    assert_reads_back(s, msgs, stamp.base_offset);

    // Restamping a stamped batch equals stamping the producer batch anew.
    let mut twice = stamped.clone();
    stamp_in_place(&mut twice, restamp, &limits).unwrap();
    let mut once = producer.clone();
    stamp_in_place(&mut once, restamp, &limits).unwrap();
    assert_eq!(twice, once);
    check(&twice, &limits).unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn build_check_stamp_check_round_trips(
        msgs in messages(24, payload_len(), user_headers_len()),
        stamp in stamps(),
        restamp in stamps(),
    ) {
        round_trip(&msgs, stamp, restamp);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn small_batches_round_trip(
        msgs in small_messages(),
        stamp in stamps(),
        restamp in stamps(),
    ) {
        round_trip(&msgs, stamp, restamp);
    }
}

#[test]
fn round_trips_at_the_edges() {
    let zero = Stamp {
        partition_id: 0,
        base_offset: 0,
        base_timestamp: 0,
    };
    let max = Stamp {
        partition_id: u64::MAX,
        base_offset: u64::MAX - 3,
        base_timestamp: u64::MAX,
    };
    let cases: Vec<Vec<Msg>> = vec![
        // One empty message.
        vec![Msg {
            id: 0,
            timestamp: 0,
            payload: vec![],
            user_headers: vec![],
        }],
        // Headers without payload; timestamps at the top of u64, full span.
        vec![
            Msg {
                id: u128::MAX,
                timestamp: u64::MAX,
                payload: vec![],
                user_headers: b"k=v".to_vec(),
            },
            Msg {
                id: 1,
                timestamp: u64::MAX - u64::from(u32::MAX),
                payload: vec![0xff; 3],
                user_headers: vec![],
            },
        ],
        // One 256 KiB payload between two empty messages.
        vec![
            Msg {
                id: 7,
                timestamp: 10,
                payload: vec![],
                user_headers: vec![],
            },
            Msg {
                id: 8,
                timestamp: 9,
                payload: filler(256 << 10, 1),
                user_headers: filler(100, 2),
            },
            Msg {
                id: 9,
                timestamp: 11,
                payload: vec![],
                user_headers: vec![],
            },
        ],
    ];
    for msgs in &cases {
        round_trip(msgs, zero, max);
        round_trip(msgs, max, zero);
    }
}

/// Enough frames (6 000, 48 KB of frame checksums) that the batch checksum
/// gather streams many chunks; it must equal the one-shot hash of the spec.
#[test]
fn many_small_frames_round_trip() {
    let msgs: Vec<Msg> = (0..6_000u32)
        .map(|i| Msg {
            id: u128::from(i),
            timestamp: 1_000 + u64::from(i % 97),
            payload: filler((i % 13) as usize, u64::from(i)),
            user_headers: vec![],
        })
        .collect();
    let stamp = Stamp {
        partition_id: 3,
        base_offset: 1 << 40,
        base_timestamp: 1_764_000_000_000_000,
    };
    round_trip(&msgs, stamp, stamp);
}

// ---------------------------------------------------------------------------
// Single-bit flips: every bit of a valid batch, each refused by the check
// that owns it.
// ---------------------------------------------------------------------------

/// Flips every bit of `orig` (a valid batch) and asserts that `check` refuses
/// each, with the error that names the damaged field where that is certain.
fn assert_every_bit_flip_refused(orig: &[u8]) {
    let limits = default_limits();
    check(orig, &limits).expect("the original is valid");
    let spans = frame_spans(orig);
    let stored_batch_checksum = get_u64(orig, batch::BATCH_CHECKSUM);
    let mut bytes = orig.to_vec();
    for byte in 0..orig.len() {
        for bit in 0..8u32 {
            bytes[byte] ^= 1 << bit;
            let result = check(&bytes, &limits);
            let Err(err) = result else {
                panic!(
                    "flip of bit {bit} of byte {byte} (of {}) accepted",
                    orig.len()
                );
            };
            let expected =
                expected_flip_error(orig, &spans, stored_batch_checksum, &bytes, byte, bit);
            assert!(
                expected(&err),
                "flip of bit {bit} of byte {byte}: unexpected {err:?}"
            );
            bytes[byte] ^= 1 << bit;
        }
    }
    assert_eq!(bytes, orig);
}

/// Which refusal a flip of `bit` in `byte` must cause.
fn expected_flip_error(
    orig: &[u8],
    spans: &[(usize, usize)],
    stored_batch_checksum: u64,
    flipped: &[u8],
    byte: usize,
    bit: u32,
) -> Box<dyn Fn(&BatchError) -> bool> {
    use BatchError as E;
    let len = orig.len();
    if byte < BATCH_HEADER_LEN {
        return match byte {
            // partition_id, base_offset, base_timestamp, origin_timestamp:
            // only batch_checksum covers them.
            0..=31 => Box::new(move |e| {
                matches!(*e, E::BatchChecksum { stored, computed }
                    if stored == stored_batch_checksum && computed != stored)
            }),
            32..=39 => {
                let declared = get_u64(flipped, batch::BATCH_LENGTH);
                Box::new(move |e| match *e {
                    E::LengthMismatch {
                        declared: d,
                        actual,
                    } => d == declared && actual == len,
                    E::TooLarge { declared: d, .. } | E::LengthBelowHeader { declared: d } => {
                        d == declared
                    }
                    _ => false,
                })
            }
            40..=47 => {
                let now = get_u64(flipped, batch::BATCH_CHECKSUM);
                Box::new(move |e| {
                    *e == E::BatchChecksum {
                        stored: now,
                        computed: stored_batch_checksum,
                    }
                })
            }
            // message_count: caught by whichever tiling check comes first.
            48..=51 => Box::new(|_| true),
            _ => {
                let want = E::ReservedHeaderByte {
                    at: byte,
                    value: 1 << bit,
                };
                Box::new(move |e| *e == want)
            }
        };
    }
    let (index, &(position, _)) = spans
        .iter()
        .enumerate()
        .find(|(_, &(p, l))| (p..p + l).contains(&byte))
        .expect("every blob byte is in a frame");
    let index = index as u32;
    let rel = byte - position;
    let stored_frame_checksum = get_u64(orig, at(position, frame::CHECKSUM));
    match rel {
        0..=7 => {
            let now = get_u64(flipped, at(position, frame::CHECKSUM));
            Box::new(move |e| {
                *e == E::FrameChecksum {
                    index,
                    position,
                    stored: now,
                    computed: stored_frame_checksum,
                }
            })
        }
        24..=27 => {
            let stored = index ^ (1 << (bit + 8 * (rel as u32 - 24)));
            Box::new(move |e| {
                *e == E::OffsetDelta {
                    index,
                    position,
                    stored,
                }
            })
        }
        // The lengths re-tile the blob; some structural or checksum error.
        32..=39 => Box::new(|_| true),
        40..=47 => {
            let value = 1u64 << (bit + 8 * (rel as u32 - 40));
            Box::new(move |e| {
                *e == E::FrameReserved {
                    index,
                    position,
                    value,
                }
            })
        }
        // id, timestamp_delta, payload, user headers: the frame checksum.
        _ => Box::new(move |e| {
            matches!(*e, E::FrameChecksum { index: i, position: p, stored, computed }
                if i == index && p == position && stored == stored_frame_checksum
                    && computed != stored)
        }),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn every_single_bit_flip_is_refused(msgs in small_messages(), stamp in stamps()) {
        let producer = build(&msgs);
        assert_every_bit_flip_refused(&producer);
        // The stamped form: flips in the stamped server fields are caught by
        // batch_checksum as well.
        let mut stamped = producer;
        stamp_in_place(&mut stamped, stamp, &default_limits()).unwrap();
        assert_every_bit_flip_refused(&stamped);
    }
}

#[test]
fn every_single_bit_flip_of_every_shared_vector_is_refused() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/vectors");
    let mut n = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "bin") {
            assert_every_bit_flip_refused(&std::fs::read(&path).unwrap());
            n += 1;
        }
    }
    assert!(
        n >= 12,
        "expected the producer and stamped vectors, found {n}"
    );
}

// ---------------------------------------------------------------------------
// Truncations and extensions.
// ---------------------------------------------------------------------------

fn assert_truncations_and_extensions_refused(orig: &[u8], extra_byte: u8) {
    use BatchError as E;
    let limits = default_limits();
    let full = orig.len();
    let count = get_u32(orig, batch::MESSAGE_COUNT);
    for len in 0..full {
        let cut = &orig[..len];
        let err = check(cut, &limits).unwrap_err();
        if len < BATCH_HEADER_LEN {
            assert_eq!(err, E::ShortHeader { len });
            continue;
        }
        assert_eq!(
            err,
            E::LengthMismatch {
                declared: full as u64,
                actual: len
            }
        );
        // A truncation whose batch_length was patched to match must be
        // caught by the frame walk itself, before any checksum.
        let mut patched = cut.to_vec();
        put_u64(&mut patched, batch::BATCH_LENGTH, len as u64);
        let err = check(&patched, &limits).unwrap_err();
        assert!(
            matches!(
                err,
                E::CountTooLarge { .. }
                    | E::FrameHeaderTruncated { .. }
                    | E::FrameBodyTruncated { .. }
                    | E::MissingFrames { .. }
            ),
            "truncation to {len} of {full} with batch_length patched: {err:?}"
        );
    }

    let mut longer = orig.to_vec();
    longer.push(extra_byte);
    assert_eq!(
        check(&longer, &limits).unwrap_err(),
        E::LengthMismatch {
            declared: full as u64,
            actual: full + 1
        }
    );
    // With batch_length patched, and even with batch_checksum recomputed,
    // the extra byte is trailing.
    put_u64(&mut longer, batch::BATCH_LENGTH, full as u64 + 1);
    let trailing = E::TrailingBytes {
        count,
        position: full,
        extra: 1,
    };
    assert_eq!(check(&longer, &limits).unwrap_err(), trailing);
    let positions: Vec<usize> = frame_spans(orig).iter().map(|s| s.0).collect();
    reseal_batch_checksum(&mut longer, &positions);
    assert_eq!(check(&longer, &limits).unwrap_err(), trailing);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn every_truncation_and_extension_is_refused(
        msgs in small_messages(),
        stamp in stamps(),
        extra in any::<u8>(),
    ) {
        let mut bytes = build(&msgs);
        assert_truncations_and_extensions_refused(&bytes, extra);
        stamp_in_place(&mut bytes, stamp, &default_limits()).unwrap();
        assert_truncations_and_extensions_refused(&bytes, extra);
    }
}

#[test]
fn every_extension_byte_value_is_refused() {
    let bytes = build(&[Msg {
        id: 1,
        timestamp: 5,
        payload: b"abc".to_vec(),
        user_headers: b"h".to_vec(),
    }]);
    for extra in 0..=u8::MAX {
        let mut longer = bytes.clone();
        longer.push(extra);
        assert!(check(&longer, &default_limits()).is_err(), "{extra:#04x}");
    }
}

// ---------------------------------------------------------------------------
// No input makes `check` panic.
// ---------------------------------------------------------------------------

/// Runs `check` with default and small limits; on acceptance, reads every
/// field, stamps and checks again.
fn exercise(bytes: &[u8]) -> bool {
    let small = Limits {
        max_batch_bytes: 1024,
    };
    let _ = check(bytes, &small);
    let _ = declared_length(bytes, &default_limits());
    match check(bytes, &default_limits()) {
        Ok(b) => {
            read_everything(b);
            let stamp = Stamp {
                partition_id: 1,
                base_offset: 2,
                base_timestamp: 3,
            };
            let mut stamped = bytes.to_vec();
            stamp_in_place(&mut stamped, stamp, &default_limits()).unwrap();
            read_everything(check(&stamped, &default_limits()).unwrap());
            true
        }
        Err(_) => false,
    }
}

#[derive(Debug, Clone)]
enum Mutation {
    Overwrite {
        at: usize,
        bytes: Vec<u8>,
    },
    SetU32 {
        at: usize,
        value: u32,
    },
    SetCount(u32),
    SetBatchLength(u64),
    SetFrameLength {
        frame: usize,
        payload: bool,
        value: u32,
    },
    Truncate(usize),
    Extend(Vec<u8>),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let small_u32 = prop_oneof![0u32..300, any::<u32>(), Just(u32::MAX)];
    prop_oneof![
        (any::<usize>(), prop::collection::vec(any::<u8>(), 1..16))
            .prop_map(|(at, bytes)| Mutation::Overwrite { at, bytes }),
        (any::<usize>(), small_u32.clone()).prop_map(|(at, value)| Mutation::SetU32 { at, value }),
        small_u32.clone().prop_map(Mutation::SetCount),
        prop_oneof![0u64..2048, any::<u64>()].prop_map(Mutation::SetBatchLength),
        (any::<usize>(), any::<bool>(), small_u32).prop_map(|(frame, payload, value)| {
            Mutation::SetFrameLength {
                frame,
                payload,
                value,
            }
        }),
        any::<usize>().prop_map(Mutation::Truncate),
        prop::collection::vec(any::<u8>(), 1..64).prop_map(Mutation::Extend),
    ]
}

fn apply(bytes: &mut Vec<u8>, m: &Mutation) {
    let len = bytes.len();
    match m {
        Mutation::Overwrite { at, bytes: b } => {
            let start = at % len;
            let end = (start + b.len()).min(len);
            bytes[start..end].copy_from_slice(&b[..end - start]);
        }
        Mutation::SetU32 { at, value } => {
            let start = at % (len - 3);
            put_u32(bytes, start..start + 4, *value);
        }
        Mutation::SetCount(c) => put_u32(bytes, batch::MESSAGE_COUNT, *c),
        Mutation::SetBatchLength(l) => put_u64(bytes, batch::BATCH_LENGTH, *l),
        Mutation::SetFrameLength {
            frame: f,
            payload,
            value,
        } => {
            let spans = frame_spans(bytes);
            if spans.is_empty() {
                return;
            }
            let pos = spans[f % spans.len()].0;
            let field = if *payload {
                frame::PAYLOAD_LENGTH
            } else {
                frame::USER_HEADERS_LENGTH
            };
            put_u32(bytes, at(pos, field), *value);
        }
        Mutation::Truncate(n) => bytes.truncate(n % len),
        Mutation::Extend(b) => bytes.extend_from_slice(b),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..1024)) {
        exercise(&bytes);
    }

    /// Random bytes behind a plausible header: batch_length matches, the
    /// reserved bytes are zero, so the frame walk gets to see the garbage.
    #[test]
    fn arbitrary_blobs_behind_a_plausible_header_never_panic(
        count in prop_oneof![1u32..8, any::<u32>()],
        blob in prop::collection::vec(any::<u8>(), 0..1024),
        seal in any::<bool>(),
    ) {
        let mut bytes = vec![0u8; BATCH_HEADER_LEN];
        bytes.extend_from_slice(&blob);
        let len = bytes.len() as u64;
        put_u64(&mut bytes, batch::BATCH_LENGTH, len);
        put_u32(&mut bytes, batch::MESSAGE_COUNT, count);
        if seal && u64::from(count) * FRAME_HEADER_LEN as u64 <= blob.len() as u64 {
            // Seal what tiles, so the walk reaches frame checks and beyond.
            let tiles = frame_walk_fits(&bytes);
            if tiles {
                reseal(&mut bytes);
            }
        }
        exercise(&bytes);
    }

    /// Unsealed mutations of a valid batch: never a panic, and never an
    /// acceptance unless the mutation left the bytes as they were.
    #[test]
    fn mutated_valid_batches_never_panic_and_are_refused(
        msgs in small_messages(),
        muts in prop::collection::vec(mutation(), 1..4),
    ) {
        let orig = build(&msgs);
        let mut bytes = orig.clone();
        for m in &muts {
            if bytes.len() < BATCH_HEADER_LEN + FRAME_HEADER_LEN
                || get_u32(&bytes, batch::MESSAGE_COUNT) as usize > bytes.len()
                || !frame_walk_fits(&bytes)
            {
                break;
            }
            apply(&mut bytes, m);
        }
        let accepted = exercise(&bytes);
        prop_assert!(!accepted || bytes == orig, "accepted a changed batch");
    }

    /// Mutations followed by resealing both checksums (a producer that hashes
    /// its own garbage): whatever `check` decides, it does not panic, and an
    /// accepted batch reads back consistently.
    #[test]
    fn resealed_mutations_never_panic(
        msgs in small_messages(),
        muts in prop::collection::vec(mutation(), 1..4),
    ) {
        let mut bytes = build(&msgs);
        for m in &muts {
            if bytes.len() < BATCH_HEADER_LEN + FRAME_HEADER_LEN
                || get_u32(&bytes, batch::MESSAGE_COUNT) as usize > bytes.len()
                || !frame_walk_fits(&bytes)
            {
                break;
            }
            apply(&mut bytes, m);
        }
        if bytes.len() >= BATCH_HEADER_LEN
            && get_u32(&bytes, batch::MESSAGE_COUNT) as usize <= bytes.len()
            && frame_walk_fits(&bytes)
        {
            reseal(&mut bytes);
        }
        exercise(&bytes);
    }
}

/// Whether the frames named by `message_count` and the stored lengths all
/// lie inside the buffer (so `frame_spans` and `reseal` can walk them).
fn frame_walk_fits(bytes: &[u8]) -> bool {
    if bytes.len() < BATCH_HEADER_LEN {
        return false;
    }
    let count = get_u32(bytes, batch::MESSAGE_COUNT);
    let mut pos = BATCH_HEADER_LEN as u64;
    for _ in 0..count {
        if pos + FRAME_HEADER_LEN as u64 > bytes.len() as u64 {
            return false;
        }
        let p = pos as usize;
        pos += FRAME_HEADER_LEN as u64
            + u64::from(get_u32(bytes, at(p, frame::PAYLOAD_LENGTH)))
            + u64::from(get_u32(bytes, at(p, frame::USER_HEADERS_LENGTH)));
        if pos > bytes.len() as u64 {
            return false;
        }
    }
    true
}

// ---------------------------------------------------------------------------
// The builder's refusals.
// ---------------------------------------------------------------------------

#[test]
fn builder_refuses_an_empty_batch() {
    assert_eq!(BatchBuilder::new().build().unwrap_err(), BuildError::Empty);
    assert_eq!(
        BatchBuilder::with_capacity(4096).build().unwrap_err(),
        BuildError::Empty
    );
}

#[test]
fn builder_accepts_a_span_of_exactly_u32_max() {
    let mut b = BatchBuilder::new();
    b.push(MessageSpec {
        id: 1,
        timestamp: 100,
        payload: b"",
        user_headers: b"",
    });
    b.push(MessageSpec {
        id: 2,
        timestamp: 100 + u64::from(u32::MAX),
        payload: b"",
        user_headers: b"",
    });
    let bytes = b.build().unwrap();
    let batch = check(&bytes, &default_limits()).unwrap();
    let deltas: Vec<u32> = batch.messages().map(|m| m.timestamp_delta()).collect();
    assert_eq!(deltas, [0, u32::MAX]);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn builder_refuses_a_timestamp_span_over_u32_max(
        earliest in 0u64..=u64::MAX - u64::from(u32::MAX) - 1,
        extra in 1u64..=u64::MAX,
        filler_ts in any::<u64>(),
        latest_first in any::<bool>(),
    ) {
        let latest = earliest.saturating_add(u64::from(u32::MAX)).saturating_add(extra);
        prop_assume!(latest - earliest > u64::from(u32::MAX));
        let middle = earliest + filler_ts % (latest - earliest + 1);
        let mut order = [earliest, middle, latest];
        if latest_first {
            order.reverse();
        }
        let mut b = BatchBuilder::new();
        for (i, ts) in order.iter().enumerate() {
            b.push(MessageSpec { id: i as u128, timestamp: *ts, payload: b"x", user_headers: b"" });
        }
        prop_assert_eq!(
            b.build().unwrap_err(),
            BuildError::TimestampSpan { earliest, latest, span_us: latest - earliest }
        );
    }
}

// ---------------------------------------------------------------------------
// Every BatchError variant, reached on purpose, with its exact fields. Each
// crafted batch is resealed where needed so that the intended check fires,
// not an earlier one.
// ---------------------------------------------------------------------------

/// Three messages with distinct, non-empty payloads and headers.
fn three() -> Vec<u8> {
    build(&[
        Msg {
            id: 10,
            timestamp: 1_000,
            payload: filler(100, 1),
            user_headers: b"a=1".to_vec(),
        },
        Msg {
            id: 11,
            timestamp: 1_005,
            payload: filler(60, 2),
            user_headers: vec![],
        },
        Msg {
            id: 12,
            timestamp: 1_001,
            payload: filler(77, 3),
            user_headers: b"bb=22".to_vec(),
        },
    ])
}

fn refusal(bytes: &[u8]) -> BatchError {
    check(bytes, &default_limits()).unwrap_err()
}

#[test]
fn short_header() {
    for len in [0usize, 1, 48, 255] {
        let bytes = vec![0u8; len];
        assert_eq!(refusal(&bytes), BatchError::ShortHeader { len });
    }
    let valid = three();
    assert_eq!(refusal(&valid[..255]), BatchError::ShortHeader { len: 255 });
}

#[test]
fn length_below_header() {
    for declared in [0u64, 1, 48, 255] {
        let mut bytes = three();
        put_u64(&mut bytes, batch::BATCH_LENGTH, declared);
        let err = refusal(&bytes);
        assert_eq!(err, BatchError::LengthBelowHeader { declared });
        assert_eq!(err.header_field().unwrap().to_string(), "batch_length");
    }
}

#[test]
fn too_large() {
    let bytes = three();
    let len = bytes.len() as u64;
    let tight = Limits {
        max_batch_bytes: len,
    };
    check(&bytes, &tight).expect("a batch of exactly the limit is accepted");
    let under = Limits {
        max_batch_bytes: len - 1,
    };
    assert_eq!(
        check(&bytes, &under).unwrap_err(),
        BatchError::TooLarge {
            declared: len,
            max: len - 1
        }
    );
    // The limit is enforced on the declared length, before the bytes are
    // counted: a stream reader can refuse without reading the body.
    let mut huge = three();
    put_u64(&mut huge, batch::BATCH_LENGTH, u64::MAX);
    assert_eq!(
        refusal(&huge),
        BatchError::TooLarge {
            declared: u64::MAX,
            max: Limits::DEFAULT_MAX_BATCH_BYTES
        }
    );
    assert_eq!(
        declared_length(&huge[..BATCH_HEADER_LEN], &default_limits()).unwrap_err(),
        BatchError::TooLarge {
            declared: u64::MAX,
            max: Limits::DEFAULT_MAX_BATCH_BYTES
        }
    );
    assert_eq!(
        declared_length(&bytes[..BATCH_HEADER_LEN], &default_limits()).unwrap(),
        len
    );
}

#[test]
fn length_mismatch() {
    let bytes = three();
    let declared = bytes.len() as u64;
    assert_eq!(
        refusal(&bytes[..bytes.len() - 1]),
        BatchError::LengthMismatch {
            declared,
            actual: bytes.len() - 1
        }
    );
    let mut longer = bytes.clone();
    longer.extend_from_slice(&[0; 48]);
    assert_eq!(
        refusal(&longer),
        BatchError::LengthMismatch {
            declared,
            actual: bytes.len() + 48
        }
    );
}

#[test]
fn reserved_header_byte_at_every_position() {
    // Each reserved byte alone, including the last, partial 8-byte chunk
    // (252..256) of the 204 reserved bytes.
    for at in batch::RESERVED {
        for value in [0x01u8, 0x80, 0xff] {
            let mut bytes = three();
            bytes[at] = value;
            let err = refusal(&bytes);
            assert_eq!(err, BatchError::ReservedHeaderByte { at, value }, "at {at}");
            assert_eq!(err.header_field().unwrap().to_string(), "reserved");
        }
    }
    // Several set: the first is reported.
    let mut bytes = three();
    bytes[200] = 7;
    bytes[100] = 9;
    assert_eq!(
        refusal(&bytes),
        BatchError::ReservedHeaderByte { at: 100, value: 9 }
    );
}

#[test]
fn empty() {
    // A valid batch whose count says zero, with the checksum resealed.
    let mut bytes = three();
    put_u32(&mut bytes, batch::MESSAGE_COUNT, 0);
    reseal_batch_checksum(&mut bytes, &[]);
    assert_eq!(refusal(&bytes), BatchError::Empty);
    // A bare header: batch_length 256, count 0, a correct batch_checksum.
    let mut header = vec![0u8; BATCH_HEADER_LEN];
    put_u64(&mut header, batch::BATCH_LENGTH, BATCH_HEADER_LEN as u64);
    reseal_batch_checksum(&mut header, &[]);
    assert_eq!(refusal(&header), BatchError::Empty);
}

#[test]
fn count_too_large() {
    let mut header = vec![0u8; BATCH_HEADER_LEN];
    put_u64(&mut header, batch::BATCH_LENGTH, BATCH_HEADER_LEN as u64);
    put_u32(&mut header, batch::MESSAGE_COUNT, 1);
    assert_eq!(
        refusal(&header),
        BatchError::CountTooLarge {
            count: 1,
            blob_len: 0
        }
    );
    // A valid batch whose count claims one frame more than 48-byte frames
    // could fill its blob.
    let mut bytes = three();
    let blob_len = bytes.len() - BATCH_HEADER_LEN;
    let count = (blob_len / FRAME_HEADER_LEN) as u32 + 1;
    put_u32(&mut bytes, batch::MESSAGE_COUNT, count);
    assert_eq!(
        refusal(&bytes),
        BatchError::CountTooLarge { count, blob_len }
    );
    put_u32(&mut bytes, batch::MESSAGE_COUNT, u32::MAX);
    assert_eq!(
        refusal(&bytes),
        BatchError::CountTooLarge {
            count: u32::MAX,
            blob_len
        }
    );
}

/// One valid frame of `payload_len` bytes (index 0), then `tail` zero bytes,
/// and `message_count` = `count`; frame 0 and the batch checksum sealed.
fn one_frame_then(payload_len: usize, tail: usize, count: u32) -> Vec<u8> {
    let mut bytes = build(&[Msg {
        id: 99,
        timestamp: 5,
        payload: filler(payload_len, 9),
        user_headers: vec![],
    }]);
    bytes.resize(bytes.len() + tail, 0);
    let len = bytes.len() as u64;
    put_u64(&mut bytes, batch::BATCH_LENGTH, len);
    put_u32(&mut bytes, batch::MESSAGE_COUNT, count);
    reseal_batch_checksum(&mut bytes, &[BATCH_HEADER_LEN]);
    bytes
}

#[test]
fn frame_header_truncated() {
    // Frame 0: 48 + 30 bytes; then 30 bytes, too few for frame 1's header.
    // The blob (108 bytes) is long enough for two bare frame headers, so the
    // count check passes.
    let bytes = one_frame_then(30, 30, 2);
    let err = refusal(&bytes);
    assert_eq!(
        err,
        BatchError::FrameHeaderTruncated {
            index: 1,
            position: BATCH_HEADER_LEN + FRAME_HEADER_LEN + 30,
            available: 30
        }
    );
    assert_eq!(err.frame_index(), Some(1));
    // One byte short of a header.
    let bytes = one_frame_then(48, 47, 2);
    assert_eq!(
        refusal(&bytes),
        BatchError::FrameHeaderTruncated {
            index: 1,
            position: BATCH_HEADER_LEN + FRAME_HEADER_LEN + 48,
            available: 47
        }
    );
}

#[test]
fn frame_body_truncated() {
    let orig = three();
    let spans = frame_spans(&orig);
    let (p2, _) = spans[2];
    // Frame 2's payload grows by one byte past the end of the batch.
    let mut bytes = orig.clone();
    put_u32(&mut bytes, at(p2, frame::PAYLOAD_LENGTH), 78);
    let err = refusal(&bytes);
    assert_eq!(
        err,
        BatchError::FrameBodyTruncated {
            index: 2,
            position: p2,
            payload_length: 78,
            user_headers_length: 5,
            overrun: 1
        }
    );
    assert_eq!(err.frame_index(), Some(2));
    // Both lengths at u32::MAX: the sum does not overflow.
    let mut bytes = orig.clone();
    let (p0, _) = spans[0];
    put_u32(&mut bytes, at(p0, frame::PAYLOAD_LENGTH), u32::MAX);
    put_u32(&mut bytes, at(p0, frame::USER_HEADERS_LENGTH), u32::MAX);
    let room = (orig.len() - p0 - FRAME_HEADER_LEN) as u64;
    assert_eq!(
        refusal(&bytes),
        BatchError::FrameBodyTruncated {
            index: 0,
            position: p0,
            payload_length: u32::MAX,
            user_headers_length: u32::MAX,
            overrun: 2 * u64::from(u32::MAX) - room
        }
    );
}

#[test]
fn frame_reserved() {
    // Frame 1's reserved u64 set, and both checksums resealed over it: only
    // the reserved check can refuse it.
    let mut bytes = three();
    let (p1, _) = frame_spans(&bytes)[1];
    put_u64(&mut bytes, at(p1, frame::RESERVED), 0x0102);
    reseal(&mut bytes);
    let err = refusal(&bytes);
    assert_eq!(
        err,
        BatchError::FrameReserved {
            index: 1,
            position: p1,
            value: 0x0102
        }
    );
    assert_eq!(err.frame_index(), Some(1));
    assert_eq!(err.header_field(), None);
}

#[test]
fn offset_delta() {
    let orig = three();
    let spans = frame_spans(&orig);
    let (p2, _) = spans[2];
    let mut bytes = orig.clone();
    put_u32(&mut bytes, at(p2, frame::OFFSET_DELTA), 7);
    reseal(&mut bytes);
    assert_eq!(
        refusal(&bytes),
        BatchError::OffsetDelta {
            index: 2,
            position: p2,
            stored: 7
        }
    );
    // Two whole, individually valid frames swapped: the order is caught.
    let (p0, l0) = spans[0];
    let (p1, l1) = spans[1];
    let mut swapped = orig[..BATCH_HEADER_LEN].to_vec();
    swapped.extend_from_slice(&orig[p1..p1 + l1]);
    swapped.extend_from_slice(&orig[p0..p0 + l0]);
    swapped.extend_from_slice(&orig[p2..]);
    let positions: Vec<usize> = frame_spans(&swapped).iter().map(|s| s.0).collect();
    reseal_batch_checksum(&mut swapped, &positions);
    assert_eq!(
        refusal(&swapped),
        BatchError::OffsetDelta {
            index: 0,
            position: BATCH_HEADER_LEN,
            stored: 1
        }
    );
}

#[test]
fn frame_checksum() {
    let orig = three();
    let (p1, l1) = frame_spans(&orig)[1];
    let stored = get_u64(&orig, at(p1, frame::CHECKSUM));
    let mut bytes = orig.clone();
    bytes[p1 + FRAME_HEADER_LEN + 10] ^= 0x40;
    let computed = spec_frame_checksum(&bytes[p1..p1 + l1]);
    assert_ne!(stored, computed);
    let err = refusal(&bytes);
    assert_eq!(
        err,
        BatchError::FrameChecksum {
            index: 1,
            position: p1,
            stored,
            computed
        }
    );
    assert_eq!(err.frame_index(), Some(1));
}

#[test]
fn missing_frames() {
    // Two frames fill the blob; the count says three. The blob could hold
    // three bare frame headers, so the count check passes.
    let msgs = [
        Msg {
            id: 1,
            timestamp: 1,
            payload: filler(100, 1),
            user_headers: vec![],
        },
        Msg {
            id: 2,
            timestamp: 2,
            payload: filler(100, 2),
            user_headers: vec![],
        },
    ];
    let mut bytes = build(&msgs);
    let positions: Vec<usize> = frame_spans(&bytes).iter().map(|s| s.0).collect();
    put_u32(&mut bytes, batch::MESSAGE_COUNT, 3);
    reseal_batch_checksum(&mut bytes, &positions);
    let err = refusal(&bytes);
    assert_eq!(
        err,
        BatchError::MissingFrames {
            declared: 3,
            found: 2
        }
    );
    assert_eq!(err.header_field().unwrap().to_string(), "message_count");
}

#[test]
fn trailing_bytes() {
    // Three frames, a count of two, batch_checksum resealed over two: the
    // third frame is trailing.
    let orig = three();
    let spans = frame_spans(&orig);
    let mut bytes = orig.clone();
    put_u32(&mut bytes, batch::MESSAGE_COUNT, 2);
    reseal_batch_checksum(&mut bytes, &[spans[0].0, spans[1].0]);
    assert_eq!(
        refusal(&bytes),
        BatchError::TrailingBytes {
            count: 2,
            position: spans[2].0,
            extra: spans[2].1
        }
    );
}

#[test]
fn batch_checksum() {
    let orig = three();
    let stored = get_u64(&orig, batch::BATCH_CHECKSUM);
    let sums: Vec<u64> = check(&orig, &default_limits())
        .unwrap()
        .frame_checksums()
        .collect();
    // A producer that sent a nonzero base_offset without resealing.
    let mut bytes = orig.clone();
    put_u64(&mut bytes, batch::BASE_OFFSET, 42);
    let computed = spec_batch_checksum(&bytes, &sums);
    let err = refusal(&bytes);
    assert_eq!(err, BatchError::BatchChecksum { stored, computed });
    assert_eq!(err.header_field().unwrap().to_string(), "batch_checksum");
    // The stored checksum itself damaged.
    let mut bytes = orig.clone();
    put_u64(&mut bytes, batch::BATCH_CHECKSUM, stored ^ 1);
    assert_eq!(
        refusal(&bytes),
        BatchError::BatchChecksum {
            stored: stored ^ 1,
            computed: stored
        }
    );
}

/// Every variant's message names the numbers a user needs.
#[test]
fn error_messages_carry_their_fields() {
    let e = BatchError::FrameChecksum {
        index: 3,
        position: 777,
        stored: 0xab,
        computed: 0xcd,
    };
    let s = e.to_string();
    assert!(s.contains("frame 3") && s.contains("777") && s.contains("0x00000000000000ab"));
    let e = BuildError::TimestampSpan {
        earliest: 1,
        latest: 2 + u64::from(u32::MAX),
        span_us: 1 + u64::from(u32::MAX),
    };
    assert!(e.to_string().contains(&u32::MAX.to_string()));
}

// ---------------------------------------------------------------------------
// Retiming a built batch (`set_origin_timestamp`).
// ---------------------------------------------------------------------------

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// A retimed batch stays valid; only origin_timestamp and batch_checksum
    /// change, so every message keeps its delta and moves with the origin.
    #[test]
    fn set_origin_timestamp_keeps_the_batch_valid(
        msgs in small_messages(),
        origin in 0u64..=u64::MAX - u64::from(u32::MAX),
        stamp in stamps(),
        stamp_first in any::<bool>(),
    ) {
        let limits = default_limits();
        let mut bytes = build(&msgs);
        if stamp_first {
            stamp_in_place(&mut bytes, stamp, &limits).unwrap();
        }
        let before = bytes.clone();
        prop_assert_eq!(corelog_segment::set_origin_timestamp(&mut bytes, origin), Some(()));
        let b = check(&bytes, &limits).unwrap();
        prop_assert_eq!(b.origin_timestamp(), origin);
        let old = check(&before, &limits).unwrap();
        for (m, o) in b.messages().zip(old.messages()) {
            prop_assert_eq!(m.timestamp_delta(), o.timestamp_delta());
            prop_assert_eq!(m.timestamp(), origin + u64::from(o.timestamp_delta()));
        }
        prop_assert_eq!(&bytes[..batch::ORIGIN_TIMESTAMP.start], &before[..batch::ORIGIN_TIMESTAMP.start]);
        prop_assert_eq!(
            &bytes[batch::BATCH_LENGTH.start..batch::BATCH_CHECKSUM.start],
            &before[batch::BATCH_LENGTH.start..batch::BATCH_CHECKSUM.start]
        );
        prop_assert_eq!(&bytes[batch::MESSAGE_COUNT.start..], &before[batch::MESSAGE_COUNT.start..]);
    }

    /// Bytes that are not laid out as a batch are refused and left alone.
    #[test]
    fn set_origin_timestamp_leaves_malformed_bytes_alone(
        msgs in small_messages(),
        cut in any::<usize>(),
        extra in prop::collection::vec(any::<u8>(), 1..8),
    ) {
        let built = build(&msgs);
        let mut short = built[..cut % built.len()].to_vec();
        let copy = short.clone();
        prop_assert_eq!(corelog_segment::set_origin_timestamp(&mut short, 1), None);
        prop_assert_eq!(short, copy);
        let mut long = built.clone();
        long.extend_from_slice(&extra);
        let copy = long.clone();
        prop_assert_eq!(corelog_segment::set_origin_timestamp(&mut long, 1), None);
        prop_assert_eq!(long, copy);
    }
}
