//! One client connection, served on the shard it was handed to: read a
//! request, answer it, repeat, within the limits of [`crate::guard::limits`]:
//!
//! - waiting for the first byte of a request: unbounded once signed in
//!   (but a consumer-group member silent for 1.2 heartbeat intervals is
//!   evicted, as in Iggy's server); before that, until `login_timeout`
//!   after connecting (or signing out);
//! - from a request's first byte: no gap over `stall_timeout`, and the
//!   whole request within its deadline ([`Limits::request_deadline`]);
//! - payload bytes are read only into room taken from the shared
//!   in-flight budget, given back once the request is answered;
//! - `max_failed_logins` failed sign-ins close the connection.
//!
//! Framing errors close the connection, and so does a login Iggy's server
//! answers with an `Eviction` frame (`wire/eviction.rs`); every other
//! failure is an error status, and the connection goes on.
//!
//! [`Limits::request_deadline`]: crate::guard::limits::Limits::request_deadline

use crate::commands::{execute, Outcome, Session};
use crate::guard::budget::Grant;
use crate::guard::counters::{CloseReason, Counters, Refusal};
use crate::guard::limits::PRE_LOGIN_MAX_REQUEST;
use crate::net::tls::TlsStream;
use crate::net::transport::{ReadError, Transport};
use crate::node::context::Context;
use crate::node::registry::{Registration, TRANSPORT_TCP};
use crate::wire::eviction;
use crate::wire::header::{
    parse_request_header, reply_header, FramingError, RequestHead, HEADER_LEN,
};
use crate::wire::request::{decode_request, Request};
use crate::wire::status;
use bytes::Bytes;
use iggy_binary_protocol::codes::{LOGIN_REGISTER_CODE, LOGIN_REGISTER_WITH_PAT_CODE};
use iggy_binary_protocol::consensus::Operation;
use iggy_binary_protocol::EvictionReason;
use iggy_common::IggyError;
use monoio::net::TcpStream;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

/// Payload bytes read (and taken from the budget) at a time.
const READ_CHUNK: usize = 256 << 10;

/// Serves `stream` until the client leaves, a limit closes it, or shutdown.
/// The caller has counted it open; it is counted closed here.
pub async fn serve(ctx: Arc<Context>, stream: std::net::TcpStream) {
    let peer = stream.peer_addr().ok();
    let transport = TcpStream::from_std(stream).and_then(|tcp| {
        let _ = tcp.set_nodelay(true);
        match &ctx.tls {
            None => Ok(Transport::Plain(tcp)),
            Some(config) => TlsStream::new(tcp, config.clone())
                .map(|tls| Transport::Tls(Box::new(tls)))
                .map_err(std::io::Error::other),
        }
    });
    let reason = match transport {
        Ok(transport) => {
            let mut conn = Connection::new(ctx.clone(), transport, peer);
            let reason = conn.run().await;
            // Its consumer groups deal its partitions to the members left.
            ctx.groups.remove_connection(conn.session.connection);
            reason
        }
        Err(e) => {
            tracing::warn!("connection from {peer:?}: {e}");
            CloseReason::Io
        }
    };
    ctx.counters.closed(reason);
    let peer = peer.map(|p| p.to_string()).unwrap_or_default();
    match reason {
        CloseReason::ClientLeft | CloseReason::Shutdown => {
            tracing::debug!("connection from {peer} ends: {}", reason.name());
        }
        _ => {
            if let Some(left_out) = ctx.close_log.allow(Instant::now()) {
                tracing::info!(
                    "connection from {peer} closed: {} ({left_out} closes not logged before it)",
                    reason.name()
                );
            }
        }
    }
}

/// A connection being served.
struct Connection {
    ctx: Arc<Context>,
    transport: Transport,
    peer: Option<SocketAddr>,
    session: Session,
    /// When a connection not signed in is closed; `None` once signed in.
    login_deadline: Option<Instant>,
    /// Its entry in the client registry, removed when it is dropped.
    _registration: Registration,
    /// The request header being read, reused from request to request.
    header: Vec<u8>,
    /// When the last request's first byte came (Iggy's heartbeat: any
    /// request is a sign of life).
    last_request: Instant,
    /// The client id of its last request (an eviction frame names it).
    last_client: u128,
}

