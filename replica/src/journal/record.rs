//! One journal record: a Raft entry on disk.
//!
//! ```text
//! 0   body_len      u32   bytes of the body
//! 4   checksum      u64   XXH3-64 of the data, seeded with XXH3-64 of the
//!                         body before it (one pass over the data, one-shot);
//!                         of a batch record, of the data's first 256 bytes
//!                         (the batch header) only
//! 12  body:
//!     0   index         u64
//!     8   term          u64
//!     16  prev_term     u64   the term of entry index - 1 when this record was
//!                             written (the snapshot's term after a snapshot)
//!     24  entry_type    u8    raft's EntryType (0 normal, 1 conf change, 2 conf change v2),
//!                             plus 0x80 for a batch record, 0x40 for a pointer record
//!     25  context_len   u32
//!     29  context       context_len bytes (the command header)
//!     ..  data          the rest (for a send: the stamped batch, verbatim;
//!                       for a pointer record, the pointer below)
//! ```
//!
//! A **pointer record** stands for a send whose stamped batch lies in its
//! partition's log (one write per byte: the journal holds where, the
//! segment holds the bytes). Its data is 24 bytes, copied from the batch
//! header, and the record checksum covers them as any record's data:
//!
//! ```text
//! 0   base_offset     u64   the batch's first offset in its partition
//! 8   batch_length    u32
//! 12  batch_checksum  u64   the header's, which covers every byte of the batch
//! 20  message_count   u32
//! ```
//!
//! The batch is found again by its partition (in the context) and base
//! offset, and is the entry's only if its header's length and checksum are
//! the pointer's.
//!
//! All integers little-endian. A record is whole when its body is all there
//! and hashes to its checksum; the first record that is not ends the
//! journal (a torn tail).
//!
//! A **batch record** holds, as its data, a stamped batch that admission
//! verified before it was written (the leader's own, or one a follower
//! checked as it arrived). Its checksum stops at the batch header: the
//! header's `batch_checksum` covers the stamp and every frame's checksum,
//! and each frame's checksum covers the frame, so decoding verifies the
//! batch (every byte, as admission does) instead of hashing the data a
//! second time when it is written. The header inside the record checksum
//! binds the data to the record: an older, valid batch left under a
//! rewritten record's head by a power cut has another header and is
//! refused. `prev_term` chains a record to the one before
//! it, as Raft's log matching does: after a truncated suffix was rewritten
//! without a sync, a power cut can leave records of the old suffix beside
//! records of the new one (a filesystem may persist some of a file's pages
//! and not others), each whole; a record whose `prev_term` is not the term
//! of the record before it was written after another history and ends the
//! journal there.

use bytes::Bytes;
use corelog::{BatchError, BatchRef, Limits};
use raft::eraftpb::{Entry, EntryType};

/// Bytes before the body.
pub const PREFIX_LEN: usize = 12;
/// Bytes of the body before the context.
pub const BODY_FIXED_LEN: usize = 29;
/// The largest body a record may declare (a batch is at most 64 MiB).
pub const MAX_BODY: usize = 80 << 20;

/// The entry-type bit of a batch record.
const BATCH_RECORD: u8 = 0x80;
/// The entry-type bit of a pointer record.
const POINTER_RECORD: u8 = 0x40;
/// Bytes of a pointer record's data.
pub const POINTER_LEN: usize = 24;

/// Where a send's stamped batch lies: see the module's docs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pointer {
    /// The batch's first offset in its partition.
    pub base_offset: u64,
    /// Its length in bytes.
    pub batch_length: u32,
    /// Its header's `batch_checksum`.
    pub batch_checksum: u64,
    /// Its messages.
    pub message_count: u32,
}

impl Pointer {
    /// The pointer to the stamped batch `batch` (`None` when it declares a
    /// length past `u32`, which no admitted batch does).
    pub fn of(batch: BatchRef<'_>) -> Option<Pointer> {
        Some(Pointer {
            base_offset: batch.base_offset(),
            batch_length: u32::try_from(batch.batch_length()).ok()?,
            batch_checksum: batch.batch_checksum(),
            message_count: batch.message_count(),
        })
    }

