//! The bytes of one connection: plain TCP, or TLS over it. Reads append
//! to a caller's buffer at most the bytes asked for (so the caller decides
//! what it may hold) and end at a deadline; a write that makes no progress
//! for the stall timeout fails.

use crate::net::deadline::cancel_at;
pub use crate::net::tcp::ReadError;
use crate::net::tcp::{tcp_read, tcp_write_all};
use crate::net::tls::TlsStream;
use crate::wire::iovec::WireVec;
use monoio::io::{CancelableAsyncWriteRent, Canceller};
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

    /// Writes all of a poll reply. Plain TCP sends runs of stored bytes of
    /// at least `by_reference` bytes from their segment files
    /// (`by_reference.rs`: `sendfile`, no copy through user memory), and
    /// otherwise hands the kernel the mapped segment bytes in one vectored
    /// write (looping over short writes); TLS encrypts them from the
    /// mappings into records.
    pub async fn write_wire(
        &mut self,
        mut wire: WireVec,
        by_reference: Option<usize>,
        stall: Duration,
    ) -> io::Result<()> {
        match self {
            Transport::Tls(tls) => tls.write_slices(&wire.slices(), stall).await,
            Transport::Plain(tcp) if by_reference.is_some_and(|min| wire.remaining() >= min) => {
                let min = by_reference.unwrap_or(usize::MAX);
                crate::net::by_reference::send(tcp, &wire, min, stall).await
            }
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
