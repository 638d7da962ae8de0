//! The replica network: plain TCP between nodes, framed by [`frame`].
//!
//! - **Peer connections** carry Raft messages one way: each node keeps one
//!   outgoing connection to every peer (a thread with a bounded queue;
//!   reconnecting with a pause; a full queue or a broken connection drops
//!   messages, which Raft retransmits), and reads every incoming one on a
//!   thread of its own, handing messages to the groups' loops.
//! - **Fetch connections** (`fetch.rs`) stream a partition's stored batches
//!   from a leader to a node installing a snapshot.
//! - **Forward connections** (`forward.rs`) carry sends a node that does
//!   not lead hands to the leader, and the leader's answers.
//!
//! Every connection opens with `auth.rs`'s exchange: both ends prove they
//! hold the cluster's secret before a Raft message or a batch crosses it.

pub mod auth;
mod by_reference;
mod conn_error;
#[cfg(feature = "testing")]
pub mod cut;
pub mod fetch;
pub(crate) mod forward;
pub mod frame;
#[cfg(test)]
mod no_panic;
pub mod raft_frame;
mod socket;

use crate::inbox::Inbox;
use crate::status::Shared;
use conn_error::ConnError;
use corelog::WrittenBatch;
use crossbeam_channel::{Receiver, Sender, TrySendError};
use frame::{Frame, Kind};
use raft::eraftpb::Message;
use socket::{connect_from, IO_TIMEOUT, RECONNECT_PAUSE};
use std::collections::HashMap;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Frames queued for one peer before new ones are dropped.
const PEER_QUEUE: usize = 1024;
/// Incoming connections served at once (each a thread); more are closed
/// at once. Peers need one each, and a fetch one more while it runs.
const MAX_INCOMING: usize = 64;
/// Incoming connections served at once from addresses that are no
/// configured node's: however many such connections a stranger opens, the
/// nodes keep their [`MAX_INCOMING`] slots.
const MAX_STRANGERS: usize = 8;
/// An incoming connection must finish its handshake (challenge, first
/// frame with its proof) this soon after it is accepted.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(2);
/// Refused connections are logged at most this often.
const REFUSED_LOG_EVERY: Duration = Duration::from_secs(1);

/// Counters of the replica network.
#[derive(Debug, Default)]
pub struct NetStats {
    /// Messages dropped (queue full or peer unreachable).
    pub dropped: AtomicU64,
    /// Connections made to peers.
    pub connects: AtomicU64,
}

/// A message queued for a peer: its group, the message, and where its
/// entries' data lie in segment files (by entry, possibly shorter).
type Queued = (u32, Message, Vec<Option<WrittenBatch>>);

/// The sending half: a queue per peer.
#[derive(Debug, Clone)]
pub struct RaftTransport {
    peers: Arc<HashMap<u64, Peer>>,
    stats: Arc<NetStats>,
    /// This node's replica address (links are cut by address, `cut.rs`).
    #[cfg(feature = "testing")]
    me: Option<SocketAddr>,
}

/// One peer: its queue and its replica address.
#[derive(Debug)]
struct Peer {
    queue: Sender<Queued>,
    #[cfg(feature = "testing")]
    addr: SocketAddr,
}

impl RaftTransport {
    /// Queues `msg` for its destination (group `group`). Never blocks; it
    /// is encoded on the peer's sending thread.
    pub fn send(&self, group: u32, msg: Message) {
        self.send_from_files(group, msg, Vec::new());
    }

