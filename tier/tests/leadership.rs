//! Manifests in a cluster: only a partition's leader writes, under its
//! term; a deposed leader that commits late writes a manifest the newer
//! term's hides, so no segment is held twice and nothing its successor
//! committed is lost; a follower trims only below its current term's.
#![allow(clippy::unwrap_used)]

use corelog_segment::log::{Retention, SealedSegment};
use corelog_segment::Limits;
use corelog_tier::upload::load_manifest;
use corelog_tier::{Leadership, Manifest, MemoryStore, ObjectStore, Tier, TierConfig};
use std::path::Path;
use std::sync::{Arc, Mutex};

/// A node's view of leadership, set by the test.
#[derive(Debug, Default)]
struct Lead(Mutex<(Option<u64>, Option<u64>)>);

impl Lead {
    fn set(&self, leading: Option<u64>, term: u64) {
        *self.0.lock().unwrap() = (leading, Some(term));
    }
}

impl Leadership for Lead {
    fn leading(&self, _: u64) -> Option<u64> {
        self.0.lock().unwrap().0
    }
    fn term(&self, _: u64) -> Option<u64> {
        self.0.lock().unwrap().1
    }
}

/// A tier over `store` keeping `keep` bytes locally, in a cluster when
/// `leadership` is given.
fn tier(store: &Arc<MemoryStore>, leadership: Option<Arc<dyn Leadership>>, keep: u64) -> Arc<Tier> {
    let config = TierConfig {
        leadership,
        local_retention_bytes: keep,
        ..TierConfig::new(store.clone())
    };
    Tier::start(config, Limits::default()).unwrap()
}

fn node(store: &Arc<MemoryStore>) -> (Arc<Tier>, Arc<Lead>) {
    let lead = Arc::new(Lead::default());
    (tier(store, Some(lead.clone()), 0), lead)
}

/// Sealed segments of ten offsets each, as files (their bytes are not read
/// back here).
fn segments(dir: &Path, n: u64) -> Vec<SealedSegment> {
    (0..n)
        .map(|i| {
            let log_path = dir.join(format!("{i}.log"));
            let index_path = dir.join(format!("{i}.index"));
            std::fs::write(&log_path, vec![i as u8; 100]).unwrap();
            std::fs::write(&index_path, b"").unwrap();
            SealedSegment {
                base_offset: i * 10,
                next_offset: i * 10 + 10,
                len: 100,
                first_timestamp: i,
                last_timestamp: i,
                log_path,
                index_path,
            }
        })
        .collect()
}

fn pass(t: &Tier, segs: &[SealedSegment]) -> corelog_tier::OffloadPass {
    // The log holds more locally than its limit (0): a follower looks.
    t.offload(1, segs, &Retention::default(), (0, 1000), 0)
        .unwrap()
}

fn held(store: &MemoryStore) -> Vec<u64> {
    let m = load_manifest(store, 1).unwrap();
    m.segments.iter().map(|s| s.base_offset).collect()
}

#[test]
fn a_deposed_leaders_late_commit_is_hidden_and_no_segment_is_held_twice() {
    let tmp = tempfile::tempdir().unwrap();
    let segs = segments(tmp.path(), 4);
    let store = Arc::new(MemoryStore::new());
    let (a, lead_a) = node(&store);
    let (b, lead_b) = node(&store);
    lead_a.set(Some(1), 1);
    lead_b.set(None, 1);
    assert_eq!(pass(&a, &segs[..2]).uploaded, 2);
    // The follower uploads nothing, and may trim below its term's manifest.
    let p = pass(&b, &segs[..2]);
    assert_eq!((p.uploaded, p.offloaded_through), (0, 20));
    // Leadership moves to b (term 2) while a still believes it leads term 1.
    lead_b.set(Some(2), 2);
    assert_eq!(pass(&b, &segs[..3]).uploaded, 1);
    assert_eq!(held(&store), vec![0, 10, 20]);
    // A node that believes it leads term 1 and has not seen term 2's
    // manifest yet finds it, and stands back.
    let (d, lead_d) = node(&store);
    lead_d.set(Some(1), 1);
    assert_eq!(pass(&d, &segs).uploaded, 0);
    d.stop();
    // a's late commits (of term 1) hide nothing of term 2's.
    let late = pass(&a, &segs);
    assert_eq!(late.uploaded, 2, "{late:?}");
    assert_eq!(held(&store), vec![0, 10, 20]);
    // a learns the new term: a follower of term 2, trimming below its
    // manifest, never below its own late commit.
    lead_a.set(None, 2);
    assert_eq!(pass(&a, &segs).offloaded_through, 30);
    assert_eq!(pass(&b, &segs).uploaded, 1);
    assert_eq!(held(&store), vec![0, 10, 20, 30]);
    // A term with no commit yet: a follower trims nothing.
    lead_a.set(None, 3);
    assert_eq!(pass(&a, &segs).offloaded_through, 0);
    // Each segment's objects once; a's late term-1 manifest is hidden, and
    // the leader's periodic cleaning removes it.
    for _ in 0..corelog_tier::pass::CLEAN_EVERY_PASSES {
        pass(&b, &segs);
    }
    let keys = store.keys();
    let manifests: Vec<&String> = keys.iter().filter(|k| k.contains("manifest-")).collect();
    assert_eq!(manifests.len(), 1, "{keys:?}");
    assert!(
        manifests[0].ends_with("manifest-00000000000000000002.json"),
        "{keys:?}"
    );
    assert_eq!(keys.len(), 1 + 2 * 4, "{keys:?}");
    a.stop();
    b.stop();
}

