//! Tiered storage in a cluster: three nodes in one process name one store;
//! only the leader of a partition's group uploads and writes its manifest,
//! under its term; followers trim below that manifest; after the leader
//! stops, the new leader continues under its own term, and the log read
//! from offset 0 on any node is the whole log, each batch once.

mod common;

use common::*;
use corelog::tier::upload::load_manifest;
use corelog::tier::{MemoryStore, ObjectInfo, ObjectStore, StoreError};
use corelog::TierConfig;
use corelog_replica::TierLeadership;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const ELECT: Duration = Duration::from_secs(10);

fn tiered_node(
    id: u64,
    dir: &std::path::Path,
    cluster: &corelog_replica::ClusterConfig,
    store: &Arc<MemoryStore>,
) -> Node {
    tiered_node_on(id, dir, cluster, store.clone())
}

fn tiered_node_on(
    id: u64,
    dir: &std::path::Path,
    cluster: &corelog_replica::ClusterConfig,
    store: Arc<dyn ObjectStore>,
) -> Node {
    let lead = TierLeadership::new();
    let l = lead.clone();
    let node = Node::start_with(id, dir, cluster, options(), move |c| {
        c.log.segment_bytes = 16 << 10;
        c.log.index_interval_bytes = 1024;
        c.tier = Some(TierConfig {
            local_retention_bytes: 16 << 10,
            chunk_bytes: 8 << 10,
            cache_bytes: 1 << 20,
            upload_every: Duration::from_millis(50),
            leadership: Some(l),
            ..TierConfig::new(store)
        });
    });
    lead.attach(&node.handle(), node.engine());
    node
}

/// Every message id of partition 1 on `node`, read from offset 0.
fn ids(node: &Node) -> Vec<u128> {
    let mut out = Vec::new();
    let mut at = 0;
    loop {
        let r = node
            .engine()
            .poll(1, corelog::PollFrom::Offset(at), 1 << 20)
            .wait()
            .unwrap_or_else(|e| panic!("node {}: poll from {at}: {e}", node.id));
        if r.is_empty() {
            return out;
        }
        out.extend(r.messages().map(|m| m.id()));
        at = r.next_offset();
    }
}

fn expected(tags: std::ops::Range<u64>) -> Vec<u128> {
    tags.flat_map(|t| (0..20u128).map(move |i| u128::from(t) << 32 | i))
        .collect()
}

fn uploaded(node: &Node) -> u64 {
    node.engine().tier().expect("tiered").figures().uploaded.0
}

fn wait(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(Instant::now() < deadline, "not within 30 s: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn only_the_leader_uploads_and_its_successor_continues_under_its_own_term() {
    init_log();
    let store = Arc::new(MemoryStore::new());
    let dirs: Vec<_> = (0..3)
        .map(|_| tempfile::tempdir().expect("tempdir"))
        .collect();
    let cluster = cluster(3);
    let mut nodes: Vec<Node> = (0..3)
        .map(|i| tiered_node(i as u64 + 1, dirs[i].path(), &cluster, &store))
        .collect();
    let leader = wait_for_leader(&nodes.iter().collect::<Vec<_>>(), ELECT);
    let li = (leader - 1) as usize;
    for tag in 0..200 {
        append_retrying(&nodes[li], 1, batch(tag, 20));
    }
    wait("the leader uploads", || uploaded(&nodes[li]) >= 8);
    let first_term = load_manifest(store.as_ref(), 1).expect("manifest").term;
    assert!(first_term > 0);
    for (i, n) in nodes.iter().enumerate() {
        if i != li {
            assert_eq!(uploaded(n), 0, "follower {} uploaded", n.id);
            // Followers trim below the leader's manifest of the current term.
            wait("a follower trims", || {
                n.engine().stats(1).wait().expect("stats").first_offset > 0
            });
        }
        assert_eq!(ids(n), expected(0..200), "node {}", n.id);
    }
    // The leader stops; a new one continues the log and the uploads.
    nodes[li].stop();
    let rest: Vec<&Node> = nodes.iter().filter(|n| n.replica.is_some()).collect();
    let next = wait_for_leader(&rest, ELECT);
    let ni = (next - 1) as usize;
    let before = uploaded(&nodes[ni]);
    for tag in 200..400 {
        append_retrying(&nodes[ni], 1, batch(tag, 20));
    }
    wait("the new leader uploads", || {
        uploaded(&nodes[ni]) >= before + 8
    });
    let m = load_manifest(store.as_ref(), 1).expect("manifest");
    assert!(m.term > first_term, "term {} after {first_term}", m.term);
    for w in m.segments.windows(2) {
        assert_eq!(w[0].next_offset, w[1].base_offset, "{m:?}");
    }
    for n in nodes.iter().filter(|n| n.replica.is_some()) {
        assert_eq!(ids(n), expected(0..400), "node {}", n.id);
    }
}

/// One node's view of the shared store: while `hold` is set, a manifest
/// PUT waits (after the node checked it still leads) and goes on once it
/// is cleared: a commit caught between its check and its write.
#[derive(Debug)]
struct Gate {
    inner: Arc<MemoryStore>,
    hold: AtomicBool,
    held: AtomicUsize,
    /// Manifest keys written after a hold, and whether the store took them.
    late: Mutex<Vec<(String, bool)>>,
    /// Manifests read and listings made through this node's view.
    manifest_reads: AtomicUsize,
}

impl Gate {
    fn new(inner: &Arc<MemoryStore>) -> Arc<Gate> {
        Arc::new(Gate {
            inner: inner.clone(),
            hold: AtomicBool::new(false),
            held: AtomicUsize::new(0),
            late: Mutex::new(Vec::new()),
            manifest_reads: AtomicUsize::new(0),
        })
    }
}

/// Clears a gate's hold when dropped.
struct Release<'a>(&'a AtomicBool);

