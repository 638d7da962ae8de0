//! The replica-port trickle: a stranger (an address that is no configured
//! node's) holding connections to every node's replica port, each
//! declaring a first frame and then trickling a byte a second, as
//! `replica/tests/replica_port_trickle.rs` does at the library level. Half
//! declare a frame far over a handshake's (80 MiB: refused before any of
//! it is read), half one under it (100 bytes: only the handshake deadline
//! closes it). A node serves at most a few strangers at once and closes
//! the rest at once; each connection notes when the node closed it,
//! counted from its connect. The connections open spread over the first
//! second, and a closed one is replaced, from the same slot, about a
//! second later (a trickle, not a connection flood), while the run lasts.
//! Also: which node leads, from GET_CLUSTER_METADATA.

use crate::producer::signed_in;
use iggy_binary_protocol::codec::WireDecode;
use iggy_binary_protocol::codes::GET_CLUSTER_METADATA_CODE;
use iggy_binary_protocol::consensus::result_section_len;
use iggy_binary_protocol::responses::system::get_cluster_metadata::ClusterMetadataResponse;
use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// A declared first frame far over a handshake's (`auth::MAX_FIRST_FRAME`
/// is about 120 bytes).
const LARGE: u32 = 80 << 20;
/// A declared first frame under a handshake's: the node waits for it.
const SMALL: u32 = 100;
/// Open this long or longer: the node gave the connection one of its slots
/// (a refused one is closed within milliseconds).
const HELD: Duration = Duration::from_secs(1);
/// A slot whose connection was closed connects again this much later, give
/// or take half of it (so that the slots, all refused in the same tick,
/// do not all come back in the same tick).
const REOPEN: Duration = Duration::from_secs(1);

/// [`REOPEN`] from `now`, jittered.
fn reopen(now: Instant) -> Instant {
    now + REOPEN / 2 + REOPEN.mul_f64(fastrand::f64())
}

struct Conn {
    stream: TcpStream,
    /// When the connect returned.
    from: Instant,
    next_byte: Instant,
    large: bool,
}

struct Slot {
    target: usize,
    large: bool,
    conn: Option<Conn>,
    /// When to connect again.
    at: Instant,
}

/// What the trickle saw.
#[derive(Default)]
pub struct Seen {
    pub opened: u64,
    pub closed: u64,
    /// Closed within [`HELD`] of its connect (no slot, or a declared frame
    /// over a handshake's).
    pub closed_at_once: u64,
    /// Closed later: held a stranger's slot until the handshake deadline.
    pub closed_held: u64,
    pub max_close_ms: u64,
    /// The slowest close of a connection that declared [`LARGE`].
    pub max_close_large_ms: u64,
    /// Still open at the end although older than the limit (+1 s).
    pub overdue: u64,
    pub failed_to_open: u64,
    /// The most connections to one node open for [`HELD`] or longer at
    /// one moment: the stranger slots that node served.
    pub max_held_per_target: u64,
    pub bytes_trickled: u64,
}

fn connect(from: IpAddr, to: SocketAddr, large: bool) -> std::io::Result<Conn> {
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?;
    s.bind(&SocketAddr::new(from, 0).into())?;
    s.connect_timeout(&to.into(), Duration::from_secs(1))?;
    let mut stream: TcpStream = s.into();
    let now = Instant::now();
    // The first frame's length, ahead of the challenge (it waits in the
    // node's socket buffer until the node reads it).
    stream.write_all(&(if large { LARGE } else { SMALL }).to_le_bytes())?;
    stream.set_nonblocking(true)?;
    Ok(Conn {
        stream,
        from: now,
        next_byte: now + Duration::from_secs(1),
        large,
    })
}

/// Whether the node closed `c` (EOF or reset); reads the challenge and
/// sends a trickle byte when due.
fn closed(c: &mut Conn, now: Instant, trickled: &mut u64) -> bool {
    let mut b = [0u8; 256];
    match c.stream.read(&mut b) {
        Ok(0) => return true,
        Ok(_) => {}
        Err(e) if e.kind() == ErrorKind::WouldBlock => {}
        Err(_) => return true,
    }
    if now >= c.next_byte {
        c.next_byte += Duration::from_secs(1);
        match c.stream.write(&[0u8]) {
            Ok(n) => *trickled += n as u64,
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            Err(_) => return true,
        }
    }
    false
}

