//! The sparse index next to each segment.
//!
//! ```text
//! <base offset>.index = entry* [seal record]
//! entry (24 bytes, little-endian):
//!   0 ..  4  relative offset  u32   base_offset of the batch - segment base offset
//!   4 ..  8  position         u32   byte position of the batch in the .log
//!   8 .. 16  timestamp        u64   base_timestamp of the batch (µs)
//!  16 .. 24  checksum         u64   XXH3-64 of bytes 0..16
//! ```
//!
//! The per-entry checksum lets an open find a garbled entry by reading the
//! index alone (without touching the log): entries are used up to the first
//! that fails it, and the rest of the index is rebuilt from the log.
//!
//! One entry for the first batch of a segment, then one for the first batch
//! starting at least `index_interval_bytes` after the previous entry's. The
//! index is an accelerator: it is rebuilt from the log whenever it is
//! missing or disagrees with it, and it is never fsynced on its own. It only
//! ever holds entries for batches that were durable when it was written, so
//! recovery never has to look before the last entry for pages a power cut
//! lost.
//!
//! When a segment is sealed and its data is durable, the index is rewritten
//! whole with a seal record at its end; a segment whose index carries a
//! valid seal record is *confirmed*, and recovery trusts it:
//!
//! ```text
//! seal record (32 bytes):
//!   0 ..  4  u32::MAX      marker (never a relative offset)
//!   4 ..  8  data length   u32
//!   8 .. 16  next offset   u64   offset after the segment's last message
//!  16 .. 20  u32::MAX      marker
//!  20 .. 24  0
//!  24 .. 32  checksum      u64   XXH3-64 of every byte before it
//! ```

/// Bytes per entry.
pub const ENTRY_LEN: usize = 24;

/// One index entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexEntry {
    /// `base_offset - segment base offset`.
    pub rel_offset: u32,
    /// Byte position of the batch in the segment.
    pub position: u32,
    /// The batch's `base_timestamp`.
    pub timestamp: u64,
}

impl IndexEntry {
    /// Encodes the entry.
    pub fn encode(&self) -> [u8; ENTRY_LEN] {
        let mut b = [0u8; ENTRY_LEN];
        b[0..4].copy_from_slice(&self.rel_offset.to_le_bytes());
        b[4..8].copy_from_slice(&self.position.to_le_bytes());
        b[8..16].copy_from_slice(&self.timestamp.to_le_bytes());
        let sum = crate::format::checksum::xxh3(&b[..16]);
        b[16..24].copy_from_slice(&sum.to_le_bytes());
        b
    }

    /// Decodes an entry; `None` when it fails its checksum.
    pub fn decode(b: &[u8; ENTRY_LEN]) -> Option<IndexEntry> {
        let [r0, r1, r2, r3, p0, p1, p2, p3, t0, t1, t2, t3, t4, t5, t6, t7, c @ ..] = *b;
        (u64::from_le_bytes(c) == crate::format::checksum::xxh3(&b[..16])).then(|| IndexEntry {
            rel_offset: u32::from_le_bytes([r0, r1, r2, r3]),
            position: u32::from_le_bytes([p0, p1, p2, p3]),
            timestamp: u64::from_le_bytes([t0, t1, t2, t3, t4, t5, t6, t7]),
        })
    }
}

/// The seal record of a confirmed segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seal {
    /// Bytes of batches in the segment (its file length).
    pub data_len: u64,
    /// Offset after its last message.
    pub next_offset: u64,
}

const SEAL_MARK: u32 = u32::MAX;
const SEAL_LEN: usize = 32;

/// Encodes a sealed index: the entries, then the seal record.
pub fn encode_sealed(entries: &[IndexEntry], seal: Seal) -> Vec<u8> {
    let mut out = encode_all(entries);
    out.extend_from_slice(&SEAL_MARK.to_le_bytes());
    out.extend_from_slice(
        &u32::try_from(seal.data_len)
            .unwrap_or(u32::MAX)
            .to_le_bytes(),
    );
    out.extend_from_slice(&seal.next_offset.to_le_bytes());
    out.extend_from_slice(&SEAL_MARK.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    let sum = crate::format::checksum::xxh3(&out);
    out.extend_from_slice(&sum.to_le_bytes());
    out
}

/// Decodes an index file: its entries and, when it ends with a valid seal
/// record, the seal.
pub fn decode_file(bytes: &[u8]) -> (Vec<IndexEntry>, Option<Seal>) {
    if bytes.len() >= SEAL_LEN && (bytes.len() - SEAL_LEN).is_multiple_of(ENTRY_LEN) {
        let (body, tail) = bytes.split_at(bytes.len() - SEAL_LEN);
        let u32_at =
            |at: usize| u32::from_le_bytes([tail[at], tail[at + 1], tail[at + 2], tail[at + 3]]);
        let u64_at = |at: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&tail[at..at + 8]);
            u64::from_le_bytes(b)
        };
        let sum = crate::format::checksum::xxh3(&bytes[..bytes.len() - 8]);
        if u32_at(0) == SEAL_MARK && u32_at(16) == SEAL_MARK && u32_at(20) == 0 && u64_at(24) == sum
        {
            let seal = Seal {
                data_len: u64::from(u32_at(4)),
                next_offset: u64_at(8),
            };
            return (decode_all(body), Some(seal));
        }
    }
    (decode_all(bytes), None)
}

/// Decodes the entries of an index file up to the first that fails its
/// checksum (a torn trailing entry is ignored too).
pub fn decode_all(bytes: &[u8]) -> Vec<IndexEntry> {
    decode_prefix(bytes).0
}

