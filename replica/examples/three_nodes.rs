//! An embedder's three-node group in one process: three engines over
//! their own directories, three replicas on loopback, a send through the
//! leader, the same bytes read back from every node.
//!
//! ```sh
//! cargo run -p corelog-replica --example three_nodes
//! ```

use bytes::Bytes;
use corelog::{BatchBuilder, Engine, FsyncPolicy, MessageSpec, PollFrom};
use corelog_replica::{
    ClusterConfig, MetaMachine, NodeAddr, Origin, Replica, ReplicaConfig, ReplicaOptions, Secret,
};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// This embedder keeps no metadata of its own: every change is accepted
/// and only its index remembered (a real one would persist it).
#[derive(Debug, Default)]
struct NoMetadata {
    applied: AtomicU64,
}

impl MetaMachine for NoMetadata {
    fn applied_index(&self) -> u64 {
        self.applied.load(Ordering::SeqCst)
    }
    fn version(&self) -> u64 {
        self.applied_index()
    }
    fn apply(
        &self,
        index: u64,
        _base: u64,
        _data: &[u8],
    ) -> Result<bool, corelog_replica::MachineError> {
        self.applied.store(index, Ordering::SeqCst);
        Ok(true)
    }
    fn snapshot(&self) -> Bytes {
        Bytes::new()
    }
    fn restore(&self, index: u64, _data: &[u8]) -> Result<(), corelog_replica::MachineError> {
        self.applied.store(index, Ordering::SeqCst);
        Ok(())
    }
    fn keeps(&self, _partition: u64) -> bool {
        true
    }
}

fn port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut nodes = Vec::new();
    for id in 1..=3 {
        nodes.push(NodeAddr {
            id,
            client: format!("127.0.0.1:{}", port()?).parse()?,
            replica: format!("127.0.0.1:{}", port()?).parse()?,
        });
    }
    // Peers prove they hold this secret (a real cluster reads it from the
    // file its cluster file names).
    let secret = Secret::new(b"three nodes in one process, one secret".to_vec());
    let cluster = ClusterConfig {
        shards: 2,
        nodes,
        secret_file: None,
        secret,
    };
    let dirs: Vec<tempfile::TempDir> = (0..3)
        .map(|_| tempfile::tempdir())
        .collect::<Result<_, _>>()?;
    let mut running = Vec::new();
    for (i, dir) in dirs.iter().enumerate() {
        let mut config = corelog::Config::new(dir.path());
        config.shards = Some(cluster.shards);
        config.pin_threads = false;
        config.log.fsync = FsyncPolicy::Never; // the journal is the durable point
        let engine = Engine::open(config)?;
        let replica = Replica::start(
            engine.handle(),
            ReplicaConfig {
                dir: dir.path().to_owned(),
                me: i as u64 + 1,
                cluster: cluster.clone(),
                options: ReplicaOptions::default(),
            },
            Arc::new(NoMetadata::default()),
        )?;
        running.push((engine, replica));
    }

    // Wait for one node to lead every group.
    let deadline = Instant::now() + Duration::from_secs(10);
    let leader = loop {
        if let Some((_, r)) = running.iter().find(|(_, r)| r.handle().leads_all()) {
            break r.handle();
        }
        if Instant::now() > deadline {
            return Err("no leader within 10 s".into());
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    println!("node {} leads", leader.me());

    let mut b = BatchBuilder::new();
    b.push(MessageSpec {
        id: 1,
        timestamp: 0,
        payload: b"hello, replicas",
        user_headers: &[],
    });
    let ack = pollster::block_on(leader.append(7, Bytes::from(b.build()?), Origin::default()))?;
    println!("stored at offset {} on a majority", ack.base_offset);

    // Every node stores the leader's bytes.
    std::thread::sleep(Duration::from_millis(200));
    let mut copies = Vec::new();
    for (engine, _) in &running {
        let reply = engine
            .handle()
            .poll(7, PollFrom::Offset(0), 1 << 20)
            .wait()?;
        copies.push(reply.slices().flatten().copied().collect::<Vec<u8>>());
    }
    let same = copies.windows(2).all(|w| w[0] == w[1]);
    println!("{} bytes on each node, identical: {same}", copies[0].len());
    for (engine, replica) in running {
        replica.shutdown();
        engine.shutdown()?;
    }
    if same {
        Ok(())
    } else {
        Err("replicas differ".into())
    }
}
