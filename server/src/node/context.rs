//! What every connection, on every shard, shares.

use crate::catalog::root::Users;
use crate::catalog::store::MetadataStore;
use crate::guard::budget::Budget;
use crate::guard::buffers::{pool_bytes, BufPool};
use crate::guard::counters::Counters;
use crate::guard::limits::Limits;
use crate::guard::login::log_limit::LogLimit;
use crate::guard::login::Logins;
use crate::node::membership::Memberships;
use crate::node::registry::Registry;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

/// The server's shared state. Reads of the catalog take a snapshot;
/// everything else is atomics or immutable.
#[derive(Debug)]
pub struct Context {
    /// The engine.
    pub engine: corelog::Handle,
    /// The data directory (GET_STATS reports its file system's space).
    pub dir: std::path::PathBuf,
    /// Streams, topics and their partitions.
    pub metadata: Arc<MetadataStore>,
    /// In a cluster: the replication, and every node.
    pub cluster: Option<Cluster>,
    /// TLS on the client port, when set up.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// Who may sign in.
    pub users: Arc<Users>,
    /// Largest request accepted (header included).
    pub max_request: u64,
    /// When the server started, µs since the epoch.
    pub started_at: u64,
    /// The address clients reach it at.
    pub listen: std::net::SocketAddr,
    /// Set when the server stops taking requests.
    pub closing: AtomicBool,
    /// Requests read and not yet answered.
    pub in_flight: AtomicUsize,
    /// Whether a send is answered only once durable (`--fsync batch`).
    pub durable_acks: bool,
    /// The engine's segment size in bytes (`--segment-bytes`).
    pub segment_bytes: u64,
    /// Poll replies to plain-TCP clients send runs of stored bytes at
    /// least this long from their segment files (`--send-by-reference`).
    pub send_by_reference: Option<usize>,
    /// The connected clients.
    pub clients: Arc<Registry>,
    /// What each client, and all of them, may hold.
    pub limits: Limits,
    /// The bytes of requests in flight (`limits.max_inflight_bytes`).
    pub budget: Arc<Budget>,
    /// Request payload buffers given back by the requests (and appends)
    /// done with them, for the next requests.
    pub buffers: Arc<BufPool>,
    /// Password checks and their throttle.
    pub logins: Logins,
    /// What happened to clients.
    pub counters: Counters,
    /// Log lines about closed connections, a few a second.
    pub close_log: LogLimit,
    /// Consumer-group members: this node's connections, in memory.
    pub groups: Memberships,
    sessions: AtomicU64,
    balanced: AtomicU64,
}

/// What the server's start gives the [`Context`]; the rest it makes.
#[derive(Debug)]
pub struct Parts {
    /// The engine.
    pub engine: corelog::Handle,
    /// The data directory.
    pub dir: std::path::PathBuf,
    /// The catalog.
    pub metadata: Arc<MetadataStore>,
    /// In a cluster: the replication, and every node.
    pub cluster: Option<Cluster>,
    /// TLS on the client port, when set up.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// Who may sign in.
    pub users: Users,
    /// Largest request accepted (header included).
    pub max_request: u64,
    /// The address clients reach it at.
    pub listen: std::net::SocketAddr,
    /// Whether a send is answered only once durable.
    pub durable_acks: bool,
    /// The engine's segment size in bytes.
    pub segment_bytes: u64,
    /// What each client, and all of them, may hold.
    pub limits: Limits,
    /// The smallest run of stored bytes a poll reply sends by reference.
    pub send_by_reference: Option<usize>,
}

impl Context {
    /// The shared state over a running engine, built once at start;
    /// starts the login pool.
    pub fn new(parts: Parts) -> std::io::Result<Context> {
        let Parts {
            engine,
            dir,
            metadata,
            cluster,
            tls,
            users,
            max_request,
            listen,
            durable_acks,
            segment_bytes,
            limits,
            send_by_reference,
        } = parts;
        let logins = Logins::new(
            limits.login_concurrency,
            limits.login_failure_burst,
            limits.login_failure_rate,
        )?;
        // A leader stamps a batch in place only if its bytes are its own:
        // a cluster node pools no payload buffers.
        let buffers = if cluster.is_some() {
            BufPool::unpooled()
        } else {
            BufPool::new(pool_bytes(limits.max_inflight_bytes))
        };
        Ok(Context {
            engine,
            dir,
            metadata,
            cluster,
            tls,
            users: Arc::new(users),
            max_request,
            started_at: now_micros(),
            listen,
            closing: AtomicBool::new(false),
            in_flight: AtomicUsize::new(0),
            durable_acks,
            segment_bytes,
            send_by_reference,
            clients: Arc::new(Registry::default()),
            budget: Budget::new(limits.max_inflight_bytes, max_request),
            buffers,
            limits,
            logins,
            counters: Counters::default(),
            close_log: LogLimit::new(5),
            groups: Memberships::default(),
            sessions: AtomicU64::new(0),
            balanced: AtomicU64::new(0),
        })
    }

    /// What a topic's absent option keys resolve to on this server.
    pub fn topic_defaults(&self) -> crate::catalog::options::TopicDefaults {
        crate::catalog::options::TopicDefaults {
            segment_bytes: self.segment_bytes,
            durable_acks: self.durable_acks,
        }
    }

    /// A new, non-zero session number.
    pub fn next_session(&self) -> u64 {
        self.sessions.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// The next partition index for balanced sends over `count` partitions.
    pub fn next_balanced(&self, count: u32) -> u32 {
        (self.balanced.fetch_add(1, Ordering::Relaxed) % u64::from(count.max(1))) as u32
    }
}

/// In a cluster: the replica, the nodes, and the lock that serialises this
/// leader's catalog changes.
#[derive(Debug)]
pub struct Cluster {
    /// The replication.
    pub replica: corelog_replica::ReplicaHandle,
    /// Every node.
    pub config: corelog_replica::ClusterConfig,
    pub(crate) catalog_writer: async_lock::Mutex<()>,
}

impl Cluster {
    /// A cluster over a running replica.
    pub fn new(
        replica: corelog_replica::ReplicaHandle,
        config: corelog_replica::ClusterConfig,
    ) -> Cluster {
        Cluster {
            replica,
            config,
            catalog_writer: async_lock::Mutex::new(()),
        }
    }
}

/// Microseconds since the Unix epoch.
pub fn now_micros() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}
