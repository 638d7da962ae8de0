//! Forwarding a send from a node that does not lead to the one that does.
//!
//! A client whose node was deposed (paused past an election, cut off, or
//! simply not told yet) keeps sending there; Iggy's SDK replays a refused
//! send on the same connection for two seconds before it asks who leads.
//! Instead the node hands the send to the leader over the replica network
//! and answers the client with the leader's answer.
//!
//! ```text
//! forward connection: the connecting node's first frame is kind 9 (forward),
//! body its node id (authenticated as every connection is, auth.rs); then
//!   kind 10 send   partition u64, client u128, session u64, request u64, the batch
//!   kind 11 answer 0, then the AppendAck (base_offset u64, message_count u32,
//!                  segment u64, position u64, bytes u64, base_timestamp u64)
//!                  or an error code u8 (1 not leader, 2 not committed,
//!                  3 refused, 4 stopped), then a message (UTF-8)
//! ```
//!
//! Answers come in the order of the sends, one connection per peer, sends
//! pipelined on it (a writer thread, a reader thread per connection). The
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
use crate::error::ReplicaError;
use crate::handle::Origin;
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

/// The answer to a send.
type Answer = oneshot::Sender<Result<AppendAck, ReplicaError>>;

/// A send to forward.
pub(crate) struct Job {
    pub partition: u64,
    pub origin: Origin,
    pub batch: Bytes,
    pub answer: Answer,
}

/// The forwarding side: a queue per peer, each drained by a thread that
/// keeps a connection to it.
#[derive(Debug, Default)]
pub(crate) struct Forwarder {
    peers: HashMap<u64, Sender<Job>>,
    /// Sends queued for a leader so far.
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
            let _ = job
                .answer
                .send(Err(ReplicaError::NotLeader { leader: Some(to) }));
            return;
        };
        match q.try_send(job) {
            Ok(()) => {
                self.forwarded.fetch_add(1, Ordering::Relaxed);
            }
            Err(TrySendError::Full(job) | TrySendError::Disconnected(job)) => {
                let _ = job
                    .answer
                    .send(Err(ReplicaError::NotLeader { leader: Some(to) }));
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
    while !stop.load(Ordering::Relaxed) {
        let job = match jobs.recv_timeout(Duration::from_millis(200)) {
            Ok(j) => j,
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => continue,
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => return,
        };
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
                    let _ = job
                        .answer
                        .send(Err(ReplicaError::NotLeader { leader: Some(id) }));
                    continue;
                }
            };
        }
        let Some(c) = conn.as_mut() else {
            continue;
        };
        match write_send(&mut c.stream, &job) {
            Ok(()) => {
                if let Err(e) = c.answers.send(job.answer) {
                    // The reader ended (the connection broke): the send
                    // may have arrived whole.
                    let _ = e.into_inner().send(Err(ReplicaError::NotCommitted));
                    conn = None;
                }
            }
            Err(e) => {
                tracing::debug!("replica: forwarding to node {id}: {e}");
                let _ = job
                    .answer
                    .send(Err(ReplicaError::NotLeader { leader: Some(id) }));
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
    let mut s = super::connect_from(local, addr)?;
    s.set_nodelay(true)?;
    s.set_write_timeout(Some(super::IO_TIMEOUT))?;
    s.set_read_timeout(Some(super::IO_TIMEOUT))?;
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
            // Answers queued after the drain: unknown outcome.
            for a in rx.try_iter() {
                let _ = a.send(Err(ReplicaError::NotCommitted));
            }
        })?;
    Ok(Conn {
        stream: s,
        answers: tx,
        alive,
    })
}

/// Reads the answers of one connection, in order, until it breaks; the
/// sends still unanswered then are "not committed".
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
        let result = if f.kind == Kind::ForwardAnswer {
            decode_answer(&f.body)
        } else {
            Err(ReplicaError::NotCommitted)
        };
        let _ = answer.send(result);
        if f.kind != Kind::ForwardAnswer {
            tracing::warn!(
                "replica: node {id} answered a forwarded send with {:?}",
                f.kind
            );
            break;
        }
    }
    let _ = s.shutdown(std::net::Shutdown::Both);
    for a in answers.try_iter() {
        let _ = a.send(Err(ReplicaError::NotCommitted));
    }
}

/// Bytes of a send's fields before its batch.
const SEND_FIELDS: usize = 8 + 16 + 8 + 8;

fn write_send(s: &mut TcpStream, job: &Job) -> std::io::Result<()> {
    let mut head = Vec::with_capacity(9 + SEND_FIELDS);
    head.extend_from_slice(&frame::head(
        Kind::ForwardSend,
        0,
        SEND_FIELDS + job.batch.len(),
    ));
    head.extend_from_slice(&job.partition.to_le_bytes());
    head.extend_from_slice(&job.origin.client.to_le_bytes());
    head.extend_from_slice(&job.origin.session.to_le_bytes());
    head.extend_from_slice(&job.origin.request.to_le_bytes());
    s.write_all(&head)?;
    s.write_all(&job.batch)
}

/// A forwarded send, as the leader reads it.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Send {
    pub partition: u64,
    pub origin: Origin,
    pub batch: Bytes,
}

/// Decodes a send's body (`None`: too short).
pub(crate) fn decode_send(body: &Bytes) -> Option<Send> {
    let [partition] = frame::u64s::<1>(body)?;
    let client = u128::from_le_bytes(body.get(8..24)?.try_into().ok()?);
    let [session, request] = frame::u64s::<2>(body.get(24..)?)?;
    Some(Send {
        partition,
        origin: Origin {
            client,
            session,
            request,
        },
        batch: body.slice(SEND_FIELDS..),
    })
}

