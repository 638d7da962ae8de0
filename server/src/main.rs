//! `corelog-server`: Iggy's TCP protocol over corelog.

use clap::Parser;
use corelog::FsyncPolicy;
use corelog_server::Limits;
use corelog_server::{Server, ServerConfig};
use corelog_server::{DEFAULT_PASSWORD, DEFAULT_USERNAME};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Serve Apache Iggy's TCP protocol (0.11.0-edge.4) from a corelog data
/// directory.
#[derive(Debug, Parser)]
#[command(name = "corelog-server", version)]
struct Args {
    /// Data directory (created if missing; locked while running).
    #[arg(long)]
    dir: PathBuf,
    /// Address to listen on (default 127.0.0.1:8090; in a cluster, this
    /// node's `client` address in the cluster file).
    #[arg(long)]
    listen: Option<SocketAddr>,
    /// In a cluster: this node's id in the cluster file.
    #[arg(long, requires = "cluster")]
    node: Option<u64>,
    /// In a cluster: the cluster file (TOML: `shards`, then `[[node]]` with
    /// `id`, `client`, `replica`), the same on every node.
    #[arg(long, requires = "node")]
    cluster: Option<PathBuf>,
    /// Shards (pinned threads); default one per CPU.
    #[arg(long)]
    shards: Option<usize>,
    /// When a send is acknowledged: never | batch | interval:MS.
    #[arg(long, default_value = "never")]
    fsync: FsyncPolicy,
    /// Segment size (K/M/G suffixes): a partition's segment is sealed past
    /// it (retention and DELETE_SEGMENTS delete whole sealed segments).
    #[arg(long, default_value_t = corelog::LogConfig::default().segment_bytes, value_parser = parse_bytes)]
    segment_bytes: u64,
    /// Poll replies to plain-TCP clients send each run of stored bytes of
    /// at least this size from its segment file (sendfile, no copy through
    /// user memory); `off`: every byte from the mappings (writev).
    #[arg(long, default_value = "64K", value_parser = parse_by_reference)]
    send_by_reference: ByReference,
    /// In a cluster under `--fsync never` or `interval:MS`: the leader
    /// sends each batch of at least this size to its followers from the
    /// segment file once written (sendfile), instead of from memory at
    /// once; `off` (the default: on loopback it measured no gain, see
    /// docs/bench/cluster-profile.md).
    #[arg(long, default_value = "off", value_parser = parse_by_reference)]
    replicate_by_reference: ByReference,
    /// Appends' writes of at most this size are made on the shards' own
    /// threads instead of by io_uring's workers (0: none); default 64K.
    #[arg(long, value_parser = parse_bytes)]
    inline_write_max: Option<u64>,
    /// The user clients sign in as.
    #[arg(long, env = "CORELOG_SERVER_USERNAME", default_value = DEFAULT_USERNAME)]
    username: String,
    /// Its password (prefer the environment variable to the flag).
    #[arg(long, env = "CORELOG_SERVER_PASSWORD", default_value = DEFAULT_PASSWORD, hide_env_values = true)]
    password: String,
    /// TLS on the client port: the certificate chain (PEM). Needs --tls-key.
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The certificate's private key (PEM). Needs --tls-cert.
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Connections served at once; past it new ones are closed at once.
    #[arg(long, default_value_t = Limits::default().max_connections)]
    max_connections: usize,
    /// Connections served at once from one peer address (an IPv6 /64);
    /// past it new ones from there are closed at once.
    #[arg(long, default_value_t = Limits::default().max_connections_per_address)]
    max_connections_per_address: usize,
    /// Largest request, header included (K/M/G suffixes, powers of 1024);
    /// default and most: the largest batch (64 MiB) plus 4 KiB.
    #[arg(long, value_parser = parse_bytes)]
    max_request_bytes: Option<u64>,
    /// Request bytes all connections may hold at once; a connection waits
    /// for room before reading more.
    #[arg(long, default_value = "256M", value_parser = parse_bytes)]
    max_inflight_bytes: u64,
    /// Close a connection that sent part of a request, then nothing for
    /// this long (e.g. 10s, 500ms).
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    stall_timeout: Duration,
    /// A request must arrive whole within this of its first byte, plus 1 s
    /// per MiB it declares.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    request_timeout: Duration,
    /// Close a connection not signed in this long after connecting (or
    /// signing out).
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    login_timeout: Duration,
    /// Threads checking passwords (argon2); other sign-ins wait their turn.
    #[arg(long, default_value_t = Limits::default().login_concurrency)]
    login_concurrency: usize,
    /// Close a connection after this many failed sign-ins.
    #[arg(long, default_value_t = Limits::default().max_failed_logins)]
    max_failed_logins: u32,
    /// Failed sign-ins one peer address may have at once...
    #[arg(long, default_value_t = Limits::default().login_failure_burst)]
    login_failure_burst: u32,
    /// ...and then per second; past them its sign-ins are refused unchecked.
    #[arg(long, default_value_t = Limits::default().login_failure_rate)]
    login_failure_rate: f64,
    /// Iggy's heartbeat interval: a consumer-group member silent for 1.2
    /// times it (no request, no PING) is evicted and its partitions move to
    /// the other members. 0 turns the check off.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    heartbeat_interval: Duration,
    /// Consumers (and groups) with a stored offset in one partition at
    /// once; a store for one more is refused until one is deleted.
    #[arg(long, default_value_t = Limits::default().max_consumer_offsets)]
    max_consumer_offsets: usize,
    /// Consumer groups one topic may hold; creating one more is refused
    /// until one is deleted.
    #[arg(long, default_value_t = Limits::default().max_consumer_groups)]
    max_consumer_groups: usize,
    /// Once listening, write `[tcp] address = "<bound address>"` here: the
    /// `runtime/current_config.toml` Iggy's test harness waits for.
    #[arg(long)]
    runtime_config: Option<PathBuf>,
    /// Tiered storage: copy sealed segments to this bucket and prefix
    /// (`s3://BUCKET/PREFIX`) and serve polls below the local log from it.
    /// Credentials and region from the environment, as AWS's tools read
    /// them: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY (AWS_SESSION_TOKEN),
    /// AWS_REGION.
    #[arg(long)]
    tier: Option<String>,
    /// The endpoint of an S3-compatible store (MinIO, SeaweedFS, Ceph:
    /// `http://host:port`, path-style); AWS's for the region when unset.
    #[arg(long, requires = "tier")]
    tier_endpoint: Option<String>,
    /// Per partition, bytes of sealed segments kept on local disk once the
    /// store holds them (K/M/G suffixes).
    #[arg(long, default_value = "1G", value_parser = parse_bytes)]
    local_retention_bytes: u64,
    /// Memory for chunks read from the store (K/M/G suffixes).
    #[arg(long, default_value = "256M", value_parser = parse_bytes)]
    tier_cache_bytes: u64,
    /// Bytes per ranged GET from the store, the chunk cache's unit (K/M/G
    /// suffixes; at least 64K).
    #[arg(long, default_value = "16M", value_parser = parse_bytes)]
    tier_chunk_bytes: u64,
}

