//! Three corelog-server nodes in one process, on loopback: Iggy's SDK
//! pointed at a follower is sent to the leader; what it sends is stored
//! byte-identically on every node; the leader stops and the SDK, pointed at
//! a survivor, is sent to the new leader and finds everything.

mod common;

use common::{message, named};
use corelog_replica::{ClusterConfig, NodeAddr, ReplicaOptions, Secret};
use corelog_server::ClusterSetup;
use corelog_server::{Server, ServerConfig};
use iggy::prelude::*;
use std::path::Path;
use std::time::{Duration, Instant};

fn free_port() -> u16 {
    common::listen_port("127.0.0.1")
}

fn cluster_config() -> ClusterConfig {
    ClusterConfig {
        shards: 2,
        nodes: (1..=3)
            .map(|id| NodeAddr {
                id,
                client: format!("127.0.0.1:{}", free_port()).parse().expect("addr"),
                replica: format!("127.0.0.1:{}", free_port()).parse().expect("addr"),
            })
            .collect(),
        secret_file: None,
        secret: Secret::new(b"the server tests' cluster secret".to_vec()),
    }
}

fn start_node(dir: &Path, id: u64, cluster: &ClusterConfig) -> Server {
    try_start_node(dir, id, cluster).expect("node starts")
}

fn try_start_node(
    dir: &Path,
    id: u64,
    cluster: &ClusterConfig,
) -> Result<Server, corelog_server::ServerError> {
    try_start_node_with(dir, id, cluster, corelog_server::Limits::default())
}

fn try_start_node_with(
    dir: &Path,
    id: u64,
    cluster: &ClusterConfig,
    limits: corelog_server::Limits,
) -> Result<Server, corelog_server::ServerError> {
    let node = cluster.node(id).expect("node");
    Server::start(ServerConfig {
        limits,
        shards: Some(2),
        pin_threads: false,
        fsync: corelog::FsyncPolicy::Batch,
        cluster: Some(ClusterSetup {
            node: id,
            config: cluster.clone(),
            options: ReplicaOptions {
                tick: Duration::from_millis(20),
                ..ReplicaOptions::default()
            },
        }),
        ..ServerConfig::new(dir, node.client)
    })
}

/// Three nodes on fresh ports, picked again when one was taken between
/// its pick and its bind (by another test's outgoing connection, say).
fn start_three(dirs: &[tempfile::TempDir]) -> (ClusterConfig, Vec<Server>) {
    start_three_with(dirs, &corelog_server::Limits::default())
}

fn start_three_with(
    dirs: &[tempfile::TempDir],
    limits: &corelog_server::Limits,
) -> (ClusterConfig, Vec<Server>) {
    for _ in 0..5 {
        let cluster = cluster_config();
        let mut servers = Vec::new();
        for (i, dir) in dirs.iter().enumerate() {
            match try_start_node_with(dir.path(), i as u64 + 1, &cluster, limits.clone()) {
                Ok(s) => servers.push(s),
                Err(e) if format!("{e:?}").contains("AddrInUse") => break,
                Err(e) => panic!("node {} starts: {e}", i + 1),
            }
        }
        if servers.len() == dirs.len() {
            return (cluster, servers);
        }
        for s in servers {
            s.shutdown().expect("stops");
        }
        for d in dirs {
            for e in std::fs::read_dir(d.path()).expect("dir").flatten() {
                let _ =
                    std::fs::remove_dir_all(e.path()).or_else(|_| std::fs::remove_file(e.path()));
            }
        }
    }
    panic!("no free ports for three nodes in five tries");
}

