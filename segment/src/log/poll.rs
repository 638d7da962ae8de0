//! Polls: whole stored batches, served as byte ranges of mapped segments.

use super::error::{Damage, LogError};
use super::index;
use super::partition::{release_idle_maps, PartitionLog, State};
use super::scan::{header_at, HeaderPeek};
use super::segment::Segment;
use crate::format::layout::BATCH_HEADER_LEN;
use crate::format::{check, BatchRef, Limits, Message};
use crate::io::{Mapping, Storage};
use std::io::{IoSlice, Write};
use std::ops::Range;
use std::path::PathBuf;

/// Where a poll starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PollFrom {
    /// The batch holding this offset (or the first retained batch, when the
    /// offset was deleted by retention).
    Offset(u64),
    /// The first batch whose `base_timestamp` is at or after this (µs).
    Timestamp(u64),
    /// The first retained batch.
    First,
    /// The last visible batch.
    Last,
}

/// A poll's answer: whole stored batches, byte for byte as on disk, as
/// ranges of mapped segment files (no copy). It may span segments. A poll
/// from an offset inside a batch serves that whole batch, and
/// [`PollReply::messages`] starts at the offset. Holding
/// it keeps the segments mapped, even if retention deletes their files.
pub struct PollReply {
    chunks: Vec<Chunk>,
    first_offset: u64,
    /// The first offset the caller wants ([`PollReply::starting_at`]):
    /// [`PollReply::messages`] begins there. Never below `first_offset`.
    start: u64,
    next_offset: u64,
    batches: usize,
    bytes: u64,
}

struct Chunk {
    map: Mapping,
    range: Range<usize>,
    path: PathBuf,
    /// Where `range.start` lies in `path`: the same for a segment's
    /// mapping; a fetched copy's first byte may lie anywhere.
    at: u64,
}

impl Chunk {
    fn bytes(&self) -> &[u8] {
        // The range was checked against the mapping when the reply was made.
        self.map.slice(self.range.clone()).unwrap_or(&[])
    }

    fn bytes_walk(&self) -> BatchWalk<'_> {
        BatchWalk { rest: self.bytes() }
    }
}