impl Connection {
    fn new(ctx: Arc<Context>, transport: Transport, peer: Option<SocketAddr>) -> Connection {
        let login_deadline = Some(Instant::now() + ctx.limits.login_timeout);
        let address = peer.map(|p| p.to_string()).unwrap_or_default();
        let registration = ctx.clients.register(address, TRANSPORT_TCP);
        let connection = u64::from(registration.client().id);
        Connection {
            session: Session {
                peer: peer.map(|p| p.ip()),
                client: Some(registration.client().clone()),
                connection,
                ..Session::default()
            },
            ctx,
            transport,
            peer,
            login_deadline,
            _registration: registration,
            header: Vec::with_capacity(HEADER_LEN),
            last_request: Instant::now(),
            last_client: 0,
        }
    }

    async fn run(&mut self) -> CloseReason {
        loop {
            if self.ctx.closing.load(Ordering::SeqCst) {
                return CloseReason::Shutdown;
            }
            if let Err(reason) = self.serve_one().await {
                return reason;
            }
        }
    }

    /// Reads one request, answers it, applies the sign-in limits.
    async fn serve_one(&mut self) -> Result<(), CloseReason> {
        let mut header = std::mem::take(&mut self.header);
        header.clear();
        let read = self.read_header(&mut header).await;
        let framed = read.and_then(|first| {
            let bytes: &[u8; HEADER_LEN] =
                header[..].try_into().map_err(|_| CloseReason::Framing)?;
            Ok((first, parse_request_header(bytes, self.max_request())))
        });
        self.header = header;
        let (first, framed) = framed?;
        let framed = framed.map_err(|e| {
            let kind = match e {
                FramingError::TooLarge { .. } => Refusal::TooLarge,
                _ => Refusal::Malformed,
            };
            self.ctx.counters.refused(kind);
            CloseReason::Framing
        })?;
        let deadline = self
            .ctx
            .limits
            .request_deadline(first, framed.payload_len as u64);
        let mut grant = self.ctx.budget.empty(self.peer.map(|p| p.ip()));
        let payload = self
            .read_payload(framed.payload_len, &mut grant, deadline)
            .await?;
        self.ctx.in_flight.fetch_add(1, Ordering::SeqCst);
        self.last_request = first;
        let written = match framed.head {
            Ok(head) => {
                self.last_client = head.client;
                self.answer(head, payload).await
            }
            Err(e) => {
                self.ctx.counters.refused(Refusal::Malformed);
                tracing::debug!("request from {:?}: {e}", self.peer);
                let outcome = Outcome::Error(IggyError::InvalidCommand);
                self.write_outcome(None, outcome).await
            }
        };
        self.ctx.in_flight.fetch_sub(1, Ordering::SeqCst);
        drop(grant);
        if written.map_err(|e| io_reason(&e))? == Written::Evicted {
            return Err(CloseReason::Evicted);
        }
        if self.session.failed_logins >= self.ctx.limits.max_failed_logins {
            return Err(CloseReason::LoginFailures);
        }
        self.login_deadline = match (self.session.id, self.login_deadline) {
            (Some(_), _) => None,
            (None, None) => Some(Instant::now() + self.ctx.limits.login_timeout),
            (None, Some(d)) => Some(d),
        };
        Ok(())
    }

    /// Decodes and executes a routed request and writes its reply.
    async fn answer(&mut self, head: RequestHead, payload: Bytes) -> std::io::Result<Written> {
        let outcome = match decode_request(head.code, &payload) {
            Ok(request) => {
                let kind = match request {
                    Request::SendMessages(_) => Refusal::Send,
                    _ => Refusal::Other,
                };
                let login = matches!(request, Request::Login { .. });
                let outcome = execute(&self.ctx, &mut self.session, &head, request, payload).await;
                match &outcome {
                    Outcome::Error(IggyError::Unauthenticated) => {
                        self.ctx.counters.refused(Refusal::Unauthenticated);
                    }
                    Outcome::Error(_) if !login => self.ctx.counters.refused(kind),
                    _ => {}
                }
                outcome
            }
            Err(e) => {
                self.ctx.counters.refused(Refusal::Malformed);
                if matches!(
                    head.code,
                    LOGIN_REGISTER_CODE | LOGIN_REGISTER_WITH_PAT_CODE
                ) {
                    tracing::debug!("login from {:?} evicted: {e}", self.peer);
                    Outcome::Evict(eviction::for_login(&e))
                } else {
                    Outcome::Error(status::from_decode(&e))
                }
            }
        };
        self.write_outcome(Some(&head), outcome).await
    }

