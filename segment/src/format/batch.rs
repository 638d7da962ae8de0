//! The owned, validated batch: admitted bytes that can cross threads.
//!
//! A [`Batch`] is what the log appends: only [`Batch::admit`] makes one, so
//! an unvalidated batch cannot be appended by mistake.

use super::admission::{check_keeping_sums, Limits};
use super::checksum::SumInput;
use super::error::BatchError;
use super::layout::{self, batch};
use super::stamp::{stamp_header, Stamp, StampedHeader};
use super::view::BatchRef;
use bytes::Bytes;

/// An owned, validated batch: the bytes travel, the fields stay in them.
#[derive(Clone)]
pub struct Batch {
    bytes: Bytes,
    /// The batch checksum's input, gathered by admission (see
    /// [`Batch::stamped_header`]).
    sums: SumInput,
}

/// Batches are equal when their bytes are (the gathered checksums follow
/// from them).
impl PartialEq for Batch {
    fn eq(&self, other: &Batch) -> bool {
        self.bytes == other.bytes
    }
}

impl Eq for Batch {}

impl std::fmt::Debug for Batch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.as_ref().fmt(f)
    }
}

impl Batch {
    /// Admits untrusted bytes: checks the whole layout and both checksums
    /// against `limits`, without copying them.
    pub fn admit(bytes: impl Into<Bytes>, limits: &Limits) -> Result<Batch, BatchError> {
        let bytes = bytes.into();
        let sums = check_keeping_sums(&bytes, limits)?;
        Ok(Batch { bytes, sums })
    }

    /// The stamped header of this batch: the same as
    /// [`stamped_header`](super::stamped_header) of its view, but the checksum is computed
    /// from the frame checksums admission gathered (N × 8 contiguous
    /// bytes), not by walking the frames again.
    pub fn stamped_header(&mut self, stamp: Stamp) -> StampedHeader {
        let sums = &mut self.sums;
        stamp_header(&self.bytes, stamp, |checksummed| {
            sums.with_header(checksummed)
        })
    }

    /// What the batch holds, as one number: its `batch_checksum` under a
    /// zero stamp (a hash of the producer's header fields and of every
    /// frame's checksum). Two batches of the same bytes have the same
    /// identity, whatever they are stamped with later; it costs a hash of
    /// 8 bytes a message, not of the batch.
    pub fn identity(&mut self) -> u64 {
        let zero = Stamp {
            partition_id: 0,
            base_offset: 0,
            base_timestamp: 0,
        };
        let header = self.stamped_header(zero);
        layout::u64_at(&header.0, batch::BATCH_CHECKSUM.start)
    }

    /// The batch stamped with `stamp`, in one contiguous buffer (the stamped
    /// header, then the untouched frames): what a replicated log carries
    /// and every replica stores with `append_stamped`.
    pub fn into_stamped(self, stamp: Stamp) -> Bytes {
        self.stamp(stamp).bytes
    }

    /// The batch stamped with `stamp`, still a valid batch (its frames, and
    /// so the checksums admission gathered, are untouched). The stamped
    /// header is written over the producer's in place when nothing else
    /// holds these bytes; otherwise the batch is copied once.
    pub fn stamp(mut self, stamp: Stamp) -> Batch {
        let header = self.stamped_header(stamp);
        let n = header.0.len();
        let bytes = match std::mem::take(&mut self.bytes).try_into_mut() {
            Ok(mut own) => match own.get_mut(..n) {
                Some(head) => {
                    head.copy_from_slice(&header.0);
                    own.freeze()
                }
                None => own.freeze(), // shorter than a header: admission refuses such bytes
            },
            Err(shared) => {
                let mut out = Vec::with_capacity(shared.len());
                out.extend_from_slice(&header.0);
                out.extend_from_slice(shared.get(n..).unwrap_or_default());
                Bytes::from(out)
            }
        };
        Batch {
            bytes,
            sums: self.sums,
        }
    }