#[test]
fn a_node_that_is_no_longer_confirmed_commits_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let segs = segments(tmp.path(), 2);
    let store = Arc::new(MemoryStore::new());
    let (a, lead_a) = node(&store);
    lead_a.set(Some(1), 1);
    assert_eq!(pass(&a, &segs[..1]).uploaded, 1);
    // It no longer leads: no upload, no commit, its manifest stays.
    lead_a.set(None, 1);
    assert_eq!(pass(&a, &segs).uploaded, 0);
    assert_eq!(held(&store), vec![0]);
    // Unknown term (the cluster not started): nothing at all.
    let (c, _) = node(&store);
    assert_eq!(pass(&c, &segs), corelog_tier::OffloadPass::default());
    a.stop();
    c.stop();
}

/// Leadership that answers "this node leads term 1" to as many questions
/// as it holds, then "it does not": a leader deposed in the middle of its
/// pass.
#[derive(Debug)]
struct Ending(std::sync::atomic::AtomicU64);

impl Leadership for Ending {
    fn leading(&self, _: u64) -> Option<u64> {
        let left = self.0.load(std::sync::atomic::Ordering::Relaxed);
        self.0
            .store(left.saturating_sub(1), std::sync::atomic::Ordering::Relaxed);
        (left > 0).then_some(1)
    }
    fn term(&self, _: u64) -> Option<u64> {
        Some(1)
    }
}

/// A leader deposed after its pass began commits nothing: each commit asks
/// again whether this node leads (the first question starts the pass).
#[test]
fn a_leader_deposed_during_its_pass_commits_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let segs = segments(tmp.path(), 2);
    let store = Arc::new(MemoryStore::new());
    let t = tier(&store, Some(Arc::new(Ending(1.into()))), 0);
    let err = t
        .offload(1, &segs, &Retention::default(), (0, 1000), 0)
        .unwrap_err();
    assert!(
        matches!(err, corelog_tier::TierError::Deposed { .. }),
        "{err}"
    );
    assert!(held(&store).is_empty(), "a deposed leader committed");
    t.stop();
}

/// Leadership that replicates commits, as a cluster's does: what a leader
/// hands over is the group's log, and a follower reads the highest end
/// applied from it.
#[derive(Debug, Default)]
struct Replicating {
    lead: Lead,
    /// The ends handed to the group, in order (shared by every node).
    log: Arc<Mutex<Vec<u64>>>,
}

impl Leadership for Replicating {
    fn leading(&self, p: u64) -> Option<u64> {
        self.lead.leading(p)
    }
    fn term(&self, p: u64) -> Option<u64> {
        self.lead.term(p)
    }
    fn committed(&self, _: u64, end: u64) {
        self.log.lock().unwrap().push(end);
    }
    fn offloaded(&self, _: u64) -> Option<u64> {
        Some(self.log.lock().unwrap().iter().copied().max().unwrap_or(0))
    }
}