impl std::fmt::Debug for PollReply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PollReply")
            .field("first_offset", &self.first_offset)
            .field("start", &self.start)
            .field("next_offset", &self.next_offset)
            .field("batches", &self.batches)
            .field("bytes", &self.bytes)
            .field(
                "segments",
                &self
                    .chunks
                    .iter()
                    .map(|c| c.path.clone())
                    .collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl PollReply {
    fn empty(next_offset: u64) -> PollReply {
        PollReply {
            chunks: Vec::new(),
            first_offset: next_offset,
            start: next_offset,
            next_offset,
            batches: 0,
            bytes: 0,
        }
    }

    /// A reply over fetched bytes held in memory (a copy, such as an object
    /// store's chunk) rather than a mapped segment: `bytes` holds whole
    /// batches, the first at byte `at` of `origin`. Every batch is verified
    /// here (layout, both checksums, offsets continuing one another); damage
    /// is an error naming `origin` and the byte position in it, and nothing
    /// of it is served.
    pub fn from_fetched(
        bytes: bytes::Bytes,
        origin: PathBuf,
        at: u64,
        limits: &Limits,
    ) -> Result<PollReply, LogError> {
        let len = bytes.len();
        let Some(first) = header_at(&bytes, 0) else {
            return Err(LogError::Corrupt {
                path: origin,
                position: at,
                damage: Damage::TornHeader {
                    available: len as u64,
                },
            });
        };
        let mut reply = PollReply::empty(first.base_offset);
        reply.chunks.push(Chunk {
            map: Mapping::from_bytes(bytes),
            range: 0..len,
            path: origin,
            at,
        });
        // Every batch checked, each continuing the one before from the
        // first's offset, before any is walked.
        reply.verify(limits)?;
        for b in reply.chunks[0].bytes_walk() {
            reply.batches += 1;
            reply.next_offset = b.next_offset();
        }
        reply.bytes = len as u64;
        Ok(reply)
    }

    /// Whether no batch matched.
    pub fn is_empty(&self) -> bool {
        self.batches == 0
    }

    /// Bytes in the reply.
    pub fn len(&self) -> u64 {
        self.bytes
    }

    /// Batches in the reply.
    pub fn batch_count(&self) -> usize {
        self.batches
    }

    /// `base_offset` of the first batch (the next offset when empty).
    pub fn first_offset(&self) -> u64 {
        self.first_offset
    }

    /// The first offset [`PollReply::messages`] yields: `first_offset`,
    /// or later when trimmed by [`PollReply::starting_at`].
    pub fn start_offset(&self) -> u64 {
        self.start
    }

    /// The same reply, its messages starting at `offset`: a poll from an
    /// offset inside a batch returns the whole batch (the stored bytes,
    /// which [`PollReply::slices`] and [`PollReply::batches`] still give),
    /// and this marks where the caller's messages begin, without copying.
    /// An `offset` below the reply's first is the first; one past its end
    /// leaves no message.
    pub fn starting_at(mut self, offset: u64) -> PollReply {
        self.start = offset.clamp(self.first_offset, self.next_offset);
        self
    }

    /// The messages from [`PollReply::start_offset`] on, in order, as views
    /// over the mapped bytes.
    pub fn messages(&self) -> impl Iterator<Item = Message<'_>> {
        let start = self.start;
        self.batches()
            .skip_while(move |b| b.next_offset() <= start)
            .flat_map(|b| b.messages())
            .skip_while(move |m| m.offset() < start)
    }

    /// The offset after the last message of the reply: where the next poll
    /// continues. When empty, the log's visible end.
    pub fn next_offset(&self) -> u64 {
        self.next_offset
    }

    /// The reply's bytes, one slice per segment it spans.
    pub fn slices(&self) -> impl Iterator<Item = &[u8]> {
        self.chunks.iter().map(|c| c.bytes())
    }

    /// Where slice `chunk` (of [`PollReply::slices`]) lies in its segment
    /// file: the file's descriptor, open while the reply lives, and the
    /// offset of the slice's first byte. `None` for a mapping of no file
    /// (the simulator's) or past the last slice. For a zero-copy send
    /// (`sendfile`) of exactly the bytes the slice holds.
    pub fn slice_file(&self, chunk: usize) -> Option<(std::os::fd::BorrowedFd<'_>, u64)> {
        let c = self.chunks.get(chunk)?;
        Some((c.map.fd()?, c.range.start as u64))
    }

    /// The slices as `IoSlice`s, for a vectored socket write.
    pub fn io_slices(&self) -> Vec<IoSlice<'_>> {
        self.slices().map(IoSlice::new).collect()
    }

    /// The batches, in order, as views over the mapped bytes.
    pub fn batches(&self) -> impl Iterator<Item = BatchRef<'_>> {
        self.chunks
            .iter()
            .flat_map(|c| BatchWalk { rest: c.bytes() })
    }

    /// Verifies every batch (layout, both checksums, offsets continuous);
    /// on failure names the segment file and byte position of the first
    /// bad batch.
    pub fn verify(&self, limits: &Limits) -> Result<(), LogError> {
        let mut expected = self.first_offset;
        for c in &self.chunks {
            let bytes = c.bytes();
            let mut pos = 0usize;
            while pos < bytes.len() {
                let at = c.at + pos as u64;
                let corrupt = |damage| LogError::Corrupt {
                    path: c.path.clone(),
                    position: at,
                    damage,
                };
                let rest = &bytes[pos..];
                let len = crate::format::declared_length(rest, limits)
                    .map_err(|e| corrupt(Damage::Batch(e)))?;
                let Some(one) = rest.get(..len as usize) else {
                    return Err(corrupt(Damage::TornBatch {
                        declared: len,
                        available: rest.len() as u64,
                    }));
                };
                let view = check(one, limits).map_err(|e| corrupt(Damage::Batch(e)))?;
                if view.base_offset() != expected {
                    return Err(corrupt(Damage::OffsetGap {
                        expected,
                        found: view.base_offset(),
                    }));
                }
                expected = view.next_offset();
                pos += len as usize;
            }
        }
        Ok(())
    }

    /// Writes the reply's bytes to `w`.
    pub fn write_to(&self, w: &mut impl Write) -> std::io::Result<()> {
        for s in self.slices() {
            w.write_all(s)?;
        }
        Ok(())
    }
}

/// Walks batches of a range already checked by the poll.
struct BatchWalk<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for BatchWalk<'a> {
    type Item = BatchRef<'a>;

    fn next(&mut self) -> Option<BatchRef<'a>> {
        let peek = header_at(self.rest, 0)?;
        let len = usize::try_from(peek.batch_length).ok()?;
        if len < BATCH_HEADER_LEN {
            return None;
        }
        let one = self.rest.get(..len)?;
        self.rest = &self.rest[len..];
        Some(BatchRef::new_checked(one))
    }
}

