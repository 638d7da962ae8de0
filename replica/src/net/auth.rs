//! Peers prove to each other that they hold the cluster's secret before
//! anything else crosses a connection.
//!
//! ```text
//! connecting node                          accepting node
//!        ◄──── challenge: nonce_a (16 B) ──────
//!        ───── hello or fetch: body, nonce_c (16 B),
//!              proof_c = MAC(c, nonce_a, nonce_c, kind, group, body) ──►  checked
//!        ◄──── welcome: proof_a = MAC(a, nonce_a, nonce_c) ─────────────
//!  checked
//! ```
//!
//! MAC is keyed BLAKE3 under a key derived from the secret
//! (`blake3::derive_key`), the comparison constant-time (`blake3::Hash`'s
//! `==`). Fresh nonces on both sides: a recorded exchange cannot be
//! replayed to either node. A node that cannot prove itself is refused
//! before its first message is read as Raft or a fetch is served, and the
//! connecting node sends nothing beyond its first frame to an endpoint
//! that cannot prove itself. Without a secret, the key is derived from an
//! empty one: the exchange still runs (so a node with a secret and one
//! without refuse each other, naming the cause), but proves nothing.
//!
//! This authenticates connections; it does not encrypt them or protect
//! later frames from a machine on the path: the replica network belongs on
//! a private link (or a VPN such as WireGuard).

use super::frame::{self, Frame, FrameError, Kind};
use std::net::TcpStream;
use std::time::Instant;

const NONCE: usize = 16;
const PROOF: usize = 32;
const CONTEXT: &str = "corelog-replica 2026-12-01 peer authentication";

/// The key both sides of a connection prove they hold.
#[derive(Clone)]
pub struct Key([u8; 32]);

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Key(..)")
    }
}

impl Key {
    /// The key of a cluster secret (`None`: the empty secret).
    pub fn of(secret: Option<&crate::config::Secret>) -> Key {
        Key(blake3::derive_key(
            CONTEXT,
            secret.map_or(&[][..], |s| s.bytes()),
        ))
    }

    fn mac(&self, side: u8, a: &[u8; NONCE], c: &[u8; NONCE], rest: &[&[u8]]) -> blake3::Hash {
        let mut h = blake3::Hasher::new_keyed(&self.0);
        h.update(&[side]);
        h.update(a);
        h.update(c);
        for r in rest {
            h.update(&(r.len() as u64).to_le_bytes());
            h.update(r);
        }
        h.finalize()
    }
}

/// Why a connection was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AuthError {
    /// Reading or writing failed (also: no challenge in time).
    #[error("handshake: {0}")]
    Frame(#[from] FrameError),
    /// The other side sent something else than the exchange expects.
    #[error("handshake: expected {expected}, got a {got:?} frame of {len} bytes")]
    Unexpected {
        /// what was expected
        expected: &'static str,
        /// the frame's kind
        got: Kind,
        /// its body's length
        len: usize,
    },
    /// The other side's proof does not match: it does not hold this
    /// node's secret.
    #[error("its proof does not match: the nodes' cluster secrets differ")]
    WrongProof,
}

fn nonce() -> [u8; NONCE] {
    let mut n = [0u8; NONCE];
    // The kernel's generator; failing it, the time and a counter (unique,
    // so still fresh; only less unpredictable).
    if getrandom::fill(&mut n).is_err() {
        use std::sync::atomic::{AtomicU64, Ordering};
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        n[..8].copy_from_slice(&t.to_le_bytes());
        n[8..].copy_from_slice(&COUNTER.fetch_add(1, Ordering::Relaxed).to_le_bytes());
    }
    n
}

