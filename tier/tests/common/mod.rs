//! What the tier's tests share: remote segments built from stamped batches.

use corelog_segment::log::index::IndexEntry;
use corelog_segment::{Batch, BatchBuilder, Limits, MessageSpec, Stamp};
use corelog_tier::RemoteSegment;

/// A segment of `partition` from offset `base`: `sizes.len()` stamped batches (batch k holds `sizes[k]`
/// messages of a payload length that varies), its index (an entry every
/// third batch, the first at the start), its manifest entry, and every
/// batch as an index entry would name it.
pub fn segment_at(
    partition: u64,
    base: u64,
    sizes: &[u8],
) -> (Vec<u8>, Vec<IndexEntry>, RemoteSegment, Vec<IndexEntry>) {
    let limits = Limits::default();
    let (mut log, mut entries, mut all) = (Vec::new(), Vec::new(), Vec::new());
    let mut offset = base;
    for (k, &n) in sizes.iter().enumerate() {
        let payloads: Vec<Vec<u8>> = (0..u64::from(n))
            .map(|i| vec![k as u8; ((k as u64 * 53 + i * 17) % 300) as usize])
            .collect();
        let mut b = BatchBuilder::new();
        for (i, p) in payloads.iter().enumerate() {
            b.push(MessageSpec {
                id: (k * 1000 + i + 1) as u128,
                timestamp: 5,
                payload: p,
                user_headers: &[],
            });
        }
        let stamp = Stamp {
            partition_id: partition,
            base_offset: offset,
            base_timestamp: 10_000 + 10 * k as u64,
        };
        let batch = Batch::admit(b.build().expect("build"), &limits)
            .expect("admit")
            .stamp(stamp);
        let entry = IndexEntry {
            rel_offset: (offset - base) as u32,
            position: log.len() as u32,
            timestamp: stamp.base_timestamp,
        };
        if k % 3 == 0 {
            entries.push(entry);
        }
        all.push(entry);
        log.extend_from_slice(batch.bytes());
        offset += u64::from(n);
    }
    let seg = RemoteSegment {
        base_offset: base,
        next_offset: offset,
        bytes: log.len() as u64,
        index_bytes: 0,
        first_timestamp: 10_000,
        last_timestamp: 10_000 + 10 * (sizes.len() as u64 - 1),
        checksum: corelog_segment::checksum::xxh3(&log),
    };
    (log, entries, seg, all)
}