    /// The largest request this connection may send now: before sign-in,
    /// no more than a sign-in needs ([`PRE_LOGIN_MAX_REQUEST`]).
    fn max_request(&self) -> u64 {
        match self.login_deadline {
            Some(_) => self.ctx.max_request.min(PRE_LOGIN_MAX_REQUEST),
            None => self.ctx.max_request,
        }
    }

    /// `deadline`, or the login deadline if that comes first: a connection
    /// not signed in lives no longer than `login_timeout`, whatever it is
    /// reading or waiting for. With the reason a read that misses it gives.
    fn capped(&self, deadline: Instant) -> (Instant, CloseReason) {
        match self.login_deadline {
            Some(login) if login <= deadline => (login, CloseReason::LoginTimeout),
            _ => (deadline, CloseReason::TooSlow),
        }
    }

    /// Reads a request header into `header`; returns when its first byte
    /// came.
    async fn read_header(&mut self, header: &mut Vec<u8>) -> Result<Instant, CloseReason> {
        self.wait_for_request(header).await?;
        let first = Instant::now();
        let deadline = self.ctx.limits.request_deadline(first, 0);
        self.read_to(header, HEADER_LEN, deadline).await?;
        Ok(first)
    }

    /// Waits for the first bytes of the next request: for as long as it
    /// takes once signed in (a consumer-group member: until the heartbeat
    /// threshold), until the login deadline before.
    async fn wait_for_request(&mut self, header: &mut Vec<u8>) -> Result<(), CloseReason> {
        loop {
            let stale = self.stale_deadline();
            let deadline = self.login_deadline.or(stale);
            let read = self.transport.read_into(header, HEADER_LEN, deadline).await;
            if !matches!(read, Err(ReadError::TimedOut)) || self.login_deadline.is_some() {
                return self.count_read(read, CloseReason::LoginTimeout);
            }
            // Silent past the threshold: evicted if it still is a member
            // (its group may have been deleted meanwhile).
            if self
                .ctx
                .groups
                .groups_of(self.session.connection)
                .is_empty()
            {
                self.session.joined = false;
                continue;
            }
            self.evict_stale().await;
            return Err(CloseReason::Stale);
        }
    }

    /// When a silent member is evicted, if it is one and heartbeats are
    /// checked.
    fn stale_deadline(&self) -> Option<Instant> {
        let after = self.ctx.limits.stale_after()?;
        (self.session.id.is_some() && self.session.joined).then(|| self.last_request + after)
    }

    /// Drops a silent member from its groups (their partitions are dealt
    /// to the others) and tells the client with `Eviction(StaleClient)`.
    async fn evict_stale(&mut self) {
        self.ctx.groups.remove_connection(self.session.connection);
        tracing::info!(
            "client {} ({:?}) evicted: silent past the heartbeat threshold",
            self.session.connection,
            self.peer
        );
        let frame = eviction::frame(self.last_client, EvictionReason::StaleClient);
        let n = frame.len() as u64;
        if self
            .transport
            .write_all(frame.to_vec(), self.ctx.limits.stall_timeout)
            .await
            .is_ok()
        {
            Counters::add(&self.ctx.counters.bytes_out, n);
        }
    }

    /// Reads until `buf` holds `len` bytes: each read within the stall
    /// timeout, all of them before `deadline` (and before the login
    /// deadline, while not signed in).
    async fn read_to(
        &mut self,
        buf: &mut Vec<u8>,
        len: usize,
        deadline: Instant,
    ) -> Result<(), CloseReason> {
        let (deadline, late) = self.capped(deadline);
        while buf.len() < len {
            let stall = Instant::now() + self.ctx.limits.stall_timeout;
            let (until, reason) = if stall < deadline {
                (stall, CloseReason::Stalled)
            } else {
                (deadline, late)
            };
            let want = len - buf.len();
            let read = self.transport.read_into(buf, want, Some(until)).await;
            self.count_read(read, reason)?;
        }
        Ok(())
    }