/// A leader hands each new end of its manifest to the group once (again
/// only when it grew, or in a new term), and a follower trims below the
/// end the group replicated without reading the store: here its store
/// holds no manifest at all, and the manifest it held for reads, now
/// stale, is dropped.
#[test]
fn with_replicated_commits_a_follower_trims_by_its_group_not_the_store() {
    let tmp = tempfile::tempdir().unwrap();
    let segs = segments(tmp.path(), 4);
    let log = Arc::new(Mutex::new(Vec::new()));
    let start = |store: &Arc<MemoryStore>| {
        let lead = Arc::new(Replicating {
            lead: Lead::default(),
            log: log.clone(),
        });
        (tier(store, Some(lead.clone()), 0), lead)
    };
    let store = Arc::new(MemoryStore::new());
    let (a, lead_a) = start(&store);
    lead_a.lead.set(Some(1), 1);
    assert_eq!(pass(&a, &segs[..2]).uploaded, 2);
    assert_eq!(*log.lock().unwrap(), vec![20]);
    // Nothing new: nothing handed over again.
    pass(&a, &segs[..2]);
    assert_eq!(*log.lock().unwrap(), vec![20]);
    assert_eq!(pass(&a, &segs[..3]).uploaded, 1);
    assert_eq!(*log.lock().unwrap(), vec![20, 30]);

    // The follower's own store is empty: it trims by the group's end.
    let empty = Arc::new(MemoryStore::new());
    let (b, lead_b) = start(&empty);
    lead_b.lead.set(None, 1);
    assert_eq!(pass(&b, &segs).offloaded_through, 30);
    // A manifest it holds for reads that ends below the group's end is
    // stale: its next pass drops it, and the next read loads the store's.
    assert_eq!(b.manifest(1).unwrap().end_offset(), 0);
    empty
        .put(&Manifest::key(1, 1), &held_manifest(&store))
        .unwrap();
    pass(&b, &segs);
    assert_eq!(b.manifest(1).unwrap().end_offset(), 30);

    // A new leader (term 2) repeats the end it starts from once, for a
    // follower that missed it, then hands over what it adds.
    let (c, lead_c) = start(&store);
    lead_a.lead.set(None, 2);
    lead_c.lead.set(Some(2), 2);
    assert_eq!(pass(&c, &segs[..3]).uploaded, 0);
    assert_eq!(*log.lock().unwrap(), vec![20, 30, 30]);
    assert_eq!(pass(&c, &segs).uploaded, 1);
    assert_eq!(*log.lock().unwrap(), vec![20, 30, 30, 40]);
    assert_eq!(pass(&a, &segs).offloaded_through, 40);
    for t in [a, b, c] {
        t.stop();
    }
}

fn held_manifest(store: &MemoryStore) -> Vec<u8> {
    load_manifest(store, 1).unwrap().encode()
}

/// A new leader's first look cleans nothing: until its own manifest is
/// the one in force, an object the manifest in force does not name may be
/// a deposed leader's upload whose commit is still on its way.
#[test]
fn a_new_cluster_leader_cleans_nothing_before_its_manifest_is_in_force() {
    let tmp = tempfile::tempdir().unwrap();
    let segs = segments(tmp.path(), 2);
    let store = Arc::new(MemoryStore::new());
    let (a, lead_a) = node(&store);
    lead_a.set(Some(1), 1);
    assert_eq!(pass(&a, &segs[..1]).uploaded, 1);
    // Term 1's leader copied its second segment; its commit has not landed.
    let pending = corelog_tier::manifest::object_key(1, 10, 20, "log");
    store.put(&pending, b"uploaded, not yet committed").unwrap();
    let (b, lead_b) = node(&store);
    lead_a.set(None, 2);
    lead_b.set(Some(2), 2);
    // Nothing new to copy: term 2 commits nothing, and cleans nothing.
    assert_eq!(pass(&b, &segs[..1]).uploaded, 0);
    assert!(store.keys().contains(&pending), "{:?}", store.keys());
    a.stop();
    b.stop();
}

