#![allow(clippy::field_reassign_with_default)]
//! Three nodes in one process: each an engine over its own directory and a
//! replica on loopback ports, and a metadata state machine that records
//! the partitions it was told about.
#![allow(dead_code)]

use bytes::Bytes;
use corelog::{BatchBuilder, Engine, MessageSpec};
use corelog_replica::{
    ClusterConfig, MetaMachine, NodeAddr, Origin, Replica, ReplicaConfig, ReplicaHandle,
    ReplicaOptions, Secret,
};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Metadata of the tests: a byte string per change, all of them kept.
#[derive(Debug, Default)]
pub struct ListMeta {
    pub inner: Mutex<(u64, u64, Vec<Vec<u8>>)>, // applied, version, changes
}

impl MetaMachine for ListMeta {
    fn applied_index(&self) -> u64 {
        self.inner.lock().expect("lock").0
    }
    fn version(&self) -> u64 {
        self.inner.lock().expect("lock").1
    }
    fn apply(
        &self,
        index: u64,
        base: u64,
        data: &[u8],
    ) -> Result<bool, corelog_replica::MachineError> {
        let mut g = self.inner.lock().expect("lock");
        g.0 = index;
        if g.1 != base {
            return Ok(false);
        }
        g.1 = index;
        g.2.push(data.to_vec());
        Ok(true)
    }
    /// The version, then each change as its length and bytes.
    fn snapshot(&self) -> Bytes {
        let g = self.inner.lock().expect("lock");
        let mut out = g.1.to_le_bytes().to_vec();
        for c in &g.2 {
            out.extend_from_slice(&(c.len() as u64).to_le_bytes());
            out.extend_from_slice(c);
        }
        Bytes::from(out)
    }
    fn restore(&self, index: u64, data: &[u8]) -> Result<(), corelog_replica::MachineError> {
        let word = |at: usize| -> Option<u64> {
            Some(u64::from_le_bytes(data.get(at..at + 8)?.try_into().ok()?))
        };
        let bad = || corelog_replica::MachineError::from("a list's snapshot cut short".to_string());
        let version = word(0).ok_or_else(bad)?;
        let (mut changes, mut at) = (Vec::new(), 8);
        while at < data.len() {
            let len = word(at).ok_or_else(bad)? as usize;
            let change = data.get(at + 8..at + 8 + len).ok_or_else(bad)?;
            changes.push(change.to_vec());
            at += 8 + len;
        }
        *self.inner.lock().expect("lock") = (index, version, changes);
        Ok(())
    }
    fn keeps(&self, _partition: u64) -> bool {
        true
    }
}

/// A free port on `ip` for a node's listener, below the kernel's
/// ephemeral range (32768–60999 by default): a node that stops and starts
/// again binds the same port, and an outgoing connection's source port,
/// taken from the ephemeral range meanwhile, must not be able to hold it
/// (it did once: "Address already in use" at a restart). Spread by the
/// process id and handed out once per process; each is checked free.
pub fn listen_port(ip: &str) -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    const LOW: u32 = 20_000;
    const SPAN: u32 = 12_000;
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let start = (std::process::id().wrapping_mul(7_919)) % SPAN;
    for _ in 0..SPAN {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = (LOW + (start + n) % SPAN) as u16;
        if std::net::TcpListener::bind(format!("{ip}:{port}")).is_ok() {
            return port;
        }
    }
    panic!("no free port on {ip} in {LOW}..{}", LOW + SPAN)
}

/// A free loopback port for a node's listener ([`listen_port`]).
pub fn free_port() -> u16 {
    listen_port("127.0.0.1")
}

/// Logs to the test's output (RUST_LOG sets the filter; default warn).
pub fn init_log() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_test_writer()
        .try_init();
}