impl<S: Storage> PartitionLog<S> {
    /// Serves whole batches from `from`, up to `max_bytes` (at least one
    /// batch), without copying: see [`PollReply`]. Only batches below the
    /// visible end are served.
    pub fn poll(&self, from: PollFrom, max_bytes: u64) -> Result<PollReply, LogError> {
        let reply = self.poll_mapped(from, max_bytes).map(|r| match from {
            // The whole batch holding the offset is served; its messages
            // start at the offset asked for.
            PollFrom::Offset(o) => r.starting_at(o),
            _ => r,
        });
        // The reply holds the mappings it reads; the partition keeps the
        // few most recently read.
        if let Ok(mut st) = self.inner.st.try_borrow_mut() {
            release_idle_maps(&mut st.segments);
        }
        reply
    }

    fn poll_mapped(&self, from: PollFrom, max_bytes: u64) -> Result<PollReply, LogError> {
        let st = self.inner.st.borrow();
        let visible_next = self.visible_next_offset(&st);
        let start = match from {
            PollFrom::Offset(o) => locate_offset(&st, o)?,
            PollFrom::Timestamp(t) => locate_timestamp(&st, t)?,
            PollFrom::First => st
                .segments
                .iter()
                .position(|s| s.visible.len > 0)
                .map(|i| (i, 0, Some(st.segments[i].base_offset))),
            PollFrom::Last => match st
                .segments
                .iter()
                .rposition(|s| s.visible.last_batch.is_some() && s.visible.len > 0)
            {
                Some(i) => last_batch(&st.segments[i])?.map(|(p, o)| (i, p, Some(o))),
                None => None,
            },
        };
        let Some((first_seg, first_pos, first_expected)) = start else {
            return Ok(PollReply::empty(visible_next));
        };
        let mut reply = PollReply::empty(visible_next);
        // Every batch must continue the one before (the first, the offset
        // the walk expects there): a header that does not is damage, never
        // a reason to skip offsets.
        let mut expected = first_expected;
        'segments: for (i, seg) in st.segments.iter().enumerate().skip(first_seg) {
            let mut pos = if i == first_seg { first_pos } else { 0 };
            let chunk_start = pos;
            let mut full = false;
            while pos < seg.visible.len {
                let peek = match peek_at(seg, pos, expected) {
                    Ok(p) => p,
                    // Serve what came before the damage; the next poll
                    // starts at it and reports it.
                    Err(_) if reply.batches > 0 => {
                        full = true;
                        break;
                    }
                    Err(e) => return Err(e),
                };
                if reply.batches > 0 && reply.bytes + peek.batch_length > max_bytes {
                    full = true;
                    break;
                }
                if reply.batches == 0 {
                    reply.first_offset = peek.base_offset;
                    reply.start = peek.base_offset;
                }
                reply.bytes += peek.batch_length;
                reply.batches += 1;
                reply.next_offset = peek.next_offset();
                expected = Some(peek.next_offset());
                pos += peek.batch_length;
            }
            if pos > chunk_start {
                reply.chunks.push(Chunk {
                    // Mapped: the walk above peeked at its batches.
                    map: seg
                        .mapping()
                        .map_err(|e| LogError::io("map segment", &seg.log_path, e))?
                        .clone(),
                    range: chunk_start as usize..pos as usize,
                    at: chunk_start,
                    path: seg.log_path.clone(),
                });
            }
            if full {
                break 'segments;
            }
        }
        Ok(reply)
    }

    /// Polls for a consumer: from the offset after its stored offset, or
    /// from the first batch when it has none.
    pub async fn poll_next(&self, consumer: u64, max_bytes: u64) -> Result<PollReply, LogError> {
        let from = match self.load_offset(consumer).await? {
            Some(o) => PollFrom::Offset(o.saturating_add(1)),
            None => PollFrom::First,
        };
        self.poll(from, max_bytes)
    }
}

/// The header of the batch at `pos`, checked to lie inside the visible
/// bytes.
fn peek<F>(seg: &Segment<F>, pos: u64) -> Result<HeaderPeek, LogError> {
    let corrupt = |damage| LogError::Corrupt {
        path: seg.log_path.clone(),
        position: pos,
        damage,
    };
    let visible = usize::try_from(seg.visible.len).unwrap_or(usize::MAX);
    let map = seg
        .mapping()
        .map_err(|e| LogError::io("map segment", &seg.log_path, e))?;
    let data = map.slice(0..visible).unwrap_or(&[]);
    let peek = header_at(data, pos).ok_or_else(|| {
        corrupt(Damage::TornHeader {
            available: seg.visible.len.saturating_sub(pos),
        })
    })?;
    if peek.batch_length < BATCH_HEADER_LEN as u64
        || pos.saturating_add(peek.batch_length) > seg.visible.len
    {
        return Err(corrupt(Damage::TornBatch {
            declared: peek.batch_length,
            available: seg.visible.len.saturating_sub(pos),
        }));
    }
    Ok(peek)
}