/// The node every running node names as leader, once it leads every group.
fn wait_for_leader(servers: &[&Server]) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let leaders: Vec<Option<u64>> = servers
            .iter()
            .map(|s| s.replica().expect("cluster").leader())
            .collect();
        if let Some(Some(l)) = leaders.first() {
            let all_agree = leaders.iter().all(|x| *x == Some(*l));
            let leads_all = servers
                .iter()
                .map(|s| s.replica().expect("cluster"))
                .find(|r| r.me() == *l)
                .is_some_and(|r| r.leads_all());
            if all_agree && leads_all {
                return *l;
            }
        }
        assert!(Instant::now() < deadline, "no leader: {leaders:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

async fn signed_in(addr: std::net::SocketAddr) -> IggyClient {
    let client = IggyClient::builder()
        .with_tcp()
        .with_server_address(addr.to_string())
        .build()
        .expect("client");
    client.connect().await.expect("connect");
    client.login_user("iggy", "iggy").await.expect("login");
    client
}

async fn send(c: &IggyClient, partition: u32, ids: std::ops::Range<u128>) {
    let mut batch: Vec<IggyMessage> = ids
        .map(|i| message(i, format!("payload-{i}").as_bytes(), None))
        .collect();
    c.send_messages(
        &named("s"),
        &named("t"),
        &Partitioning::partition_id(partition),
        &mut batch,
    )
    .await
    .expect("send");
}

async fn ids_in(c: &IggyClient, partition: u32) -> Vec<u128> {
    let polled = c
        .poll_messages(
            &named("s"),
            &named("t"),
            Some(partition),
            &Consumer::new(named("check")),
            &PollingStrategy::offset(0),
            1000,
            false,
        )
        .await
        .expect("poll");
    polled.messages.iter().map(|m| m.header.id).collect()
}

/// Every segment file under `DIR/partitions`, by relative path.
fn segment_files(dir: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    let mut out = std::collections::BTreeMap::new();
    let root = dir.join("partitions");
    for p in std::fs::read_dir(&root).expect("partitions") {
        let p = p.expect("entry").path();
        for f in std::fs::read_dir(&p).expect("partition") {
            let f = f.expect("file").path();
            if f.extension().is_some_and(|e| e == "log") {
                let rel = f.strip_prefix(&root).expect("rel").display().to_string();
                out.insert(rel, std::fs::read(&f).expect("read"));
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sdk_follows_the_leader_and_replicas_are_identical() {
    let dirs: Vec<_> = (0..3)
        .map(|_| tempfile::tempdir().expect("tempdir"))
        .collect();
    let (cluster, servers) = start_three(&dirs);
    let mut servers: Vec<Option<Server>> = servers.into_iter().map(Some).collect();
    let running: Vec<&Server> = servers.iter().flatten().collect();
    let leader = wait_for_leader(&running);
    let follower = (leader % 3) + 1;

    // Pointed at a follower, the SDK ends up on the leader.
    let c = signed_in(cluster.node(follower).expect("node").client).await;
    c.create_stream("s").await.expect("create stream");
    c.create_topic(
        &named("s"),
        "t",
        &TopicCreateOptions {
            partitions_count: Some(3),
            ..TopicCreateOptions::default()
        },
    )
    .await
    .expect("create topic");
    for p in 0..3u32 {
        send(&c, p, u128::from(p) * 100 + 1..u128::from(p) * 100 + 11).await;
    }
    for p in 0..3u32 {
        let want: Vec<u128> = (u128::from(p) * 100 + 1..u128::from(p) * 100 + 11).collect();
        assert_eq!(ids_in(&c, p).await, want);
    }
    let fi = (follower - 1) as usize;
    let forwarded = servers[fi]
        .as_ref()
        .and_then(|s| s.replica())
        .map(|r| r.forwarded());
    assert_eq!(
        forwarded,
        Some(0),
        "the SDK sent to the leader, not through the follower"
    );
    drop(c);

    // The leader stops; a client pointed at a survivor is sent to the new
    // leader, which holds everything and goes on.
    let li = (leader - 1) as usize;
    if let Some(s) = servers[li].take() {
        s.shutdown().expect("leader stops");
    }
    let survivors: Vec<&Server> = servers.iter().flatten().collect();
    let next = wait_for_leader(&survivors);
    assert_ne!(next, leader);
    let other = survivors
        .iter()
        .map(|s| s.replica().expect("cluster").me())
        .find(|id| *id != next)
        .expect("a follower");
    let c = signed_in(cluster.node(other).expect("node").client).await;
    send(&c, 1, 111..116).await;
    let want: Vec<u128> = (101..116).collect();
    assert_eq!(ids_in(&c, 1).await, want);
    drop(c);

    // The old leader comes back and catches up; then every node holds the
    // same segment files, byte for byte.
    servers[li] = Some(start_node(dirs[li].path(), leader, &cluster));
    let all: Vec<&Server> = servers.iter().flatten().collect();
    wait_for_leader(&all);
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let applied: Vec<Vec<u64>> = all
            .iter()
            .map(|s| {
                s.replica()
                    .expect("cluster")
                    .status()
                    .iter()
                    .map(|g| g.applied)
                    .collect()
            })
            .collect();
        if applied.windows(2).all(|w| w[0] == w[1]) {
            break;
        }
        assert!(Instant::now() < deadline, "not caught up: {applied:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for s in servers.iter_mut() {
        if let Some(s) = s.take() {
            s.shutdown().expect("stops");
        }
    }
    let files: Vec<_> = dirs.iter().map(|d| segment_files(d.path())).collect();
    assert_eq!(files[0].len(), 3, "three partitions: {:?}", files[0].keys());
    assert_eq!(files[0], files[1]);
    assert_eq!(files[0], files[2]);
}

/// Three nodes, the leader, and root signed in there with stream `s` and
/// topic `t` made.
struct Led {
    _dirs: Vec<tempfile::TempDir>,
    cluster: ClusterConfig,
    servers: Vec<Server>,
    leader: u64,
    leader_addr: std::net::SocketAddr,
    c: IggyClient,
}

async fn led_with_a_topic() -> Led {
    let dirs: Vec<_> = (0..3)
        .map(|_| tempfile::tempdir().expect("tempdir"))
        .collect();
    let (cluster, servers) = start_three(&dirs);
    let leader = wait_for_leader(&servers.iter().collect::<Vec<_>>());
    let leader_addr = cluster.node(leader).expect("node").client;
    let c = signed_in(leader_addr).await;
    c.create_stream("s").await.expect("create stream");
    c.create_topic(&named("s"), "t", &TopicCreateOptions::default())
        .await
        .expect("create topic");
    Led {
        _dirs: dirs,
        cluster,
        servers,
        leader,
        leader_addr,
        c,
    }
}

/// A send repeated under the same client, session and request number with
/// the same batch (as the SDK repeats one answered "not committed") is
/// answered from the first and stored once; another batch under the same
/// number (the SDK numbers a session's consecutive sends alike) is a new
/// send; a follower forwards a send to the leader.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeated_send_is_stored_once() {
    use common::raw::{send_payload, send_payload_ids, Raw};
    use iggy_binary_protocol::codes::SEND_MESSAGES_CODE;
    let Led {
        _dirs,
        cluster,
        servers,
        leader,
        leader_addr,
        c,
    } = led_with_a_topic().await;

    let payload = send_payload();
    let mut raw = Raw::connect(leader_addr);
    assert_eq!(raw.login("iggy", "iggy"), 0);
    let first = raw.send(SEND_MESSAGES_CODE, &payload);
    assert_eq!(first.status, 0);
    let again = raw.repeat(SEND_MESSAGES_CODE, &payload);
    assert_eq!(again.status, 0);
    assert_eq!(again.body, first.body, "the first send's answer");
    assert_eq!(ids_in(&c, 0).await, vec![1, 2], "stored once");

    // A send on a follower is forwarded to the leader, stored there (a new
    // send: another session) and answered with the leader's answer; its
    // repeat through the follower is answered from the leader's first.
    let follower = cluster.node((leader % 3) + 1).expect("node").client;
    let mut other = Raw::connect(follower);
    assert_eq!(other.login("iggy", "iggy"), 0);
    let forwarded = other.send(SEND_MESSAGES_CODE, &payload);
    assert_eq!(
        forwarded.status, 0,
        "a follower forwards a send to the leader"
    );
    assert_eq!(
        ids_in(&c, 0).await,
        vec![1, 2, 1, 2],
        "stored through the leader"
    );
    let forwarded_again = other.repeat(SEND_MESSAGES_CODE, &payload);
    assert_eq!(forwarded_again.status, 0);
    assert_eq!(
        forwarded_again.body, forwarded.body,
        "the forwarded send's answer"
    );
    assert_eq!(ids_in(&c, 0).await, vec![1, 2, 1, 2], "stored once");
    let fi = (leader % 3) as usize;
    assert_eq!(servers[fi].replica().map(|r| r.forwarded()), Some(2));

    let other = raw.repeat(SEND_MESSAGES_CODE, &send_payload_ids([3, 4]));
    assert_eq!(other.status, 0);
    assert_ne!(other.body, first.body, "another batch, another offset");
    assert_eq!(ids_in(&c, 0).await, vec![1, 2, 1, 2, 3, 4]);
    let next = raw.send(SEND_MESSAGES_CODE, &payload);
    assert_eq!(next.status, 0);
    assert_eq!(ids_in(&c, 0).await, vec![1, 2, 1, 2, 3, 4, 1, 2]);
}

/// The repeat table is keyed by the signed-in user and the session this
/// node gave the connection, not by the header's client and session
/// fields, which a client chooses: another user copying a first user's
/// client id, session number and request number, with the same batch,
/// gets a new send (stored), not the first user's answer (before: its
/// batch was dropped as a repeat and it was told the first user's offset).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_users_forged_repeat_is_a_new_send() {
    use common::raw::{send_payload, Raw};
    use iggy_binary_protocol::codes::SEND_MESSAGES_CODE;
    let Led {
        _dirs,
        cluster: _,
        servers: _servers,
        leader: _,
        leader_addr,
        c,
    } = led_with_a_topic().await;
    let sender = GlobalPermissions {
        send_messages: true,
        ..GlobalPermissions::default()
    };
    c.create_user(
        "mallory",
        "secret1",
        UserStatus::Active,
        Some(Permissions {
            global: sender,
            streams: None,
        }),
    )
    .await
    .expect("user");

    let payload = send_payload();
    let mut root = Raw::connect(leader_addr);
    assert_eq!(root.login("iggy", "iggy"), 0);
    let first = root.send(SEND_MESSAGES_CODE, &payload);
    assert_eq!(first.status, 0);
    assert_eq!(ids_in(&c, 0).await, vec![1, 2]);

    // Same client id (Raw's), root's session number, the same request
    // number (a sign-in, then the send) and the same batch.
    let mut mallory = Raw::connect(leader_addr);
    assert_eq!(mallory.login("mallory", "secret1"), 0);
    assert_ne!(mallory.session, root.session);
    mallory.session = root.session;
    let forged = mallory.send(SEND_MESSAGES_CODE, &payload);
    assert_eq!(forged.status, 0);
    assert_ne!(forged.body, first.body, "root's answer was handed out");
    assert_eq!(
        ids_in(&c, 0).await,
        vec![1, 2, 1, 2],
        "stored as a new send"
    );
    // Root's own repeat is still answered from its first send.
    let again = root.repeat(SEND_MESSAGES_CODE, &payload);
    assert_eq!(again.status, 0);
    assert_eq!(again.body, first.body);
    assert_eq!(ids_in(&c, 0).await, vec![1, 2, 1, 2]);
}

/// Offset files named `consumer` under `dir` (any partition).
fn offset_files_of(dir: &Path, consumer: u64) -> usize {
    let name = format!("{consumer:020}.offset");
    let mut n = 0;
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = e.path();
            if path.is_dir() {
                todo.push(path);
            } else if path.file_name().is_some_and(|f| *f == *name) {
                n += 1;
            }
        }
    }
    n
}

/// `--max-consumer-offsets` in a cluster: the store of one consumer more
/// is committed, then refused alike on every node when applied; the client
/// is told (the generic status, as one node tells it), and no node stores
/// it, while the consumer within the limit is stored on all three.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_max_consumer_offsets_no_node_stores_a_new_consumer() {
    let dirs: Vec<_> = (0..3)
        .map(|_| tempfile::tempdir().expect("tempdir"))
        .collect();
    let limits = corelog_server::Limits {
        max_consumer_offsets: 1,
        ..corelog_server::Limits::default()
    };
    let (cluster, servers) = start_three_with(&dirs, &limits);
    let leader = wait_for_leader(&servers.iter().collect::<Vec<_>>());
    let c = signed_in(cluster.node(leader).expect("node").client).await;
    c.create_stream("s").await.expect("create stream");
    c.create_topic(&named("s"), "t", &TopicCreateOptions::default())
        .await
        .expect("create topic");
    send(&c, 0, 0..1).await;
    let (s, t) = (named("s"), named("t"));
    let consumer = |id: u32| Consumer::new(Identifier::numeric(id).expect("id"));
    c.store_consumer_offset(&consumer(1), &s, &t, Some(0), 0)
        .await
        .expect("within the limit");
    let refused = c
        .store_consumer_offset(&consumer(2), &s, &t, Some(0), 0)
        .await;
    assert!(matches!(refused, Err(IggyError::Error)), "{refused:?}");
    // Applied everywhere: consumer 1's file on each node, 2's on none.
    let deadline = Instant::now() + Duration::from_secs(10);
    while dirs.iter().any(|d| offset_files_of(d.path(), 1) == 0) {
        assert!(
            Instant::now() < deadline,
            "consumer 1 not stored on every node"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    for d in &dirs {
        assert_eq!(offset_files_of(d.path(), 2), 0, "{}", d.path().display());
    }
    for server in servers {
        server.shutdown().expect("stops");
    }
}