/// A segment whose remote copy retention expired, still held locally (its
/// local retention has not run yet), is not copied again: the store's log
/// only ever grows at its end. And by size, the remote copies of segments
/// held locally stay: dropping them would not shrink the log.
#[test]
fn a_local_segment_whose_remote_copy_expired_is_not_copied_again() {
    let tmp = tempfile::tempdir().unwrap();
    let segs = segments(tmp.path(), 3);
    let store = Arc::new(MemoryStore::new());
    let t = tier(&store, None, 1 << 30);
    let all = (0, 300);
    let keep = Retention::default();
    assert_eq!(t.offload(1, &segs, &keep, all, 0).unwrap().uploaded, 3);
    // The whole log may hold 250 bytes, all of it local: nothing expires.
    let small = Retention {
        max_age: None,
        max_bytes: Some(250),
    };
    assert_eq!(t.offload(1, &segs, &small, all, 0).unwrap().uploaded, 0);
    assert_eq!(held(&store), vec![0, 10, 20]);
    // Segment 0's newest batch (at 0 µs) is older than 1 µs at 2 µs.
    let young = Retention {
        max_age: Some(std::time::Duration::from_micros(1)),
        max_bytes: None,
    };
    assert_eq!(t.offload(1, &segs, &young, all, 2).unwrap().uploaded, 0);
    assert_eq!(held(&store), vec![10, 20]);
    let p = t.offload(1, &segs, &keep, all, 2).unwrap();
    assert_eq!((p.uploaded, p.offloaded_through), (0, 30));
    assert_eq!(held(&store), vec![10, 20]);
    t.stop();
}

/// A pass that fails after some uploads reports what it uploaded and,
/// as its backlog, every segment still waiting, the failed one included.
#[test]
fn a_pass_that_fails_midway_reports_what_still_waits() {
    let tmp = tempfile::tempdir().unwrap();
    let segs = segments(tmp.path(), 3);
    let store = Arc::new(MemoryStore::new());
    let t = tier(&store, None, 0);
    let second = corelog_tier::manifest::object_key(1, 10, 20, "log");
    store.refuse_puts_ending(Some(&second[second.len() - 20..]));
    let p = t
        .offload(1, &segs, &Retention::default(), (0, 300), 0)
        .unwrap();
    assert_eq!((p.uploaded, p.backlog), (1, (2, 200)));
    assert_eq!(held(&store), vec![0]);
    store.refuse_puts_ending(None);
    let p = t
        .offload(1, &segs, &Retention::default(), (0, 300), 0)
        .unwrap();
    assert_eq!((p.uploaded, p.backlog), (2, (0, 0)));
    t.stop();
}

/// Looking for strays lists every object of the partition, so a steady
/// leader looks once its term's manifest is in force and then every
/// `CLEAN_EVERY_PASSES` passes, not on every pass; a leader of a new term
/// looks as soon as its own manifest is in force. A follower within its
/// local limit asks the store nothing.
#[test]
fn a_leader_looks_for_strays_when_its_term_begins_and_then_periodically() {
    let tmp = tempfile::tempdir().unwrap();
    let segs = segments(tmp.path(), 3);
    let store = Arc::new(MemoryStore::new());
    let (a, lead_a) = node(&store);
    lead_a.set(Some(1), 1);
    assert_eq!(pass(&a, &segs[..1]).uploaded, 1);
    // A deposed leader's late copy, which no manifest will name.
    let stray = |base: u64| {
        let key = corelog_tier::manifest::object_key(1, base, base + 10, "log");
        store.put(&key, b"late").unwrap();
        key
    };
    let late = stray(90);
    for n in 1..corelog_tier::pass::CLEAN_EVERY_PASSES {
        pass(&a, &segs[..1]);
        assert!(store.keys().contains(&late), "cleaned at pass {n}");
    }
    pass(&a, &segs[..1]);
    assert!(!store.keys().contains(&late), "{:?}", store.keys());

    // The same node leads again in term 3: its first commit in that term
    // puts its manifest in force, and it cleans at once.
    let late = stray(80);
    lead_a.set(Some(3), 3);
    assert_eq!(pass(&a, &segs[..2]).uploaded, 1);
    assert!(!store.keys().contains(&late), "{:?}", store.keys());

    // A follower holding less than its local limit has nothing to trim:
    // with the store down, its pass still succeeds, having asked nothing.
    let lead_b = Arc::new(Lead::default());
    let b = tier(&store, Some(lead_b.clone()), 1 << 30);
    lead_b.set(None, 3);
    store.set_down(true);
    let quiet = b.offload(1, &segs, &Retention::default(), (0, 1000), 0);
    assert_eq!(quiet.unwrap(), corelog_tier::OffloadPass::default());
    store.set_down(false);
    a.stop();
    b.stop();
}