/// The header at `pos`, which must hold the batch starting at `expected`
/// (when known).
fn peek_at<F>(seg: &Segment<F>, pos: u64, expected: Option<u64>) -> Result<HeaderPeek, LogError> {
    let p = peek(seg, pos)?;
    match expected {
        Some(e) if e != p.base_offset => Err(LogError::Corrupt {
            path: seg.log_path.clone(),
            position: pos,
            damage: Damage::OffsetGap {
                expected: e,
                found: p.base_offset,
            },
        }),
        _ => Ok(p),
    }
}

/// The position and base offset of the segment's last visible batch, once
/// its header says it ends where the visible bytes and offsets do: no walk
/// leads to it, so nothing else checks that it continues the log.
fn last_batch<F>(seg: &Segment<F>) -> Result<Option<(u64, u64)>, LogError> {
    let Some(pos) = seg.visible.last_batch else {
        return Ok(None);
    };
    let p = peek(seg, pos)?;
    let corrupt = |damage| LogError::Corrupt {
        path: seg.log_path.clone(),
        position: pos,
        damage,
    };
    if pos + p.batch_length != seg.visible.len {
        return Err(corrupt(Damage::TornBatch {
            declared: p.batch_length,
            available: seg.visible.len - pos,
        }));
    }
    if p.next_offset() != seg.visible.next_offset {
        let count = p.next_offset().saturating_sub(p.base_offset);
        return Err(corrupt(Damage::OffsetGap {
            expected: seg.visible.next_offset.saturating_sub(count),
            found: p.base_offset,
        }));
    }
    Ok(Some((pos, p.base_offset)))
}

/// Where a walk of batch headers starts, and the offset of the batch
/// there: the index entry's, once the batch there is the one the entry
/// names (an index is a hint; one that disagrees with the log is not
/// followed), else the segment's start.
fn start_at<F>(seg: &Segment<F>, entry: Option<&index::IndexEntry>) -> (u64, u64) {
    let Some(e) = entry else {
        return (0, seg.base_offset);
    };
    let pos = u64::from(e.position);
    let offset = seg.base_offset + u64::from(e.rel_offset);
    let names_its_batch = peek(seg, pos)
        .map(|p| p.base_offset == offset && p.base_timestamp == e.timestamp)
        .unwrap_or(false);
    if names_its_batch {
        return (pos, offset);
    }
    tracing::warn!(
        "{}: index entry for offset {offset} at byte {pos} does not name its batch; walking from the start",
        seg.log_path.display(),
    );
    (0, seg.base_offset)
}

/// A located batch: segment index, byte position, its base offset.
type Located = Option<(usize, u64, Option<u64>)>;

fn locate_offset<F>(st: &State<F>, o: u64) -> Result<Located, LogError> {
    let from = st
        .segments
        .partition_point(|s| s.base_offset <= o)
        .saturating_sub(1);
    for (i, seg) in st.segments.iter().enumerate().skip(from) {
        if seg.visible.len == 0 || o >= seg.visible.next_offset {
            continue;
        }
        let rel = o.saturating_sub(seg.base_offset);
        let (mut pos, mut expected) = start_at(seg, index::floor_offset(seg.visible_index(), rel));
        while pos < seg.visible.len {
            let p = peek_at(seg, pos, Some(expected))?;
            if o < p.next_offset() {
                return Ok(Some((i, pos, Some(expected))));
            }
            expected = p.next_offset();
            pos += p.batch_length;
        }
    }
    Ok(None)
}

fn locate_timestamp<F>(st: &State<F>, t: u64) -> Result<Located, LogError> {
    for (i, seg) in st.segments.iter().enumerate() {
        if seg.visible.len == 0 || seg.visible.last_timestamp < t {
            continue;
        }
        let (mut pos, mut expected) = start_at(seg, index::floor_timestamp(seg.visible_index(), t));
        while pos < seg.visible.len {
            let p = peek_at(seg, pos, Some(expected))?;
            if p.base_timestamp >= t {
                return Ok(Some((i, pos, Some(expected))));
            }
            expected = p.next_offset();
            pos += p.batch_length;
        }
    }
    Ok(None)
}
