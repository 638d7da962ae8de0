//! A poll reply to a plain-TCP client sent by reference: the stored batch
//! bytes go from their segment files to the socket with `sendfile(2)`,
//! which hands the kernel the page-cache pages instead of copying them
//! through a user buffer into the socket; the bytes built in memory
//! (headers, prefixes, short runs) go with `writev(2)` as before.
//!
//! Both calls run on the connection's thread against the socket, put in
//! non-blocking mode for the send only: a full socket answers `EAGAIN`, and
//! the connection waits for room on its runtime (`writable`, an io_uring
//! poll), failing after the stall timeout without progress, as
//! `Transport::write_wire` does. The descriptors and memory handed to the kernel belong to the
//! `WireVec`, borrowed for the whole send.
#![allow(unsafe_code)]

use crate::wire::iovec::{Run, WireVec};
use monoio::net::TcpStream;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

/// Most iovecs one `writev` takes (Linux `IOV_MAX`).
const IOV_MAX: usize = 1024;

/// Sends all of `wire` on `tcp`: stored runs of at least `min_file` bytes
/// from their files, the rest from memory.
pub(crate) async fn send(
    tcp: &TcpStream,
    wire: &WireVec,
    min_file: usize,
    stall: Duration,
) -> io::Result<()> {
    let sock = tcp.as_raw_fd();
    let _nonblocking = NonBlocking::set(sock)?;
    for run in wire.runs(min_file) {
        match run {
            Run::Vectored(r) => {
                let iovecs = wire.iovecs().get(r).ok_or(io::ErrorKind::InvalidInput)?;
                write_iovecs(tcp, sock, iovecs, stall).await?;
            }
            Run::File { chunk, start, len } => {
                let (fd, base) = wire.slice_file(chunk).ok_or(io::ErrorKind::InvalidInput)?;
                let at = base + start as u64;
                send_file(tcp, sock, fd.as_raw_fd(), at, len, stall).await?;
            }
        }
    }
    Ok(())
}

/// The socket in non-blocking mode for the send, its flags put back when
/// dropped (at the end, on an error, or when the send is abandoned). The
/// connection runs one operation at a time, so no io_uring operation of
/// its own meets the flag (io_uring honours `O_NONBLOCK` by answering
/// `EAGAIN` where it would otherwise wait).
struct NonBlocking {
    sock: RawFd,
    flags: libc::c_int,
}

impl NonBlocking {
    fn set(sock: RawFd) -> io::Result<NonBlocking> {
        // SAFETY: fcntl(2) on a descriptor the caller's TcpStream owns and
        // keeps open for the send; F_GETFL/F_SETFL touch no memory of ours.
        let flags = unsafe { libc::fcntl(sock, libc::F_GETFL) };
        if flags < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: as above.
        if unsafe { libc::fcntl(sock, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(NonBlocking { sock, flags })
    }
}

impl Drop for NonBlocking {
    fn drop(&mut self) {
        // SAFETY: as in `set`; the TcpStream outlives this guard (both are
        // borrowed by `send`).
        let _ = unsafe { libc::fcntl(self.sock, libc::F_SETFL, self.flags) };
    }
}

/// Writes every byte `iovecs` cover.
async fn write_iovecs(
    tcp: &TcpStream,
    sock: RawFd,
    iovecs: &[libc::iovec],
    stall: Duration,
) -> io::Result<()> {
    let mut iov = iovecs.to_vec();
    let mut first = 0;
    while first < iov.len() {
        let n = (iov.len() - first).min(IOV_MAX) as libc::c_int;
        // The iovecs were checked against their buffers when the WireVec
        // was made, and the loop below only moves a start forward within
        // its own bytes.
        // SAFETY: each iovec covers bytes the borrowed WireVec owns; `n`
        // iovecs from `first` exist; the kernel only reads them.
        let written = unsafe { libc::writev(sock, iov[first..].as_ptr(), n) };
        let Some(mut done) = progress(written, tcp, stall).await? else {
            continue;
        };
        while done > 0 && first < iov.len() {
            let v = &mut iov[first];
            if done < v.iov_len {
                v.iov_base = v.iov_base.cast::<u8>().wrapping_add(done).cast();
                v.iov_len -= done;
                done = 0;
            } else {
                done -= v.iov_len;
                first += 1;
            }
        }
    }
    Ok(())
}

/// Sends `len` bytes of file `fd` from offset `at`.
async fn send_file(
    tcp: &TcpStream,
    sock: RawFd,
    fd: RawFd,
    at: u64,
    mut len: usize,
    stall: Duration,
) -> io::Result<()> {
    let mut offset = libc::off_t::try_from(at).map_err(|_| io::ErrorKind::InvalidInput)?;
    while len > 0 {
        // `fd` is the segment's, kept open by the WireVec's reply; the range
        // is written bytes below the visible end, which nothing truncates or
        // rewrites while the reply holds them (the mapping contract).
        // SAFETY: sendfile(2) touches no memory of ours but `offset`, a live
        // local; both descriptors are open for the call.
        let sent = unsafe { libc::sendfile(sock, fd, &mut offset, len) };
        let Some(done) = progress(sent, tcp, stall).await? else {
            continue;
        };
        if done == 0 {
            // The file ends before the range: never for written bytes.
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        len -= done.min(len);
    }
    Ok(())
}

/// What a write call returned: bytes written (`Some`), or `None` after
/// waiting for room (a full socket) or an interruption; an error otherwise,
/// `TimedOut` once the socket took nothing for `stall`.
async fn progress(ret: isize, tcp: &TcpStream, stall: Duration) -> io::Result<Option<usize>> {
    if ret >= 0 {
        return Ok(Some(ret as usize));
    }
    let e = io::Error::last_os_error();
    match e.kind() {
        io::ErrorKind::Interrupted => Ok(None),
        io::ErrorKind::WouldBlock => {
            match monoio::time::timeout(stall, tcp.writable(false)).await {
                Ok(ready) => ready.map(|()| None),
                Err(_) => Err(io::ErrorKind::TimedOut.into()),
            }
        }
        _ => Err(e),
    }
}
