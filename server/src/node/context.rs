//! What every connection, on every shard, shares.

use crate::catalog::root::Users;
use crate::catalog::store::MetadataStore;
use crate::commands::authz::{Authorized, Denied};
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

impl Context {
    /// A context over a running engine; starts the login pool.
    pub fn new(
        engine: corelog::Handle,
        metadata: Arc<MetadataStore>,
        users: Users,
        max_request: u64,
        listen: std::net::SocketAddr,
        durable_acks: bool,
        limits: Limits,
    ) -> std::io::Result<Context> {
        let logins = Logins::new(
            limits.login_concurrency,
            limits.login_failure_burst,
            limits.login_failure_rate,
        )?;
        Ok(Context {
            engine,
            dir: std::path::PathBuf::new(),
            metadata,
            cluster: None,
            tls: None,
            users: Arc::new(users),
            max_request,
            started_at: now_micros(),
            listen,
            closing: AtomicBool::new(false),
            in_flight: AtomicUsize::new(0),
            durable_acks,
            segment_bytes: corelog::LogConfig::default().segment_bytes,
            clients: Arc::new(Registry::default()),
            budget: Budget::new(limits.max_inflight_bytes),
            buffers: BufPool::new(pool_bytes(limits.max_inflight_bytes)),
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
    catalog_writer: async_lock::Mutex<()>,
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

/// Why a change of state was not made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The engine refused or failed.
    #[error(transparent)]
    Engine(#[from] corelog::RequestError),
    /// The replication refused or failed.
    #[error(transparent)]
    Replica(#[from] corelog_replica::ReplicaError),
}

/// Every change of state goes through these: a send, a stored offset, a
/// catalog change and the partitions it creates or deletes. On one node
/// they go straight to the engine and the catalog file; in a cluster they
/// are replicated first (the `corelog-replica` crate), and every node
/// applies them. Reads use `engine` and `metadata.snapshot()` directly.
impl Context {
    /// The replica, in a cluster.
    pub fn replica(&self) -> Option<&corelog_replica::ReplicaHandle> {
        self.cluster.as_ref().map(|c| &c.replica)
    }

    /// Stores a producer's batch in `partition`; resolves at the fsync
    /// policy's durable point (in a cluster: on a majority's, and a repeat
    /// of a send from the same `origin` is answered from the first; a node
    /// that does not lead answers such repeats and forwards other sends to
    /// the leader, answering with its answer).
    pub async fn append(
        &self,
        partition: u64,
        batch: bytes::Bytes,
        origin: corelog_replica::Origin,
    ) -> Result<corelog::AppendAck, StoreError> {
        match self.replica() {
            Some(r) if r.leads_all() => Ok(r.append(partition, batch, origin).await?),
            Some(r) => Ok(r.append_or_forward(partition, batch, origin).await?),
            None => Ok(self.engine.append(partition, batch).await?),
        }
    }

    /// Durably stores `consumer`'s offset in `partition`.
    pub async fn store_offset(
        &self,
        partition: u64,
        consumer: u64,
        offset: u64,
    ) -> Result<(), StoreError> {
        match self.replica() {
            Some(r) => Ok(r.store_offset(partition, consumer, offset).await?),
            None => Ok(self
                .engine
                .store_offset(partition, consumer, offset)
                .await?),
        }
    }

    /// Durably forgets `consumer`'s offset in `partition`; resolves to
    /// whether there was one.
    pub async fn delete_offset(&self, partition: u64, consumer: u64) -> Result<bool, StoreError> {
        match self.replica() {
            Some(r) => Ok(r.delete_offset(partition, consumer).await?),
            None => Ok(self.engine.delete_offset(partition, consumer).await?),
        }
    }

    /// Deletes the oldest `count` sealed segments of `partition` (never
    /// its active one); resolves to how many were deleted.
    pub async fn delete_segments(&self, partition: u64, count: usize) -> Result<usize, StoreError> {
        match self.replica() {
            Some(r) => Ok(r.delete_segments(partition, count).await?),
            None => Ok(self.engine.delete_segments(partition, count).await?.len()),
        }
    }

    /// Sets the retention of engine partitions (derived from their topic's
    /// settings in the catalog: every node applies it from its own copy,
    /// at start and after each topic change).
    pub async fn set_retention(
        &self,
        partitions: &[u64],
        retention: corelog::Retention,
    ) -> Result<(), corelog::RequestError> {
        let sets: Vec<_> = partitions
            .iter()
            .map(|p| self.engine.set_retention(*p, retention))
            .collect();
        for s in sets {
            s.await?;
        }
        Ok(())
    }

    /// Applies `change` to the catalog and persists it (see
    /// [`MetadataStore::update_async`]: the file I/O off the shard). In a
    /// cluster the changed catalog is replicated, and every node applies it
    /// (creating and deleting the engine partitions it added or dropped)
    /// before this returns.
    ///
    /// `request`'s permission check runs first, under the writer lock,
    /// against the catalog `change` is given: what `change` resolves is
    /// what was checked (`commands/authz.rs`).
    pub async fn update_catalog<T, E>(
        &self,
        request: &Authorized,
        change: impl FnOnce(&mut crate::catalog::model::Catalog) -> Result<T, E>,
    ) -> Result<T, E>
    where
        E: From<crate::catalog::store::MetadataError> + From<Denied>,
    {
        let change = |c: &mut crate::catalog::model::Catalog| {
            request.check(c)?;
            change(c)
        };
        let Some(cluster) = &self.cluster else {
            return self.metadata.update_async(change).await;
        };
        let _writer = cluster.catalog_writer.lock().await;
        let base = self.metadata.snapshot();
        let mut next = (*base).clone();
        let out = change(&mut next)?;
        if next == *base {
            return Ok(out);
        }
        let body = bytes::Bytes::from(crate::catalog::store::encode_body(&next));
        cluster
            .replica
            .propose_meta(base.replica_version, body)
            .await
            .map_err(crate::catalog::store::MetadataError::from)?;
        Ok(out)
    }

    /// Creates engine partitions (those that exist stay as they are). In a
    /// cluster, the catalog change that holds them creates them on every
    /// node.
    pub async fn create_partitions(&self, partitions: &[u64]) -> Result<(), StoreError> {
        if self.cluster.is_some() {
            return Ok(());
        }
        let creates: Vec<_> = partitions
            .iter()
            .map(|p| self.engine.create_partition(*p))
            .collect();
        for c in creates {
            c.await?;
        }
        Ok(())
    }

    /// Deletes engine partitions and their data. In a cluster, the catalog
    /// change that dropped them deletes them on every node.
    pub async fn delete_partitions(&self, partitions: &[u64]) -> Result<(), StoreError> {
        if self.cluster.is_some() {
            return Ok(());
        }
        let deletes: Vec<_> = partitions
            .iter()
            .map(|p| self.engine.delete_partition(*p))
            .collect();
        for d in deletes {
            d.await?;
        }
        Ok(())
    }
}

/// Microseconds since the Unix epoch.
pub fn now_micros() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}