pub fn cluster(n: u64) -> ClusterConfig {
    init_log();
    ClusterConfig {
        shards: 2,
        nodes: (1..=n)
            .map(|id| NodeAddr {
                id,
                client: format!("127.0.0.1:{}", free_port()).parse().expect("addr"),
                replica: format!("127.0.0.1:{}", free_port()).parse().expect("addr"),
            })
            .collect(),
        secret_file: None,
        secret: Secret::new(b"the replica tests' cluster secret".to_vec()),
    }
}

pub fn options() -> ReplicaOptions {
    ReplicaOptions {
        tick: Duration::from_millis(20),
        commit_timeout: Duration::from_secs(5),
        ..ReplicaOptions::default()
    }
}

/// One running node.
pub struct Node {
    pub id: u64,
    pub dir: PathBuf,
    pub engine: Option<Engine>,
    pub replica: Option<Replica>,
    pub meta: Arc<ListMeta>,
}

impl Node {
    pub fn start(id: u64, dir: &Path, cluster: &ClusterConfig, opts: ReplicaOptions) -> Node {
        Node::start_with(id, dir, cluster, opts, |_| {})
    }

    /// [`Node::start`], the engine's configuration changed by `tune`.
    pub fn start_with(
        id: u64,
        dir: &Path,
        cluster: &ClusterConfig,
        opts: ReplicaOptions,
        tune: impl FnOnce(&mut corelog::Config),
    ) -> Node {
        let mut config = corelog::Config::new(dir);
        config.shards = Some(cluster.shards);
        config.pin_threads = false;
        config.log = opts.log_config(config.log);
        tune(&mut config);
        let engine = Engine::open(config).expect("engine opens");
        let meta = Arc::new(ListMeta::default());
        let replica = Replica::start(
            engine.handle(),
            ReplicaConfig {
                dir: dir.to_owned(),
                me: id,
                cluster: cluster.clone(),
                options: opts,
            },
            meta.clone(),
        )
        .expect("replica starts");
        Node {
            id,
            dir: dir.to_owned(),
            engine: Some(engine),
            replica: Some(replica),
            meta,
        }
    }

    pub fn handle(&self) -> ReplicaHandle {
        self.replica.as_ref().expect("running").handle()
    }

    pub fn engine(&self) -> corelog::Handle {
        self.engine.as_ref().expect("running").handle()
    }