impl Drop for Release<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

impl ObjectStore for Gate {
    fn describe(&self) -> String {
        self.inner.describe()
    }
    fn object_name(&self, key: &str) -> String {
        self.inner.object_name(key)
    }
    fn check(&self) -> Result<(), StoreError> {
        self.inner.check()
    }
    fn put(&self, key: &str, bytes: &[u8]) -> Result<(), StoreError> {
        if !key.contains("manifest-") || !self.hold.load(Ordering::SeqCst) {
            return self.inner.put(key, bytes);
        }
        self.held.fetch_add(1, Ordering::SeqCst);
        while self.hold.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(5));
        }
        let done = self.inner.put(key, bytes);
        let mut late = self.late.lock().unwrap_or_else(|p| p.into_inner());
        late.push((key.to_owned(), done.is_ok()));
        done
    }
    fn put_reader(
        &self,
        key: &str,
        body: &mut dyn std::io::Read,
        len: u64,
    ) -> Result<(), StoreError> {
        self.inner.put_reader(key, body, len)
    }
    fn get(&self, key: &str, range: Option<std::ops::Range<u64>>) -> Result<Vec<u8>, StoreError> {
        if key.contains("manifest-") {
            self.manifest_reads.fetch_add(1, Ordering::SeqCst);
        }
        self.inner.get(key, range)
    }
    fn delete(&self, key: &str) -> Result<(), StoreError> {
        self.inner.delete(key)
    }
    fn list(&self, prefix: &str) -> Result<Vec<ObjectInfo>, StoreError> {
        self.manifest_reads.fetch_add(1, Ordering::SeqCst);
        self.inner.list(prefix)
    }
}

fn first_offset(node: &Node) -> u64 {
    node.engine().stats(1).wait().expect("stats").first_offset
}

/// Three tiered nodes, each seeing the one store through its own gate.
fn gated_cluster() -> (
    Arc<MemoryStore>,
    Vec<Arc<Gate>>,
    Vec<tempfile::TempDir>,
    Vec<Node>,
) {
    init_log();
    let store = Arc::new(MemoryStore::new());
    let gates: Vec<Arc<Gate>> = (0..3).map(|_| Gate::new(&store)).collect();
    let dirs: Vec<_> = (0..3)
        .map(|_| tempfile::tempdir().expect("tempdir"))
        .collect();
    let cluster = cluster(3);
    let nodes = (0..3)
        .map(|i| tiered_node_on(i as u64 + 1, dirs[i].path(), &cluster, gates[i].clone()))
        .collect();
    (store, gates, dirs, nodes)
}

