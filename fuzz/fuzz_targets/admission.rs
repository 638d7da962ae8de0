//! Admission of untrusted bytes: `check` never panics, agrees with an
//! independent, spec-literal reference on what is a valid batch, and
//! whatever it accepts reads back consistently, stamps, and stays valid when
//! stamped.
//!
//! Random bytes almost never carry correct checksums, so each input is also
//! checked a second time "resealed": every frame that fits gets its correct
//! checksum, then the batch checksum is recomputed. That lets the fuzzer
//! explore the structural checks behind the checksums.

#![no_main]

use corelog_segment::checksum::xxh3;
use corelog_segment::layout::{batch, frame, BATCH_HEADER_LEN, FRAME_HEADER_LEN};
use corelog_segment::{check, stamp_in_place, stamped_header, BatchRef, Limits, Stamp};
use libfuzzer_sys::fuzz_target;
use std::ops::Range;

/// Small enough that the fuzzer's inputs cross it often.
const SMALL: Limits = Limits {
    max_batch_bytes: 1024,
};

fuzz_target!(|data: &[u8]| {
    admit(data);
    if let Some(resealed) = reseal(data) {
        admit(&resealed);
    }
});

fn admit(data: &[u8]) {
    let default = check(data, &Limits::default());
    let small = check(data, &SMALL);
    for (limits, result) in [(Limits::default(), &default), (SMALL, &small)] {
        let reference = reference_check(data, limits.max_batch_bytes);
        assert_eq!(
            result.is_ok(),
            reference,
            "check and the spec reference disagree (max {}): {result:?}",
            limits.max_batch_bytes
        );
    }
    // The limit only ever adds a refusal, for batches over it.
    match (&default, &small) {
        (Ok(a), Ok(b)) => assert_eq!(a, b),
        (Ok(_), Err(e)) => assert!(data.len() as u64 > SMALL.max_batch_bytes, "{e}"),
        (Err(e), Ok(_)) => panic!("refused under the default limit but not under 1 KiB: {e}"),
        (Err(_), Err(_)) => {}
    }
    // The append path's admission agrees with `check`.
    let admitted = corelog_segment::Batch::admit(data.to_vec(), &Limits::default());
    assert_eq!(admitted.is_ok(), default.is_ok(), "Batch::admit and check disagree");
    let Ok(batch) = default else { return };
    read_everything(batch);

    let stamp = Stamp {
        partition_id: data.len() as u64,
        base_offset: u64::from(batch.message_count()) << 20,
        base_timestamp: batch.batch_checksum(),
    };
    let header = stamped_header(batch, stamp);
    // The append path stamps from the checksums admission gathered.
    if let Ok(mut admitted) = admitted {
        assert_eq!(admitted.stamped_header(stamp), header, "the admitted stamp differs");
    }
    let mut stamped = data.to_vec();
    stamp_in_place(&mut stamped, stamp, &Limits::default()).expect("an accepted batch stamps");
    assert_eq!(&stamped[..BATCH_HEADER_LEN], &header.0[..]);
    assert_eq!(
        &stamped[BATCH_HEADER_LEN..],
        batch.blob(),
        "stamping moved the blob"
    );
    let again = check(&stamped, &Limits::default()).expect("a stamped batch stays valid");
    assert!(reference_check(&stamped, Limits::DEFAULT_MAX_BATCH_BYTES));
    assert_eq!(again.partition_id(), stamp.partition_id);
    assert_eq!(again.base_offset(), stamp.base_offset);
    assert_eq!(again.base_timestamp(), stamp.base_timestamp);
    assert_eq!(
        again.frame_checksums().collect::<Vec<_>>(),
        batch.frame_checksums().collect::<Vec<_>>()
    );
    read_everything(again);
}

/// Reads every field of every message; the frames must tile the blob.
fn read_everything(batch: BatchRef<'_>) {
    assert_eq!(batch.len() as u64, batch.batch_length());
    let _ = (
        batch.partition_id(),
        batch.base_timestamp(),
        batch.origin_timestamp(),
        batch.last_offset(),
        batch.next_offset(),
    );
    let mut frames = 0u32;
    let mut bytes = 0usize;
    for (i, m) in batch.messages().enumerate() {
        let _ = (m.id(), m.timestamp(), m.timestamp_delta());
        assert_eq!(m.offset_delta() as usize, i);
        assert_eq!(m.offset(), batch.base_offset().saturating_add(i as u64));
        let f = m.frame_bytes();
        assert_eq!(
            f.len(),
            FRAME_HEADER_LEN + m.payload().len() + m.user_headers().len()
        );
        assert_eq!(
            m.payload(),
            &f[FRAME_HEADER_LEN..FRAME_HEADER_LEN + m.payload().len()]
        );
        assert_eq!(m.checksum(), xxh3(&f[frame::CHECKSUMMED_FROM..]));
        frames += 1;
        bytes += f.len();
    }
    assert_eq!(frames, batch.message_count());
    assert_eq!(bytes, batch.blob().len());
}