/// `--tier` and its flags: the store, checked when the engine opens.
fn tier_of(args: &Args) -> Result<Option<corelog::TierConfig>, String> {
    let Some(url) = &args.tier else {
        return Ok(None);
    };
    let location = corelog::tier::S3Location::parse(url, args.tier_endpoint.as_deref())?;
    let store = corelog::tier::S3Store::from_env(location)?;
    Ok(Some(corelog::TierConfig {
        local_retention_bytes: args.local_retention_bytes,
        cache_bytes: args.tier_cache_bytes,
        chunk_bytes: args.tier_chunk_bytes.max(64 << 10),
        ..corelog::TierConfig::new(std::sync::Arc::new(store))
    }))
}

/// `N`, `NK`, `NM` or `NG` (powers of 1024; a trailing `B` or `iB` is allowed).
fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim().trim_end_matches("iB").trim_end_matches('B');
    let (digits, shift) = match t.chars().last() {
        Some('K' | 'k') => (&t[..t.len() - 1], 10),
        Some('M' | 'm') => (&t[..t.len() - 1], 20),
        Some('G' | 'g') => (&t[..t.len() - 1], 30),
        _ => (t, 0),
    };
    let n: u64 = digits.parse().map_err(|e| format!("{s:?}: {e}"))?;
    n.checked_mul(1 << shift)
        .ok_or_else(|| format!("{s:?} is too large"))
}

/// `--send-by-reference`: a size, or `off`.
#[derive(Debug, Clone, Copy)]
struct ByReference(Option<usize>);

fn parse_by_reference(s: &str) -> Result<ByReference, String> {
    if s.trim() == "off" {
        return Ok(ByReference(None));
    }
    let n = parse_bytes(s)?;
    usize::try_from(n)
        .map(|n| ByReference(Some(n)))
        .map_err(|_| format!("{s:?} is too large"))
}

