//! The bytes of one connection: plain TCP, or TLS over it. Reads append
//! to a caller's buffer at most the bytes asked for (so the caller decides
//! what it may hold) and end at a deadline; a write that makes no progress
//! for the stall timeout fails.

use crate::deadline::cancel_at;
use crate::tls::TlsStream;
use crate::wire::iovec::WireVec;
use monoio::buf::{IoBuf, IoBufMut};
use monoio::io::{CancelableAsyncReadRent, CancelableAsyncWriteRent, Canceller};
use monoio::net::TcpStream;
use std::io;
use std::time::{Duration, Instant};

/// A client connection's byte stream.
#[derive(Debug)]
pub enum Transport {
    /// Plain TCP.
    Plain(TcpStream),
    /// TLS over TCP.
    Tls(Box<TlsStream>),
}

/// Why a read returned no bytes.
#[derive(Debug)]
pub enum ReadError {
    /// The deadline passed first.
    TimedOut,
    /// The read failed.
    Io(io::Error),
}

impl Transport {
    /// Appends up to `max` bytes read to `buf`; `Ok(0)` when the client
    /// closed its side (or `max` is 0).
    pub async fn read_into(
        &mut self,
        buf: &mut Vec<u8>,
        max: usize,
        deadline: Option<Instant>,
    ) -> Result<usize, ReadError> {
        match self {
            Transport::Plain(tcp) => tcp_read(tcp, buf, max, deadline).await,
            Transport::Tls(tls) => tls.read_into(buf, max, deadline).await,
        }
    }

    /// Writes all of `bytes`.
    pub async fn write_all(&mut self, bytes: Vec<u8>, stall: Duration) -> io::Result<()> {
        match self {
            Transport::Plain(tcp) => tcp_write_all(tcp, bytes, stall).await.0,
            Transport::Tls(tls) => tls.write_all(&bytes, stall).await,
        }
    }

    /// Writes all of a poll reply. Plain TCP hands the kernel the mapped
    /// segment bytes in one vectored write (looping over short writes); TLS
    /// encrypts them from the mappings into records.
    pub async fn write_wire(&mut self, mut wire: WireVec, stall: Duration) -> io::Result<()> {
        match self {
            Transport::Tls(tls) => tls.write_slices(&wire.slices(), stall).await,
            Transport::Plain(tcp) => {
                while wire.remaining() > 0 {
                    let c = Canceller::new();
                    let op = tcp.cancelable_writev(wire, c.handle());
                    let ((res, back), late) = cancel_at(Some(Instant::now() + stall), c, op).await;
                    wire = back;
                    match res {
                        Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                        Ok(n) => wire.advance(n),
                        Err(_) if late => return Err(io::ErrorKind::TimedOut.into()),
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => return Err(e),
                    }
                }
                Ok(())
            }
        }
    }
}

/// One read of at most `max` bytes, appended to `buf`.
pub(crate) async fn tcp_read(
    tcp: &mut TcpStream,
    buf: &mut Vec<u8>,
    max: usize,
    deadline: Option<Instant>,
) -> Result<usize, ReadError> {
    if max == 0 {
        return Ok(0);
    }
    buf.reserve(max);
    let len = buf.len();
    let owned = std::mem::take(buf).slice_mut(len..len + max);
    let c = Canceller::new();
    let op = tcp.cancelable_read(owned, c.handle());
    let ((read, back), late) = cancel_at(deadline, c, op).await;
    *buf = back.into_inner();
    match read {
        Ok(n) => Ok(n),
        Err(_) if late => Err(ReadError::TimedOut),
        Err(e) => Err(ReadError::Io(e)),
    }
}

/// Writes all of `bytes`; each write must progress within `stall`. Gives
/// the buffer back.
pub(crate) async fn tcp_write_all(
    tcp: &mut TcpStream,
    mut bytes: Vec<u8>,
    stall: Duration,
) -> (io::Result<()>, Vec<u8>) {
    let mut at = 0;
    while at < bytes.len() {
        let c = Canceller::new();
        let op = tcp.cancelable_write(bytes.slice(at..), c.handle());
        let ((res, back), late) = cancel_at(Some(Instant::now() + stall), c, op).await;
        bytes = back.into_inner();
        let err = match res {
            Ok(0) => io::ErrorKind::WriteZero.into(),
            Ok(n) => {
                at += n;
                continue;
            }
            Err(_) if late => io::ErrorKind::TimedOut.into(),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => e,
        };
        return (Err(err), bytes);
    }
    (Ok(()), bytes)
}
