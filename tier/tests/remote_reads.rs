//! Remote reads over objects damaged at random: whatever the store's log
//! and index objects hold, a poll never panics, never loops, and never
//! serves a byte the segment did not hold at that place. What it serves
//! verifies, belongs to the partition, and starts where asked.

use corelog_segment::log::index::{encode_all, encode_sealed, IndexEntry, Seal};
use corelog_segment::log::PollFrom;
use corelog_segment::watchdog::Watchdog;
use corelog_segment::Limits;
use corelog_tier::buffers::ChunkBuffers;
use corelog_tier::cache::ChunkCache;
use corelog_tier::manifest::{index_key, log_key};
use corelog_tier::read::{IndexCache, Reader};
use corelog_tier::{Manifest, MemoryStore, ObjectStore, RemoteSegment};
use proptest::prelude::*;

mod common;
use std::time::Duration;

const PARTITION: u64 = 3;
const BASE: u64 = 1_000;

/// A segment of [`PARTITION`] from [`BASE`] (see [`common::segment_at`]).
fn segment(sizes: &[u8]) -> (Vec<u8>, Vec<IndexEntry>, RemoteSegment, Vec<IndexEntry>) {
    common::segment_at(PARTITION, BASE, sizes)
}

/// A segment's log and index objects in a store in memory, its manifest,
/// and what a [`Reader`] over them needs.
struct Stored {
    store: MemoryStore,
    manifest: Manifest,
    cache: ChunkCache,
    indexes: IndexCache,
    buffers: ChunkBuffers,
    chunk: u64,
}

impl Stored {
    fn new(seg: &RemoteSegment, log: &[u8], index: &[u8], chunk: u64) -> Stored {
        let store = MemoryStore::new();
        store.put(&log_key(PARTITION, seg), log).expect("put log");
        store
            .put(&index_key(PARTITION, seg), index)
            .expect("put index");
        let mut manifest = Manifest::new(PARTITION);
        manifest.segments.push(seg.clone());
        Stored {
            store,
            manifest,
            cache: ChunkCache::new(1 << 20),
            indexes: IndexCache::default(),
            buffers: ChunkBuffers::new(chunk as usize),
            chunk,
        }
    }

    fn reader(&self) -> Reader<'_> {
        Reader {
            store: &self.store,
            cache: &self.cache,
            indexes: &self.indexes,
            chunk_bytes: self.chunk,
            buffers: &self.buffers,
            limits: Limits::default(),
        }
    }
}

/// A poll that walks forever must fail the test, not hang it (and CI with
/// it): a watchdog is armed around each poll.
const WALK_LIMIT: Duration = Duration::from_secs(20);

/// A damage to the objects.
#[derive(Debug, Clone)]
enum Damage {
    /// Flip the bits of the log's byte at this fraction of its length.
    LogByte(f64, u8),
    /// The same in the index object.
    IndexByte(f64, u8),
    /// Replace index entry `i` by one naming this position and offset.
    Entry(usize, u32, u32),
    /// Point index entry `i` at batch `k` (its position and offset), its
    /// timestamp left as it was.
    Retarget(usize, usize),
    /// Cut the log object to this fraction of its length.
    Truncate(f64),
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        (0.0..1.0f64, 1..=255u8).prop_map(|(f, x)| Damage::LogByte(f, x)),
        (0.0..1.0f64, 1..=255u8).prop_map(|(f, x)| Damage::IndexByte(f, x)),
        (0..8usize, 0..20_000u32, 0..200u32).prop_map(|(i, p, o)| Damage::Entry(i, p, o)),
        (0..8usize, 0..24usize).prop_map(|(i, k)| Damage::Retarget(i, k)),
        (0.0..1.0f64).prop_map(Damage::Truncate),
    ]
}

