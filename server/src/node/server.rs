//! Starting and stopping the server: the engine, the catalog, the user,
//! and one acceptor thread that hands each connection to a shard, round
//! robin, to be served on that shard's monoio runtime.

use crate::catalog::root::{Users, UsersError};
use crate::catalog::store::{MetadataError, MetadataStore};
use crate::guard::counters::Counters;
use crate::guard::limits::{Limits, LimitsError};
use crate::net::connection;
use crate::node::context::{Context, Parts};
use corelog::{Config, Engine, FsyncPolicy, LogConfig};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How to run a server.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// The data directory (the engine's, plus `iggy-metadata`).
    pub dir: PathBuf,
    /// Where to listen.
    pub listen: SocketAddr,
    /// Shards; default one per CPU.
    pub shards: Option<usize>,
    /// Pin each shard to a CPU.
    pub pin_threads: bool,
    /// When an append is acknowledged.
    pub fsync: FsyncPolicy,
    /// Size at which a partition's segment is sealed and the next begins
    /// (retention and DELETE_SEGMENTS delete whole sealed segments).
    pub segment_bytes: u64,
    /// How often topics' retention (`message_expiry`, `max_topic_size`)
    /// is applied.
    pub retention_check: Duration,
    /// The user's name.
    pub username: String,
    /// The user's password (hashed at start, then dropped).
    pub password: String,
    /// What each client, and all of them, may hold.
    pub limits: Limits,
    /// TLS on the client port: a PEM certificate chain and its key.
    pub tls: Option<crate::net::tls::TlsFiles>,
    /// In a cluster: this node, every node, and the replication's timing.
    pub cluster: Option<ClusterSetup>,
    /// Poll replies to plain-TCP clients send each run of stored bytes of
    /// at least this many bytes from its segment file (`sendfile`: no copy
    /// through user memory), the rest from the mappings; `None`: every
    /// byte from the mappings (`writev`).
    pub send_by_reference: Option<usize>,
    /// Appends' writes of at most this many bytes are made on the shards'
    /// own threads instead of by io_uring's workers (0: none); default the
    /// engine's ([`corelog::DEFAULT_INLINE_WRITE_MAX`]).
    pub inline_write_max: usize,
    /// Tiered storage: sealed segments copied to an object store and read
    /// back from it (in a cluster, every node names the same store; only a
    /// partition's leader writes it).
    pub tier: Option<corelog::TierConfig>,
}

/// The smallest run of stored bytes a poll reply sends from its segment
/// file by default ([`ServerConfig::send_by_reference`]).
pub const DEFAULT_SEND_BY_REFERENCE: usize = 64 << 10;

/// How a node joins its cluster.
#[derive(Debug, Clone)]
pub struct ClusterSetup {
    /// This node's id.
    pub node: u64,
    /// Every node (the cluster file).
    pub config: corelog_replica::ClusterConfig,
    /// Timing (durability follows `fsync`).
    pub options: corelog_replica::ReplicaOptions,
}

impl ServerConfig {
    /// Defaults: Iggy's default user, `fsync=never`, one shard per CPU.
    pub fn new(dir: impl Into<PathBuf>, listen: SocketAddr) -> ServerConfig {
        ServerConfig {
            dir: dir.into(),
            listen,
            shards: None,
            pin_threads: true,
            fsync: FsyncPolicy::Never,
            segment_bytes: LogConfig::default().segment_bytes,
            retention_check: Duration::from_secs(30),
            username: crate::catalog::root::DEFAULT_USERNAME.into(),
            password: crate::catalog::root::DEFAULT_PASSWORD.into(),
            cluster: None,
            send_by_reference: Some(DEFAULT_SEND_BY_REFERENCE),
            inline_write_max: corelog::DEFAULT_INLINE_WRITE_MAX,
            limits: Limits::default(),
            tls: None,
            tier: None,
        }
    }
}

