//! A partition's manifest: the segments the store holds for it, committed
//! by one atomic PUT after their objects are complete (copy first, commit
//! second, Kafka's COPY_SEGMENT_STARTED → FINISHED). An object no manifest
//! names is a stray: an upload a crash interrupted, or a removal whose
//! delete failed; the next pass deletes it.
//!
//! ```text
//! PREFIX/partitions/<p>/manifest-<term, 20 digits>.json
//! PREFIX/partitions/<p>/<base, 20 digits>-<next, 20 digits>.log    the segment, byte for byte
//! PREFIX/partitions/<p>/<base, 20 digits>-<next, 20 digits>.index  its index, seal record included
//! ```
//!
//! An object's key is a function of what it holds (the partition and the
//! offsets), so an upload redone after a crash replaces the same object:
//! no committed duplicate can arise.
//!
//! A manifest is written under the term of its writer: in a cluster only
//! the leader of the partition's group writes, and only its term's key, so
//! a deposed leader that commits late writes an older term's manifest,
//! which the newest term's hides. The manifest in force is the one of the
//! highest term (a single node writes term 0).

use crate::error::TierError;
use serde::{Deserialize, Serialize};

/// The manifest format's version.
pub const MANIFEST_VERSION: u32 = 1;

/// One segment held by the store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoteSegment {
    /// Offset of its first batch.
    pub base_offset: u64,
    /// Offset after its last message.
    pub next_offset: u64,
    /// Bytes of its log object.
    pub bytes: u64,
    /// Bytes of its index object.
    pub index_bytes: u64,
    /// `base_timestamp` of its first batch (µs).
    pub first_timestamp: u64,
    /// `base_timestamp` of its last batch (µs).
    pub last_timestamp: u64,
    /// XXH3-64 of the log object's bytes.
    pub checksum: u64,
}

/// What the store holds for one partition, oldest segment first. Segments
/// never overlap; a gap is possible where local retention removed a
/// segment before it was copied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// [`MANIFEST_VERSION`].
    pub version: u32,
    /// The partition.
    pub partition: u64,
    /// Commits so far (each PUT one more).
    pub generation: u64,
    /// The term it was written under (0 on a single node).
    #[serde(default)]
    pub term: u64,
    /// The segments.
    pub segments: Vec<RemoteSegment>,
}

impl Manifest {
    /// An empty manifest (nothing committed yet).
    pub fn new(partition: u64) -> Manifest {
        Manifest {
            version: MANIFEST_VERSION,
            partition,
            generation: 0,
            term: 0,
            segments: Vec::new(),
        }
    }

    /// The key of the partition's manifest written under `term`.
    pub fn key(partition: u64, term: u64) -> String {
        format!(
            "{}{MANIFEST_PREFIX}{term:020}.json",
            partition_prefix(partition)
        )
    }

    /// The term a manifest key names, if it is one.
    pub fn term_of_key(partition: u64, key: &str) -> Option<u64> {
        let digits = key
            .strip_prefix(&partition_prefix(partition))?
            .strip_prefix(MANIFEST_PREFIX)?
            .strip_suffix(".json")?;
        (digits.len() == 20).then(|| digits.parse().ok())?
    }

    /// Parses and checks a stored manifest, read from `term`'s key.
    pub fn decode(partition: u64, term: u64, bytes: &[u8]) -> Result<Manifest, TierError> {
        let damaged = |reason: String| TierError::Manifest {
            key: Manifest::key(partition, term),
            reason,
        };
        let m: Manifest = serde_json::from_slice(bytes).map_err(|e| damaged(e.to_string()))?;
        if m.version != MANIFEST_VERSION {
            return Err(damaged(format!(
                "version {} (this build reads {MANIFEST_VERSION})",
                m.version
            )));
        }
        if m.partition != partition {
            return Err(damaged(format!("names partition {}", m.partition)));
        }
        if m.term != term {
            return Err(damaged(format!("names term {}", m.term)));
        }
        if m.generation == u64::MAX {
            // No commit can follow it: the next would need generation 2^64.
            return Err(damaged(format!("generation {}", m.generation)));
        }
        let (mut end, mut bytes, mut index_bytes) = (0u64, 0u64, 0u64);
        for (i, s) in m.segments.iter().enumerate() {
            if s.next_offset <= s.base_offset || (i > 0 && s.base_offset < end) {
                return Err(damaged(format!(
                    "segment {} ({}..{}) overlaps or is empty",
                    i, s.base_offset, s.next_offset
                )));
            }
            end = s.next_offset;
            // Sums over the segments (retention's, the status's) must not
            // overflow: no store holds 2^64 bytes of one partition.
            let (Some(b), Some(ib)) = (
                bytes.checked_add(s.bytes),
                index_bytes.checked_add(s.index_bytes),
            ) else {
                return Err(damaged(format!(
                    "segment {i} ({}..{}) takes the partition's bytes past 2^64",
                    s.base_offset, s.next_offset
                )));
            };
            (bytes, index_bytes) = (b, ib);
        }
        Ok(m)
    }

    /// The stored form.
    pub fn encode(&self) -> Vec<u8> {
        // A struct of integers always serializes.
        serde_json::to_vec_pretty(self).unwrap_or_default()
    }

    /// The offset after the newest segment held (0 when none).
    pub fn end_offset(&self) -> u64 {
        self.segments.last().map(|s| s.next_offset).unwrap_or(0)
    }

    /// The offset of the oldest message held, if any.
    pub fn start_offset(&self) -> Option<u64> {
        self.segments.first().map(|s| s.base_offset)
    }