/// Decodes entries up to the first that fails its checksum; also returns
/// that entry's number, if one failed.
pub fn decode_prefix(bytes: &[u8]) -> (Vec<IndexEntry>, Option<usize>) {
    let mut out = Vec::with_capacity(bytes.len() / ENTRY_LEN);
    for (i, c) in bytes.chunks_exact(ENTRY_LEN).enumerate() {
        let mut b = [0u8; ENTRY_LEN];
        b.copy_from_slice(c);
        match IndexEntry::decode(&b) {
            Some(e) => out.push(e),
            None => return (out, Some(i)),
        }
    }
    (out, None)
}

/// Encodes entries.
pub fn encode_all(entries: &[IndexEntry]) -> Vec<u8> {
    let mut out = Vec::with_capacity(entries.len() * ENTRY_LEN);
    for e in entries {
        out.extend_from_slice(&e.encode());
    }
    out
}

/// The length of the longest prefix of `entries` that is well formed for a
/// segment of `data_len` bytes: first entry at position 0 and relative
/// offset 0, then strictly increasing offsets and positions, timestamps
/// never decreasing, positions inside the data.
pub fn well_formed_prefix(entries: &[IndexEntry], data_len: u64) -> usize {
    let mut prev: Option<&IndexEntry> = None;
    for (i, e) in entries.iter().enumerate() {
        let ok = match prev {
            None => e.rel_offset == 0 && e.position == 0,
            Some(p) => {
                e.rel_offset > p.rel_offset && e.position > p.position && e.timestamp >= p.timestamp
            }
        } && u64::from(e.position) < data_len;
        if !ok {
            return i;
        }
        prev = Some(e);
    }
    entries.len()
}

/// The last entry at or before relative offset `rel`.
pub fn floor_offset(entries: &[IndexEntry], rel: u64) -> Option<&IndexEntry> {
    let i = entries.partition_point(|e| u64::from(e.rel_offset) <= rel);
    i.checked_sub(1).map(|i| &entries[i])
}

/// The last entry whose timestamp is before `ts` (the batch with the
/// first timestamp at or after `ts` is at or after it).
pub fn floor_timestamp(entries: &[IndexEntry], ts: u64) -> Option<&IndexEntry> {
    let i = entries.partition_point(|e| e.timestamp < ts);
    i.checked_sub(1).map(|i| &entries[i])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(rel_offset: u32, position: u32, timestamp: u64) -> IndexEntry {
        IndexEntry {
            rel_offset,
            position,
            timestamp,
        }
    }

    #[test]
    fn a_garbled_entry_ends_the_entries_used() {
        let entries = vec![e(0, 0, 5), e(10, 4096, 7), e(20, 9000, 7)];
        for bit in 0..ENTRY_LEN * 8 {
            let mut bytes = encode_all(&entries);
            bytes[ENTRY_LEN + bit / 8] ^= 1 << (bit % 8);
            assert_eq!(
                decode_prefix(&bytes),
                (entries[..1].to_vec(), Some(1)),
                "bit {bit}"
            );
        }
    }

    #[test]
    fn round_trips_and_ignores_torn_entry() {
        let entries = vec![e(0, 0, 5), e(10, 4096, 7), e(20, 9000, 7)];
        let mut bytes = encode_all(&entries);
        assert_eq!(decode_all(&bytes), entries);
        bytes.extend_from_slice(&[1, 2, 3]);
        assert_eq!(decode_all(&bytes), entries);
    }

    #[test]
    fn well_formed_prefix_stops_at_the_first_bad_entry() {
        // Timestamps may repeat (equal at 10 and 20); offsets and positions
        // strictly grow.
        let good = vec![e(0, 0, 5), e(10, 4096, 7), e(20, 9000, 7)];
        assert_eq!(well_formed_prefix(&good, 10_000), 3);
        assert_eq!(well_formed_prefix(&good, 9000), 2, "position past the data");
        let mut bad = good.clone();
        bad[2].rel_offset = 10;
        assert_eq!(well_formed_prefix(&bad, 10_000), 2, "offset not increasing");
        bad = good.clone();
        bad[2].position = 4096;
        assert_eq!(
            well_formed_prefix(&bad, 10_000),
            2,
            "position not increasing"
        );
        bad = good.clone();
        bad[1].timestamp = 1;
        assert_eq!(well_formed_prefix(&bad, 10_000), 1, "timestamp going back");
        bad = good;
        bad[0].position = 1;
        assert_eq!(well_formed_prefix(&bad, 10_000), 0, "first entry not at 0");
    }

    #[test]
    fn seal_record_round_trips_and_any_flip_unseals() {
        let entries = vec![e(0, 0, 5), e(10, 4096, 7)];
        let seal = Seal {
            data_len: 9000,
            next_offset: 1234,
        };
        let bytes = encode_sealed(&entries, seal);
        assert_eq!(decode_file(&bytes), (entries.clone(), Some(seal)));
        for i in 0..bytes.len() * 8 {
            let mut b = bytes.clone();
            b[i / 8] ^= 1 << (i % 8);
            assert_ne!(decode_file(&b).1, Some(seal), "bit {i}");
        }
        assert_eq!(decode_file(&encode_all(&entries)), (entries, None));
    }

    #[test]
    fn floors() {
        let entries = vec![e(0, 0, 5), e(10, 4096, 7), e(20, 9000, 9)];
        assert_eq!(floor_offset(&entries, 0).map(|e| e.position), Some(0));
        assert_eq!(floor_offset(&entries, 15).map(|e| e.position), Some(4096));
        assert_eq!(floor_offset(&entries, 20).map(|e| e.position), Some(9000));
        assert_eq!(floor_timestamp(&entries, 5), None);
        assert_eq!(floor_timestamp(&entries, 8).map(|e| e.position), Some(4096));
        assert_eq!(
            floor_timestamp(&entries, 100).map(|e| e.position),
            Some(9000)
        );
    }
}
