//! Forwarding a send, or a consumer offset's change, from a node that does
//! not lead to the one that does.
//!
//! A client whose node was deposed (paused past an election, cut off, or
//! simply not told yet) keeps sending there; Iggy's SDK replays a refused
//! request on the same connection for two seconds before it asks who
//! leads. Instead the node hands the request to the leader over the replica
//! network and answers the client with the leader's answer.
//!
//! ```text
//! forward connection: the connecting node's first frame is kind 9 (forward),
//! body its node id (authenticated as every connection is, auth.rs); then
//!   kind 10 send    partition u64, client u128, session u64, request u64, the batch
//!   kind 12 offset  a store-offset or delete-offset command (command.rs's encoding)
//!   kind 11 answer  0, then the result: a send's AppendAck (base_offset u64,
//!                   message_count u32, segment u64, position u64, bytes u64,
//!                   base_timestamp u64), an offset command's count u64;
//!                   or an error code u8 (1 not leader, 2 not committed,
//!                   3 refused, 4 stopped), then a message (UTF-8)
//! ```
//!
//! Answers come in the order of the requests, one connection per peer,
//! requests pipelined on it (a writer thread, a reader thread per connection). The
//! leader proposes a forwarded send with its origin, as if the client had
//! sent it there, so a repeat is answered from the first; it never forwards
//! again (a node that no longer leads answers "not leader").
//!
//! What the forwarding node answers when the leader's answer does not come:
//! the send not written whole (no connection, a write failed) → not leader
//! (nothing stored: the client may send it anywhere); written, then the
//! connection lost → not committed (the outcome is unknown: the client
//! replays it, same session and number).

use super::frame::{self, Kind};
use crate::command::Command;
use crate::command::Origin;
use crate::error::ReplicaError;
use bytes::Bytes;
use corelog::AppendAck;
use crossbeam_channel::{Receiver, Sender, TrySendError};
use futures_channel::oneshot;
use std::collections::HashMap;
use std::io::Write;
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Sends waiting to be forwarded to one peer before more are refused.
const QUEUE: usize = 256;
/// How long the leader's answer may take (its commit timeout is shorter).
const ANSWER_TIMEOUT: Duration = Duration::from_secs(30);

/// Where a forwarded request's answer goes.
pub(crate) enum Answer {
    /// A send's.
    Send(oneshot::Sender<Result<AppendAck, ReplicaError>>),
    /// An offset command's count.
    Count(oneshot::Sender<Result<u64, ReplicaError>>),
}

impl Answer {
    fn fail(self, e: ReplicaError) {
        match self {
            Answer::Send(tx) => {
                let _ = tx.send(Err(e));
            }
            Answer::Count(tx) => {
                let _ = tx.send(Err(e));
            }
        }
    }

    /// Delivers the answer whose body is `body`.
    pub(crate) fn deliver(self, body: &[u8]) {
        let result = decode_answer(body);
        match self {
            Answer::Send(tx) => {
                let _ = tx.send(result.and_then(decode_ack));
            }
            Answer::Count(tx) => {
                let _ = tx.send(result.and_then(decode_count));
            }
        }
    }
}

/// What to forward.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Request {
    /// A producer's batch for `partition`, from `origin`.
    Send {
        partition: u64,
        origin: Origin,
        batch: Bytes,
    },
    /// A store-offset or delete-offset command.
    Offset(Command),
}

/// A request to forward, and where its answer goes.
pub(crate) struct Job {
    pub request: Request,
    pub answer: Answer,
}

/// The forwarding side: a queue per peer, each drained by a thread that
/// keeps a connection to it.
#[derive(Debug, Default)]
pub(crate) struct Forwarder {
    peers: HashMap<u64, Sender<Job>>,
    /// Requests queued for a leader so far.
    pub(crate) forwarded: std::sync::atomic::AtomicU64,
}