/// The connecting side: waits for the challenge, sends `kind`/`group`/`body`
/// with its proof, and checks the welcome.
pub fn open(
    s: &mut TcpStream,
    key: &Key,
    kind: Kind,
    group: u32,
    body: &[u8],
) -> Result<(), AuthError> {
    let ch = frame::read(s)?;
    let a: [u8; NONCE] = match (ch.kind, ch.body.as_ref().try_into()) {
        (Kind::Challenge, Ok(a)) => a,
        _ => return Err(unexpected("a challenge", &ch)),
    };
    let c = nonce();
    let proof = key.mac(b'c', &a, &c, &[&[kind as u8], &group.to_le_bytes(), body]);
    let mut out = Vec::with_capacity(body.len() + NONCE + PROOF);
    out.extend_from_slice(body);
    out.extend_from_slice(&c);
    out.extend_from_slice(proof.as_bytes());
    send(s, kind, group, &out)?;
    let w = frame::read(s)?;
    let got: [u8; PROOF] = match (w.kind, w.body.as_ref().try_into()) {
        (Kind::Welcome, Ok(p)) => p,
        _ => return Err(unexpected("a welcome", &w)),
    };
    if blake3::Hash::from(got) != key.mac(b'a', &a, &c, &[]) {
        return Err(AuthError::WrongProof);
    }
    Ok(())
}

/// The longest first frame a connecting side sends: a hello, fetch or
/// forward body (at most 24 bytes) and the nonce and proof.
pub const MAX_FIRST_FRAME: usize = 5 + 64 + NONCE + PROOF;

/// The accepting side: challenges, reads the first frame, checks its proof,
/// and welcomes. Returns the first frame without the proof. The whole
/// exchange must end by `deadline` (whatever the socket's per-read
/// timeout), and a first frame over [`MAX_FIRST_FRAME`] is refused
/// unread: a peer that has proved nothing holds neither time nor memory.
pub fn accept(s: &mut TcpStream, key: &Key, deadline: Instant) -> Result<Frame, AuthError> {
    let a = nonce();
    send(s, Kind::Challenge, 0, &a)?;
    let mut f = frame::read_max(&mut Until { s, deadline }, MAX_FIRST_FRAME)?;
    let Some(at) = f.body.len().checked_sub(NONCE + PROOF) else {
        return Err(unexpected("a first frame with a proof", &f));
    };
    let c: [u8; NONCE] = f.body[at..at + NONCE].try_into().expect("16 bytes");
    let proof: [u8; PROOF] = f.body[at + NONCE..].try_into().expect("32 bytes");
    let body = f.body.slice(..at);
    let want = key.mac(
        b'c',
        &a,
        &c,
        &[&[f.kind as u8], &f.group.to_le_bytes(), &body],
    );
    if blake3::Hash::from(proof) != want {
        return Err(AuthError::WrongProof);
    }
    send(s, Kind::Welcome, 0, key.mac(b'a', &a, &c, &[]).as_bytes())?;
    f.body = body;
    Ok(f)
}

/// A socket read against an overall deadline: each read waits no longer
/// than what is left of it.
struct Until<'a> {
    s: &'a mut TcpStream,
    deadline: Instant,
}

impl std::io::Read for Until<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(std::io::ErrorKind::TimedOut.into());
        }
        self.s.set_read_timeout(Some(left))?;
        self.s.read(buf)
    }
}

fn send(s: &mut TcpStream, kind: Kind, group: u32, body: &[u8]) -> Result<(), AuthError> {
    frame::write(s, kind, group, body).map_err(|e| AuthError::Frame(e.into()))
}

