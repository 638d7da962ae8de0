//! The cluster fault suite: three `corelog-server` processes on loopback
//! (127.0.0.1, .2 and .3), Iggy's SDK producing through whichever node it
//! reaches with a journal of every acknowledged message, and faults while
//! it sends: `kill -9` of the leader and of a follower, `SIGSTOP`/`SIGCONT`
//! of the leader, a follower's data directory wiped and rejoined, and a
//! network partition of the leader (its replica traffic dropped with
//! iptables). After the faults the nodes must converge; then, on every
//! node: acknowledged ⊆ stored, and every partition's segment files
//! byte-identical.
//!
//! Run by `scripts/cluster-test.sh` (as root: iptables). Ignored by a
//! plain `cargo test`: it kills processes and changes firewall rules.
//! `CLUSTER_ROUNDS` repeats the faults (default 1).

mod common;

use common::named;
use iggy::prelude::*;
use std::collections::{BTreeMap, HashSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const PARTITIONS: u32 = 4;
const PER_BATCH: u128 = 10;

struct Proc {
    id: u64,
    dir: PathBuf,
    client: SocketAddr,
    replica: SocketAddr,
    child: Option<Child>,
    cluster_file: PathBuf,
    log: PathBuf,
}

impl Proc {
    fn start(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("log");
        let child = Command::new(env!("CARGO_BIN_EXE_corelog-server"))
            .args(["--dir", &self.dir.display().to_string()])
            .args(["--node", &self.id.to_string()])
            .args(["--cluster", &self.cluster_file.display().to_string()])
            .args(["--fsync", "batch", "--shards", "2"])
            .env(
                "RUST_LOG",
                std::env::var("NODE_LOG").unwrap_or_else(|_| "info".into()),
            )
            .env("CORELOG_SERVER_USERNAME", "iggy")
            .env("CORELOG_SERVER_PASSWORD", "iggy")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("corelog-server starts");
        self.child = Some(child);
    }

    fn pid(&self) -> i32 {
        self.child.as_ref().map(|c| c.id() as i32).unwrap_or(0)
    }

    fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            unsafe_free_signal(c.id() as i32, libc::SIGTERM);
            let deadline = Instant::now() + Duration::from_secs(20);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = c.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = c.kill();
            let _ = c.wait();
            panic!("node {} did not stop on SIGTERM within 20 s", self.id);
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// Sends `sig` to `pid` through `kill(1)` (the tests deny `unsafe`).
fn unsafe_free_signal(pid: i32, sig: i32) {
    let name = match sig {
        libc::SIGSTOP => "STOP",
        libc::SIGCONT => "CONT",
        _ => "TERM",
    };
    let _ = Command::new("kill")
        .args([format!("-{name}"), pid.to_string()])
        .status();
}

fn free_port(ip: &str) -> u16 {
    common::listen_port(ip)
}

/// Drops the replica traffic of `ip` (both ways) while alive.
struct Partition {
    rules: Vec<Vec<String>>,
}

impl Partition {
    fn isolate(ip: std::net::IpAddr, replica_ports: &[u16]) -> Partition {
        let ports = replica_ports
            .iter()
            .map(u16::to_string)
            .collect::<Vec<_>>()
            .join(",");
        let ip = ip.to_string();
        let rules: Vec<Vec<String>> = ["-s", "-d"]
            .iter()
            .map(|dir| {
                [
                    "INPUT",
                    "-p",
                    "tcp",
                    dir,
                    &ip,
                    "-m",
                    "multiport",
                    "--dports",
                    &ports,
                    "-j",
                    "DROP",
                ]
                .iter()
                .map(|s| s.to_string())
                .collect()
            })
            .collect();
        for r in &rules {
            let ok = Command::new("iptables")
                .arg("-I")
                .args(r)
                .status()
                .is_ok_and(|s| s.success());
            assert!(
                ok,
                "iptables -I {r:?} failed (the suite runs as root with iptables)"
            );
        }
        Partition { rules }
    }
}

impl Drop for Partition {
    fn drop(&mut self) {
        for r in &self.rules {
            let _ = Command::new("iptables").arg("-D").args(r).status();
        }
    }
}

/// What the producer acknowledged, and when.
#[derive(Default)]
struct Journal {
    acked: Vec<u128>,
    /// When each acknowledged send was started and acknowledged.
    ack_times: Vec<(Instant, Instant)>,
    errors: u64,
}

async fn connect(addr: SocketAddr) -> Option<IggyClient> {
    let client = IggyClient::builder()
        .with_tcp()
        .with_server_address(addr.to_string())
        .with_reconnection_max_retries(Some(0))
        // The SDK waits out 5 s (its default) before reconnecting when a
        // connection broke within 5 s of being made: a producer that reached
        // a node in the instant it was killed (its listening socket still
        // open) would wait that out, and the failover figure would be that
        // back-off, not the cluster's. This producer reconnects on its own.
        .with_reestablish_after(IggyDuration::new(Duration::ZERO))
        .build()
        .ok()?;
    tokio::time::timeout(Duration::from_secs(8), async {
        client.connect().await.ok()?;
        client.login_user("iggy", "iggy").await.ok()?;
        Some(())
    })
    .await
    .ok()
    .flatten()?;
    Some(client)
}

/// Sends batches until `stop`, through whichever node it reaches.
async fn produce(addrs: Vec<SocketAddr>, journal: Arc<Mutex<Journal>>, stop: Arc<AtomicBool>) {
    let mut next_id: u128 = 1;
    let mut client: Option<IggyClient> = None;
    let mut turn = 0usize;
    while !stop.load(Ordering::SeqCst) {
        let Some(c) = client.as_ref() else {
            client = connect(addrs[turn % addrs.len()]).await;
            turn += 1;
            if client.is_none() {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            continue;
        };
        let ids: Vec<u128> = (next_id..next_id + PER_BATCH).collect();
        next_id += PER_BATCH;
        let mut batch: Vec<IggyMessage> = ids
            .iter()
            .map(|i| {
                IggyMessage::builder()
                    .id(*i)
                    .payload(bytes::Bytes::from(format!("m{i:020}").repeat(4)))
                    .build()
                    .expect("message")
            })
            .collect();
        let partition = (next_id / PER_BATCH % u128::from(PARTITIONS)) as u32;
        let started = Instant::now();
        let sent = tokio::time::timeout(
            Duration::from_secs(15),
            c.send_messages(
                &named("s"),
                &named("t"),
                &Partitioning::partition_id(partition),
                &mut batch,
            ),
        )
        .await;
        match sent {
            Ok(Ok(_)) => {
                let mut j = journal.lock().expect("journal");
                j.acked.extend(ids);
                j.ack_times.push((started, Instant::now()));
            }
            _ => {
                journal.lock().expect("journal").errors += 1;
                client = None;
            }
        }
    }
}

/// The leader, as the first live node that names one says (retrying
/// while an election runs, up to 20 s).
async fn leader(procs: &[Proc], live: &[usize]) -> Option<u64> {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        for &i in live {
            if let Some(l) = leader_named_by(procs, i).await {
                return Some(l);
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    None
}

async fn leader_named_by(procs: &[Proc], i: usize) -> Option<u64> {
    let c = connect(procs[i].client).await?;
    let m = tokio::time::timeout(Duration::from_secs(3), c.get_cluster_metadata())
        .await
        .ok()?
        .ok()?;
    let leader = m.nodes.iter().find(|n| n.role == ClusterNodeRole::Leader)?;
    procs
        .iter()
        .find(|p| p.client.port() == leader.endpoints.tcp && p.client.ip().to_string() == leader.ip)
        .map(|p| p.id)
}

/// On a failure (or with `KEEP_LOGS` set), keeps the nodes' logs in
/// `/tmp/cluster-faults-logs`.
struct KeepLogs(Vec<PathBuf>);

impl Drop for KeepLogs {
    fn drop(&mut self) {
        if std::thread::panicking() || std::env::var_os("KEEP_LOGS").is_some() {
            let to = Path::new("/tmp/cluster-faults-logs");
            let _ = std::fs::create_dir_all(to);
            for l in &self.0 {
                if let Some(name) = l.file_name() {
                    let _ = std::fs::copy(l, to.join(name));
                }
            }
            eprintln!("node logs kept in {}", to.display());
        }
    }
}

/// Every stored batch of every partition of `dir`: partition → bytes.
fn stored(dir: &Path) -> BTreeMap<u64, Vec<u8>> {
    let root = dir.join("partitions");
    let mut out = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir(&root) else {
        return out;
    };
    for e in entries.flatten() {
        let Ok(p) = e.file_name().to_string_lossy().parse::<u64>() else {
            continue;
        };
        let mut files: Vec<PathBuf> = std::fs::read_dir(e.path())
            .map(|r| r.flatten().map(|f| f.path()).collect())
            .unwrap_or_default();
        files.retain(|f| f.extension().is_some_and(|x| x == "log"));
        files.sort();
        // A segment's preallocated tail is zeros: each file's batches end
        // where the next batch length would be zero.
        let mut bytes = Vec::new();
        for f in files {
            bytes.extend(trim_to_batches(&std::fs::read(&f).unwrap_or_default()));
        }
        out.insert(p, bytes);
    }
    out
}

/// The whole batches at the front of `bytes`.
fn trim_to_batches(bytes: &[u8]) -> Vec<u8> {
    let mut at = 0usize;
    while at + 256 <= bytes.len() {
        let mut len = [0u8; 8];
        len.copy_from_slice(&bytes[at + 32..at + 40]);
        let len = u64::from_le_bytes(len) as usize;
        if len < 256 || at + len > bytes.len() {
            break;
        }
        at += len;
    }
    bytes[..at].to_vec()
}

/// Message ids in stored batches (frame id at +8 of each 48-byte frame header).
fn ids(batches: &[u8]) -> Vec<u128> {
    let mut out = Vec::new();
    let mut at = 0usize;
    while at + 256 <= batches.len() {
        let u64_at = |p: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&batches[p..p + 8]);
            u64::from_le_bytes(b) as usize
        };
        let len = u64_at(at + 32);
        let mut f = at + 256;
        while f + 48 <= at + len {
            let mut id = [0u8; 16];
            id.copy_from_slice(&batches[f + 8..f + 24]);
            out.push(u128::from_le_bytes(id));
            let user = u32::from_le_bytes(batches[f + 32..f + 36].try_into().expect("4")) as usize;
            let payload =
                u32::from_le_bytes(batches[f + 36..f + 40].try_into().expect("4")) as usize;
            f += 48 + payload + user;
        }
        at += len;
    }
    out
}

#[derive(Debug, Default)]
struct Row {
    fault: String,
    failover: Option<Duration>,
}

/// Starts three nodes under `root` (127.0.0.1, .2 and .3); their logs
/// are kept on a failure.
fn start_cluster(root: &Path) -> (Vec<Proc>, KeepLogs) {
    let cluster_file = root.join("cluster.toml");
    let mut procs: Vec<Proc> = (1..=3u64)
        .map(|id| {
            let ip = format!("127.0.0.{id}");
            Proc {
                id,
                dir: root.join(format!("node{id}")),
                client: format!("{ip}:{}", free_port(&ip)).parse().expect("addr"),
                replica: format!("{ip}:{}", free_port(&ip)).parse().expect("addr"),
                child: None,
                cluster_file: cluster_file.clone(),
                log: root.join(format!("node{id}.log")),
            }
        })
        .collect();
    std::fs::write(root.join("secret"), "the fault suite's cluster secret\n").expect("secret file");
    {
        use std::os::unix::fs::PermissionsExt;
        let owner_only = std::fs::Permissions::from_mode(0o600);
        std::fs::set_permissions(root.join("secret"), owner_only).expect("chmod secret");
    }
    let mut toml = String::from("shards = 2\nsecret_file = \"secret\"\n");
    for p in &procs {
        toml.push_str(&format!(
            "[[node]]\nid = {}\nclient = \"{}\"\nreplica = \"{}\"\n",
            p.id, p.client, p.replica
        ));
    }
    std::fs::write(&cluster_file, toml).expect("cluster file");
    let keep = KeepLogs(procs.iter().map(|p| p.log.clone()).collect());
    for p in procs.iter_mut() {
        p.start();
    }
    (procs, keep)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "kills processes and changes iptables rules: run scripts/cluster-test.sh"]
async fn faults_lose_nothing_acknowledged() {
    // With RUST_LOG, the producer's SDK says what it does (redirects,
    // waits for a leader) on stderr, with times to set beside the nodes'.
    if std::env::var_os("RUST_LOG").is_some() {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .try_init();
    }
    let rounds: usize = std::env::var("CLUSTER_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(1);
    let root = tempfile::tempdir().expect("tempdir");
    let (mut procs, _keep) = start_cluster(root.path());
    let addrs: Vec<SocketAddr> = procs.iter().map(|p| p.client).collect();
    let all: Vec<usize> = vec![0, 1, 2];
    assert!(
        leader(&procs, &all).await.is_some(),
        "no leader within 20 s"
    );
    let setup = connect(addrs[0]).await.expect("a client");
    setup.create_stream("s").await.expect("stream");
    setup
        .create_topic(
            &named("s"),
            "t",
            &TopicCreateOptions {
                partitions_count: Some(PARTITIONS),
                ..TopicCreateOptions::default()
            },
        )
        .await
        .expect("topic");
    drop(setup);

    let journal = Arc::new(Mutex::new(Journal::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let producer = tokio::spawn(produce(addrs.clone(), journal.clone(), stop.clone()));
    let replica_ports: Vec<u16> = procs.iter().map(|p| p.replica.port()).collect();
    let mut rows: Vec<Row> = Vec::new();
    let settle = Duration::from_secs(2);
    tokio::time::sleep(settle).await;
    for round in 0..rounds {
        for fault in [
            "kill -9 leader",
            "kill -9 follower",
            "SIGSTOP leader 3 s",
            "wipe follower DIR",
            "partition leader 3 s",
        ] {
            let l = leader(&procs, &all)
                .await
                .expect("a leader before the fault");
            let li = (l - 1) as usize;
            let fi = (li + 1) % 3;
            // When the fault took effect (the process killed, the signal
            // sent, the rules in): a send completing while kill(1) or
            // iptables starts is no failover.
            let t0: Instant;
            tracing::info!("fault: {fault} (leader: node {l})");
            match fault {
                "kill -9 leader" => {
                    procs[li].kill9();
                    t0 = Instant::now();
                    tokio::time::sleep(settle * 2).await;
                    procs[li].start();
                }
                "kill -9 follower" => {
                    procs[fi].kill9();
                    t0 = Instant::now();
                    tokio::time::sleep(settle).await;
                    procs[fi].start();
                }
                "SIGSTOP leader 3 s" => {
                    unsafe_free_signal(procs[li].pid(), libc::SIGSTOP);
                    t0 = Instant::now();
                    tokio::time::sleep(Duration::from_secs(3)).await;
                    unsafe_free_signal(procs[li].pid(), libc::SIGCONT);
                }
                "wipe follower DIR" => {
                    procs[fi].kill9();
                    t0 = Instant::now();
                    std::fs::remove_dir_all(&procs[fi].dir).expect("wipe");
                    procs[fi].start();
                }
                _ => {
                    let cut = Partition::isolate(procs[li].replica.ip(), &replica_ports);
                    t0 = Instant::now();
                    tokio::time::sleep(Duration::from_secs(3)).await;
                    drop(cut);
                }
            }
            // Wait for a send started after the fault began to be
            // acknowledged.
            let deadline = Instant::now() + Duration::from_secs(30);
            let failover = loop {
                let after = journal
                    .lock()
                    .expect("journal")
                    .ack_times
                    .iter()
                    .find(|(start, _)| *start > t0)
                    .map(|(_, end)| *end);
                if let Some(t) = after {
                    break Some(t - t0);
                }
                if Instant::now() > deadline {
                    break None;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            };
            let row = Row {
                fault: format!("{fault} (round {})", round + 1),
                failover,
            };
            eprintln!("{row:?}");
            assert!(
                failover.is_some(),
                "no acknowledged send within 30 s after {fault}; logs in {}",
                root.path().display()
            );
            rows.push(row);
            tokio::time::sleep(settle).await;
        }
    }
    stop.store(true, Ordering::SeqCst);
    let _ = producer.await;

    // Converge: every node's partitions the same, then stop them cleanly.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let views: Vec<_> = procs.iter().map(|p| stored(&p.dir)).collect();
        if views.windows(2).all(|w| w[0] == w[1]) {
            break;
        }
        if Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    for p in procs.iter_mut() {
        p.stop();
    }
    let views: Vec<BTreeMap<u64, Vec<u8>>> = procs.iter().map(|p| stored(&p.dir)).collect();
    let journal = journal.lock().expect("journal");
    let acked: HashSet<u128> = journal.acked.iter().copied().collect();
    let mut lost_total = 0usize;
    for (p, view) in procs.iter().zip(&views) {
        let mut have: HashSet<u128> = HashSet::new();
        let mut dup = 0usize;
        for bytes in view.values() {
            for id in ids(bytes) {
                if !have.insert(id) {
                    dup += 1;
                }
            }
        }
        let lost = acked.iter().filter(|id| !have.contains(id)).count();
        lost_total += lost;
        eprintln!(
            "node {}: {} messages stored, {} of {} acknowledged lost, {} stored twice (a resend after an unknown outcome)",
            p.id,
            have.len(),
            lost,
            acked.len(),
            dup
        );
    }
    let mut divergent = 0usize;
    for p in views[0].keys() {
        if views.iter().any(|v| v.get(p) != views[0].get(p)) {
            divergent += 1;
        }
    }
    // Failover: from kill -9 of the leader to the first send acknowledged
    // through the new one.
    let mut failovers: Vec<Duration> = rows
        .iter()
        .filter(|r| r.fault.starts_with("kill -9 leader"))
        .filter_map(|r| r.failover)
        .collect();
    failovers.sort();
    println!("| faults | acknowledged | lost | divergent partitions | send errors | leader-kill failover median | max |");
    println!("|---|---|---|---|---|---|---|");
    println!(
        "| {} | {} | {} | {} | {} | {} ms | {} ms |",
        rows.len(),
        acked.len(),
        lost_total,
        divergent,
        journal.errors,
        failovers
            .get(failovers.len() / 2)
            .map_or(0, |d| d.as_millis()),
        failovers.last().map_or(0, |d| d.as_millis()),
    );
    println!();
    println!("| fault | first send started after it acknowledged after |");
    println!("|---|---|");
    for r in &rows {
        println!(
            "| {} | {} ms |",
            r.fault,
            r.failover.map_or(0, |d| d.as_millis())
        );
    }
    assert!(
        acked.len() > 100,
        "the producer barely ran: {}",
        acked.len()
    );
    assert_eq!(
        lost_total,
        0,
        "acknowledged messages lost; logs in {}",
        root.path().display()
    );
    assert_eq!(
        divergent,
        0,
        "replicas differ; logs in {}",
        root.path().display()
    );
    assert_eq!(views[0].len(), PARTITIONS as usize);
}

/// A leader paused past an election timeout has been replaced when it
/// resumes, though in its own eyes it still leads until its peers reach
/// it. Asked then who leads, it must not name itself: Iggy's SDK would
/// stay with it and replay its sends there. Resumed cut off from its peers
/// (so that nothing they sent can tell it), it names no leader; reached
/// again, it names the new one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "stops processes and changes iptables rules: run scripts/cluster-test.sh"]
async fn a_resumed_leader_does_not_name_itself_before_a_majority_confirms_it() {
    let root = tempfile::tempdir().expect("tempdir");
    let (procs, _keep) = start_cluster(root.path());
    let all: Vec<usize> = vec![0, 1, 2];
    let l = leader(&procs, &all).await.expect("a leader within 20 s");
    let li = (l - 1) as usize;
    // Signed in on the leader while it runs (a sign-in needs the process).
    let on_old = connect(procs[li].client)
        .await
        .expect("a client on the leader");
    assert_eq!(leader_in(&on_old).await, Some(l), "the leader names itself");

    // Cut off and paused at once: it runs no tick in between, so raft's
    // own quorum check cannot depose it.
    let replica_ports: Vec<u16> = procs.iter().map(|p| p.replica.port()).collect();
    let cut = Partition::isolate(procs[li].replica.ip(), &replica_ports);
    unsafe_free_signal(procs[li].pid(), libc::SIGSTOP);
    let others: Vec<usize> = all.iter().copied().filter(|i| *i != li).collect();
    let deadline = Instant::now() + Duration::from_secs(20);
    let new = loop {
        match leader(&procs, &others).await {
            Some(n) if n != l => break n,
            _ if Instant::now() > deadline => {
                unsafe_free_signal(procs[li].pid(), libc::SIGCONT);
                panic!("the other two elected no leader within 20 s");
            }
            _ => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    };
    unsafe_free_signal(procs[li].pid(), libc::SIGCONT);
    let named = leader_in(&on_old).await;
    assert_ne!(
        named,
        Some(l),
        "node {l}, resumed after node {new} was elected and cut off from it, names itself leader"
    );
    drop(cut);
    // Reached again, it follows the new leader and names it.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let named = leader_in(&on_old).await;
        if named == Some(new) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "node {l} names {named:?}, not node {new}, 20 s after it was reached again"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The node `c`'s server names leader (by the ids 1-3 of 127.0.0.1-3).
async fn leader_in(c: &IggyClient) -> Option<u64> {
    let m = tokio::time::timeout(Duration::from_secs(3), c.get_cluster_metadata())
        .await
        .expect("metadata within 3 s")
        .expect("metadata");
    let n = m.nodes.iter().find(|n| n.role == ClusterNodeRole::Leader)?;
    n.ip.strip_prefix("127.0.0.")?.parse().ok()
}
