//! Fetching a partition's stored batches from a peer: how a node installing
//! a snapshot (its journal is too far behind the leader's, or its data
//! directory was wiped) gets the data the snapshot names. The batches
//! travel as stored (stamped, verbatim) and are stored with
//! `append_stamped`, which checks every checksum and that they continue
//! the partition.

use super::frame::{self, Kind};
use bytes::Bytes;
use corelog::replication::ReplicaLog;
use corelog::PollFrom;
use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// Bytes per poll while serving a fetch.
const CHUNK: u64 = 4 << 20;

/// Why a fetch failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FetchError {
    /// The connection failed.
    #[error("fetch from {addr}: {source}")]
    Io {
        /// the peer
        addr: SocketAddr,
        /// the error
        source: std::io::Error,
    },
    /// A frame could not be read.
    #[error("fetch from {addr}: {source}")]
    Frame {
        /// the peer
        addr: SocketAddr,
        /// the error
        source: frame::FrameError,
    },
    /// The peer refused or failed.
    /// (What it said is logged where its answer arrives.)
    #[error("fetch from {addr}: the peer refused or failed")]
    Refused {
        /// the peer
        addr: SocketAddr,
    },
    /// Storing a fetched batch failed.
    #[error("fetch from {addr}: storing partition {partition}: {source}")]
    Store {
        /// the peer
        addr: SocketAddr,
        /// the partition
        partition: u64,
        /// the engine's error
        source: corelog::RequestError,
    },
    /// The peer sent something else.
    #[error("fetch from {addr}: {what}")]
    Protocol {
        /// the peer
        addr: SocketAddr,
        /// what came
        what: Unexpected,
    },
}

/// What a fetching node did not expect from the leader.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Unexpected {
    /// A batch frame whose bytes are no whole batch.
    #[error("a cut batch")]
    CutBatch,
    /// A frame of a kind a fetch does not answer with.
    #[error("unexpected {0:?} frame")]
    Frame(frame::Kind),
}

/// Fetches `partition`'s batches `[from, to)` from the peer at `addr` and
/// stores each with `append_stamped` on `engine`. Returns the offset after
/// the last batch stored.
#[allow(clippy::too_many_arguments)]
pub fn fetch(
    local: std::net::IpAddr,
    addr: SocketAddr,
    key: &super::auth::Key,
    group: u32,
    partition: u64,
    from: u64,
    to: u64,
    engine: &corelog::Handle,
) -> Result<u64, FetchError> {
    let io = |source| FetchError::Io { addr, source };
    #[cfg(feature = "testing")]
    hold::wait(addr);
    // From this node's replica address, as its peer connections: the
    // leader's replica port keeps its slots for the configured nodes.
    let mut s = super::socket::connect_from(local, addr).map_err(io)?;
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .map_err(io)?;
    let mut body = Vec::with_capacity(24);
    for v in [partition, from, to] {
        body.extend_from_slice(&v.to_le_bytes());
    }
    super::auth::open(&mut s, key, Kind::Fetch, group, &body)
        .map_err(|e| io(std::io::Error::other(e.to_string())))?;
    let mut next = from;
    loop {
        let f = frame::read(&mut s).map_err(|source| FetchError::Frame { addr, source })?;
        match f.kind {
            Kind::Batches => {
                let mut rest = f.body;
                while !rest.is_empty() {
                    let len = batch_len(&rest, &engine.limits()).ok_or(FetchError::Protocol {
                        addr,
                        what: Unexpected::CutBatch,
                    })?;
                    let batch = rest.slice(..len);
                    rest = rest.slice(len..);
                    let ack = engine
                        .append_stamped(partition, batch)
                        .wait()
                        .map_err(|source| FetchError::Store {
                            addr,
                            partition,
                            source,
                        })?;
                    next = ack.base_offset + u64::from(ack.message_count);
                }
            }
            Kind::FetchEnd => return Ok(next),
            Kind::FetchFailed => {
                tracing::warn!(
                    "fetch from {addr}: the peer says: {}",
                    String::from_utf8_lossy(&f.body)
                );
                return Err(FetchError::Refused { addr });
            }
            k => {
                return Err(FetchError::Protocol {
                    addr,
                    what: Unexpected::Frame(k),
                })
            }
        }
    }
}

/// Serves a fetch: polls the partition from `from` up to `to` and sends
/// whole batches as stored.
pub(super) fn serve(
    mut s: TcpStream,
    req: &frame::Frame,
    engine: &corelog::Handle,
) -> std::io::Result<()> {
    let Some([partition, from, to]) = frame::u64s::<3>(&req.body) else {
        return frame::write(&mut s, Kind::FetchFailed, req.group, b"short fetch request");
    };
    let mut at = from;
    while at < to {
        let reply = match engine.poll(partition, PollFrom::Offset(at), CHUNK).wait() {
            Ok(r) => r,
            Err(e) => {
                let msg = format!("poll partition {partition} at {at}: {e}");
                return frame::write(&mut s, Kind::FetchFailed, req.group, msg.as_bytes());
            }
        };
        if reply.is_empty() {
            break;
        }
        let len: usize = reply.slices().map(<[u8]>::len).sum();
        s.write_all(&frame::head(Kind::Batches, req.group, len))?;
        for slice in reply.slices() {
            s.write_all(slice)?;
        }
        at = reply.next_offset();
    }
    frame::write(&mut s, Kind::FetchEnd, req.group, &at.to_le_bytes())
}

/// The declared length of the batch at the front of `b`.
fn batch_len(b: &Bytes, limits: &corelog::Limits) -> Option<usize> {
    let len = usize::try_from(corelog::declared_length(b, limits).ok()?).ok()?;
    (len <= b.len()).then_some(len)
}

/// For tests: fetches from a peer held back (a slow leader or link), to
/// show what waits for them.
#[cfg(feature = "testing")]
pub mod hold {
    use std::net::SocketAddr;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Condvar, Mutex};

    static HELD: Mutex<Vec<SocketAddr>> = Mutex::new(Vec::new());
    static RELEASED: Condvar = Condvar::new();
    static WAITED: AtomicUsize = AtomicUsize::new(0);

    /// Fetches from the peer at `addr` (its replica address) wait until
    /// the guard is dropped.
    #[must_use = "the fetches are released when this is dropped"]
    pub fn hold_fetches(addr: SocketAddr) -> Held {
        let mut held = HELD.lock().unwrap_or_else(|e| e.into_inner());
        held.push(addr);
        Held(addr)
    }

    /// Holds the fetches from a peer while it lives.
    #[derive(Debug)]
    pub struct Held(SocketAddr);

    impl Drop for Held {
        fn drop(&mut self) {
            let mut held = HELD.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(i) = held.iter().position(|a| *a == self.0) {
                held.remove(i);
            }
            RELEASED.notify_all();
        }
    }

    /// How many fetches have waited for a hold so far (in this process).
    pub fn held_so_far() -> usize {
        WAITED.load(Ordering::Relaxed)
    }

    pub(super) fn wait(addr: SocketAddr) {
        let mut held = HELD.lock().unwrap_or_else(|e| e.into_inner());
        if held.contains(&addr) {
            WAITED.fetch_add(1, Ordering::Relaxed);
        }
        while held.contains(&addr) {
            held = RELEASED.wait(held).unwrap_or_else(|e| e.into_inner());
        }
    }
}