impl Forwarder {
    /// Starts a forwarding thread for every peer.
    pub(crate) fn start(
        peers: &[(u64, SocketAddr)],
        me: u64,
        local: IpAddr,
        key: &super::auth::Key,
        stop: &Arc<AtomicBool>,
    ) -> std::io::Result<(Forwarder, Vec<std::thread::JoinHandle<()>>)> {
        let mut queues = HashMap::new();
        let mut threads = Vec::new();
        for &(id, addr) in peers {
            let (tx, rx) = crossbeam_channel::bounded(QUEUE);
            queues.insert(id, tx);
            let (key, stop) = (key.clone(), stop.clone());
            threads.push(
                std::thread::Builder::new()
                    .name(format!("replica-fwd-{id}"))
                    .spawn(move || writer(id, addr, me, local, &key, &rx, &stop))?,
            );
        }
        Ok((
            Forwarder {
                peers: queues,
                forwarded: Default::default(),
            },
            threads,
        ))
    }

    /// Queues `job` for node `to`; answers it "not leader" at once when
    /// that node is unknown or its queue is full.
    pub(crate) fn forward(&self, to: u64, job: Job) {
        let Some(q) = self.peers.get(&to) else {
            job.answer
                .fail(ReplicaError::NotLeader { leader: Some(to) });
            return;
        };
        match q.try_send(job) {
            Ok(()) => {
                self.forwarded.fetch_add(1, Ordering::Relaxed);
            }
            Err(TrySendError::Full(job) | TrySendError::Disconnected(job)) => {
                job.answer
                    .fail(ReplicaError::NotLeader { leader: Some(to) });
            }
        }
    }
}

/// One peer's forwarding: connect when there is something to send, write
/// each send, hand its answer to the connection's reader.
fn writer(
    id: u64,
    addr: SocketAddr,
    me: u64,
    local: IpAddr,
    key: &super::auth::Key,
    jobs: &Receiver<Job>,
    stop: &AtomicBool,
) {
    let mut conn: Option<Conn> = None;
    // After a failed connect, sends are refused at once until then (not
    // each after a connect timeout of its own).
    let mut down_until: Option<std::time::Instant> = None;
    while !stop.load(Ordering::Relaxed) {
        let job = match jobs.recv_timeout(Duration::from_millis(200)) {
            Ok(j) => j,
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => continue,
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => return,
        };
        if down_until.is_some_and(|t| std::time::Instant::now() < t) {
            job.answer
                .fail(ReplicaError::NotLeader { leader: Some(id) });
            continue;
        }
        if conn
            .as_ref()
            .is_some_and(|c| !c.alive.load(Ordering::Acquire))
        {
            conn = None; // its reader saw it end: a new one, before writing
        }
        if conn.is_none() {
            conn = match connect(id, addr, me, local, key) {
                Ok(c) => Some(c),
                Err(e) => {
                    tracing::debug!("replica: forwarding to node {id} at {addr}: {e}");
                    job.answer
                        .fail(ReplicaError::NotLeader { leader: Some(id) });
                    down_until = Some(std::time::Instant::now() + super::socket::RECONNECT_PAUSE);
                    continue;
                }
            };
        }
        let Some(c) = conn.as_mut() else {
            continue;
        };
        match write_request(&mut c.stream, &job.request) {
            Ok(()) => {
                if let Err(e) = c.answers.send(job.answer) {
                    // The reader ended (the connection broke): the request
                    // may have arrived whole.
                    e.into_inner().fail(ReplicaError::NotCommitted);
                    conn = None;
                }
            }
            Err(e) => {
                tracing::debug!("replica: forwarding to node {id}: {e}");
                job.answer
                    .fail(ReplicaError::NotLeader { leader: Some(id) });
                if let Some(c) = conn.take() {
                    let _ = c.stream.shutdown(std::net::Shutdown::Both);
                }
            }
        }
    }
}

/// A forward connection: written here, its answers read by its reader.
struct Conn {
    stream: TcpStream,
    /// Where the answers of written sends wait for the reader.
    answers: Sender<Answer>,
    /// Cleared by the reader when the connection ends.
    alive: Arc<AtomicBool>,
}

/// Opens a forward connection and starts its reader.
fn connect(
    id: u64,
    addr: SocketAddr,
    me: u64,
    local: IpAddr,
    key: &super::auth::Key,
) -> std::io::Result<Conn> {
    let mut s = super::socket::connect_from(local, addr)?;
    s.set_nodelay(true)?;
    s.set_write_timeout(Some(super::socket::IO_TIMEOUT))?;
    s.set_read_timeout(Some(super::socket::IO_TIMEOUT))?;
    super::auth::open(&mut s, key, Kind::Forward, 0, &me.to_le_bytes())
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    s.set_read_timeout(Some(ANSWER_TIMEOUT))?;
    let r = s.try_clone()?;
    let (tx, rx) = crossbeam_channel::unbounded::<Answer>();
    let alive = Arc::new(AtomicBool::new(true));
    let flag = alive.clone();
    std::thread::Builder::new()
        .name(format!("replica-fwd-{id}-r"))
        .spawn(move || {
            reader(id, r, &rx);
            flag.store(false, Ordering::Release);
            // Requests written and unanswered: unknown outcome.
            for a in rx.try_iter() {
                a.fail(ReplicaError::NotCommitted);
            }
        })?;
    Ok(Conn {
        stream: s,
        answers: tx,
        alive,
    })
}