    /// Stops the replica and the engine, cleanly.
    pub fn stop(&mut self) {
        if let Some(r) = self.replica.take() {
            r.shutdown();
        }
        if let Some(e) = self.engine.take() {
            e.shutdown().expect("engine shuts down");
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Waits until every running node names the same leader of every group,
/// and that leader leads everything; returns its id.
pub fn wait_for_leader(nodes: &[&Node], within: Duration) -> u64 {
    let deadline = Instant::now() + within;
    loop {
        let leaders: Vec<Option<u64>> = nodes.iter().map(|n| n.handle().leader()).collect();
        if let Some(Some(l)) = leaders.first() {
            if leaders.iter().all(|x| *x == Some(*l)) {
                if let Some(leader) = nodes.iter().find(|n| n.id == *l) {
                    if leader.handle().leads_all() {
                        return *l;
                    }
                }
            }
        }
        assert!(
            Instant::now() < deadline,
            "no single leader of every group within {within:?}: {leaders:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A producer batch of `n` messages with payloads tagged by `tag`.
pub fn batch(tag: u64, n: u32) -> Bytes {
    let mut b = BatchBuilder::new();
    let payloads: Vec<Vec<u8>> = (0..n)
        .map(|i| format!("{tag}:{i}:{}", "x".repeat(40)).into_bytes())
        .collect();
    for (i, p) in payloads.iter().enumerate() {
        b.push(MessageSpec {
            id: u128::from(tag) << 32 | i as u128,
            timestamp: 1_000 + i as u64,
            payload: p,
            user_headers: &[],
        });
    }
    Bytes::from(b.build().expect("build"))
}

pub fn origin() -> Origin {
    Origin::default()
}

/// The bytes of every batch stored in `partition` on `engine`.
pub fn stored(engine: &corelog::Handle, partition: u64) -> Vec<u8> {
    let mut out = Vec::new();
    let mut at = 0;
    loop {
        let r = match engine
            .poll(partition, corelog::PollFrom::Offset(at), 1 << 20)
            .wait()
        {
            Ok(r) => r,
            Err(corelog::RequestError::UnknownPartition { .. }) => return out,
            Err(e) => panic!("poll: {e}"),
        };
        if r.is_empty() {
            return out;
        }
        for s in r.slices() {
            out.extend_from_slice(s);
        }
        at = r.next_offset();
    }
}

/// Waits until `done` holds, looking every 10 ms; fails saying `what`
/// did not happen within `within`.
pub fn wait_until(within: Duration, what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !done() {
        assert!(Instant::now() < deadline, "{what} within {within:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Cuts the Raft links of node `i` (its index in `cluster`) to every
/// other node, as a network partition does (`net/cut.rs`); they heal when
/// the cuts are dropped.
pub fn cut_off(cluster: &ClusterConfig, i: usize) -> Vec<corelog_replica::link_cut::Cut> {
    let addr = |k: usize| cluster.nodes[k].replica;
    (0..cluster.nodes.len())
        .filter(|&k| k != i)
        .map(|k| corelog_replica::link_cut::cut_link(addr(i), addr(k)))
        .collect()
}

/// Waits until `partition` holds `len` bytes on `engine`.
pub fn wait_stored(engine: &corelog::Handle, partition: u64, len: usize, within: Duration) {
    let deadline = Instant::now() + within;
    while stored(engine, partition).len() < len {
        assert!(
            Instant::now() < deadline,
            "partition {partition} not caught up"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Empties a node's directory, as a lost disk does.
pub fn wipe(dir: &Path) {
    std::fs::remove_dir_all(dir).expect("wipe");
    std::fs::create_dir_all(dir).expect("recreate");
}

/// Three nodes of a fresh cluster, each in a directory of its own, and the
/// leader they elected.
pub struct Three {
    pub dirs: Vec<tempfile::TempDir>,
    pub cluster: ClusterConfig,
    pub nodes: Vec<Node>,
    pub leader: u64,
}

pub fn three(opts: &ReplicaOptions, elect_within: Duration) -> Three {
    let dirs: Vec<_> = (0..3)
        .map(|_| tempfile::tempdir().expect("tempdir"))
        .collect();
    let cluster = cluster(3);
    let nodes: Vec<Node> = (0..3)
        .map(|i| Node::start(i as u64 + 1, dirs[i].path(), &cluster, opts.clone()))
        .collect();
    let leader = wait_for_leader(&nodes.iter().collect::<Vec<_>>(), elect_within);
    Three {
        dirs,
        cluster,
        nodes,
        leader,
    }
}

/// Appends as a client does: a refusal while leadership settles ("not the
/// leader", nothing stored) is retried.
pub fn append_retrying(node: &Node, partition: u64, bytes: bytes::Bytes) -> corelog::AppendAck {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match pollster::block_on(node.handle().append(partition, bytes.clone(), origin())) {
            Ok(ack) => return ack,
            Err(corelog_replica::ReplicaError::NotLeader { .. }) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => panic!("append on node {}: {e}", node.id),
        }
    }
}

/// Asserts for `window` that `node` leads every group (`group`: only that
/// one) without a change of term: no election took leadership away, as one
/// does when a leader loses its quorum (check_quorum). `why` names what was
/// going on.
pub fn assert_leads_throughout(node: &Node, group: Option<u32>, window: Duration, why: &str) {
    let leader = node.id;
    let terms: Vec<u64> = node.handle().status().iter().map(|g| g.term).collect();
    let until = Instant::now() + window;
    while Instant::now() < until {
        for g in node.handle().status() {
            if group.is_some_and(|only| only != g.group) {
                continue;
            }
            assert_eq!(
                (g.leader, g.term),
                (Some(leader), terms[g.group as usize]),
                "group {}: the leader lost its quorum while {why}",
                g.group
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