/// Holds `count` connections from `from` to each of `targets` for
/// `seconds`; `limit` is the deadline that should close each.
pub fn run(
    targets: &[SocketAddr],
    from: IpAddr,
    count: usize,
    seconds: f64,
    limit: Duration,
) -> Seen {
    let mut seen = Seen::default();
    let start = Instant::now();
    let end = start + Duration::from_secs_f64(seconds);
    let mut slots: Vec<Slot> = (0..targets.len())
        .flat_map(|t| {
            (0..count).map(move |i| Slot {
                target: t,
                large: i % 2 == 0,
                conn: None,
                at: start + REOPEN.mul_f64(i as f64 / count as f64),
            })
        })
        .collect();
    let mut held = vec![0u64; targets.len()];
    while Instant::now() < end {
        let now = Instant::now();
        held.iter_mut().for_each(|h| *h = 0);
        for slot in slots.iter_mut() {
            match &mut slot.conn {
                None if now < slot.at => {}
                None => match connect(from, targets[slot.target], slot.large) {
                    Ok(c) => {
                        seen.opened += 1;
                        slot.conn = Some(c);
                    }
                    Err(_) => {
                        seen.failed_to_open += 1;
                        slot.at = reopen(now);
                    }
                },
                Some(c) => {
                    if closed(c, now, &mut seen.bytes_trickled) {
                        let open = now.saturating_duration_since(c.from);
                        let ms = open.as_millis() as u64;
                        seen.closed += 1;
                        seen.max_close_ms = seen.max_close_ms.max(ms);
                        if c.large {
                            seen.max_close_large_ms = seen.max_close_large_ms.max(ms);
                        }
                        if open < HELD {
                            seen.closed_at_once += 1;
                        } else {
                            seen.closed_held += 1;
                        }
                        slot.conn = None;
                        slot.at = reopen(now);
                    } else if now.saturating_duration_since(c.from) >= HELD {
                        held[slot.target] += 1;
                    }
                }
            }
        }
        let most = held.iter().copied().max().unwrap_or(0);
        seen.max_held_per_target = seen.max_held_per_target.max(most);
        std::thread::sleep(Duration::from_millis(20));
    }
    let now = Instant::now();
    for c in slots.iter().filter_map(|s| s.conn.as_ref()) {
        if now.saturating_duration_since(c.from) > limit + Duration::from_secs(1) {
            seen.overdue += 1;
        }
    }
    seen
}

/// The client address of the node that `addr` names leader, asking again
/// for up to `seconds` while an election runs.
pub fn leader(addr: SocketAddr, password: &str, seconds: f64) -> Result<SocketAddr, String> {
    let end = Instant::now() + Duration::from_secs_f64(seconds);
    loop {
        let last = match named_leader(addr, password) {
            Ok(Some(l)) => return Ok(l),
            Ok(None) => "no leader named".to_owned(),
            Err(e) => e,
        };
        if Instant::now() >= end {
            return Err(format!("{addr}: {last} within {seconds} s"));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn named_leader(addr: SocketAddr, password: &str) -> Result<Option<SocketAddr>, String> {
    let mut c = signed_in(addr, None, password)?;
    let reply = c
        .call(GET_CLUSTER_METADATA_CODE, &[])
        .map_err(|e| e.to_string())?;
    if reply.status != 0 {
        return Err(format!("get cluster metadata: status {}", reply.status));
    }
    let decoded = ClusterMetadataResponse::decode(&reply.body).or_else(|e| {
        let at = result_section_len(&reply.body).ok_or(e)?;
        ClusterMetadataResponse::decode(&reply.body[at..])
    });
    let (m, _) = decoded.map_err(|e| e.to_string())?;
    // Role 0 is Iggy's ClusterNodeRole::Leader.
    let Some(n) = m.nodes.iter().find(|n| n.role == 0) else {
        return Ok(None);
    };
    let ip: IpAddr = n.ip.parse().map_err(|e| format!("{}: {e}", n.ip))?;
    Ok(Some(SocketAddr::new(ip, n.tcp_port)))
}
