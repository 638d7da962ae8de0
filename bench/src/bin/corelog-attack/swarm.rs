//! Attackers that hold many connections from one thread (non-blocking
//! sockets, checked every 20 ms): idle connections, slowloris, half-sent
//! batches, sign-ins trickled. Each notes when the server closes a
//! connection, counted from the moment the limit that should close it
//! starts: connecting (idle and trickled sign-ins: `--login-timeout`,
//! which bounds a signed-out connection's whole life), the first byte of the request (slowloris: the
//! request deadline), the last byte sent (half a batch: `--stall-timeout`).
//! A closed connection is replaced while the run lasts.

use crate::client::{header, tcp};
use crate::producer::send_payload;
use iggy_binary_protocol::codes::{LOGIN_REGISTER_CODE, SEND_MESSAGES_CODE};
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// Which attack.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Idle,
    Slowloris,
    Half,
    Trickle,
}

struct Conn {
    stream: TcpStream,
    /// When the limit's clock started.
    from: Instant,
    next_byte: Instant,
    trickle: Vec<u8>,
}

/// What the attack saw.
#[derive(Default)]
pub struct Seen {
    pub opened: u64,
    pub closed: u64,
    pub max_close_ms: u64,
    /// Still open at the end although older than the limit (+1 s).
    pub overdue: u64,
    pub failed_to_open: u64,
}

/// A connection that sent header `h` and will send `len` more bytes, one
/// a second.
fn trickled(addr: SocketAddr, h: [u8; 256], len: usize) -> std::io::Result<Conn> {
    let mut stream = tcp(addr, None)?;
    let now = Instant::now();
    stream.write_all(&h)?;
    stream.set_nonblocking(true)?;
    Ok(Conn {
        stream,
        from: now,
        next_byte: now + Duration::from_secs(1),
        trickle: vec![0u8; len],
    })
}

fn open(kind: Kind, addr: SocketAddr, _password: &str) -> std::io::Result<Conn> {
    match kind {
        Kind::Idle => {
            let stream = tcp(addr, None)?;
            stream.set_nonblocking(true)?;
            let now = Instant::now();
            Ok(Conn {
                stream,
                from: now,
                next_byte: now,
                trickle: Vec::new(),
            })
        }
        // A whole header declaring 100 kB, then one byte a second.
        Kind::Slowloris => trickled(addr, header(SEND_MESSAGES_CODE, 100_000, 7, 1, 0), 100_000),
        // A sign-in's worth declared, then a byte a second: the login
        // deadline, not the request's, must close it.
        Kind::Trickle => trickled(addr, header(LOGIN_REGISTER_CODE, 3000, 11, 0, 0), 3000),
        Kind::Half => {
            // Half of a 1 MB batch, then nothing, the socket kept open
            // (signed out: the server reads a payload before refusing it).
            let mut stream = tcp(addr, None)?;
            let payload = send_payload(1000, 1000).map_err(std::io::Error::other)?;
            let h = header(SEND_MESSAGES_CODE, payload.len(), 9, 1, 0);
            stream.write_all(&h)?;
            stream.write_all(&payload[..payload.len() / 2])?;
            stream.set_nonblocking(true)?;
            let now = Instant::now();
            Ok(Conn {
                stream,
                from: now,
                next_byte: now + Duration::from_secs(3600),
                trickle: Vec::new(),
            })
        }
    }
}

/// Whether the server closed `c` (EOF or reset); sends a trickle byte when due.
fn closed(c: &mut Conn, now: Instant) -> bool {
    let mut b = [0u8; 512];
    match c.stream.read(&mut b) {
        Ok(0) => return true,
        Ok(_) => {}
        Err(e) if e.kind() == ErrorKind::WouldBlock => {}
        Err(_) => return true,
    }
    if now >= c.next_byte && !c.trickle.is_empty() {
        c.next_byte += Duration::from_secs(1);
        c.trickle.pop();
        match c.stream.write(&[0u8]) {
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            Err(_) => return true,
        }
    }
    false
}

/// Holds `count` connections of `kind` for `seconds`.
pub fn run(
    kind: Kind,
    addr: SocketAddr,
    password: &str,
    count: usize,
    seconds: f64,
    limit: Duration,
) -> Seen {
    let mut seen = Seen::default();
    let end = Instant::now() + Duration::from_secs_f64(seconds);
    let mut conns: Vec<Option<Conn>> = (0..count).map(|_| None).collect();
    while Instant::now() < end {
        let now = Instant::now();
        // At most 50 new connections a tick, so closes are seen in time.
        let mut may_open = 50;
        for slot in conns.iter_mut() {
            match slot {
                None if may_open == 0 => {}
                None => match open(kind, addr, password) {
                    Ok(c) => {
                        may_open -= 1;
                        seen.opened += 1;
                        *slot = Some(c);
                    }
                    Err(_) => seen.failed_to_open += 1,
                },
                Some(c) => {
                    if closed(c, now) {
                        seen.closed += 1;
                        let ms = now.saturating_duration_since(c.from).as_millis() as u64;
                        seen.max_close_ms = seen.max_close_ms.max(ms);
                        *slot = None;
                    }
                }
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let now = Instant::now();
    for c in conns.iter().flatten() {
        if now.saturating_duration_since(c.from) > limit + Duration::from_secs(1) {
            seen.overdue += 1;
        }
    }
    seen
}