fn unexpected(expected: &'static str, f: &Frame) -> AuthError {
    AuthError::Unexpected {
        expected,
        got: f.kind,
        len: f.body.len(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Secret;
    use bytes::Bytes;
    use std::net::TcpListener;

    type Accepting = std::thread::JoinHandle<Result<Frame, AuthError>>;

    /// A node accepting one connection with `key` on a loopback port.
    fn accepting(key: Key) -> (std::net::SocketAddr, Accepting) {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = l.local_addr().expect("addr");
        let t = std::thread::spawn(move || {
            let (mut s, _) = l.accept().expect("accept");
            accept(
                &mut s,
                &key,
                Instant::now() + std::time::Duration::from_secs(5),
            )
        });
        (addr, t)
    }

    /// Runs `open` against `accept` over loopback with the two keys.
    fn exchange(server: Key, client: Key) -> (Result<Frame, AuthError>, Result<(), AuthError>) {
        let (addr, t) = accepting(server);
        let mut s = TcpStream::connect(addr).expect("connect");
        let opened = open(&mut s, &client, Kind::Hello, 3, b"body");
        drop(s);
        (t.join().expect("join"), opened)
    }

    fn key(s: &[u8]) -> Key {
        Key::of(Some(&Secret::new(s.to_vec()).expect("secret")))
    }

    #[test]
    fn the_same_secret_opens_and_the_first_frame_arrives_whole() {
        let (acc, opened) = exchange(
            key(b"0123456789abcdef0123456789abcdef"),
            key(b"0123456789abcdef0123456789abcdef"),
        );
        opened.expect("opened");
        let f = acc.expect("accepted");
        assert_eq!(
            (f.kind, f.group, f.body.as_ref()),
            (Kind::Hello, 3, &b"body"[..])
        );
    }

    /// An endpoint that challenges and welcomes without the secret (an
    /// impostor at a peer's address): the connecting node sends nothing
    /// more.
    #[test]
    fn an_impostor_cannot_welcome() {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = l.local_addr().expect("addr");
        let t = std::thread::spawn(move || {
            let (mut s, _) = l.accept().expect("accept");
            send(&mut s, Kind::Challenge, 0, &[7u8; NONCE]).expect("challenge");
            frame::read(&mut s).expect("hello");
            send(&mut s, Kind::Welcome, 0, &[0u8; PROOF]).expect("welcome");
        });
        let mut s = TcpStream::connect(addr).expect("connect");
        let opened = open(
            &mut s,
            &key(b"0123456789abcdef0123456789abcdef"),
            Kind::Hello,
            0,
            b"",
        );
        assert!(matches!(opened, Err(AuthError::WrongProof)), "{opened:?}");
        t.join().expect("join");
    }

    const SECRET: &[u8] = b"0123456789abcdef0123456789abcdef";

    /// A connecting node's first frame, answering the challenge `a`: what
    /// a machine on the path can record.
    fn recorded_first_frame(a: [u8; NONCE]) -> Frame {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = l.local_addr().expect("addr");
        let t = std::thread::spawn(move || {
            let (mut s, _) = l.accept().expect("accept");
            send(&mut s, Kind::Challenge, 0, &a).expect("challenge");
            frame::read(&mut s).expect("first frame")
        });
        let mut s = TcpStream::connect(addr).expect("connect");
        // No welcome comes: the recorder hangs up.
        let opened = open(&mut s, &key(SECRET), Kind::Hello, 3, b"body");
        assert!(opened.is_err(), "{opened:?}");
        t.join().expect("join")
    }

    /// Sends `f` to a node accepting with the secret, after its challenge.
    fn offer(f: &Frame) -> Result<Frame, AuthError> {
        let (addr, t) = accepting(key(SECRET));
        let mut s = TcpStream::connect(addr).expect("connect");
        frame::read(&mut s).expect("challenge");
        frame::write(&mut s, f.kind, f.group, &f.body).expect("send");
        let accepted = t.join().expect("join");
        drop(s);
        accepted
    }

    /// A first frame recorded from a node that holds the secret, sent
    /// again to another (or the same) node: its challenge is new, so the
    /// proof no longer matches. A proof that did not cover the accepting
    /// side's nonce would let anyone on the path replay a join.
    #[test]
    fn a_recorded_first_frame_cannot_be_replayed() {
        let f = recorded_first_frame([7u8; NONCE]);
        assert!(matches!(offer(&f), Err(AuthError::WrongProof)));
    }

    /// A machine on the path between a connecting node and a node that
    /// accepts: it passes the accepting node's challenge on, and the
    /// connecting node's first frame back after `change`. What the
    /// accepting node made of it.
    fn relayed(change: fn(&mut Frame)) -> Result<Frame, AuthError> {
        let (real_addr, node) = accepting(key(SECRET));
        let mut up = TcpStream::connect(real_addr).expect("connect");
        let challenge = frame::read(&mut up).expect("challenge");
        let path = TcpListener::bind("127.0.0.1:0").expect("bind");
        let path_addr = path.local_addr().expect("addr");
        let client = std::thread::spawn(move || {
            let mut s = TcpStream::connect(path_addr).expect("connect");
            open(&mut s, &key(SECRET), Kind::Hello, 3, b"body")
        });
        let (mut down, _) = path.accept().expect("accept");
        frame::write(&mut down, challenge.kind, challenge.group, &challenge.body)
            .expect("challenge on");
        let mut f = frame::read(&mut down).expect("first frame");
        change(&mut f);
        frame::write(&mut up, f.kind, f.group, &f.body).expect("first frame on");
        let accepted = node.join().expect("join");
        drop((up, down));
        let _ = client.join().expect("join");
        accepted
    }

    /// The proof covers the first frame's kind, group and body and the
    /// connecting side's nonce: changed on the path, each is refused.
    /// Passed on unchanged it is accepted (the exchange authenticates the
    /// connection's ends, not later frames: see the module doc).
    #[test]
    fn a_first_frame_changed_on_the_path_is_refused() {
        let f = relayed(|_| {}).expect("passed on unchanged");
        assert_eq!(
            (f.kind, f.group, f.body.as_ref()),
            (Kind::Hello, 3, &b"body"[..])
        );
        type Change = (&'static str, fn(&mut Frame));
        let changes: [Change; 5] = [
            ("the group", |f| f.group = 4),
            ("the kind", |f| f.kind = Kind::Fetch),
            ("a body byte", |f| f.body = flip(&f.body, 0)),
            ("the nonce", |f| {
                f.body = flip(&f.body, f.body.len() - PROOF - 1)
            }),
            ("the proof", |f| f.body = flip(&f.body, f.body.len() - 1)),
        ];
        for (what, change) in changes {
            let got = relayed(change);
            assert!(
                matches!(got, Err(AuthError::WrongProof)),
                "{what} changed on the path: {got:?}"
            );
        }
    }

    fn flip(b: &Bytes, at: usize) -> Bytes {
        let mut v = b.to_vec();
        v[at] ^= 1;
        v.into()
    }

    /// A welcome recorded from the real node, replayed by an impostor that
    /// sends the same challenge: the connecting node's own nonce is new,
    /// so the welcome does not prove anything and it is refused.
    #[test]
    fn a_recorded_welcome_cannot_be_replayed() {
        let a = [5u8; NONCE];
        // The real node's welcome for the challenge `a` and a client nonce.
        let f = recorded_first_frame(a);
        let at = f.body.len() - NONCE - PROOF;
        let c: [u8; NONCE] = f.body[at..at + NONCE].try_into().expect("nonce");
        let welcome = key(SECRET).mac(b'a', &a, &c, &[]);
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = l.local_addr().expect("addr");
        let t = std::thread::spawn(move || {
            let (mut s, _) = l.accept().expect("accept");
            send(&mut s, Kind::Challenge, 0, &a).expect("challenge");
            frame::read(&mut s).expect("first frame");
            send(&mut s, Kind::Welcome, 0, welcome.as_bytes()).expect("welcome");
        });
        let mut s = TcpStream::connect(addr).expect("connect");
        let opened = open(&mut s, &key(SECRET), Kind::Hello, 3, b"body");
        assert!(matches!(opened, Err(AuthError::WrongProof)), "{opened:?}");
        t.join().expect("join");
    }

    #[test]
    fn another_secret_or_none_is_refused() {
        for (server, client) in [
            (
                key(b"0123456789abcdef0123456789abcdef"),
                key(b"0123456789abcdef0123456789abcdeF"),
            ),
            (key(b"0123456789abcdef0123456789abcdef"), Key::of(None)),
            (Key::of(None), key(b"0123456789abcdef0123456789abcdef")),
        ] {
            let (acc, opened) = exchange(server, client);
            assert!(matches!(acc, Err(AuthError::WrongProof)), "{acc:?}");
            assert!(opened.is_err(), "the client saw no welcome");
        }
    }
}