/// Reads the answers of one connection, in order, until it breaks (its
/// caller then answers the requests still waiting "not committed").
fn reader(id: u64, mut s: TcpStream, answers: &Receiver<Answer>) {
    loop {
        let f = match frame::read(&mut s) {
            Ok(f) => f,
            Err(e) => {
                tracing::debug!("replica: forward connection to node {id}: {e}");
                break;
            }
        };
        let Ok(answer) = answers.recv() else {
            break;
        };
        if f.kind == Kind::ForwardAnswer {
            answer.deliver(&f.body);
        } else {
            answer.fail(ReplicaError::NotCommitted);
            tracing::warn!(
                "replica: node {id} answered a forwarded request with {:?}",
                f.kind
            );
            break;
        }
    }
    let _ = s.shutdown(std::net::Shutdown::Both);
}

/// Bytes of a send's fields before its batch.
const SEND_FIELDS: usize = 8 + 16 + 8 + 8;

fn write_request(s: &mut TcpStream, request: &Request) -> std::io::Result<()> {
    match request {
        Request::Send {
            partition,
            origin,
            batch,
        } => {
            let mut head = Vec::with_capacity(9 + SEND_FIELDS);
            head.extend_from_slice(&frame::head(
                Kind::ForwardSend,
                0,
                SEND_FIELDS + batch.len(),
            ));
            head.extend_from_slice(&partition.to_le_bytes());
            head.extend_from_slice(&origin.client.to_le_bytes());
            head.extend_from_slice(&origin.session.to_le_bytes());
            head.extend_from_slice(&origin.request.to_le_bytes());
            s.write_all(&head)?;
            s.write_all(batch)
        }
        Request::Offset(cmd) => frame::write(s, Kind::ForwardOffset, 0, &cmd.encode()),
    }
}

/// Decodes a send's body (`None`: too short).
pub(crate) fn decode_send(body: &Bytes) -> Option<Request> {
    let [partition] = frame::u64s::<1>(body)?;
    let client = u128::from_le_bytes(body.get(8..24)?.try_into().ok()?);
    let [session, request] = frame::u64s::<2>(body.get(24..)?)?;
    Some(Request::Send {
        partition,
        origin: Origin {
            client,
            session,
            request,
        },
        batch: body.slice(SEND_FIELDS..),
    })
}

/// An acknowledgement's bytes in an answer.
fn encode_ack(ack: &AppendAck) -> Vec<u8> {
    let mut out = Vec::with_capacity(44);
    out.extend_from_slice(&ack.base_offset.to_le_bytes());
    out.extend_from_slice(&ack.message_count.to_le_bytes());
    for v in [ack.segment, ack.position, ack.bytes, ack.base_timestamp] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out
}

/// The acknowledgement an answer's result holds.
fn decode_ack(b: &[u8]) -> Result<AppendAck, ReplicaError> {
    let cut = || ReplicaError::NotCommitted;
    let [base_offset] = frame::u64s::<1>(b).ok_or_else(cut)?;
    let count = b.get(8..12).ok_or_else(cut)?;
    let message_count = u32::from_le_bytes([count[0], count[1], count[2], count[3]]);
    let [segment, position, bytes, base_timestamp] =
        frame::u64s::<4>(b.get(12..).ok_or_else(cut)?).ok_or_else(cut)?;
    let mut ack = AppendAck::default();
    ack.base_offset = base_offset;
    ack.message_count = message_count;
    ack.segment = segment;
    ack.position = position;
    ack.bytes = bytes;
    ack.base_timestamp = base_timestamp;
    Ok(ack)
}

