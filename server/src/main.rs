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
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8090")]
    listen: SocketAddr,
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
    /// Once listening, write `[tcp] address = "<bound address>"` here: the
    /// `runtime/current_config.toml` Iggy's test harness waits for.
    #[arg(long)]
    runtime_config: Option<PathBuf>,
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
    let config = ServerConfig {
        shards: args.shards,
        fsync: args.fsync,
        username: args.username,
        password: args.password,
        ..ServerConfig::new(args.dir, args.listen)
    };
    let server = match Server::start(config) {
        Ok(s) => s,
        Err(e) => {
            tracing::error!("{e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    if let Some(path) = &args.runtime_config {
        if let Err(e) = write_runtime_config(path, server.local_addr()) {
            tracing::error!("writing {}: {e}", path.display());
            let _ = server.shutdown();
            return std::process::ExitCode::FAILURE;
        }
    }
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

/// Writes the bound address as Iggy's server writes its runtime config.
fn write_runtime_config(path: &std::path::Path, addr: SocketAddr) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, format!("[tcp]\naddress = \"{addr}\"\n"))?;
    std::fs::rename(&tmp, path)
}