    /// Whether the verified batch `batch` is the one this points at.
    pub fn names(&self, batch: BatchRef<'_>) -> bool {
        Pointer::of(batch).as_ref() == Some(self)
    }

    /// The offset after the batch.
    pub fn next_offset(&self) -> u64 {
        self.base_offset + u64::from(self.message_count)
    }

    fn encode(&self) -> [u8; POINTER_LEN] {
        let mut out = [0u8; POINTER_LEN];
        out[0..8].copy_from_slice(&self.base_offset.to_le_bytes());
        out[8..12].copy_from_slice(&self.batch_length.to_le_bytes());
        out[12..20].copy_from_slice(&self.batch_checksum.to_le_bytes());
        out[20..24].copy_from_slice(&self.message_count.to_le_bytes());
        out
    }

    fn decode(b: &[u8]) -> Option<Pointer> {
        (b.len() == POINTER_LEN).then(|| Pointer {
            base_offset: u64_at(b, 0),
            batch_length: u32_at(b, 8),
            batch_checksum: u64_at(b, 12),
            message_count: u32_at(b, 20),
        })
    }
}

/// How an entry is written to the journal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Context and data, the data hashed whole.
    Plain,
    /// A stamped batch admission verified: checked by its own checksums.
    VerifiedBatch,
    /// A stamped batch its partition's log holds: only where it lies.
    Pointer(Pointer),
}

impl Kind {
    fn bits(&self) -> u8 {
        match self {
            Kind::Plain => 0,
            Kind::VerifiedBatch => BATCH_RECORD,
            Kind::Pointer(_) => POINTER_RECORD,
        }
    }
}

/// The bytes of a batch record's data its checksum covers: the batch
/// header.
const BATCH_HEAD: usize = 256;

/// The record of `e`, whose predecessor has term `prev_term`, written as
/// `kind` says: the prefix and fixed body fields, then the context, then
/// the data written (the entry's, or the pointer's bytes). For
/// [`Kind::VerifiedBatch`] the caller answers that the data is a whole
/// stamped batch admission verified, since one whose data does not verify
/// is damage to the reader.
pub fn encode_parts(e: &Entry, prev_term: u64, kind: Kind) -> Parts<'_> {
    let pointer = match kind {
        Kind::Pointer(p) => Some(p.encode()),
        _ => None,
    };
    let data_len = pointer.map_or(e.data.len(), |p| p.len());
    let body_len = BODY_FIXED_LEN + e.context.len() + data_len;
    let mut fixed = [0u8; BODY_FIXED_LEN];
    fixed[0..8].copy_from_slice(&e.index.to_le_bytes());
    fixed[8..16].copy_from_slice(&e.term.to_le_bytes());
    fixed[16..24].copy_from_slice(&prev_term.to_le_bytes());
    fixed[24] = e.get_entry_type() as u8 | kind.bits();
    fixed[25..29].copy_from_slice(&(e.context.len() as u32).to_le_bytes());
    let data: &[u8] = match &pointer {
        Some(p) => p,
        None => &e.data,
    };
    let sum = checksum(
        &fixed,
        &e.context,
        summed(data, kind == Kind::VerifiedBatch),
    );
    let mut head = [0u8; PREFIX_LEN + BODY_FIXED_LEN];
    head[0..4].copy_from_slice(&(body_len as u32).to_le_bytes());
    head[4..12].copy_from_slice(&sum.to_le_bytes());
    head[12..].copy_from_slice(&fixed);
    Parts {
        head,
        context: &e.context,
        pointer,
        data: &e.data,
    }
}

/// A record's bytes, in order: see [`encode_parts`].
#[derive(Debug)]
pub struct Parts<'a> {
    head: [u8; PREFIX_LEN + BODY_FIXED_LEN],
    context: &'a [u8],
    pointer: Option<[u8; POINTER_LEN]>,
    data: &'a [u8],
}