    /// Reads a payload of `len` bytes into room taken from the budget,
    /// [`READ_CHUNK`] at a time, into a buffer from the pool when it has one
    /// free (see [`crate::guard::buffers`]). Time spent waiting for room
    /// moves the deadline: the client is not the one holding things up.
    /// It never moves the login deadline ([`Connection::read_to`] caps by
    /// it), and waiting for room ends there too.
    async fn read_payload(
        &mut self,
        len: usize,
        grant: &mut Grant,
        mut deadline: Instant,
    ) -> Result<Bytes, CloseReason> {
        let mut req = self.ctx.buffers.take(len, READ_CHUNK);
        while req.buf.len() < len {
            let target = (req.buf.len() + READ_CHUNK).min(len);
            let held = grant.bytes() as usize;
            if held < target {
                let waited = Instant::now();
                let room = self.ctx.budget.grow(grant, (target - held) as u64);
                match self.login_deadline {
                    Some(login) => {
                        let sleep =
                            monoio::time::sleep_until(monoio::time::Instant::from_std(login));
                        monoio::select! {
                            _ = room => {}
                            _ = sleep => return Err(CloseReason::LoginTimeout),
                        }
                    }
                    None => room.await,
                }
                deadline += waited.elapsed();
            }
            self.read_to(&mut req.buf, target, deadline).await?;
        }
        Ok(req.freeze())
    }

    fn count_read(
        &self,
        read: Result<usize, ReadError>,
        late: CloseReason,
    ) -> Result<(), CloseReason> {
        match read {
            Ok(0) => Err(CloseReason::ClientLeft),
            Ok(n) => {
                Counters::add(&self.ctx.counters.bytes_in, n as u64);
                Ok(())
            }
            Err(ReadError::TimedOut) => Err(late),
            Err(ReadError::Io(e)) => Err(io_reason(&e)),
        }
    }

    async fn write_outcome(
        &mut self,
        head: Option<&RequestHead>,
        outcome: Outcome,
    ) -> std::io::Result<Written> {
        let (status, body) = match outcome {
            Outcome::Poll(wire) => {
                let n = wire.remaining() as u64;
                self.transport
                    .write_wire(
                        wire,
                        self.ctx.send_by_reference,
                        self.ctx.limits.stall_timeout,
                    )
                    .await?;
                Counters::add(&self.ctx.counters.bytes_out, n);
                return Ok(Written::Reply);
            }
            Outcome::Evict(reason) => {
                let frame = eviction::frame(head.map_or(0, |h| h.client), reason);
                self.transport
                    .write_all(frame.to_vec(), self.ctx.limits.stall_timeout)
                    .await?;
                Counters::add(&self.ctx.counters.bytes_out, frame.len() as u64);
                return Ok(Written::Evicted);
            }
            Outcome::Body(body) => (0, body),
            Outcome::Error(e) => (e.as_code(), Bytes::new()),
        };
        // Replies to metadata and consumer-offset operations, and a successful
        // login, carry a result section: `[count = 0]` before the payload.
        let framed = status == 0
            && head.is_some_and(|h| {
                h.operation.is_result_framed() || h.operation == Operation::Register
            });
        let section = if framed { 4 } else { 0 };
        let mut out = Vec::with_capacity(HEADER_LEN + section + body.len());
        out.extend_from_slice(&reply_header(head, status, section + body.len()));
        out.resize(HEADER_LEN + section, 0);
        out.extend_from_slice(&body);
        let n = out.len() as u64;
        self.transport
            .write_all(out, self.ctx.limits.stall_timeout)
            .await?;
        Counters::add(&self.ctx.counters.bytes_out, n);
        Ok(Written::Reply)
    }
}

/// What answered a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Written {
    /// A reply: the connection goes on.
    Reply,
    /// An eviction: the connection ends.
    Evicted,
}

/// The close reason of a failed read or write.
fn io_reason(e: &std::io::Error) -> CloseReason {
    match e.kind() {
        std::io::ErrorKind::ConnectionReset
        | std::io::ErrorKind::ConnectionAborted
        | std::io::ErrorKind::BrokenPipe
        | std::io::ErrorKind::UnexpectedEof => CloseReason::ClientLeft,
        std::io::ErrorKind::InvalidData => CloseReason::Tls,
        std::io::ErrorKind::TimedOut => CloseReason::Stalled,
        _ => CloseReason::Io,
    }
}