fn from() -> impl Strategy<Value = PollFrom> {
    prop_oneof![
        (BASE - 5..BASE + 200).prop_map(PollFrom::Offset),
        (9_990..10_300u64).prop_map(PollFrom::Timestamp),
        Just(PollFrom::First),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn a_damaged_remote_segment_is_never_served_wrong(
        sizes in prop::collection::vec(1..6u8, 4..24),
        damages in prop::collection::vec(damage(), 0..4),
        sealed in any::<bool>(),
        polls in prop::collection::vec((from(), 1..20_000u64), 1..6),
        chunk in prop::sample::select(vec![64u64, 256, 4096]),
    ) {
        let (original, mut entries, seg, batches) = segment(&sizes);
        let mut log = original.clone();
        let mut index_bytes = None;
        for d in &damages {
            match *d {
                Damage::Entry(i, position, rel) if i < entries.len() => {
                    entries[i] = IndexEntry { rel_offset: rel, position, ..entries[i] };
                }
                Damage::Retarget(i, k) if i < entries.len() && k < batches.len() => {
                    entries[i] = IndexEntry { timestamp: entries[i].timestamp, ..batches[k] };
                }
                _ => {}
            }
        }
        let encode = |e: &[IndexEntry]| if sealed {
            encode_sealed(e, Seal { data_len: seg.bytes, next_offset: seg.next_offset })
        } else {
            encode_all(e)
        };
        for d in &damages {
            match *d {
                Damage::LogByte(f, x) if !log.is_empty() => {
                    let at = ((log.len() as f64 * f) as usize).min(log.len() - 1);
                    log[at] ^= x;
                }
                Damage::IndexByte(f, x) => {
                    let bytes = index_bytes.get_or_insert_with(|| encode(&entries));
                    let at = ((bytes.len() as f64 * f) as usize).min(bytes.len() - 1);
                    bytes[at] ^= x;
                }
                Damage::Truncate(f) => log.truncate((log.len() as f64 * f) as usize),
                _ => {}
            }
        }
        let index_bytes = index_bytes.unwrap_or_else(|| encode(&entries));
        let stored = Stored::new(&seg, &log, &index_bytes, chunk);
        let (manifest, reader) = (&stored.manifest, stored.reader());
        // The index is a hint: whatever it holds, an intact log object
        // serves every poll whose start it holds.
        let log_intact = log == original;
        let last_timestamp = batches.last().map_or(0, |b| b.timestamp);
        for (from, max) in polls {
            let held = match from {
                PollFrom::Offset(o) => (BASE..manifest.segments[0].next_offset).contains(&o),
                PollFrom::Timestamp(t) => t <= last_timestamp,
                _ => true,
            };
            let watchdog = Watchdog::arm(format!(
                "a poll {from:?} max {max} over sizes {sizes:?}, damages {damages:?}, sealed {sealed}, chunk {chunk}"
            ), WALK_LIMIT);
            let got = reader.poll(manifest, from, max);
            drop(watchdog);
            if log_intact && held {
                prop_assert!(
                    matches!(got, Ok(Some(_))),
                    "{:?} from an intact log: {:?}", from, got.map(|r| r.map(|r| r.0))
                );
            }
            let Ok(Some((reply, base, end))) = got else {
                continue;
            };
            prop_assert_eq!(base, BASE);
            reply.verify(&Limits::default()).map_err(|e| TestCaseError::fail(e.to_string()))?;
            // Every byte served is the segment's own, at its place.
            let served: Vec<u8> = reply.slices().flatten().copied().collect();
            let start = end as usize - reply.len() as usize;
            prop_assert!(end as usize <= original.len());
            prop_assert_eq!(&served[..], &original[start..end as usize]);
            for b in reply.batches() {
                prop_assert_eq!(b.partition_id(), PARTITION);
            }
            // Whole batches up to `max` bytes (at least one), as many as
            // fit: it ends at the segment's end or where the next batch
            // would pass `max`.
            prop_assert!(reply.batch_count() == 1 || reply.len() <= max);
            let next = batches.iter().find(|b| u64::from(b.position) == end);
            if let Some(next) = next {
                let next_len = batches
                    .iter()
                    .find(|b| b.position > next.position)
                    .map_or(original.len() as u64, |b| u64::from(b.position))
                    - u64::from(next.position);
                prop_assert!(reply.len() + next_len > max, "stopped short of {} bytes", max);
            } else {
                prop_assert_eq!(end, original.len() as u64);
            }
            // And it starts where asked: the batch holding the offset, or
            // the first at or after the timestamp.
            let first = reply.batches().next().expect("a batch");
            match from {
                PollFrom::Offset(o) if o >= BASE => {
                    prop_assert!(first.base_offset() <= o && o < first.next_offset());
                    prop_assert_eq!(reply.messages().next().map(|m| m.offset()), Some(o));
                }
                PollFrom::Timestamp(t) => {
                    let want = batches.iter().find(|b| b.timestamp >= t).map(|b| BASE + u64::from(b.rel_offset));
                    prop_assert_eq!(Some(first.base_offset()), want, "the first batch at or after {}", t);
                }
                _ => prop_assert_eq!(first.base_offset(), BASE),
            }
        }
    }
}

/// The index is what keeps a poll near a segment's end from reading the
/// segment from its start: with it, the poll fetches the index object and
/// the chunks from the entry before its offset on.
#[test]
fn a_poll_near_the_end_starts_from_the_index_entry_before_it() {
    let sizes = [5u8; 24];
    let (log, entries, seg, batches) = segment(&sizes);
    let index = encode_sealed(
        &entries,
        Seal {
            data_len: seg.bytes,
            next_offset: seg.next_offset,
        },
    );
    let chunk = 64u64;
    let stored = Stored::new(&seg, &log, &index, chunk);
    let (store, cache, manifest, reader) = (
        &stored.store,
        &stored.cache,
        &stored.manifest,
        stored.reader(),
    );
    let last = batches[23];
    let hint = entries.last().expect("entries");
    assert_eq!(hint.rel_offset, batches[21].rel_offset);
    let (_, gets_before) = store.requests();
    let from = PollFrom::Offset(BASE + u64::from(last.rel_offset) + 2);
    let (reply, _, _) = reader.poll(manifest, from, 1).expect("poll").expect("held");
    assert_eq!(reply.first_offset(), BASE + u64::from(last.rel_offset));
    let (_, gets) = store.requests();
    // The index, then the chunks from the entry's batch to the end.
    let chunks = seg.bytes.div_ceil(chunk) - u64::from(hint.position) / chunk;
    assert!(
        gets - gets_before <= 1 + chunks,
        "{} GETs, where the index and {chunks} chunks would do (the segment is {} chunks)",
        gets - gets_before,
        seg.bytes.div_ceil(chunk)
    );
    // By timestamp the same, from a cache emptied of the log's chunks; the
    // index decoded for the first poll is held, so only chunks are fetched.
    let by_timestamp = || {
        cache.forget(PARTITION, BASE);
        let (_, gets_before) = store.requests();
        let from = PollFrom::Timestamp(last.timestamp);
        let (reply, _, _) = reader.poll(manifest, from, 1).expect("poll").expect("held");
        assert_eq!(reply.first_offset(), BASE + u64::from(last.rel_offset));
        store.requests().1 - gets_before
    };
    let gets = by_timestamp();
    assert!(
        gets <= chunks,
        "{gets} GETs by timestamp, where {chunks} chunks would do (the index is held)"
    );
    // Forgetting another partition keeps this one's index; forgetting
    // this one (deleted) drops it, and the next poll fetches it again.
    stored.indexes.forget_partition(PARTITION + 1);
    assert_eq!(by_timestamp(), gets);
    stored.indexes.forget_partition(PARTITION);
    assert_eq!(by_timestamp(), gets + 1);
}

/// A batch whose length says less than a batch header is named where it
/// lies, not walked past.
#[test]
fn a_batch_length_shorter_than_a_header_is_named_where_it_lies() {
    let (mut log, entries, seg, batches) = segment(&[2u8; 8]);
    let at = batches[2].position as usize;
    log[at + 32..at + 40].copy_from_slice(&100u64.to_le_bytes());
    let stored = Stored::new(&seg, &log, &encode_all(&entries), 256);
    let (manifest, reader) = (&stored.manifest, stored.reader());
    for from in [PollFrom::First, PollFrom::Offset(BASE + 5)] {
        let err = reader
            .poll(manifest, from, 1 << 20)
            .expect_err("a damaged batch");
        let said = err.to_string();
        assert!(
            said.contains(&format!("damaged at byte {at}: a batch of 100 bytes")),
            "{from:?}: {said}"
        );
    }
}

/// A log object shorter than its manifest says is named at the byte where
/// it ends.
#[test]
fn a_log_object_cut_short_is_named_where_it_ends() {
    let (log, entries, seg, batches) = segment(&[2u8; 8]);
    let cut = batches[5].position as usize + 300;
    let stored = Stored::new(&seg, &log[..cut], &encode_all(&entries), 256);
    let (manifest, reader) = (&stored.manifest, stored.reader());
    let err = reader
        .poll(manifest, PollFrom::First, 1 << 20)
        .expect_err("cut short");
    let said = err.to_string();
    assert!(
        said.contains(&format!("damaged at byte {cut}: the object ends there")),
        "{said}"
    );
}

/// A bound that whole batches fill exactly takes every one of them.
#[test]
fn whole_batches_that_fill_max_bytes_exactly_are_all_served() {
    let (log, entries, seg, batches) = segment(&[3u8; 8]);
    let stored = Stored::new(&seg, &log, &encode_all(&entries), 256);
    let (manifest, reader) = (&stored.manifest, stored.reader());
    for (k, b) in batches.iter().enumerate().skip(1) {
        let max = u64::from(b.position);
        let (reply, _, end) = reader
            .poll(manifest, PollFrom::First, max)
            .expect("poll")
            .expect("held");
        assert_eq!((reply.batch_count(), end), (k, max), "max {max}");
    }
}
