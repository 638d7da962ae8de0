//! Reads and writes on a plain TCP socket with a deadline: what a
//! [`crate::net::transport::Transport`] does over plain TCP, and what TLS
//! (`tls.rs`) does under its records. Its own file so that `transport.rs`
//! and `tls.rs` both use it without importing each other.

use crate::net::deadline::cancel_at;
use monoio::buf::{IoBuf, IoBufMut};
use monoio::io::{CancelableAsyncReadRent, CancelableAsyncWriteRent, Canceller};
use monoio::net::TcpStream;
use std::io;
use std::time::{Duration, Instant};

/// Why a read returned no bytes.
#[derive(Debug)]
pub enum ReadError {
    /// The deadline passed first.
    TimedOut,
    /// The read failed.
    Io(io::Error),
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