fn u64_at(bytes: &[u8], r: Range<usize>) -> u64 {
    u64::from_le_bytes(bytes[r].try_into().expect("8 bytes"))
}

fn u32_at(bytes: &[u8], r: Range<usize>) -> u32 {
    u32::from_le_bytes(bytes[r].try_into().expect("4 bytes"))
}

/// The frames from the start of the blob whose header and body fit in
/// `bytes`, at most `message_count` of them: `(position, length)`.
fn walk(bytes: &[u8]) -> Vec<(usize, usize)> {
    let count = u32_at(bytes, batch::MESSAGE_COUNT);
    let mut frames = Vec::new();
    let mut pos = BATCH_HEADER_LEN;
    while frames.len() < count as usize && bytes.len() - pos >= FRAME_HEADER_LEN {
        let f = &bytes[pos..];
        let body = u64::from(u32_at(f, frame::PAYLOAD_LENGTH))
            + u64::from(u32_at(f, frame::USER_HEADERS_LENGTH));
        if body > (f.len() - FRAME_HEADER_LEN) as u64 {
            break;
        }
        let len = FRAME_HEADER_LEN + body as usize;
        frames.push((pos, len));
        pos += len;
    }
    frames
}

fn spec_batch_checksum(bytes: &[u8], frame_checksums: impl Iterator<Item = u64>) -> u64 {
    let mut gathered = bytes[..batch::BATCH_CHECKSUM.start].to_vec();
    gathered.extend_from_slice(&bytes[batch::MESSAGE_COUNT]);
    for c in frame_checksums {
        gathered.extend_from_slice(&c.to_le_bytes());
    }
    xxh3(&gathered)
}

/// `data` with correct checksums on every frame that fits, and a batch
/// checksum over them.
fn reseal(data: &[u8]) -> Option<Vec<u8>> {
    if data.len() < BATCH_HEADER_LEN {
        return None;
    }
    let mut bytes = data.to_vec();
    let frames = walk(&bytes);
    let mut sums = Vec::with_capacity(frames.len());
    for &(pos, len) in &frames {
        let c = xxh3(&bytes[pos + frame::CHECKSUMMED_FROM..pos + len]);
        bytes[pos..pos + 8].copy_from_slice(&c.to_le_bytes());
        sums.push(c);
    }
    let c = spec_batch_checksum(&bytes, sums.into_iter());
    bytes[batch::BATCH_CHECKSUM].copy_from_slice(&c.to_le_bytes());
    (bytes != data).then_some(bytes)
}

/// `message-batches.md`, read literally and written without the crate's
/// code: is `bytes` exactly one valid batch of at most `max` bytes?
fn reference_check(bytes: &[u8], max: u64) -> bool {
    if bytes.len() < BATCH_HEADER_LEN {
        return false;
    }
    let declared = u64_at(bytes, batch::BATCH_LENGTH);
    if declared < BATCH_HEADER_LEN as u64 || declared > max || declared != bytes.len() as u64 {
        return false;
    }
    if bytes[batch::RESERVED].iter().any(|&b| b != 0) {
        return false;
    }
    let count = u32_at(bytes, batch::MESSAGE_COUNT);
    if count == 0 {
        return false;
    }
    let frames = walk(bytes);
    if frames.len() != count as usize {
        return false;
    }
    let end = frames.last().map_or(BATCH_HEADER_LEN, |&(p, l)| p + l);
    if end != bytes.len() {
        return false;
    }
    for (i, &(pos, len)) in frames.iter().enumerate() {
        let f = &bytes[pos..pos + len];
        if u64_at(f, frame::RESERVED) != 0
            || u32_at(f, frame::OFFSET_DELTA) as usize != i
            || u64_at(f, frame::CHECKSUM) != xxh3(&f[frame::CHECKSUMMED_FROM..])
        {
            return false;
        }
    }
    let sums = frames.iter().map(|&(p, _)| u64_at(bytes, p..p + 8));
    if u64_at(bytes, batch::BATCH_CHECKSUM) != spec_batch_checksum(bytes, sums) {
        return false;
    }
    // corelog's one rule beyond the spec's text: every message's producer
    // time, origin_timestamp + timestamp_delta, is a u64.
    let origin = u64_at(bytes, batch::ORIGIN_TIMESTAMP);
    frames.iter().all(|&(p, _)| {
        let delta = u32_at(&bytes[p..], frame::TIMESTAMP_DELTA);
        origin.checked_add(u64::from(delta)).is_some()
    })
}
