//! A data group's snapshot: each partition's commit mark when it was
//! taken (`snapshot.rs` takes and installs it; `reconcile.rs` reads it at
//! open).
//!
//! ```text
//! data snapshot = count u32, then count × (partition u64, end offset u64)
//! ```

use bytes::Bytes;

/// The snapshot data of `ends` (partition, commit mark).
pub(super) fn encode_ends(ends: &[(u64, u64)]) -> Bytes {
    let mut out = Vec::with_capacity(4 + ends.len() * 16);
    out.extend_from_slice(&(ends.len() as u32).to_le_bytes());
    for (p, end) in ends {
        out.extend_from_slice(&p.to_le_bytes());
        out.extend_from_slice(&end.to_le_bytes());
    }
    Bytes::from(out)
}

/// The (partition, commit mark) pairs of a data snapshot; `None` when it
/// is not one.
pub(super) fn decode_ends(b: &[u8]) -> Option<Vec<(u64, u64)>> {
    let n = u32::from_le_bytes(b.get(..4)?.try_into().ok()?) as usize;
    let rest = b.get(4..)?;
    if rest.len() != n * 16 {
        return None;
    }
    Some(
        rest.chunks_exact(16)
            .map(|c| {
                let mut p = [0u8; 8];
                let mut e = [0u8; 8];
                p.copy_from_slice(&c[..8]);
                e.copy_from_slice(&c[8..]);
                (u64::from_le_bytes(p), u64::from_le_bytes(e))
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ends_round_trip() {
        let ends = vec![(1, 10), (3, 0), (u64::MAX, 7)];
        assert_eq!(decode_ends(&encode_ends(&ends)), Some(ends));
        assert_eq!(decode_ends(&[1, 0, 0, 0]), None);
        assert_eq!(decode_ends(&[]), None);
    }
}
