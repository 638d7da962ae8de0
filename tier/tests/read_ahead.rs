//! Read-ahead: a poll served from the store has the chunks after it
//! fetched ahead, a whole window of them, on into the next segment, so a
//! consumer reading on finds them in the cache.
#![allow(clippy::unwrap_used)]

use corelog_segment::log::index::{encode_sealed, Seal};
use corelog_segment::log::PollFrom;
use corelog_segment::Limits;
use corelog_tier::manifest::{index_key, log_key};
use corelog_tier::tier::READ_AHEAD;
use corelog_tier::upload::commit;
use corelog_tier::{Manifest, MemoryStore, ObjectStore, Tier, TierConfig};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod common;

const PARTITION: u64 = 4;

#[test]
fn a_remote_poll_fetches_a_window_of_chunks_ahead_into_the_next_segment() {
    // Two segments; the first of three batches, the second of twelve.
    let (log_a, entries_a, seg_a, all_a) = common::segment_at(PARTITION, 0, &[4; 3]);
    let (log_b, entries_b, seg_b, _) = common::segment_at(PARTITION, seg_a.next_offset, &[4; 12]);
    let store = Arc::new(MemoryStore::new());
    let mut manifest = Manifest::new(PARTITION);
    for (log, entries, seg) in [(&log_a, &entries_a, &seg_a), (&log_b, &entries_b, &seg_b)] {
        let seal = Seal {
            data_len: seg.bytes,
            next_offset: seg.next_offset,
        };
        store.put(&log_key(PARTITION, seg), log).unwrap();
        store
            .put(&index_key(PARTITION, seg), &encode_sealed(entries, seal))
            .unwrap();
        manifest.segments.push(seg.clone());
    }
    commit(store.as_ref(), &mut manifest, &|| true).unwrap();
    // A chunk as long as the first batch: the first poll ends exactly at
    // a chunk's end, and reads the next batch's header there (to find where
    // its reply ends), so chunks 0 and 1 are held after it.
    let chunk = u64::from(all_a[1].position);
    let config = TierConfig {
        chunk_bytes: chunk,
        cache_bytes: 1 << 24,
        ..TierConfig::new(store.clone())
    };
    let tier = Tier::start(config, Limits::default()).unwrap();

    let first = tier.poll(PARTITION, PollFrom::First, 1).unwrap().unwrap();
    assert_eq!(first.len(), chunk);
    let chunks_a = seg_a.bytes.div_ceil(chunk);
    let chunks_b = seg_b.bytes.div_ceil(chunk);
    // Chunks 1.. of the first segment, then the second's from its start.
    let window = READ_AHEAD.min(chunks_a - 1 + chunks_b);
    assert!(
        window > chunks_a - 1,
        "the window reaches the second segment"
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while tier.cache_stats().prefetched < window && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(
        tier.cache_stats().prefetched,
        window,
        "chunks fetched ahead"
    );

    // The rest of the first segment, then the second's first batch: every
    // chunk is in the cache; only the second segment's index is fetched.
    let misses = tier.cache_stats().misses;
    let rest = seg_a.bytes - chunk;
    let on = PollFrom::Offset(first.next_offset());
    let reply = tier.poll(PARTITION, on, rest).unwrap().unwrap();
    assert_eq!(
        (reply.first_offset(), reply.len()),
        (first.next_offset(), rest)
    );
    let next = PollFrom::Offset(seg_b.base_offset);
    let reply = tier.poll(PARTITION, next, 1).unwrap().unwrap();
    assert_eq!(reply.first_offset(), seg_b.base_offset);
    assert_eq!(
        tier.cache_stats().misses,
        misses + 1,
        "{:?}",
        tier.cache_stats()
    );
    tier.stop();
}
