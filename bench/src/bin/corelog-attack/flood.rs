//! Attackers with a thread each: a login flood (wrong passwords in a
//! loop, reconnecting whenever the server closes) and careless clients
//! sending oversize and malformed requests. Both count what the server
//! answered; neither must ever get a request through.

use crate::client::{tcp, Client};
use crate::producer::send_payload;
use iggy_binary_protocol::codes::{CREATE_STREAM_CODE, SEND_MESSAGES_CODE};
use iggy_binary_protocol::consensus::RequestHeader;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Counts over all threads.
#[derive(Default)]
pub struct Tally {
    pub connections: AtomicU64,
    pub requests: AtomicU64,
    pub refused: AtomicU64,
    pub accepted: AtomicU64,
    pub closed: AtomicU64,
    /// Most refusals one connection got before the server closed it.
    pub max_per_connection: AtomicU64,
}

fn spawn_all(clients: usize, seconds: f64, body: impl Fn(Instant) + Send + Sync + 'static) {
    let end = Instant::now() + Duration::from_secs_f64(seconds);
    let body = Arc::new(body);
    let threads: Vec<_> = (0..clients)
        .map(|_| {
            let body = body.clone();
            std::thread::Builder::new()
                .stack_size(256 << 10)
                .spawn(move || body(end))
        })
        .filter_map(Result::ok)
        .collect();
    for t in threads {
        let _ = t.join();
    }
}

/// A fresh connection sends a header declaring 2 GB: the server must
/// close it without reading or answering.
fn oversize(addr: SocketAddr, t: &Tally) {
    let Ok(stream) = tcp(addr, None) else { return };
    let Ok(mut c) = Client::over(stream, None) else {
        return;
    };
    t.requests.fetch_add(1, Ordering::Relaxed);
    let mut h = c.header(SEND_MESSAGES_CODE, 0);
    let at = std::mem::offset_of!(RequestHeader, size);
    h[at..at + 4].copy_from_slice(&0x7fff_0000u32.to_le_bytes());
    let _ = c.send_raw(&h, &[]);
    match c.read_reply() {
        Ok(r) if r.status == 0 => t.accepted.fetch_add(1, Ordering::Relaxed),
        Ok(_) => t.refused.fetch_add(1, Ordering::Relaxed),
        Err(_) => t.closed.fetch_add(1, Ordering::Relaxed),
    };
}

/// `clients` threads signing in with a wrong password from `source`.
pub fn login_flood(addr: SocketAddr, source: IpAddr, clients: usize, seconds: f64) -> Arc<Tally> {
    let tally = Arc::new(Tally::default());
    let t = tally.clone();
    spawn_all(clients, seconds, move |end| {
        while Instant::now() < end {
            let Ok(stream) = tcp(addr, Some(source)) else {
                std::thread::sleep(Duration::from_millis(10));
                continue;
            };
            let Ok(mut c) = Client::over(stream, None) else {
                continue;
            };
            t.connections.fetch_add(1, Ordering::Relaxed);
            let mut refused_here = 0;
            while Instant::now() < end {
                t.requests.fetch_add(1, Ordering::Relaxed);
                match c.login("iggy", "not-the-password") {
                    Ok(0) => {
                        t.accepted.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(_) => {
                        t.refused.fetch_add(1, Ordering::Relaxed);
                        refused_here += 1;
                    }
                    Err(_) => {
                        t.closed.fetch_add(1, Ordering::Relaxed);
                        break;
                    }
                }
            }
            t.max_per_connection
                .fetch_max(refused_here, Ordering::Relaxed);
        }
    });
    tally
}

/// `clients` signed-in threads sending, round robin: an unknown command,
/// a CREATE_STREAM of garbage, a batch with a flipped byte, a batch with a
/// reserved byte set, a truncated batch, an undecodable header; and every
/// tenth round, on a fresh connection (no sign-in needed), a header
/// declaring 2 GB, which the server must close at once.
pub fn garbage(addr: SocketAddr, password: String, clients: usize, seconds: f64) -> Arc<Tally> {
    let tally = Arc::new(Tally::default());
    let t = tally.clone();
    let good = send_payload(10, 100).unwrap_or_default();
    spawn_all(clients, seconds, move |end| {
        let mut round = 0u64;
        while Instant::now() < end {
            let Ok(stream) = tcp(addr, None) else {
                std::thread::sleep(Duration::from_millis(10));
                continue;
            };
            let Ok(mut c) = Client::over(stream, None) else {
                continue;
            };
            if !matches!(c.login("iggy", &password), Ok(0)) {
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
            t.connections.fetch_add(1, Ordering::Relaxed);
            while Instant::now() < end {
                round += 1;
                t.requests.fetch_add(1, Ordering::Relaxed);
                if round.is_multiple_of(10) {
                    oversize(addr, &t);
                }
                let reply = match round % 7 {
                    0 => c.call(60_000, b"what is this"),
                    1 => c.call(CREATE_STREAM_CODE, &[0xff; 37]),
                    2 => {
                        let mut p = good.clone();
                        if let Some(b) = p.last_mut() {
                            *b ^= 1;
                        }
                        c.call(SEND_MESSAGES_CODE, &p)
                    }
                    3 => {
                        let mut p = good.clone();
                        let at = p.len() - (10 * (48 + 100)) - 256 + 100;
                        p[at] = 9;
                        c.call(SEND_MESSAGES_CODE, &p)
                    }
                    4 => c.call(SEND_MESSAGES_CODE, &good[..good.len() - 7]),
                    5 => {
                        let mut h = c.header(SEND_MESSAGES_CODE, good.len());
                        h[std::mem::offset_of!(RequestHeader, command)] = 0xee;
                        c.send_raw(&h, &good).and_then(|_| c.read_reply())
                    }
                    _ => c.call(SEND_MESSAGES_CODE, &good[..300]),
                };
                match reply {
                    Ok(r) if r.status == 0 => {
                        t.accepted.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(_) => {
                        t.refused.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(_) => {
                        t.closed.fetch_add(1, Ordering::Relaxed);
                        break;
                    }
                }
            }
        }
    });
    tally
}
