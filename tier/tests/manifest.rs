//! A partition's manifest: a commit is one PUT, made only while this node
//! may commit, and a failed or refused one leaves the manifest as it was,
//! in memory (its generation counts the commits the store took) and in the
//! store; retention drops the oldest remote segments by age and by the
//! whole log's size, at the bounds exactly.
#![allow(clippy::unwrap_used)]

use corelog_segment::log::Retention;
use corelog_tier::upload::{commit, expire, load_manifest};
use corelog_tier::{Manifest, MemoryStore, RemoteSegment, TierError};
use std::time::Duration;

#[test]
fn a_failed_or_refused_commit_leaves_the_manifest_as_it_was() {
    let store = MemoryStore::new();
    let mut m = Manifest::new(7);
    commit(&store, &mut m, &|| true).unwrap();
    assert_eq!(m.generation, 1);

    store.set_down(true);
    assert!(commit(&store, &mut m, &|| true).is_err());
    assert_eq!(m.generation, 1, "a failed PUT is no commit");
    store.set_down(false);
    assert!(matches!(
        commit(&store, &mut m, &|| false),
        Err(TierError::Deposed { partition: 7, .. })
    ));
    assert_eq!(m.generation, 1, "a deposed leader commits nothing");
    assert_eq!(load_manifest(&store, 7).unwrap().generation, 1);

    commit(&store, &mut m, &|| true).unwrap();
    assert_eq!(m.generation, 2);
    assert_eq!(load_manifest(&store, 7).unwrap(), m);
}

/// Five remote segments of 100 bytes, offsets 0..50 in tens, the newest
/// batch of segment `i` at `1000 * (i + 1)` µs.
fn five(store: &MemoryStore) -> Manifest {
    let mut m = Manifest::new(9);
    m.segments = (0..5u64)
        .map(|i| RemoteSegment {
            base_offset: 10 * i,
            next_offset: 10 * (i + 1),
            bytes: 100,
            index_bytes: 0,
            first_timestamp: 1000 * i + 1,
            last_timestamp: 1000 * (i + 1),
            checksum: 0,
        })
        .collect();
    commit(store, &mut m, &|| true).unwrap();
    m
}

fn bases(m: &Manifest) -> Vec<u64> {
    m.segments.iter().map(|s| s.base_offset).collect()
}

#[test]
fn retention_expires_the_oldest_remote_segments_at_its_bounds() {
    let store = MemoryStore::new();
    let age = |micros| Retention {
        max_age: Some(Duration::from_micros(micros)),
        max_bytes: None,
    };
    let size = |max| Retention {
        max_age: None,
        max_bytes: Some(max),
    };
    // By age: a segment goes once its newest batch is older than the age;
    // segment 1's newest (2000) plus 1000 is not before now (3000).
    let mut m = five(&store);
    let gone = expire(&store, &|| true, &mut m, &age(1000), 50, 0, 3000).unwrap();
    assert_eq!(gone.len(), 1);
    assert_eq!(bases(&m), [10, 20, 30, 40]);
    assert_eq!(load_manifest(&store, 9).unwrap(), m, "committed");

    // By size, all of it remote (the local log starts past it): 500 bytes
    // against 400 drop one segment, not two.
    let mut m = five(&store);
    expire(&store, &|| true, &mut m, &size(400), 50, 0, 0).unwrap();
    assert_eq!(bases(&m), [10, 20, 30, 40]);

    // Segments 3 and 4 are also held locally (200 bytes there): the whole
    // log is 300 remote-only bytes and the local 200. Against 400: one goes.
    let mut m = five(&store);
    expire(&store, &|| true, &mut m, &size(400), 30, 200, 0).unwrap();
    assert_eq!(bases(&m), [10, 20, 30, 40]);
    // Against 150: the three remote-only ones go; the log is still the
    // local 200 bytes, but dropping the copies of the local segments would
    // not shrink it (local retention takes those, then the next pass their
    // copies): they stay, or the next pass would copy them again.
    let mut m = five(&store);
    expire(&store, &|| true, &mut m, &size(150), 30, 200, 0).unwrap();
    assert_eq!(bases(&m), [30, 40]);

    // Nothing past the bounds: nothing committed.
    let mut m = five(&store);
    let generation = m.generation;
    assert!(expire(&store, &|| true, &mut m, &size(500), 50, 0, 0)
        .unwrap()
        .is_empty());
    assert_eq!(m.generation, generation);
}