/// The leader replicates each manifest commit's end through the
/// partition's group: the followers trim their local copies as far as the
/// leader does, and never read a manifest from the store to do it.
#[test]
fn followers_trim_by_the_replicated_manifest_end_without_reading_the_store() {
    let (_store, gates, _dirs, nodes) = gated_cluster();
    let leader = wait_for_leader(&nodes.iter().collect::<Vec<_>>(), ELECT);
    let li = (leader - 1) as usize;
    for tag in 0..200 {
        append_retrying(&nodes[li], 1, batch(tag, 20));
    }
    wait("the leader uploads and trims", || {
        let f = nodes[li].engine().tier().expect("tiered").figures();
        f.uploaded.0 >= 8 && f.backlog.0 == 0 && first_offset(&nodes[li]) > 0
    });
    let trimmed_to = first_offset(&nodes[li]);
    for (i, n) in nodes.iter().enumerate().filter(|(i, _)| *i != li) {
        wait("a follower trims as far as the leader", || {
            first_offset(n) >= trimmed_to
        });
        assert_eq!(
            gates[i].manifest_reads.load(Ordering::SeqCst),
            0,
            "follower {} read the store's manifests",
            n.id
        );
    }
    assert!(gates[li].manifest_reads.load(Ordering::SeqCst) > 0);
    for n in &nodes {
        assert_eq!(ids(n), expected(0..200), "node {}", n.id);
    }
}

/// The leader is stopped between uploading a segment and committing the
/// manifest that names it; its successor uploads the same segments and
/// commits under its term; then the deposed leader's commit lands, late.
/// The manifest in force is the successor's: each offset once, and every
/// node reads the whole log, each batch once.
#[test]
fn a_leader_change_mid_upload_leaves_no_committed_duplicate() {
    let (store, gates, _dirs, mut nodes) = gated_cluster();
    let leader = wait_for_leader(&nodes.iter().collect::<Vec<_>>(), ELECT);
    let li = (leader - 1) as usize;
    gates[li].hold.store(true, Ordering::SeqCst);
    // Dropped before the nodes: a failed step releases the held commit, so
    // the deposed leader's engine can shut down and the test fails, not hangs.
    let _release = Release(&gates[li].hold);
    for tag in 0..200 {
        append_retrying(&nodes[li], 1, batch(tag, 20));
    }
    wait("the leader's first commit is held", || {
        gates[li].held.load(Ordering::SeqCst) > 0
    });
    assert_eq!(uploaded(&nodes[li]), 0, "nothing committed before the hold");
    let figures = nodes[li].engine().tier().expect("tiered").figures();
    // Its replica stops; its engine stays, the upload held in the store
    // (an engine's shutdown waits for a store call in flight to return).
    if let Some(r) = nodes[li].replica.take() {
        r.shutdown();
    }
    let rest: Vec<&Node> = nodes.iter().filter(|n| n.replica.is_some()).collect();
    let next = wait_for_leader(&rest, ELECT);
    let ni = (next - 1) as usize;
    for tag in 200..400 {
        append_retrying(&nodes[ni], 1, batch(tag, 20));
    }
    wait("the new leader uploads", || uploaded(&nodes[ni]) >= 8);
    let in_force = load_manifest(store.as_ref(), 1).expect("manifest").term;
    // The deposed leader's commit goes on now, under its older term.
    gates[li].hold.store(false, Ordering::SeqCst);
    wait("the deposed leader's late commit", || {
        !gates[li].late.lock().expect("late").is_empty()
    });
    let late = gates[li].late.lock().expect("late").clone();
    assert!(late.iter().all(|(_, took)| *took), "{late:?} ({figures})");
    let m = load_manifest(store.as_ref(), 1).expect("manifest");
    assert_eq!(m.term, in_force, "the successor's manifest stays in force");
    assert!(
        late.iter()
            .all(|(k, _)| !k.ends_with(&format!("{:020}.json", m.term))),
        "{late:?}"
    );
    for w in m.segments.windows(2) {
        assert_eq!(w[0].next_offset, w[1].base_offset, "{m:?}");
    }
    for n in nodes.iter().filter(|n| n.replica.is_some()) {
        assert_eq!(ids(n), expected(0..400), "node {}", n.id);
    }
}
