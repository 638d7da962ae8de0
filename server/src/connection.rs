//! One client connection, served on the shard it was handed to: read a
//! request, answer it, repeat. Framing errors close the connection; every
//! other failure is an error status, and the connection goes on.

use crate::commands::{execute, Outcome, Session};
use crate::context::Context;
use crate::status;
use crate::wire::header::{parse_request_header, reply_header, HEADER_LEN};
use crate::wire::iovec::WireVec;
use crate::wire::request::decode_request;
use bytes::Bytes;
use iggy_binary_protocol::consensus::Operation;
use iggy_common::IggyError;
use monoio::buf::IoBufMut;
use monoio::io::{AsyncReadRentExt, AsyncWriteRent, AsyncWriteRentExt};
use monoio::net::TcpStream;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Serves `stream` until the client leaves, a framing error, or shutdown.
pub async fn serve(ctx: Arc<Context>, stream: std::net::TcpStream) {
    let peer = stream
        .peer_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    let mut stream = match TcpStream::from_std(stream) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!("connection from {peer}: {e}");
            return;
        }
    };
    let _ = stream.set_nodelay(true);
    tracing::debug!("connection from {peer}");
    let registration = ctx
        .clients
        .register(peer.clone(), crate::clients::TRANSPORT_TCP);
    let mut session = Session {
        client: Some(registration.client().clone()),
        ..Session::default()
    };
    let mut header = vec![0u8; HEADER_LEN];
    while !ctx.closing.load(Ordering::SeqCst) {
        let (read, buf) = stream.read_exact(header).await;
        header = buf;
        if read.is_err() {
            break;
        }
        let Ok(bytes) = <&[u8; HEADER_LEN]>::try_from(&header[..]) else {
            break;
        };
        let framed = match parse_request_header(bytes, ctx.max_request) {
            Ok(f) => f,
            Err(e) => {
                tracing::warn!("connection from {peer} closed: {e}");
                break;
            }
        };
        let Some(payload) = read_payload(&mut stream, framed.payload_len).await else {
            break;
        };
        ctx.in_flight.fetch_add(1, Ordering::SeqCst);
        let written = match framed.head {
            Ok(head) => {
                let outcome = match decode_request(head.code, &payload) {
                    Ok(request) => execute(&ctx, &mut session, &head, request, payload).await,
                    Err(e) => Outcome::Error(status::from_decode(&e)),
                };
                write_outcome(&mut stream, Some(&head), outcome).await
            }
            Err(e) => {
                tracing::warn!("request from {peer}: {e}");
                write_outcome(&mut stream, None, Outcome::Error(IggyError::InvalidCommand)).await
            }
        };
        ctx.in_flight.fetch_sub(1, Ordering::SeqCst);
        if let Err(e) = written {
            tracing::debug!("connection from {peer}: {e}");
            break;
        }
    }
    tracing::debug!("connection from {peer} ends");
}

async fn read_payload(stream: &mut TcpStream, len: usize) -> Option<Bytes> {
    if len == 0 {
        return Some(Bytes::new());
    }
    let buf = Vec::with_capacity(len).slice_mut(0..len);
    let (read, buf) = stream.read_exact(buf).await;
    read.ok()?;
    Some(Bytes::from(buf.into_inner()))
}

async fn write_outcome(
    stream: &mut TcpStream,
    head: Option<&crate::wire::header::RequestHead>,
    outcome: Outcome,
) -> std::io::Result<()> {
    let (status, body) = match outcome {
        Outcome::Poll(wire) => return write_vectored(stream, wire).await,
        Outcome::Body(body) => (0, body),
        Outcome::Error(e) => (e.as_code(), Bytes::new()),
    };
    // Replies to metadata and consumer-offset operations, and a successful
    // login, carry a result section: `[count = 0]` before the payload.
    let framed = status == 0
        && head
            .is_some_and(|h| h.operation.is_result_framed() || h.operation == Operation::Register);
    let section = if framed { 4 } else { 0 };
    let mut out = Vec::with_capacity(HEADER_LEN + section + body.len());
    out.extend_from_slice(&reply_header(head, status, section + body.len()));
    out.resize(HEADER_LEN + section, 0);
    out.extend_from_slice(&body);
    let (written, _) = stream.write_all(out).await;
    written.map(|_| ())
}

/// Writes all of `wire`, looping over short writes; the kernel reads the
/// batch bytes from the mappings `wire` owns.
async fn write_vectored(stream: &mut TcpStream, mut wire: WireVec) -> std::io::Result<()> {
    while wire.remaining() > 0 {
        let (res, back) = stream.writev(wire).await;
        wire = back;
        match res {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => wire.advance(n),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