impl Parts<'_> {
    /// The slices to write, back to back.
    pub fn slices(&self) -> [&[u8]; 3] {
        let data: &[u8] = match &self.pointer {
            Some(p) => p,
            None => self.data,
        };
        [&self.head, self.context, data]
    }

    /// Bytes the record takes on disk.
    pub fn disk_len(&self) -> u64 {
        self.slices().iter().map(|s| s.len() as u64).sum()
    }
}

/// Bytes `e` takes in memory (its record, were its data written whole):
/// what a journal counts toward compaction.
pub fn len(e: &Entry) -> u64 {
    (PREFIX_LEN + BODY_FIXED_LEN + e.context.len() + e.data.len()) as u64
}

/// Why the bytes at a position are not a whole record.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RecordError {
    /// Fewer bytes than the prefix or the declared body.
    #[error("record cut short: {have} bytes of {need}")]
    Short {
        /// bytes present
        have: usize,
        /// bytes the record needs
        need: usize,
    },
    /// The declared body length is impossible.
    #[error("record declares a body of {0} bytes")]
    BadLength(usize),
    /// The body does not hash to the stored checksum.
    #[error("checksum {stored:#018x}, body hashes to {computed:#018x}")]
    Checksum {
        /// stored in the prefix
        stored: u64,
        /// computed from the body
        computed: u64,
    },
    /// The entry type byte is no EntryType.
    #[error("entry type {0} is unknown")]
    EntryType(u8),
    /// A batch record's data is not the whole, valid batch it was.
    #[error("batch record: {0}")]
    Batch(BatchError),
    /// A pointer record's data is not a pointer.
    #[error("pointer record holds {0} bytes, not {POINTER_LEN}")]
    Pointer(usize),
    /// Both the batch and the pointer bits are set.
    #[error("record is marked both a batch and a pointer")]
    Kinds,
}

/// A decoded record.
#[derive(Debug, Clone, PartialEq)]
pub struct Decoded {
    /// The entry (context and data are views of the buffer).
    pub entry: Entry,
    /// The term of the entry before it, as written.
    pub prev_term: u64,
    /// The record's length.
    pub len: usize,
    /// A batch record (its data verified as a batch, not hashed whole).
    pub batch: bool,
    /// A pointer record: where the entry's batch lies (its data is then
    /// empty until read back from the partition's log).
    pub pointer: Option<Pointer>,
}

/// Decodes the record at the start of `buf` (a slice of the file's bytes,
/// so context and data are zero-copy views).
pub fn decode(buf: &Bytes) -> Result<Decoded, RecordError> {
    let (body, total) = body_of(buf)?;
    let body_len = body.len();
    let stored = u64_at(buf, 4);
    let context_len = u32_at(&body, 25) as usize;
    if BODY_FIXED_LEN + context_len > body_len {
        return Err(RecordError::BadLength(body_len));
    }
    let is_batch = body[24] & BATCH_RECORD != 0;
    let is_pointer = body[24] & POINTER_RECORD != 0;
    let data = &body[BODY_FIXED_LEN + context_len..];
    let computed = checksum(
        &body[..BODY_FIXED_LEN],
        &body[BODY_FIXED_LEN..BODY_FIXED_LEN + context_len],
        summed(data, is_batch),
    );
    if stored != computed {
        return Err(RecordError::Checksum { stored, computed });
    }
    if is_batch && is_pointer {
        return Err(RecordError::Kinds);
    }
    let pointer = if is_pointer {
        Some(Pointer::decode(data).ok_or(RecordError::Pointer(data.len()))?)
    } else {
        None
    };
    if is_batch {
        let limits = Limits {
            max_batch_bytes: MAX_BODY as u64,
        };
        BatchRef::new(data, &limits).map_err(RecordError::Batch)?;
    }
    let entry_type = match body[24] & !(BATCH_RECORD | POINTER_RECORD) {
        0 => EntryType::EntryNormal,
        1 => EntryType::EntryConfChange,
        2 => EntryType::EntryConfChangeV2,
        other => return Err(RecordError::EntryType(other)),
    };
    let mut e = Entry::default();
    e.index = u64_at(&body, 0);
    e.term = u64_at(&body, 8);
    e.set_entry_type(entry_type);
    e.context = body.slice(BODY_FIXED_LEN..BODY_FIXED_LEN + context_len);
    if pointer.is_none() {
        e.data = body.slice(BODY_FIXED_LEN + context_len..);
    }
    Ok(Decoded {
        entry: e,
        prev_term: u64_at(&body, 16),
        len: total,
        batch: is_batch,
        pointer,
    })
}