    /// Bytes of the log objects held.
    pub fn bytes(&self) -> u64 {
        self.segments.iter().map(|s| s.bytes).sum()
    }

    /// Whether the manifest holds the segment starting at `base`.
    pub fn holds(&self, base: u64) -> bool {
        self.segments
            .binary_search_by_key(&base, |s| s.base_offset)
            .is_ok()
    }

    /// The segment holding `offset`, or the first after it (an offset in a
    /// gap, or before the oldest, reads from the next one held).
    pub fn segment_from(&self, offset: u64) -> Option<&RemoteSegment> {
        let i = self.segments.partition_point(|s| s.next_offset <= offset);
        self.segments.get(i)
    }
}

/// How a manifest's key begins (after the partition's prefix).
pub const MANIFEST_PREFIX: &str = "manifest-";

/// The prefix of a partition's objects.
pub fn partition_prefix(partition: u64) -> String {
    format!("partitions/{partition}/")
}

/// The key of a segment's log object.
pub fn log_key(partition: u64, s: &RemoteSegment) -> String {
    object_key(partition, s.base_offset, s.next_offset, "log")
}

/// The key of a segment's index object.
pub fn index_key(partition: u64, s: &RemoteSegment) -> String {
    object_key(partition, s.base_offset, s.next_offset, "index")
}

/// The key of a segment object by its offsets.
pub fn object_key(partition: u64, base: u64, next: u64, ext: &str) -> String {
    format!("{}{base:020}-{next:020}.{ext}", partition_prefix(partition))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(base: u64, next: u64) -> RemoteSegment {
        RemoteSegment {
            base_offset: base,
            next_offset: next,
            bytes: 10,
            index_bytes: 0,
            first_timestamp: 0,
            last_timestamp: 0,
            checksum: 0,
        }
    }

    #[test]
    fn a_manifest_round_trips_and_finds_segments() {
        let mut m = Manifest::new(7);
        m.segments = vec![seg(0, 10), seg(10, 20), seg(30, 40)];
        let back = Manifest::decode(7, 0, &m.encode()).expect("decodes");
        assert_eq!(Manifest::term_of_key(7, &Manifest::key(7, 12)), Some(12));
        assert_eq!(Manifest::term_of_key(7, &Manifest::key(8, 12)), None);
        assert_eq!(back, m);
        assert_eq!(m.segment_from(5).map(|s| s.base_offset), Some(0));
        assert_eq!(m.segment_from(10).map(|s| s.base_offset), Some(10));
        // In the gap: the next segment held.
        assert_eq!(m.segment_from(25).map(|s| s.base_offset), Some(30));
        assert!(m.segment_from(40).is_none());
        assert!(m.holds(30) && !m.holds(20));
        assert_eq!(
            (m.start_offset(), m.end_offset(), m.bytes()),
            (Some(0), 40, 30)
        );
        // Retention dropped the oldest: the store starts at the next.
        m.segments.remove(0);
        assert_eq!((m.start_offset(), m.end_offset()), (Some(10), 40));
        let empty = Manifest::new(7);
        assert_eq!((empty.start_offset(), empty.end_offset()), (None, 0));
    }

    #[test]
    fn a_damaged_manifest_is_named() {
        let mut m = Manifest::new(7);
        m.segments = vec![seg(0, 10), seg(5, 20)];
        let err = Manifest::decode(7, 0, &m.encode()).expect_err("overlap");
        let key = "partitions/7/manifest-00000000000000000000.json";
        assert!(err.to_string().contains(key), "{err}");
        let err = Manifest::decode(8, 0, &Manifest::new(7).encode()).expect_err("other partition");
        assert!(err.to_string().contains("names partition 7"), "{err}");
        let err = Manifest::decode(7, 3, &Manifest::new(7).encode()).expect_err("other term");
        assert!(err.to_string().contains("names term 0"), "{err}");
        assert!(Manifest::decode(7, 0, b"{not json").is_err());
    }

    /// Sizes and a generation no real store reaches are refused at decode,
    /// so that sums over the segments (retention, status) and the next
    /// commit's generation cannot overflow; the largest that fit decode.
    #[test]
    fn a_manifest_whose_sizes_or_generation_overflow_is_refused() {
        let big = |bytes: u64, index_bytes: u64| {
            let mut m = Manifest::new(7);
            m.segments = vec![seg(0, 10), seg(10, 20)];
            m.segments[0].bytes = bytes;
            m.segments[0].index_bytes = index_bytes;
            m
        };
        // seg() gives each segment 10 bytes and no index bytes.
        let fits = big(u64::MAX - 10, u64::MAX);
        let back = Manifest::decode(7, 0, &fits.encode()).expect("sums to u64::MAX exactly");
        assert_eq!(back.bytes(), u64::MAX);
        let err = Manifest::decode(7, 0, &big(u64::MAX - 9, 0).encode()).expect_err("log bytes");
        assert!(
            err.to_string()
                .contains("segment 1 (10..20) takes the partition's bytes past 2^64"),
            "{err}"
        );
        let mut two_indexes = big(0, u64::MAX);
        two_indexes.segments[1].index_bytes = 1;
        let err = Manifest::decode(7, 0, &two_indexes.encode()).expect_err("index bytes");
        assert!(err.to_string().contains("segment 1"), "{err}");
        let mut last = Manifest::new(7);
        last.generation = u64::MAX - 1;
        assert!(Manifest::decode(7, 0, &last.encode()).is_ok());
        last.generation = u64::MAX;
        let err = Manifest::decode(7, 0, &last.encode()).expect_err("generation");
        assert!(
            err.to_string().contains("generation 18446744073709551615"),
            "{err}"
        );
    }
}