/// Why the server cannot start or stop cleanly.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServerError {
    /// The engine could not be opened.
    #[error("engine: {0}")]
    Open(#[from] corelog::OpenError),
    /// A request to the engine (the final flush) failed.
    #[error("engine: {0}")]
    Engine(#[from] corelog::RequestError),
    /// The engine did not shut down cleanly.
    #[error("engine: {0}")]
    Shutdown(#[from] corelog::ShutdownError),
    /// The catalog cannot be read.
    #[error(transparent)]
    Metadata(#[from] MetadataError),
    /// The user cannot be set up.
    #[error(transparent)]
    Users(#[from] UsersError),
    /// The replication cannot start.
    #[error("cluster: {0}")]
    Replica(#[from] corelog_replica::StartError),
    /// `--shards` contradicts the cluster file, whose shard count every
    /// node must share (a data group per shard index).
    #[error("--shards {flag} but the cluster file says shards = {file}")]
    ShardsMismatch {
        /// `--shards`
        flag: usize,
        /// the cluster file's
        file: usize,
    },
    /// The limits do not fit together.
    #[error(transparent)]
    Limits(#[from] LimitsError),
    /// The TLS certificate or key cannot be used.
    #[error(transparent)]
    Tls(#[from] crate::net::tls::TlsError),
    /// A thread (acceptor, login pool) cannot be started.
    #[error("start a thread: {0}")]
    Thread(std::io::Error),
    /// The listener cannot be set up.
    #[error("listen on {addr}: {source}")]
    Listen {
        /// the address
        addr: SocketAddr,
        /// the error
        source: std::io::Error,
    },
}

/// A running server.
#[derive(Debug)]
pub struct Server {
    ctx: Arc<Context>,
    replica: Option<corelog_replica::Replica>,
    engine: Option<Engine>,
    acceptor: Option<JoinHandle<()>>,
    /// The acceptor's listening socket, shut down to wake its `accept`.
    listening: Option<socket2::Socket>,
    stop: Arc<AtomicBool>,
    addr: SocketAddr,
}

impl Server {
    /// Opens the engine and the catalog, deletes partitions no topic
    /// holds (left by a crash mid-change), and starts accepting.
    pub fn start(config: ServerConfig) -> Result<Server, ServerError> {
        let users = Users::new(&config.username, &config.password)?;
        let tls = match &config.tls {
            Some(f) => Some(crate::net::tls::server_config(&f.cert, &f.key)?),
            None => None,
        };
        // In a cluster, a partition's manifest in the tier is written by
        // its group's leader only: the answer comes from the replica, once
        // it runs.
        let leadership = (config.cluster.is_some() && config.tier.is_some())
            .then(corelog_replica::TierLeadership::new);
        let engine = open_engine(&config, leadership.clone())?;
        let metadata = Arc::new(MetadataStore::open(&config.dir)?);
        delete_orphans(&engine, &metadata, config.cluster.is_some())?;
        let replica = match &config.cluster {
            Some(c) => Some(start_replica(&config, c, &engine, &metadata)?),
            None => None,
        };
        if let (Some(l), Some(r)) = (&leadership, &replica) {
            l.attach(&r.handle(), engine.handle());
        }
        apply_retention(&engine, &metadata)?;
        let max_request = config
            .limits
            .resolve(engine.handle().limits().max_batch_bytes)?;
        let (listener, addr) = bind(config.listen)?;
        let listening = listener
            .try_clone()
            .map(socket2::Socket::from)
            .map_err(|source| ServerError::Listen {
                addr: config.listen,
                source,
            })?;
        let cluster = replica
            .as_ref()
            .zip(config.cluster.as_ref())
            .map(|(r, c)| crate::node::context::Cluster::new(r.handle(), c.config.clone()));
        let ctx = Arc::new(
            Context::new(Parts {
                engine: engine.handle(),
                dir: config.dir.clone(),
                metadata,
                cluster,
                tls,
                users,
                max_request,
                listen: addr,
                durable_acks: config.fsync.acks_durable(),
                segment_bytes: config.segment_bytes,
                limits: config.limits.clone(),
                send_by_reference: config.send_by_reference,
            })
            .map_err(ServerError::Thread)?,
        );
        let stop = Arc::new(AtomicBool::new(false));
        let acceptor = std::thread::Builder::new()
            .name("corelog-acceptor".into())
            .spawn({
                let (ctx, stop) = (ctx.clone(), stop.clone());
                move || accept(listener, ctx, stop)
            })
            .map_err(ServerError::Thread)?;
        tracing::info!(
            "corelog-server listening on {addr}{}, data in {}, {} shards, fsync={}",
            if config.tls.is_some() { " (TLS)" } else { "" },
            config.dir.display(),
            engine.handle().shards(),
            config.fsync
        );
        Ok(Server {
            ctx,
            replica,
            engine: Some(engine),
            acceptor: Some(acceptor),
            listening: Some(listening),
            stop,
            addr,
        })
    }

    /// What happened to clients so far.
    pub fn counters(&self) -> crate::guard::counters::CountersSnapshot {
        self.ctx.counters.snapshot()
    }

    /// Bytes of requests in flight now.
    pub fn inflight_bytes(&self) -> u64 {
        self.ctx.budget.in_use()
    }

    /// Requests of at least [`crate::guard::buffers::MIN_POOLED`] bytes so
    /// far read into a reused buffer, and into a fresh one.
    pub fn request_buffers(&self) -> (u64, u64) {
        self.ctx.buffers.counts()
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// In a cluster: the replica's handle (who leads, each group's state).
    pub fn replica(&self) -> Option<corelog_replica::ReplicaHandle> {
        self.replica.as_ref().map(|r| r.handle())
    }

    /// Stops accepting, lets requests being served finish (up to 10 s),
    /// makes everything durable, stops the engine and releases the data
    /// directory. Connections are closed.
    pub fn shutdown(mut self) -> Result<(), ServerError> {
        self.stop_accepting();
        self.ctx.closing.store(true, Ordering::SeqCst);
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.ctx.in_flight.load(Ordering::SeqCst) > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(2));
        }
        if let Some(r) = self.replica.take() {
            for g in r.handle().status() {
                tracing::info!("cluster at shutdown: {g}");
            }
            r.shutdown();
        }
        let Some(engine) = self.engine.take() else {
            return Ok(());
        };
        let flushed = futures_block_on(engine.handle().flush_all());
        tracing::info!("engine at shutdown: {}", engine.handle().metrics());
        let stopped = engine.shutdown();
        flushed?;
        stopped?;
        tracing::info!("corelog-server stopped: {}", self.ctx.counters.snapshot());
        Ok(())
    }

    fn stop_accepting(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Shutting the listening socket down ends the acceptor's `accept`
        // with an error (Linux), so it sees `stop` without a connection; a
        // connection to itself is the fallback.
        let woken = self.listening.take().is_some_and(|l| wake_acceptor(&l));
        if !woken {
            let mut wake = self.addr;
            if wake.ip().is_unspecified() {
                wake.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
            }
            let _ = TcpStream::connect_timeout(&wake, Duration::from_secs(1));
        }
        if let Some(t) = self.acceptor.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if self.acceptor.is_some() {
            self.stop_accepting();
        }
    }
}

/// Shuts `listening` down, which makes a thread blocked in `accept` on it
/// return at once; whether that worked.
fn wake_acceptor(listening: &socket2::Socket) -> bool {
    listening.shutdown(std::net::Shutdown::Both).is_ok()
}

/// Accepts until `stop`, handing connections to shards round robin; past
/// `max_connections` open, or `max_connections_per_address` from its
/// address, a new connection is closed at once.
fn accept(listener: TcpListener, ctx: Arc<Context>, stop: Arc<AtomicBool>) {
    let shards = ctx.engine.shards().max(1);
    let mut next = 0usize;
    let refusals = crate::guard::login::log_limit::LogLimit::new(1);
    let per_address =
        crate::guard::per_address::PerAddress::new(ctx.limits.max_connections_per_address);
    for conn in listener.incoming() {
        if stop.load(Ordering::SeqCst) {
            break;
        }
        let stream = match conn {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("accept: {e}");
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        let open = ctx.counters.open.load(Ordering::Relaxed);
        if open >= ctx.limits.max_connections as u64 {
            Counters::add(&ctx.counters.refused, 1);
            if let Some(left_out) = refusals.allow(Instant::now()) {
                let peer = stream
                    .peer_addr()
                    .map(|a| a.to_string())
                    .unwrap_or_default();
                tracing::warn!(
                    "refused a connection from {peer}: {open} open, --max-connections {} ({left_out} more refused since the last line)",
                    ctx.limits.max_connections
                );
            }
            drop(stream);
            continue;
        }
        let peer = stream.peer_addr().ok();
        let slot = match peer.map(|p| per_address.take(p.ip())) {
            Some(None) => {
                Counters::add(&ctx.counters.refused, 1);
                if let Some(left_out) = refusals.allow(Instant::now()) {
                    tracing::warn!(
                        "refused a connection from {peer:?}: --max-connections-per-address {} open from there ({left_out} more refused since the last line)",
                        ctx.limits.max_connections_per_address
                    );
                }
                drop(stream);
                continue;
            }
            Some(slot) => slot,
            None => None,
        };
        Counters::add(&ctx.counters.open, 1);
        Counters::add(&ctx.counters.opened, 1);
        let shard = next % shards;
        next = next.wrapping_add(1);
        let c = ctx.clone();
        let spawned = ctx
            .engine
            .spawn_on(shard, move || async move {
                connection::serve(c, stream).await;
                drop(slot);
            })
            .wait();
        if let Err(e) = spawned {
            ctx.counters.open.fetch_sub(1, Ordering::Relaxed);
            tracing::warn!("cannot hand a connection to shard {shard}: {e}");
        }
    }
}

/// Connections the kernel queues for the acceptor; past them a client's
/// SYN is dropped (and retried), so a burst of connections waits.
const ACCEPT_BACKLOG: i32 = 1024;

/// Opens the engine: in a cluster with the cluster file's shard count,
/// and partition logs that are the replicated log (a commit mark, and
/// the fsync policy of `--fsync`: see `ReplicaOptions::log_config`).
fn open_engine(
    config: &ServerConfig,
    leadership: Option<Arc<corelog_replica::TierLeadership>>,
) -> Result<Engine, ServerError> {
    let base = LogConfig {
        fsync: config.fsync,
        segment_bytes: config.segment_bytes,
        max_consumer_offsets: config.limits.max_consumer_offsets,
        ..LogConfig::default()
    };
    let (shards, log) = match &config.cluster {
        Some(c) => {
            if let Some(flag) = config.shards.filter(|s| *s != c.config.shards) {
                return Err(ServerError::ShardsMismatch {
                    flag,
                    file: c.config.shards,
                });
            }
            (
                Some(c.config.shards),
                replica_options(config, c).log_config(base),
            )
        }
        None => (config.shards, base),
    };
    Ok(Engine::open(Config {
        shards,
        pin_threads: config.pin_threads,
        log,
        retention_check: config.retention_check,
        inline_writes: corelog::InlineWrites::up_to(config.inline_write_max),
        tier: config.tier.clone().map(|t| corelog::TierConfig {
            leadership: leadership.map(|l| l as Arc<dyn corelog::tier::Leadership>),
            ..t
        }),
        ..Config::new(&config.dir)
    })?)
}

/// The replica's options: the cluster's, with durability following
/// `--fsync`.
fn replica_options(config: &ServerConfig, c: &ClusterSetup) -> corelog_replica::ReplicaOptions {
    corelog_replica::ReplicaOptions {
        sync: config.fsync == FsyncPolicy::Batch,
        sync_every: match config.fsync {
            FsyncPolicy::Interval(d) => Some(d),
            _ => None,
        },
        ..c.options.clone()
    }
}

/// Starts this node's replica, the catalog its metadata machine; the
/// journal's durability follows `--fsync`.
fn start_replica(
    config: &ServerConfig,
    c: &ClusterSetup,
    engine: &Engine,
    metadata: &Arc<MetadataStore>,
) -> Result<corelog_replica::Replica, ServerError> {
    let machine = crate::node::cluster::CatalogMachine {
        metadata: metadata.clone(),
        engine: engine.handle(),
    };
    Ok(corelog_replica::Replica::start(
        engine.handle(),
        corelog_replica::ReplicaConfig {
            dir: config.dir.clone(),
            me: c.node,
            cluster: c.config.clone(),
            options: replica_options(config, c),
        },
        Arc::new(machine),
    )?)
}

/// The client listener on `at`, and the address it took.
fn bind(at: SocketAddr) -> Result<(TcpListener, SocketAddr), ServerError> {
    let listen_error = |source| ServerError::Listen { addr: at, source };
    let listener = listen(at).map_err(listen_error)?;
    let addr = listener.local_addr().map_err(listen_error)?;
    Ok((listener, addr))
}

/// A listening socket with [`ACCEPT_BACKLOG`] (std's is 128).
fn listen(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::STREAM,
        None,
    )?;
    socket.set_reuse_address(true)?;
    socket.bind(&addr.into())?;
    socket.listen(ACCEPT_BACKLOG)?;
    Ok(socket.into())
}

/// Deletes engine partitions that no topic holds. In a cluster, ids at or
/// past the catalog's counter are kept: a send may create a partition
/// before the catalog change that holds it is applied here.
fn delete_orphans(
    engine: &Engine,
    metadata: &MetadataStore,
    cluster: bool,
) -> Result<(), corelog::RequestError> {
    let catalog = metadata.snapshot();
    let held: std::collections::HashSet<u64> = catalog.all_partitions().collect();
    for p in engine.handle().partitions().wait()? {
        let unknown_yet = cluster && p >= catalog.next_partition;
        if !held.contains(&p) && !unknown_yet {
            tracing::warn!("deleting partition {p}: no topic holds it");
            engine.handle().delete_partition(p).wait()?;
        }
    }
    Ok(())
}

/// Gives every topic's partitions the retention its settings ask for.
fn apply_retention(engine: &Engine, metadata: &MetadataStore) -> Result<(), corelog::RequestError> {
    let catalog = metadata.snapshot();
    let handle = engine.handle();
    for t in catalog.streams.iter().flat_map(|s| s.topics.iter()) {
        let retention = t.retention();
        if retention == corelog::Retention::default() {
            continue;
        }
        for p in &t.partitions {
            handle.set_retention(*p, retention).wait()?;
        }
    }
    Ok(())
}

fn futures_block_on<T>(f: impl std::future::Future<Output = T>) -> T {
    pollster::block_on(f)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// A thread blocked in `accept` returns once the listener is shut
    /// down, with no connection made (a server whose own connection
    /// cannot reach it still stops).
    #[test]
    fn shutting_the_listener_down_wakes_a_blocked_accept() {
        let (listener, _) = bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let listening = socket2::Socket::from(listener.try_clone().unwrap());
        let (tx, rx) = std::sync::mpsc::channel();
        let blocked = std::thread::spawn(move || {
            tx.send(()).unwrap();
            let got = listener.accept().map(|_| ());
            tx.send(()).unwrap();
            got
        });
        rx.recv().unwrap();
        std::thread::sleep(Duration::from_millis(50));
        assert!(wake_acceptor(&listening));
        assert!(
            rx.recv_timeout(Duration::from_secs(10)).is_ok(),
            "accept still blocked 10 s after the shutdown"
        );
        assert!(blocked.join().unwrap().is_err(), "no connection was made");
    }
}
