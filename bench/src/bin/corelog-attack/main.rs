//! `corelog-attack`: the hostile and careless clients of
//! `scripts/server-load.sh`, and the well-behaved producer they run
//! against. Loopback only, bounded in connections and time; each mode
//! prints one JSON line of what it saw.
//!
//! ```text
//! corelog-attack producer  --addr A --rate MBps --seconds S [--tls-ca F]
//! corelog-attack idle      --addr A --count 1000 --seconds S --limit-ms L
//! corelog-attack slowloris --addr A --count 200  --seconds S --limit-ms L
//! corelog-attack half      --addr A --count 20   --seconds S --limit-ms L
//! corelog-attack login-flood --addr A --count 50 --seconds S [--source 127.0.0.2]
//! corelog-attack garbage   --addr A --count 50   --seconds S
//! corelog-attack stored    --addr A
//! corelog-attack leader    --addr A --seconds S
//! corelog-attack replica-trickle --to R1,R2,R3 --count 80 --seconds S --limit-ms L [--source 127.0.0.9]
//! ```

mod client;
mod flood;
mod producer;
mod replica;
mod swarm;

use clap::{Parser, Subcommand};
use iggy_binary_protocol::codec::WireDecode;
use iggy_binary_protocol::codes::GET_TOPIC_CODE;
use iggy_binary_protocol::consensus::result_section_len;
use iggy_binary_protocol::requests::topics::GetTopicRequest;
use iggy_binary_protocol::responses::topics::get_topic::GetTopicResponse;
use iggy_binary_protocol::WireIdentifier;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::Ordering;
use std::time::Duration;

#[derive(Parser)]
#[command(name = "corelog-attack")]
struct Args {
    #[command(subcommand)]
    mode: Mode,
    /// The server (loopback only).
    #[arg(long, global = true, default_value = "127.0.0.1:8090")]
    addr: SocketAddr,
    /// The password of user iggy (producer, careless clients).
    #[arg(long, global = true, default_value = "iggy")]
    password: String,
    /// How long to run.
    #[arg(long, global = true, default_value_t = 10.0)]
    seconds: f64,
    /// Connections or clients.
    #[arg(long, global = true, default_value_t = 10)]
    count: usize,
    /// The limit that should close each connection, ms (reported against).
    #[arg(long, global = true, default_value_t = 10_000)]
    limit_ms: u64,
}

#[derive(Subcommand)]
enum Mode {
    /// Creates load/t and sends to it at a fixed rate.
    Producer {
        /// MB/s; 0: as fast as replies come.
        #[arg(long, default_value_t = 10.0)]
        rate: f64,
        #[arg(long, default_value_t = 1000)]
        message_bytes: usize,
        #[arg(long, default_value_t = 100)]
        batch: usize,
        /// TLS: the CA file to trust.
        #[arg(long)]
        tls_ca: Option<String>,
        #[arg(long, default_value = "localhost")]
        tls_domain: String,
        /// Create load/t first.
        #[arg(long)]
        setup: bool,
    },
    /// Connections that never send a byte.
    Idle,
    /// A request header, then a byte a second.
    Slowloris,
    /// Before sign-in, a LOGIN header declaring 3 KB (under the 4 KiB a
    /// signed-out request may be), then a byte a second.
    Trickle,
    /// Signed in, half a 1 MB batch, then silence (the socket kept open).
    Half,
    /// Wrong passwords in a loop.
    LoginFlood {
        #[arg(long, default_value = "127.0.0.2")]
        source: IpAddr,
    },
    /// Oversize and malformed requests, signed in.
    Garbage,
    /// Messages stored in load/t.
    Stored,
    /// The client address of the cluster's leader, as the node at `--addr`
    /// names it (asked again for up to `--seconds` while none is named).
    Leader,
    /// From an address that is no node's, `--count` connections to each
    /// replica port in `--to`, each declaring a first frame (half over a
    /// handshake's, half under) and then trickling a byte a second.
    ReplicaTrickle {
        /// The nodes' replica addresses (loopback only), comma-separated.
        #[arg(long, value_delimiter = ',', required = true)]
        to: Vec<SocketAddr>,
        /// Where the connections come from (no node's address).
        #[arg(long, default_value = "127.0.0.9")]
        source: IpAddr,
    },
}