/// `Nms`, `Ns` or `N` (seconds).
fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let (digits, millis) = match t.strip_suffix("ms") {
        Some(d) => (d, true),
        None => (t.strip_suffix('s').unwrap_or(t), false),
    };
    let n: u64 = digits.parse().map_err(|e| format!("{s:?}: {e}"))?;
    Ok(if millis {
        Duration::from_millis(n)
    } else {
        Duration::from_secs(n)
    })
}

fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let args = Args::parse();
    if args.username == DEFAULT_USERNAME && args.password == DEFAULT_PASSWORD {
        tracing::warn!(
            "signing in with Iggy's default credentials iggy/iggy; set CORELOG_SERVER_USERNAME and CORELOG_SERVER_PASSWORD"
        );
    }
    let mut signals = match signal_hook::iterator::Signals::new([
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
    ]) {
        Ok(s) => s,
        Err(e) => {
            tracing::error!("cannot handle signals: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let runtime_config = args.runtime_config.clone();
    let Some(config) = config_of(args) else {
        return std::process::ExitCode::FAILURE;
    };
    let server = match Server::start(config) {
        Ok(s) => s,
        Err(e) => {
            tracing::error!("{e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    if let Some(path) = &runtime_config {
        if let Err(e) = write_runtime_config(path, server.local_addr()) {
            tracing::error!("writing {}: {e}", path.display());
            let _ = server.shutdown();
            return std::process::ExitCode::FAILURE;
        }
    }
    if let Some(sig) = signals.forever().next() {
        tracing::info!("signal {sig}: shutting down");
    }
    match server.shutdown() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("shutdown: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// The server's configuration from the flags (and the cluster file they
/// name); `None`, with the reason logged, when they do not make one.
fn config_of(args: Args) -> Option<ServerConfig> {
    let cluster = match (args.node, &args.cluster) {
        (Some(node), Some(path)) => match corelog_replica::ClusterConfig::read(path) {
            Ok(config) => Some(corelog_server::ClusterSetup {
                node,
                config,
                options: corelog_replica::ReplicaOptions {
                    send_by_reference: args.replicate_by_reference.0,
                    ..corelog_replica::ReplicaOptions::default()
                },
            }),
            Err(e) => {
                tracing::error!("{e}");
                return None;
            }
        },
        _ => None,
    };
    let listen = match (args.listen, &cluster) {
        (Some(l), _) => l,
        (None, Some(c)) => match c.config.node(c.node) {
            Some(n) => n.client,
            None => {
                tracing::error!("node {} is not in the cluster file", c.node);
                return None;
            }
        },
        (None, None) => SocketAddr::from(([127, 0, 0, 1], 8090)),
    };
    let limits = limits_of(&args);
    let tier = match tier_of(&args) {
        Ok(t) => t,
        Err(e) => {
            tracing::error!("--tier: {e}");
            return None;
        }
    };
    Some(ServerConfig {
        tier,
        shards: args.shards,
        fsync: args.fsync,
        segment_bytes: args.segment_bytes,
        send_by_reference: args.send_by_reference.0,
        inline_write_max: args
            .inline_write_max
            .map_or(corelog::DEFAULT_INLINE_WRITE_MAX, |m| {
                usize::try_from(m).unwrap_or(usize::MAX)
            }),
        username: args.username,
        password: args.password,
        cluster,
        tls: match (args.tls_cert, args.tls_key) {
            (Some(cert), Some(key)) => Some(corelog_server::TlsFiles { cert, key }),
            _ => None,
        },
        limits,
        ..ServerConfig::new(args.dir, listen)
    })
}

/// The limits the flags set.
fn limits_of(args: &Args) -> Limits {
    Limits {
        max_connections: args.max_connections,
        max_connections_per_address: args.max_connections_per_address,
        max_request_bytes: args.max_request_bytes,
        max_inflight_bytes: args.max_inflight_bytes,
        stall_timeout: args.stall_timeout,
        request_timeout: args.request_timeout,
        login_timeout: args.login_timeout,
        login_concurrency: args.login_concurrency,
        max_failed_logins: args.max_failed_logins,
        login_failure_burst: args.login_failure_burst,
        login_failure_rate: args.login_failure_rate,
        heartbeat_interval: args.heartbeat_interval,
        max_consumer_offsets: args.max_consumer_offsets,
        max_consumer_groups: args.max_consumer_groups,
    }
}

/// Writes the bound address as Iggy's server writes its runtime config.
fn write_runtime_config(path: &std::path::Path, addr: SocketAddr) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, format!("[tcp]\naddress = \"{addr}\"\n"))?;
    std::fs::rename(&tmp, path)
}