/// The answer's body for `result`.
pub(crate) fn encode_answer(result: &Result<AppendAck, ReplicaError>) -> Vec<u8> {
    let mut out = Vec::with_capacity(45);
    match result {
        Ok(ack) => {
            out.push(0);
            out.extend_from_slice(&ack.base_offset.to_le_bytes());
            out.extend_from_slice(&ack.message_count.to_le_bytes());
            for v in [ack.segment, ack.position, ack.bytes, ack.base_timestamp] {
                out.extend_from_slice(&v.to_le_bytes());
            }
        }
        Err(e) => {
            out.push(match e {
                ReplicaError::NotLeader { .. } | ReplicaError::Conflict => 1,
                ReplicaError::NotCommitted => 2,
                ReplicaError::Stopped => 4,
                _ => 3,
            });
            out.extend_from_slice(e.to_string().as_bytes());
        }
    }
    out
}

/// The result an answer's body says.
pub(crate) fn decode_answer(body: &[u8]) -> Result<AppendAck, ReplicaError> {
    let (&code, rest) = body.split_first().ok_or(ReplicaError::NotCommitted)?;
    let message = || String::from_utf8_lossy(rest).into_owned();
    match code {
        0 => {
            let [base_offset] = frame::u64s::<1>(rest).ok_or(ReplicaError::NotCommitted)?;
            let count = rest.get(8..12).ok_or(ReplicaError::NotCommitted)?;
            let message_count = u32::from_le_bytes([count[0], count[1], count[2], count[3]]);
            let [segment, position, bytes, base_timestamp] =
                frame::u64s::<4>(rest.get(12..).ok_or(ReplicaError::NotCommitted)?)
                    .ok_or(ReplicaError::NotCommitted)?;
            Ok(AppendAck {
                base_offset,
                message_count,
                segment,
                position,
                bytes,
                base_timestamp,
            })
        }
        1 => Err(ReplicaError::NotLeader { leader: None }),
        4 => Err(ReplicaError::Stopped),
        3 => Err(ReplicaError::Apply(format!(
            "the leader refused: {}",
            message()
        ))),
        _ => Err(ReplicaError::NotCommitted),
    }
}

/// Serves a forward connection on the leader: proposes each send as its
/// client's and writes the answers in order (a thread awaiting them).
pub(super) fn serve(
    s: TcpStream,
    from: u64,
    handle: &crate::ReplicaHandle,
    stop: &AtomicBool,
) -> Result<(), String> {
    let mut w = s.try_clone().map_err(|e| e.to_string())?;
    let mut r = s;
    type Pending = std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<AppendAck, ReplicaError>> + std::marker::Send>,
    >;
    let (tx, rx) = crossbeam_channel::unbounded::<Pending>();
    let answering = std::thread::Builder::new()
        .name("replica-fwd-answer".into())
        .spawn(move || {
            for fut in rx {
                let result = super::block_on(fut);
                if frame::write(&mut w, Kind::ForwardAnswer, 0, &encode_answer(&result)).is_err() {
                    break;
                }
            }
        })
        .map_err(|e| e.to_string())?;
    let mut out = Ok(());
    while !stop.load(Ordering::Relaxed) {
        // An idle connection ends at the read timeout; the forwarding node
        // opens another when it next needs one.
        let f = match frame::read(&mut r) {
            Ok(f) => f,
            Err(e) => {
                out = Err(e.to_string());
                break;
            }
        };
        let Some(send) = (f.kind == Kind::ForwardSend)
            .then(|| decode_send(&f.body))
            .flatten()
        else {
            out = Err(format!(
                "node {from}: {:?} frame on a forward connection",
                f.kind
            ));
            break;
        };
        let fut: Pending = Box::pin(handle.append(send.partition, send.batch, send.origin));
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

    #[test]
    fn sends_and_answers_round_trip_and_short_bodies_are_refused() {
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
            Send {
                partition: 5,
                origin,
                batch: Bytes::from_static(b"batch")
            }
        );
        assert!(decode_send(&Bytes::from(body[..SEND_FIELDS - 1].to_vec())).is_none());

        let ack = AppendAck {
            base_offset: 100,
            message_count: 3,
            segment: 64,
            position: 4096,
            bytes: 900,
            base_timestamp: 123_456,
        };
        assert_eq!(decode_answer(&encode_answer(&Ok(ack))), Ok(ack));
        let cases = [
            (
                ReplicaError::NotLeader { leader: Some(2) },
                ReplicaError::NotLeader { leader: None },
            ),
            (ReplicaError::NotCommitted, ReplicaError::NotCommitted),
            (ReplicaError::Stopped, ReplicaError::Stopped),
        ];
        for (sent, got) in cases {
            assert_eq!(decode_answer(&encode_answer(&Err(sent))), Err(got));
        }
        let refused = decode_answer(&encode_answer(&Err(ReplicaError::Apply("disk".into()))));
        assert!(matches!(refused, Err(ReplicaError::Apply(m)) if m.contains("disk")));
        // A cut answer is no acknowledgement: the outcome is unknown.
        let whole = encode_answer(&Ok(ack));
        for cut in 0..whole.len() {
            assert_eq!(
                decode_answer(&whole[..cut]),
                Err(ReplicaError::NotCommitted)
            );
        }
    }

    #[test]
    fn a_send_for_a_node_without_a_forwarder_is_not_accepted_at_once() {
        let f = Forwarder::default();
        let (answer, rx) = oneshot::channel();
        let job = Job {
            partition: 1,
            origin: Origin::default(),
            batch: Bytes::new(),
            answer,
        };
        f.forward(3, job);
        assert_eq!(
            super::super::block_on(rx),
            Ok(Err(ReplicaError::NotLeader { leader: Some(3) }))
        );
    }
}
