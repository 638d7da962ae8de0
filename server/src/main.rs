//! `corelog-server`: Iggy's TCP protocol over corelog.

use clap::Parser;
use corelog::FsyncPolicy;
use corelog_server::users::{DEFAULT_PASSWORD, DEFAULT_USERNAME};
use corelog_server::{Server, ServerConfig};
use std::net::SocketAddr;
use std::path::PathBuf;

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
    /// The user clients sign in as.
    #[arg(long, env = "CORELOG_SERVER_USERNAME", default_value = DEFAULT_USERNAME)]
    username: String,
    /// Its password (prefer the environment variable to the flag).
    #[arg(long, env = "CORELOG_SERVER_PASSWORD", default_value = DEFAULT_PASSWORD, hide_env_values = true)]
    password: String,
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
    let signals = match signal_hook::iterator::Signals::new([
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
    ]) {
        Ok(s) => s,
        Err(e) => {
            tracing::error!("cannot handle signals: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let cluster = match (args.node, &args.cluster) {
        (Some(node), Some(path)) => match corelog_replica::ClusterConfig::read(path) {
            Ok(config) => Some(corelog_server::server::ClusterSetup {
                node,
                config,
                options: corelog_replica::ReplicaOptions::default(),
            }),
            Err(e) => {
                tracing::error!("{e}");
                return std::process::ExitCode::FAILURE;
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
                return std::process::ExitCode::FAILURE;
            }
        },
        (None, None) => SocketAddr::from(([127, 0, 0, 1], 8090)),
    };
    let config = ServerConfig {
        shards: args.shards,
        fsync: args.fsync,
        username: args.username,
        password: args.password,
        cluster,
        ..ServerConfig::new(args.dir, listen)
    };
    let server = match Server::start(config) {
        Ok(s) => s,
        Err(e) => {
            tracing::error!("{e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let mut signals = signals;
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