    /// A view over the batch.
    pub fn as_ref(&self) -> BatchRef<'_> {
        BatchRef::new_checked(&self.bytes)
    }

    /// The batch bytes.
    pub fn bytes(&self) -> &Bytes {
        &self.bytes
    }

    /// Gives the bytes back.
    pub fn into_bytes(self) -> Bytes {
        self.bytes
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Never true: a batch holds at least its header.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{stamp_in_place, BatchBuilder, MessageSpec};

    /// An admitted batch of one message holding `payload`.
    fn make(payload: &[u8]) -> Batch {
        let mut b = BatchBuilder::new();
        b.push(MessageSpec {
            id: 1,
            timestamp: 5,
            payload,
            user_headers: &[],
        });
        Batch::admit(b.build().expect("build"), &Limits::default()).expect("admit")
    }

    #[test]
    fn identity_follows_the_bytes_not_the_stamp() {
        let limits = Limits::default();
        let (mut a, mut same, mut other) = (make(b"one"), make(b"one"), make(b"two"));
        assert_eq!(a.identity(), same.identity());
        assert_ne!(a.identity(), other.identity());
        let stamped = a.clone().into_stamped(Stamp {
            partition_id: 3,
            base_offset: 9,
            base_timestamp: 77,
        });
        let mut restamped = Batch::admit(stamped, &limits).expect("admit");
        assert_eq!(restamped.identity(), a.identity());
    }

    /// Batches are equal exactly when their bytes are; none is empty.
    #[test]
    fn equality_is_the_bytes() {
        let (a, same, other) = (make(b"one"), make(b"one"), make(b"two"));
        assert_eq!(a, same);
        assert_ne!(a, other);
        assert!(!a.is_empty());
        let shown = format!("{a:?}");
        assert!(
            shown.contains("batch_length: 307") && shown.contains("message_count: 1"),
            "{shown}"
        );
    }

    #[test]
    fn into_stamped_is_stamp_in_place() {
        let mut b = BatchBuilder::new();
        for i in 0..3u8 {
            b.push(MessageSpec {
                id: u128::from(i),
                timestamp: 1_000 + u64::from(i),
                payload: &[i; 40],
                user_headers: &[],
            });
        }
        let bytes = b.build().expect("build");
        let limits = Limits::default();
        let stamp = Stamp {
            partition_id: 7,
            base_offset: 42,
            base_timestamp: 99_000,
        };
        let mut expected = bytes.clone();
        stamp_in_place(&mut expected, stamp, &limits).expect("stamp in place");
        let batch = Batch::admit(bytes, &limits).expect("admit");
        let stamped = batch.into_stamped(stamp);
        assert_eq!(&stamped[..], &expected[..]);
        let view = Batch::admit(stamped, &limits).expect("stamped admits");
        assert_eq!(view.as_ref().base_offset(), 42);
        assert_eq!(view.as_ref().partition_id(), 7);
    }

    #[test]
    fn stamp_writes_in_place_only_bytes_nothing_else_holds() {
        let mut b = BatchBuilder::new();
        b.push(MessageSpec {
            id: 1,
            timestamp: 5,
            payload: &[7; 100],
            user_headers: &[],
        });
        let limits = Limits::default();
        let stamp = Stamp {
            partition_id: 2,
            base_offset: 10,
            base_timestamp: 3,
        };
        // A batch inside a larger buffer (as a request's), held by nothing
        // else: stamped where it lies.
        let producer_bytes = b.build().expect("build");
        let mut buf = vec![0xAA; 16];
        buf.extend_from_slice(&producer_bytes);
        let whole = Bytes::from(buf);
        let bytes = whole.slice(16..);
        drop(whole);
        let at = bytes.as_ptr();
        let stamped = Batch::admit(bytes, &limits).expect("admit").stamp(stamp);
        assert_eq!(stamped.bytes().as_ptr(), at, "stamped without a copy");
        assert_eq!(stamped.as_ref().base_offset(), 10);
        // Shared: the other holder's bytes stay the producer's.
        let producer = Bytes::from(producer_bytes.clone());
        let kept = producer.clone();
        let stamped = Batch::admit(producer, &limits).expect("admit").stamp(stamp);
        assert_eq!(stamped.as_ref().base_offset(), 10);
        assert_eq!(&kept[..], &producer_bytes[..], "a shared batch is copied");
        let again = Batch::admit(stamped.into_bytes(), &limits).expect("admits");
        assert_eq!(again.as_ref().partition_id(), 2);
    }
}