fn main() -> std::process::ExitCode {
    let args = Args::parse();
    if !args.addr.ip().is_loopback() {
        eprintln!("corelog-attack: loopback addresses only");
        return std::process::ExitCode::from(2);
    }
    match run(args) {
        Ok(line) => {
            println!("{line}");
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("corelog-attack: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run(args: Args) -> Result<String, String> {
    let limit = Duration::from_millis(args.limit_ms);
    let swarm = |kind| {
        let s = swarm::run(
            kind,
            args.addr,
            &args.password,
            args.count.min(5000),
            args.seconds,
            limit,
        );
        format!(
            "{{\"opened\":{},\"closed\":{},\"max_close_ms\":{},\"overdue\":{},\"failed_to_open\":{},\"limit_ms\":{}}}",
            s.opened, s.closed, s.max_close_ms, s.overdue, s.failed_to_open, args.limit_ms
        )
    };
    let tally = |t: &flood::Tally| {
        format!(
            "{{\"connections\":{},\"requests\":{},\"refused\":{},\"accepted\":{},\"closed\":{},\"max_refused_per_connection\":{}}}",
            t.connections.load(Ordering::Relaxed),
            t.requests.load(Ordering::Relaxed),
            t.refused.load(Ordering::Relaxed),
            t.accepted.load(Ordering::Relaxed),
            t.closed.load(Ordering::Relaxed),
            t.max_per_connection.load(Ordering::Relaxed)
        )
    };
    let clients = args.count.min(200);
    Ok(match args.mode {
        Mode::Producer {
            rate,
            message_bytes,
            batch,
            tls_ca,
            tls_domain,
            setup,
        } => {
            let tls = match tls_ca {
                Some(ca) => Some(client::Tls::new(&ca, &tls_domain)?),
                None => None,
            };
            if setup {
                producer::setup(args.addr, tls.as_ref(), &args.password)?;
            }
            producer::run(&producer::Plan {
                addr: args.addr,
                tls,
                password: args.password.clone(),
                rate,
                seconds: args.seconds,
                message_bytes,
                batch,
            })?
        }
        Mode::Idle => swarm(swarm::Kind::Idle),
        Mode::Slowloris => swarm(swarm::Kind::Slowloris),
        Mode::Trickle => swarm(swarm::Kind::Trickle),
        Mode::Half => swarm(swarm::Kind::Half),
        Mode::LoginFlood { source } => {
            if !source.is_loopback() {
                return Err("--source must be a loopback address".into());
            }
            tally(&flood::login_flood(
                args.addr,
                source,
                clients,
                args.seconds,
            ))
        }
        Mode::Garbage => tally(&flood::garbage(
            args.addr,
            args.password.clone(),
            clients,
            args.seconds,
        )),
        Mode::Stored => format!("{{\"stored\":{}}}", stored(args.addr, &args.password)?),
        Mode::Leader => format!(
            "{{\"leader\":\"{}\"}}",
            replica::leader(args.addr, &args.password, args.seconds.min(60.0))?
        ),
        Mode::ReplicaTrickle { to, source } => {
            if !source.is_loopback() || to.iter().any(|a| !a.ip().is_loopback()) {
                return Err("--to and --source must be loopback addresses".into());
            }
            if to.len() > 8 {
                return Err("at most 8 replica ports".into());
            }
            let s = replica::run(
                &to,
                source,
                args.count.min(200),
                args.seconds.min(600.0),
                limit,
            );
            format!(
                "{{\"targets\":{},\"per_target\":{},\"opened\":{},\"closed\":{},\"closed_at_once\":{},\"closed_held\":{},\"max_close_ms\":{},\"max_close_large_ms\":{},\"overdue\":{},\"failed_to_open\":{},\"max_held_per_target\":{},\"bytes_trickled\":{},\"limit_ms\":{}}}",
                to.len(),
                args.count.min(200),
                s.opened,
                s.closed,
                s.closed_at_once,
                s.closed_held,
                s.max_close_ms,
                s.max_close_large_ms,
                s.overdue,
                s.failed_to_open,
                s.max_held_per_target,
                s.bytes_trickled,
                args.limit_ms
            )
        }
    })
}

/// Messages in load/t.
fn stored(addr: SocketAddr, password: &str) -> Result<u64, String> {
    let mut c = producer::signed_in(addr, None, password)?;
    let req = GetTopicRequest {
        stream_id: WireIdentifier::named(producer::STREAM).map_err(|e| e.to_string())?,
        topic_id: WireIdentifier::named(producer::TOPIC).map_err(|e| e.to_string())?,
    };
    use iggy_binary_protocol::codec::WireEncode;
    let reply = c
        .call(GET_TOPIC_CODE, &req.to_bytes())
        .map_err(|e| e.to_string())?;
    if reply.status != 0 {
        return Err(format!("get topic: status {}", reply.status));
    }
    // GET_TOPIC is not result-framed in this protocol version; accept both.
    let decoded = GetTopicResponse::decode(&reply.body).or_else(|e| {
        let at = result_section_len(&reply.body).ok_or(e)?;
        GetTopicResponse::decode(&reply.body[at..])
    });
    let (topic, _) = decoded.map_err(|e| e.to_string())?;
    Ok(topic.partitions.iter().map(|p| p.messages_count).sum())
}
