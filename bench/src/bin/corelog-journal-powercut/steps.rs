//! What both targets write: an entry's payload, a function of its index
//! and term, and the clock the history is stamped with.

use std::time::{SystemTime, UNIX_EPOCH};

/// Nanoseconds since the epoch (0 before it).
pub fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// 16 to 2,063 bytes, a function of `index` and `term`.
pub fn payload(index: u64, term: u64) -> Vec<u8> {
    let seed = index.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ term.wrapping_mul(0xC2B2_AE3D_27D4_EB4F);
    let len = 16 + (seed % 2048) as usize;
    (0..len)
        .map(|i| (seed.rotate_left((i % 64) as u32) as u8) ^ (i as u8))
        .collect()
}