/// The count an answer's result holds.
fn decode_count(b: &[u8]) -> Result<u64, ReplicaError> {
    frame::u64s::<1>(b)
        .map(|[n]| n)
        .ok_or(ReplicaError::NotCommitted)
}

/// The answer's body for `result` (a result's bytes, or the error).
pub(crate) fn encode_answer(result: &Result<Vec<u8>, ReplicaError>) -> Vec<u8> {
    match result {
        Ok(bytes) => {
            let mut out = Vec::with_capacity(1 + bytes.len());
            out.push(0);
            out.extend_from_slice(bytes);
            out
        }
        Err(e) => {
            let mut out = vec![match e {
                ReplicaError::NotLeader { .. } | ReplicaError::Conflict => 1,
                ReplicaError::NotCommitted => 2,
                ReplicaError::Stopped => 4,
                _ => 3,
            }];
            out.extend_from_slice(e.to_string().as_bytes());
            out
        }
    }
}

/// The result an answer's body says: its bytes, or the error. A cut or
/// unknown answer is no acknowledgement: the outcome is unknown.
pub(crate) fn decode_answer(body: &[u8]) -> Result<&[u8], ReplicaError> {
    let (&code, rest) = body.split_first().ok_or(ReplicaError::NotCommitted)?;
    match code {
        0 => Ok(rest),
        1 => Err(ReplicaError::NotLeader { leader: None }),
        4 => Err(ReplicaError::Stopped),
        3 => {
            tracing::warn!(
                "a forwarded request failed on the leader: {}",
                String::from_utf8_lossy(rest)
            );
            Err(ReplicaError::LeaderFailed)
        }
        _ => Err(ReplicaError::NotCommitted),
    }
}

/// A replicated answer, awaited on a forward connection's answering thread.
pub(crate) type Reply<T> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<T, ReplicaError>> + Send>>;

/// What a forward connection's server proposes through: the replica
/// (`handle.rs`), as the leader of the forwarded send's group.
pub(crate) trait Proposer: Send + Sync + std::fmt::Debug {
    /// Proposes `batch` for `partition` as `origin`'s send.
    fn append(&self, partition: u64, batch: Bytes, origin: Origin) -> Reply<AppendAck>;
    /// Proposes a store-offset or delete-offset command.
    fn offset_cmd(&self, cmd: Command) -> Reply<u64>;
}