/// The body of the record at the start of `buf`, and the record's length,
/// once its declared length is possible and all there.
fn body_of(buf: &Bytes) -> Result<(Bytes, usize), RecordError> {
    if buf.len() < PREFIX_LEN {
        return Err(RecordError::Short {
            have: buf.len(),
            need: PREFIX_LEN,
        });
    }
    let body_len = u32_at(buf, 0) as usize;
    if !(BODY_FIXED_LEN..=MAX_BODY).contains(&body_len) {
        return Err(RecordError::BadLength(body_len));
    }
    let total = PREFIX_LEN + body_len;
    if buf.len() < total {
        return Err(RecordError::Short {
            have: buf.len(),
            need: total,
        });
    }
    Ok((buf.slice(PREFIX_LEN..total), total))
}

/// What of the data the record checksum covers.
fn summed(data: &[u8], verified_batch: bool) -> &[u8] {
    if verified_batch {
        data.get(..BATCH_HEAD).unwrap_or(data)
    } else {
        data
    }
}

/// The record checksum: the data hashed once, seeded with the hash of the
/// fixed fields and the context.
fn checksum(fixed: &[u8], context: &[u8], data: &[u8]) -> u64 {
    let mut head = Vec::with_capacity(fixed.len() + context.len());
    head.extend_from_slice(fixed);
    head.extend_from_slice(context);
    let seed = xxhash_rust::xxh3::xxh3_64(&head);
    xxhash_rust::xxh3::xxh3_64_with_seed(data, seed)
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut x = [0u8; 4];
    x.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(x)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(x)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(index: u64, term: u64, context: &[u8], data: &[u8]) -> Entry {
        let mut e = Entry::default();
        e.index = index;
        e.term = term;
        e.context = Bytes::copy_from_slice(context);
        e.data = Bytes::copy_from_slice(data);
        e
    }

    fn encode(e: &Entry) -> Vec<u8> {
        encode_as(e, false)
    }

    fn encode_as(e: &Entry, verified_batch: bool) -> Vec<u8> {
        let kind = if verified_batch {
            Kind::VerifiedBatch
        } else {
            Kind::Plain
        };
        encode_kind(e, kind)
    }

    fn encode_kind(e: &Entry, kind: Kind) -> Vec<u8> {
        encode_parts(e, 2, kind).slices().concat()
    }

    /// A stamped batch of `n` messages at `base_offset`, stamped at `ts`.
    fn stamped(n: u32, base_offset: u64, ts: u64) -> Bytes {
        let mut b = corelog::BatchBuilder::new();
        let payloads: Vec<Vec<u8>> = (0..n).map(|i| vec![i as u8; 300]).collect();
        for (i, p) in payloads.iter().enumerate() {
            b.push(corelog::MessageSpec {
                id: i as u128,
                timestamp: 1_000 + i as u64,
                payload: p,
                user_headers: &[],
            });
        }
        let batch =
            corelog::Batch::admit(b.build().expect("build"), &Limits::default()).expect("admit");
        batch.into_stamped(corelog::Stamp {
            partition_id: 4,
            base_offset,
            base_timestamp: ts,
        })
    }

    #[test]
    fn round_trips() {
        let e = entry(7, 3, b"ctx", b"batch bytes");
        let bytes = Bytes::from(encode(&e));
        assert_eq!(bytes.len() as u64, len(&e));
        let d = decode(&bytes).expect("decode");
        assert_eq!((d.len, d.prev_term), (bytes.len(), 2));
        assert_eq!(d.entry, e);
    }

    /// Every byte of `good` flipped is refused, and every prefix is refused
    /// as cut short, saying how many bytes it needs.
    fn every_flip_and_cut_refused(good: &[u8]) {
        for i in 0..good.len() {
            let mut bad = good.to_vec();
            bad[i] ^= 0x40;
            assert!(decode(&Bytes::from(bad)).is_err(), "flip at {i} accepted");
        }
        for cut in 0..good.len() {
            let need = if cut < PREFIX_LEN {
                PREFIX_LEN
            } else {
                good.len()
            };
            assert_eq!(
                decode(&Bytes::copy_from_slice(&good[..cut])),
                Err(RecordError::Short { have: cut, need }),
                "cut to {cut} bytes"
            );
        }
    }

    #[test]
    fn every_flipped_byte_and_every_cut_is_refused() {
        every_flip_and_cut_refused(&encode(&entry(1, 1, b"c", b"data")));
    }

    #[test]
    fn a_batch_record_is_checked_by_its_batch_every_byte_and_every_cut() {
        let e = entry(9, 4, b"ctx", &stamped(3, 100, 7));
        let good = encode_as(&e, true);
        let d = decode(&Bytes::from(good.clone())).expect("decode");
        assert_eq!(d.entry, e, "a batch record decodes to its entry");
        assert!(d.batch && !decode(&Bytes::from(encode(&e))).expect("plain").batch);
        every_flip_and_cut_refused(&good);
        // Data that is no batch cannot pass as a batch record.
        let not_batch = entry(9, 4, b"ctx", &[7u8; 400]);
        let got = decode(&Bytes::from(encode_as(&not_batch, true)));
        assert!(matches!(got, Err(RecordError::Batch(_))), "{got:?}");
    }

    #[test]
    fn a_pointer_record_holds_where_the_batch_lies_not_the_batch() {
        let batch = stamped(3, 100, 7);
        let e = entry(9, 4, b"ctx", &batch);
        let view = |b: &Bytes| corelog::Batch::admit(b.clone(), &Limits::default()).expect("admit");
        let p = Pointer::of(view(&batch).as_ref()).expect("pointer");
        assert_eq!(
            (p.base_offset, p.message_count, p.next_offset()),
            (100, 3, 103)
        );
        assert!(p.names(view(&batch).as_ref()));
        let good = encode_kind(&e, Kind::Pointer(p));
        assert_eq!(good.len(), PREFIX_LEN + BODY_FIXED_LEN + 3 + POINTER_LEN);
        assert_eq!(
            encode_parts(&e, 2, Kind::Pointer(p)).disk_len(),
            good.len() as u64
        );
        let d = decode(&Bytes::from(good.clone())).expect("decode");
        assert_eq!(d.pointer, Some(p));
        assert!(d.entry.data.is_empty() && !d.batch);
        assert_eq!((d.entry.index, d.entry.term), (9, 4));
        every_flip_and_cut_refused(&good);
        // Another batch at the same offset is not the one pointed at.
        let other = stamped(3, 100, 8);
        assert!(!p.names(view(&other).as_ref()));
    }

    #[test]
    fn an_older_batch_under_a_rewritten_head_is_refused() {
        // A suffix cut and rewritten: the new record's head reached the
        // disk, its data did not, and the bytes there are the old record's
        // batch (as long, valid, stamped at another time).
        let old = entry(9, 4, b"ctx", &stamped(3, 100, 7));
        let new = entry(9, 5, b"ctx", &stamped(3, 100, 8));
        assert_eq!(old.data.len(), new.data.len());
        let mut torn = encode_as(&new, true);
        let data_at = torn.len() - old.data.len();
        torn[data_at..].copy_from_slice(&old.data);
        assert!(
            decode(&Bytes::from(torn)).is_err(),
            "old batch accepted under the new head"
        );
        // Past the header the frames are bound by the header's batch checksum.
        let mut frames = encode_as(&new, true);
        let other = entry(9, 5, b"ctx", &stamped(3, 100, 8));
        let mut tail = other.data.to_vec();
        tail[256 + 48] ^= 1; // a payload byte, its frame checksum not updated
        frames[data_at..].copy_from_slice(&tail);
        assert!(
            decode(&Bytes::from(frames)).is_err(),
            "a damaged frame accepted"
        );
    }
}
