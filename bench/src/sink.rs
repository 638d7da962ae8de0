//! Where served polls go: a socket drained by a reader thread, the way a
//! server writes a poll reply to a client. The consumer writes the reply's
//! `IoSlice`s (the mapped segment bytes, no copy in user space) with
//! vectored writes; the reader thread drains the other end and counts what
//! arrived, so a served byte is a byte that left through the socket.
//!
//! The reader stands in for the network. By default (`--drain discard`) it
//! receives TCP with `MSG_TRUNC`, which drains and counts the bytes without
//! copying them to user space: on a real network the client's copy runs on
//! the client's machine, not on the server's cores. `--drain copy` reads
//! them into a buffer instead (a Unix socket always copies).

use clap::ValueEnum;
use std::io::{IoSlice, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::thread::JoinHandle;

/// The socket polls are served through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Serve {
    /// Loopback TCP (127.0.0.1), as to a client on the network.
    Tcp,
    /// A Unix stream socket pair.
    Unix,
    /// No socket: polls only verify (refused with --no-verify, which would
    /// move no data at all).
    None,
}

impl std::fmt::Display for Serve {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Serve::Tcp => "loopback TCP",
            Serve::Unix => "Unix socket pair",
            Serve::None => "no socket",
        })
    }
}

/// What the reader thread does with the bytes it drains.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Drain {
    /// Counts them without copying them out of the kernel (TCP `MSG_TRUNC`).
    Discard,
    /// Reads them into a buffer.
    Copy,
}

enum Out {
    Tcp(TcpStream),
    Unix(UnixStream),
}

/// One consumer's socket and the thread draining its other end.
pub struct Sink {
    out: Out,
    drain: JoinHandle<std::io::Result<u64>>,
    sent: u64,
}

impl std::fmt::Debug for Sink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sink").field("sent", &self.sent).finish()
    }
}

/// Bytes a sink moved: written by the consumer, read by the drain thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Moved {
    pub sent: u64,
    pub received: u64,
}

impl Sink {
    /// Opens a socket of `kind` and starts its drain thread (`None` for
    /// `Serve::None`).
    pub fn open(kind: Serve, drain: Drain) -> std::io::Result<Option<Sink>> {
        let (out, drain) = match kind {
            Serve::None => return Ok(None),
            Serve::Tcp => {
                let listener = TcpListener::bind("127.0.0.1:0")?;
                let out = TcpStream::connect(listener.local_addr()?)?;
                let (inp, _) = listener.accept()?;
                out.set_nodelay(true)?;
                let drain = match drain {
                    Drain::Copy => spawn_drain(inp)?,
                    Drain::Discard => spawn_drain(Discard::new(inp))?,
                };
                (Out::Tcp(out), drain)
            }
            Serve::Unix => {
                let (out, inp) = UnixStream::pair()?;
                (Out::Unix(out), spawn_drain(inp)?)
            }
        };
        Ok(Some(Sink {
            out,
            drain,
            sent: 0,
        }))
    }

    /// Writes all of `slices` (a poll reply's `io_slices()`).
    pub fn send(&mut self, slices: &mut [IoSlice<'_>]) -> std::io::Result<()> {
        let mut bufs = slices;
        while !bufs.is_empty() {
            let n = match &mut self.out {
                Out::Tcp(s) => s.write_vectored(bufs),
                Out::Unix(s) => s.write_vectored(bufs),
            };
            let n = match n {
                Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            self.sent += n as u64;
            IoSlice::advance_slices(&mut bufs, n);
        }
        Ok(())
    }

    /// Closes the socket and waits for the drain thread to read the rest.
    pub fn close(self) -> std::io::Result<Moved> {
        drop(self.out);
        let received = self
            .drain
            .join()
            .map_err(|_| std::io::Error::other("the drain thread panicked"))??;
        Ok(Moved {
            sent: self.sent,
            received,
        })
    }
}

/// A TCP socket whose reads drain without copying (`MSG_TRUNC`): `read`
/// returns how many bytes left the socket and leaves `buf` untouched.
struct Discard(socket2::Socket, Vec<std::mem::MaybeUninit<u8>>);

impl Discard {
    fn new(s: TcpStream) -> Discard {
        // Under MSG_TRUNC the kernel consumes up to the buffer's length but
        // writes nothing into it.
        Discard(s.into(), vec![std::mem::MaybeUninit::uninit(); 1 << 20])
    }
}

impl Read for Discard {
    fn read(&mut self, _buf: &mut [u8]) -> std::io::Result<usize> {
        self.0.recv_with_flags(&mut self.1, libc::MSG_TRUNC)
    }
}

/// Reads `inp` to its end, counting the bytes.
fn spawn_drain(
    mut inp: impl Read + Send + 'static,
) -> std::io::Result<JoinHandle<std::io::Result<u64>>> {
    std::thread::Builder::new()
        .name("poll-drain".into())
        .spawn(move || {
            let mut buf = vec![0u8; 1 << 20];
            let mut total = 0u64;
            loop {
                match inp.read(&mut buf) {
                    Ok(0) => return Ok(total),
                    Ok(n) => total += n as u64,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn moves_every_byte(kind: Serve, drain: Drain) {
        let mut sink = Sink::open(kind, drain)
            .expect("socket")
            .expect("a socket kind");
        let a = vec![1u8; 3 << 20];
        let b = vec![2u8; 12345];
        for _ in 0..3 {
            sink.send(&mut [IoSlice::new(&a), IoSlice::new(&b)])
                .expect("send");
        }
        let moved = sink.close().expect("close");
        let expected = 3 * (a.len() + b.len()) as u64;
        assert_eq!(
            moved,
            Moved {
                sent: expected,
                received: expected
            }
        );
    }

    #[test]
    fn tcp_sink_moves_every_byte() {
        moves_every_byte(Serve::Tcp, Drain::Discard);
        moves_every_byte(Serve::Tcp, Drain::Copy);
    }

    #[test]
    fn unix_sink_moves_every_byte() {
        moves_every_byte(Serve::Unix, Drain::Copy);
    }

    #[test]
    fn no_sink_is_no_socket() {
        let none = Sink::open(Serve::None, Drain::Copy).expect("nothing to open");
        assert!(none.is_none());
    }
}