/// Serves a forward connection on the leader: proposes each send as its
/// client's, each offset command as its own, and writes the answers in
/// order (a thread awaiting them).
pub(super) fn serve(
    s: TcpStream,
    from: u64,
    handle: &dyn Proposer,
    stop: &AtomicBool,
) -> Result<(), super::conn_error::ConnError> {
    let mut w = s.try_clone()?;
    let mut r = s;
    type Pending = Reply<Vec<u8>>;
    let (tx, rx) = crossbeam_channel::unbounded::<Pending>();
    let answering = std::thread::Builder::new()
        .name("replica-fwd-answer".into())
        .spawn(move || {
            for fut in rx {
                let result = crate::block_on::block_on(fut);
                if frame::write(&mut w, Kind::ForwardAnswer, 0, &encode_answer(&result)).is_err() {
                    break;
                }
            }
        })?;
    let mut out = Ok(());
    while !stop.load(Ordering::Relaxed) {
        // An idle connection ends at the read timeout; the forwarding node
        // opens another when it next needs one.
        let f = match frame::read(&mut r) {
            Ok(f) => f,
            Err(e) => {
                out = Err(e.into());
                break;
            }
        };
        let request = match f.kind {
            Kind::ForwardSend => decode_send(&f.body),
            Kind::ForwardOffset => match Command::decode(&f.body) {
                Ok(cmd @ (Command::StoreOffset { .. } | Command::DeleteOffset { .. })) => {
                    Some(Request::Offset(cmd))
                }
                _ => None,
            },
            _ => None,
        };
        let fut: Pending = match request {
            Some(Request::Send {
                partition,
                origin,
                batch,
            }) => {
                let f = handle.append(partition, batch, origin);
                Box::pin(async move { f.await.map(|ack| encode_ack(&ack)) })
            }
            Some(Request::Offset(cmd)) => {
                let f = handle.offset_cmd(cmd);
                Box::pin(async move { f.await.map(|n| n.to_le_bytes().to_vec()) })
            }
            None => {
                out = Err(super::conn_error::ConnError::Misplaced { kind: f.kind, from });
                break;
            }
        };
        if tx.send(fut).is_err() {
            break;
        }
    }
    drop(tx);
    let _ = r.shutdown(std::net::Shutdown::Read);
    let _ = answering.join();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `answer` delivers for a body, as a send's and as a count's.
    fn delivered(body: &[u8]) -> (Result<AppendAck, ReplicaError>, Result<u64, ReplicaError>) {
        let (tx, rx) = oneshot::channel();
        Answer::Send(tx).deliver(body);
        let (ctx, crx) = oneshot::channel();
        Answer::Count(ctx).deliver(body);
        let send = crate::block_on::block_on(rx).unwrap_or(Err(ReplicaError::Stopped));
        let count = crate::block_on::block_on(crx).unwrap_or(Err(ReplicaError::Stopped));
        (send, count)
    }

    #[test]
    fn a_send_round_trips_and_a_cut_one_is_refused() {
        let origin = Origin {
            client: 7 << 70 | 3,
            session: 9,
            request: 11,
        };
        let mut body = Vec::new();
        body.extend_from_slice(&5u64.to_le_bytes());
        body.extend_from_slice(&origin.client.to_le_bytes());
        body.extend_from_slice(&origin.session.to_le_bytes());
        body.extend_from_slice(&origin.request.to_le_bytes());
        body.extend_from_slice(b"batch");
        let send = decode_send(&Bytes::from(body.clone())).expect("send");
        assert_eq!(
            send,
            Request::Send {
                partition: 5,
                origin,
                batch: Bytes::from_static(b"batch")
            }
        );
        assert!(decode_send(&Bytes::from(body[..SEND_FIELDS - 1].to_vec())).is_none());
    }

    #[test]
    fn answers_round_trip_and_cut_ones_are_refused() {
        let mut ack = AppendAck::default();
        ack.base_offset = 100;
        ack.message_count = 3;
        ack.segment = 64;
        ack.position = 4096;
        ack.bytes = 900;
        ack.base_timestamp = 123_456;
        let whole = encode_answer(&Ok(encode_ack(&ack)));
        assert!(matches!(delivered(&whole).0, Ok(a) if a == ack));
        assert!(matches!(
            delivered(&encode_answer(&Ok(7u64.to_le_bytes().to_vec()))).1,
            Ok(7)
        ));
        let cases = [
            (
                ReplicaError::NotLeader { leader: Some(2) },
                ReplicaError::NotLeader { leader: None },
            ),
            (ReplicaError::NotCommitted, ReplicaError::NotCommitted),
            (ReplicaError::Stopped, ReplicaError::Stopped),
        ];
        for (sent, got) in cases {
            let (send, count) = delivered(&encode_answer(&Err(sent)));
            // The errors carry no payload but the leader hint: their
            // Debug forms tell them apart.
            let (want, send, count) = (
                format!("{got:?}"),
                format!("{send:?}"),
                format!("{count:?}"),
            );
            assert_eq!(
                (send, count),
                (format!("Err({want})"), format!("Err({want})"))
            );
        }
        let refused = delivered(&encode_answer(&Err(ReplicaError::Replayed))).0;
        assert!(
            matches!(refused, Err(ReplicaError::LeaderFailed)),
            "{refused:?}"
        );
        // A cut answer is no acknowledgement: the outcome is unknown.
        for cut in 0..whole.len() {
            assert!(matches!(
                delivered(&whole[..cut]).0,
                Err(ReplicaError::NotCommitted)
            ));
        }
        assert!(matches!(
            delivered(&[0, 1, 2]).1,
            Err(ReplicaError::NotCommitted)
        ));
    }

    #[test]
    fn a_request_for_a_node_without_a_forwarder_is_not_accepted_at_once() {
        let f = Forwarder::default();
        let (answer, rx) = oneshot::channel();
        let job = Job {
            request: Request::Offset(Command::DeleteOffset {
                partition: 1,
                consumer: 2,
            }),
            answer: Answer::Count(answer),
        };
        f.forward(3, job);
        let answered = crate::block_on::block_on(rx);
        assert!(
            matches!(
                answered,
                Ok(Err(ReplicaError::NotLeader { leader: Some(3) }))
            ),
            "{answered:?}"
        );
    }
}

#[cfg(test)]
#[path = "forward_tests.rs"]
mod writer_tests;