    /// [`RaftTransport::send`], each entry's data sent from the segment
    /// file `files` names at its index, if any (`by_reference.rs`).
    pub fn send_from_files(&self, group: u32, msg: Message, files: Vec<Option<WrittenBatch>>) {
        let Some(peer) = self.peers.get(&msg.to) else {
            return;
        };
        #[cfg(feature = "testing")]
        if self.me.is_some_and(|me| cut::is_cut(me, peer.addr)) {
            self.stats.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        if let Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) =
            peer.queue.try_send((group, msg, files))
        {
            self.stats.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// What the receiving side hands messages to.
#[derive(Debug, Clone)]
pub struct Receivers {
    /// One inbox per group (index = group id).
    pub inboxes: Vec<Sender<Inbox>>,
    /// For fetches.
    pub engine: corelog::Handle,
    /// For forwarded sends.
    pub handle: Arc<dyn forward::Proposer>,
    /// This node.
    pub me: u64,
    /// Data groups, checked against each peer's hello.
    pub data_groups: u32,
    /// The key peers prove they hold.
    pub key: auth::Key,
    /// The address outgoing connections leave from (this node's replica
    /// address, port 0): a peer, and a firewall rule, can tell the nodes
    /// apart even when they share a host.
    pub local: std::net::IpAddr,
    /// The groups' published state (the senders count what they send
    /// from files there).
    pub shared: Arc<Shared>,
}

/// Starts the network: a listener on `listen` and a sender per peer.
pub fn start(
    listen: TcpListener,
    peers: &[(u64, SocketAddr)],
    rx: Receivers,
    stop: Arc<AtomicBool>,
) -> std::io::Result<(RaftTransport, Vec<std::thread::JoinHandle<()>>)> {
    let stats = Arc::new(NetStats::default());
    let mut queues = HashMap::new();
    let mut threads = Vec::new();
    for &(id, addr) in peers {
        let (queue, qrx) = crossbeam_channel::bounded(PEER_QUEUE);
        queues.insert(
            id,
            Peer {
                queue,
                #[cfg(feature = "testing")]
                addr,
            },
        );
        let (stop, stats, hello) = (stop.clone(), stats.clone(), hello(rx.me, rx.data_groups));
        let (from, key, shared) = (rx.local, rx.key.clone(), rx.shared.clone());
        threads.push(
            std::thread::Builder::new()
                .name(format!("replica-to-{id}"))
                .spawn(move || sender(id, addr, from, &key, qrx, hello, stop, stats, shared))?,
        );
    }
    #[cfg(feature = "testing")]
    let me = listen.local_addr().ok();
    listen.set_nonblocking(true)?;
    let stop2 = stop.clone();
    // The addresses the nodes connect from: their replica addresses (every
    // outgoing connection leaves from its node's, see `connect_from`).
    let nodes = peers
        .iter()
        .map(|(_, a)| a.ip())
        .chain([rx.local])
        .collect();
    threads.push(
        std::thread::Builder::new()
            .name("replica-accept".into())
            .spawn(move || acceptor(listen, rx, nodes, stop2))?,
    );
    Ok((
        RaftTransport {
            peers: Arc::new(queues),
            stats,
            #[cfg(feature = "testing")]
            me,
        },
        threads,
    ))
}

fn hello(me: u64, groups: u32) -> Vec<u8> {
    let mut body = me.to_le_bytes().to_vec();
    body.extend_from_slice(&groups.to_le_bytes());
    body
}

/// One peer's outgoing connection: connect, say hello, write queued
/// frames; on any failure drop the queue (Raft resends) and reconnect.
#[allow(clippy::too_many_arguments)]
fn sender(
    id: u64,
    addr: SocketAddr,
    from: std::net::IpAddr,
    key: &auth::Key,
    q: Receiver<Queued>,
    hello: Vec<u8>,
    stop: Arc<AtomicBool>,
    stats: Arc<NetStats>,
    shared: Arc<Shared>,
) {
    let mut logged_down = false;
    while !stop.load(Ordering::Relaxed) {
        let conn = connect_from(from, addr).and_then(|mut s| {
            s.set_nodelay(true)?;
            s.set_write_timeout(Some(IO_TIMEOUT))?;
            s.set_read_timeout(Some(IO_TIMEOUT))?;
            auth::open(&mut s, key, Kind::Hello, 0, &hello).map_err(|e| {
                if let auth::AuthError::WrongProof = e {
                    tracing::error!("replica: node {id} at {addr}: {e}: sending it nothing");
                }
                std::io::Error::other(e.to_string())
            })?;
            Ok(s)
        });
        let mut s = match conn {
            Ok(s) => s,
            Err(e) => {
                if !logged_down {
                    tracing::info!("replica: node {id} at {addr} unreachable: {e}");
                    logged_down = true;
                }
                let dropped = q.try_iter().count();
                stats.dropped.fetch_add(dropped as u64, Ordering::Relaxed);
                std::thread::sleep(RECONNECT_PAUSE);
                continue;
            }
        };
        stats.connects.fetch_add(1, Ordering::Relaxed);
        if logged_down {
            tracing::info!("replica: node {id} at {addr} reachable again");
        }
        logged_down = false;
        loop {
            if stop.load(Ordering::Relaxed) {
                return;
            }
            match q.recv_timeout(Duration::from_millis(200)) {
                Ok((group, msg, files)) => {
                    let mut enc = match raft_frame::encode(group, msg) {
                        Ok(e) => e,
                        Err(e) => {
                            tracing::error!("replica: encode a message to node {id}: {e}");
                            continue;
                        }
                    };
                    enc.files = files;
                    match by_reference::write_encoded(&mut s, &enc) {
                        Ok(n) => {
                            if let Some(st) = shared.groups.get(group as usize) {
                                st.sent_from_files.fetch_add(n, Ordering::Relaxed);
                            }
                        }
                        Err(e) => {
                            tracing::debug!("replica: to node {id}: {e}");
                            break;
                        }
                    }
                }
                Err(crossbeam_channel::RecvTimeoutError::Timeout) => {}
                Err(crossbeam_channel::RecvTimeoutError::Disconnected) => return,
            }
        }
    }
}

/// Incoming connections being served, from the configured nodes'
/// addresses and from anyone else, each within its own limit.
struct Slots {
    nodes: std::collections::HashSet<std::net::IpAddr>,
    from_nodes: Arc<AtomicUsize>,
    from_strangers: Arc<AtomicUsize>,
}

impl Slots {
    /// What the slots `ip` would take are, for a log line.
    fn kind(&self, ip: std::net::IpAddr) -> String {
        if self.is_node(ip) {
            format!("{MAX_INCOMING} connections from the nodes' addresses")
        } else {
            format!("{MAX_STRANGERS} connections from other addresses")
        }
    }

    fn is_node(&self, ip: std::net::IpAddr) -> bool {
        // A node listed at an unspecified address connects from whatever
        // address its route gives: then no address can be told a stranger.
        self.nodes.contains(&ip) || self.nodes.iter().any(|n| n.is_unspecified())
    }

    /// A slot for a connection from `ip`, released when dropped; `None`
    /// when its kind's slots are all taken.
    fn take(&self, ip: std::net::IpAddr) -> Option<Slot> {
        let (count, max) = if self.is_node(ip) {
            (&self.from_nodes, MAX_INCOMING)
        } else {
            (&self.from_strangers, MAX_STRANGERS)
        };
        if count.fetch_add(1, Ordering::AcqRel) >= max {
            count.fetch_sub(1, Ordering::AcqRel);
            return None;
        }
        Some(Slot(count.clone()))
    }
}

/// A taken slot.
struct Slot(Arc<AtomicUsize>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

fn acceptor(
    listen: TcpListener,
    rx: Receivers,
    nodes: std::collections::HashSet<std::net::IpAddr>,
    stop: Arc<AtomicBool>,
) {
    let slots = Slots {
        nodes,
        from_nodes: Arc::default(),
        from_strangers: Arc::default(),
    };
    let (mut refused, mut logged) = (0u64, None::<std::time::Instant>);
    while !stop.load(Ordering::Relaxed) {
        match listen.accept() {
            Ok((s, peer)) => {
                let accepted = std::time::Instant::now();
                let Some(slot) = slots.take(peer.ip()) else {
                    // Closed at once; logged at most once a second.
                    refused += 1;
                    if logged.is_none_or(|t| accepted.duration_since(t) >= REFUSED_LOG_EVERY) {
                        tracing::warn!(
                            "replica: {} already served: {peer} closed ({refused} refused since the last such line)",
                            slots.kind(peer.ip())
                        );
                        (refused, logged) = (0, Some(accepted));
                    }
                    continue;
                };
                let (rx, stop) = (rx.clone(), stop.clone());
                let spawned = std::thread::Builder::new()
                    .name("replica-from".into())
                    .spawn(move || {
                        let deadline = accepted + HANDSHAKE_TIMEOUT;
                        if let Err(e) = serve(s, &rx, deadline, &stop) {
                            tracing::debug!("replica: connection from {peer}: {e}");
                        }
                        drop(slot);
                    });
                if let Err(e) = spawned {
                    tracing::warn!("replica: no thread for a connection from {peer}: {e}");
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => {
                tracing::warn!("replica: accept: {e}");
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

/// Serves one incoming connection: a peer's messages, or a fetch.
fn serve(
    mut s: TcpStream,
    rx: &Receivers,
    handshake_by: std::time::Instant,
    stop: &AtomicBool,
) -> Result<(), ConnError> {
    s.set_nonblocking(false)?;
    s.set_read_timeout(Some(IO_TIMEOUT))?;
    s.set_write_timeout(Some(IO_TIMEOUT))?;
    let first = auth::accept(&mut s, &rx.key, handshake_by).map_err(|source| {
        let peer = s.peer_addr().ok();
        if let auth::AuthError::WrongProof = source {
            let peer = peer.map_or("?".into(), |a| a.to_string());
            tracing::error!("replica: a connection from {peer} refused: {source}");
        }
        ConnError::Auth { peer, source }
    })?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    s.set_write_timeout(None)?;
    match first.kind {
        Kind::Hello => {
            let short = || ConnError::Short(Kind::Hello);
            let [from] = frame::u64s::<1>(&first.body).ok_or_else(short)?;
            let groups = first
                .body
                .get(8..12)
                .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .ok_or_else(short)?;
            if groups != rx.data_groups {
                tracing::error!(
                    "replica: node {from} runs {groups} data groups, this node {}: refusing its messages (set the same `shards` in every node's cluster file)",
                    rx.data_groups
                );
                return Err(ConnError::GroupCount {
                    theirs: groups,
                    ours: rx.data_groups,
                });
            }
            peer_messages(s, from, rx, stop)
        }
        Kind::Fetch => fetch::serve(s, &first, &rx.engine).map_err(ConnError::Fetch),
        Kind::Forward => {
            let [from] = frame::u64s::<1>(&first.body).ok_or(ConnError::Short(Kind::Forward))?;
            forward::serve(s, from, rx.handle.as_ref(), stop)
        }
        k => Err(ConnError::First(k)),
    }
}

fn peer_messages(
    mut s: TcpStream,
    from: u64,
    rx: &Receivers,
    stop: &AtomicBool,
) -> Result<(), ConnError> {
    let limits = rx.engine.limits();
    while !stop.load(Ordering::Relaxed) {
        let Frame { kind, group, body } = frame::read(&mut s)?;
        if kind != Kind::Raft {
            return Err(ConnError::Misplaced { kind, from });
        }
        let inbox = rx
            .inboxes
            .get(group as usize)
            .ok_or(ConnError::NoGroup(group))?;
        let msg = raft_frame::decode(&body)?;
        if msg.from != from || msg.to != rx.me {
            return Err(ConnError::Misrouted {
                from: msg.from,
                to: msg.to,
                peer: from,
                me: rx.me,
            });
        }
        // Checked here, on the reader's thread, not on the group's loop.
        let verified = match crate::inbox::verified_batches(&msg, &limits) {
            Ok(v) => v,
            Err(why) => {
                if let Some(st) = rx.shared.groups.get(group as usize) {
                    st.refused_messages.fetch_add(1, Ordering::Relaxed);
                }
                tracing::error!(
                    "replica: group {group}: node {from} sent a batch that does not verify, message dropped: {why}"
                );
                continue;
            }
        };
        if inbox.send(Inbox::Raft(msg, verified)).is_err() {
            return Ok(());
        }
    }
    Ok(())
}

#[cfg(test)]
mod slot_tests {
    use super::*;

    fn slots(nodes: &[&str]) -> Slots {
        Slots {
            nodes: nodes.iter().map(|n| n.parse().expect("ip")).collect(),
            from_nodes: Arc::default(),
            from_strangers: Arc::default(),
        }
    }

    #[test]
    fn strangers_fill_only_their_own_slots() {
        let s = slots(&["127.0.0.1", "127.0.0.2"]);
        let stranger: std::net::IpAddr = "127.0.0.77".parse().expect("ip");
        let node: std::net::IpAddr = "127.0.0.2".parse().expect("ip");
        let strangers: Vec<Slot> = (0..MAX_STRANGERS)
            .filter_map(|_| s.take(stranger))
            .collect();
        assert_eq!(strangers.len(), MAX_STRANGERS);
        assert!(s.take(stranger).is_none(), "the strangers' slots are full");
        let nodes: Vec<Slot> = (0..MAX_INCOMING).filter_map(|_| s.take(node)).collect();
        assert_eq!(nodes.len(), MAX_INCOMING, "every node slot is still there");
        assert!(s.take(node).is_none());
        drop(strangers);
        assert!(s.take(stranger).is_some(), "a slot comes back when dropped");
    }

    #[test]
    fn a_node_at_an_unspecified_address_makes_no_one_a_stranger() {
        let s = slots(&["0.0.0.0", "127.0.0.2"]);
        let anyone: std::net::IpAddr = "127.0.0.77".parse().expect("ip");
        let taken: Vec<Slot> = (0..MAX_INCOMING).filter_map(|_| s.take(anyone)).collect();
        assert_eq!(taken.len(), MAX_INCOMING);
    }
}
