//! The deterministic stream of producer batches the children are fed:
//! every message id says `(cycle, seq, index)` and every byte is a function
//! of `(cycle, seq)`, so a stored batch names what it must be.

use corelog::testing::segment::layout::{self, BATCH_HEADER_LEN};
use corelog::{BatchBuilder, MessageSpec};
use std::ops::Range;

/// The sequence number of the batch the checker appends after a reopen.
pub(crate) const MARKER: u64 = u32::MAX as u64;

pub(crate) fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

pub(crate) fn message_id(cycle: u64, seq: u64, index: u64) -> u128 {
    (u128::from(cycle) << 64) | (u128::from(seq) << 32) | u128::from(index)
}

/// `(cycle, seq, index)` from a message id.
pub(crate) fn decode_id(id: u128) -> (u64, u64, u64) {
    (
        (id >> 64) as u64,
        ((id >> 32) & 0xffff_ffff) as u64,
        (id & 0xffff_ffff) as u64,
    )
}

/// Producer batch `seq` of cycle `cycle`: 1 to 4 messages of 0 to 400
/// bytes, every byte a function of `(cycle, seq)`.
pub(crate) fn producer_batch(cycle: u64, seq: u64) -> Vec<u8> {
    let h = mix(cycle.wrapping_mul(1_000_003) ^ mix(seq));
    let count = 1 + h % 4;
    let payloads: Vec<Vec<u8>> = (0..count)
        .map(|i| {
            let hi = mix(h ^ i);
            let len = (hi % 401) as usize;
            (0..len)
                .map(|j| (hi >> (j % 8 * 8)) as u8 ^ j as u8)
                .collect()
        })
        .collect();
    let mut b = BatchBuilder::new();
    for (i, p) in payloads.iter().enumerate() {
        b.push(MessageSpec {
            id: message_id(cycle, seq, i as u64),
            timestamp: 1_700_000_000_000_000 + cycle * 1_000_000 + seq * 10 + i as u64,
            payload: p,
            user_headers: if (h >> 40).is_multiple_of(3) {
                b"crash=1"
            } else {
                b""
            },
        });
    }
    b.build().expect("a valid producer batch")
}

/// The message count a producer batch declares in its header.
pub(crate) fn message_count(batch: &[u8]) -> u64 {
    let mut x = [0u8; 4];
    x.copy_from_slice(&batch[layout::batch::MESSAGE_COUNT]);
    u64::from(u32::from_le_bytes(x))
}

/// The header fields a producer sets and a stored batch keeps: the origin
/// timestamp and batch length, then the message count and reserved bytes
/// (everything but the four stamped fields).
const PRODUCER_FIELDS: [Range<usize>; 2] = [
    layout::batch::ORIGIN_TIMESTAMP.start..layout::batch::BATCH_LENGTH.end,
    layout::batch::MESSAGE_COUNT.start..layout::batch::RESERVED.end,
];
const _: () = assert!(layout::batch::ORIGIN_TIMESTAMP.end == layout::batch::BATCH_LENGTH.start);
const _: () = assert!(layout::batch::MESSAGE_COUNT.end == layout::batch::RESERVED.start);
const _: () = assert!(layout::batch::RESERVED.end == BATCH_HEADER_LEN);

/// Checks that `stored` is `produced` stamped into partition `p` at
/// `base_offset`: the producer's frames and header fields untouched.
pub(crate) fn same_as_produced(
    stored: &[u8],
    produced: &[u8],
    p: u64,
    base_offset: u64,
) -> Result<(), String> {
    let u64_at = |b: &[u8], at: Range<usize>| {
        let mut x = [0u8; 8];
        x.copy_from_slice(&b[at]);
        u64::from_le_bytes(x)
    };
    if stored.len() != produced.len() {
        return Err(format!(
            "{} bytes stored, {} sent",
            stored.len(),
            produced.len()
        ));
    }
    let partition = u64_at(stored, layout::batch::PARTITION_ID);
    let offset = u64_at(stored, layout::batch::BASE_OFFSET);
    if partition != p || offset != base_offset {
        return Err(format!(
            "stamped partition {partition} offset {offset}, expected {p} and {base_offset}"
        ));
    }
    if PRODUCER_FIELDS
        .iter()
        .any(|r| stored[r.clone()] != produced[r.clone()])
    {
        return Err("producer header fields changed".into());
    }
    if stored[BATCH_HEADER_LEN..] != produced[BATCH_HEADER_LEN..] {
        return Err("frames differ from what was sent".into());
    }
    Ok(())
}
