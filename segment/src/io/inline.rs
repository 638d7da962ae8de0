//! Writes a shard makes on its own thread instead of through its ring.
//!
//! A buffered write that io_uring cannot try without blocking (on ext4,
//! every one: it lacks `FMODE_BUF_WASYNC`, and `pwritev2(RWF_NOWAIT)`
//! returns `EOPNOTSUPP`) goes to an io-wq worker: a thread hop out and a
//! completion back through the ring's eventfd, each a wake-up on a core
//! the shard shares. A small write into the page cache takes microseconds,
//! so the shard does it itself, with `pwritev`, when all of these hold:
//!
//! | condition                                   | else                      |
//! |---------------------------------------------|---------------------------|
//! | the write is at most `max_bytes`            | the ring                  |
//! | no `fallocate`/`ftruncate` of that file is  | the ring (the write would |
//! | in flight on the ring                       | wait for its inode lock)  |
//! | no inline write was slow lately             | the ring, for a cool-off  |
//!
//! A write is *slow* when it takes longer than `slow_after` (2 ms by
//! default) plus a nanosecond a byte (a copy at 1 GB/s): the page cache
//! was throttling writers (dirty limits: pauses of 10-200 ms), a folio was
//! locked, or the journal held the size update. The shard then stops
//! writing inline for a second, doubled after each slow write in a row up
//! to 16 s, so a filesystem that blocks costs the shard one slow write per
//! cool-off, not one per append. The default bound lies above the pauses
//! any thread sees on these VMs (up to 1.8 ms, measured by
//! `scripts/vm_pauses.py`), which are no reason to stop.
//!
//! Every write of the shard's storage takes this path (appends, indexes,
//! consumer offsets, recovery's rewrites), and an [`IoObserver`] is told
//! which way each went (the engine's metrics).
#![allow(unsafe_code)]

use super::observer::{IoObserver, WriteWay};
use super::seam::WriteBufs;
use std::cell::{Cell, RefCell};
use std::io;
use std::os::fd::RawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// When a shard writes on its own thread (see the module's table).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InlineWrites {
    /// Writes of at most this many bytes are made inline; 0: none are.
    pub max_bytes: usize,
    /// A write slower than this (plus a nanosecond a byte) starts a
    /// cool-off.
    pub slow_after: Duration,
}

impl InlineWrites {
    /// No write inline: every write through the ring.
    pub const OFF: InlineWrites = InlineWrites {
        max_bytes: 0,
        slow_after: Duration::from_millis(2),
    };

    /// Writes up to `max_bytes` inline, with the default slowness bound.
    pub fn up_to(max_bytes: usize) -> InlineWrites {
        InlineWrites {
            max_bytes,
            ..InlineWrites::OFF
        }
    }
}

const FIRST_COOL_OFF: Duration = Duration::from_secs(1);
const MAX_STRIKES: u32 = 4;

/// One ring's inline-write state.
#[derive(Debug)]
pub(crate) struct Inline {
    policy: Cell<InlineWrites>,
    /// Until when writes go to the ring after a slow one.
    off_until: Cell<Option<Instant>>,
    /// Slow writes in a row (each doubles the cool-off).
    strikes: Cell<u32>,
    /// Files with an operation in flight that holds their inode lock.
    busy: RefCell<Vec<RawFd>>,
    observer: RefCell<Option<Arc<dyn IoObserver>>>,
}

impl Inline {
    pub(crate) fn new() -> Inline {
        Inline {
            policy: Cell::new(InlineWrites::OFF),
            off_until: Cell::new(None),
            strikes: Cell::new(0),
            busy: RefCell::new(Vec::new()),
            observer: RefCell::new(None),
        }
    }

    pub(crate) fn set(&self, policy: InlineWrites) {
        self.policy.set(policy);
    }

    pub(crate) fn observe(&self, observer: Arc<dyn IoObserver>) {
        *self.observer.borrow_mut() = Some(observer);
    }

    /// Marks `fd` busy until the returned guard drops.
    pub(crate) fn busy(&self, fd: RawFd) -> Busy<'_> {
        self.busy.borrow_mut().push(fd);
        Busy { inline: self, fd }
    }

    /// Writes `bufs` at `pos` of `fd` on this thread when the table above
    /// allows it: `None` when the write is the ring's to make.
    pub(crate) fn try_write(
        &self,
        fd: RawFd,
        pos: u64,
        bufs: &WriteBufs,
    ) -> Option<io::Result<()>> {
        let policy = self.policy.get();
        let len = bufs.len();
        let cooling = self.off_until.get().is_some_and(|t| Instant::now() < t);
        if len > policy.max_bytes || cooling || self.busy.borrow().contains(&fd) {
            self.tell(WriteWay::Ring);
            return None;
        }
        let started = Instant::now();
        let result = pwritev_all(fd, pos, bufs);
        let took = started.elapsed();
        let bound = policy.slow_after + Duration::from_nanos(len as u64);
        if took > bound {
            let strikes = self.strikes.get();
            self.strikes.set(strikes.saturating_add(1));
            self.off_until.set(Some(Instant::now() + cool_off(strikes)));
            self.tell(WriteWay::InlineSlow);
            tracing::debug!("an inline write of {len} bytes took {took:?}: writing through the ring for a while");
        } else {
            self.strikes.set(0);
            self.tell(WriteWay::Inline);
        }
        Some(result)
    }

    fn tell(&self, way: WriteWay) {
        if let Some(o) = &*self.observer.borrow() {
            o.wrote(way);
        }
    }
}

/// How long writes go to the ring after a slow one, when `strikes` slow
/// ones came right before it: a second, doubled each time, at most 16 s.
fn cool_off(strikes: u32) -> Duration {
    FIRST_COOL_OFF * (1 << strikes.min(MAX_STRIKES))
}

/// A file marked busy by [`Inline::busy`].
pub(crate) struct Busy<'a> {
    inline: &'a Inline,
    fd: RawFd,
}

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        let mut busy = self.inline.busy.borrow_mut();
        if let Some(i) = busy.iter().position(|&f| f == self.fd) {
            busy.swap_remove(i);
        }
    }
}

/// `pwritev` of all of `bufs` at `pos`, resuming after short writes and
/// interruptions.
fn pwritev_all(fd: RawFd, pos: u64, bufs: &WriteBufs) -> io::Result<()> {
    write_all_with(pos, bufs, |iov, at| {
        let at = libc::off_t::try_from(at).map_err(|_| {
            io::Error::new(io::ErrorKind::InvalidInput, "write position past off_t")
        })?;
        // SAFETY: the iovecs point into `bufs`' two buffers, which the
        // caller's borrow keeps alive and unchanged for the call; the
        // kernel only reads them. `fd` is the caller's open descriptor.
        let r = unsafe { libc::pwritev(fd, iov.as_ptr(), iov.len() as libc::c_int, at) };
        usize::try_from(r).map_err(|_| io::Error::last_os_error())
    })
}

/// Writes all of `bufs` at `pos` by calls of `write(iovecs, position)`,
/// each returning how many bytes it wrote: resumes after a short write,
/// retries an interrupted one, and refuses a write of nothing.
fn write_all_with(
    pos: u64,
    bufs: &WriteBufs,
    mut write: impl FnMut(&[libc::iovec], u64) -> io::Result<usize>,
) -> io::Result<()> {
    let total = bufs.len();
    let mut done = 0usize;
    while done < total {
        let (iov, n) = iovecs(bufs, done);
        match write(&iov[..n], pos + done as u64) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::WriteZero,
                    "write returned 0 bytes",
                ))
            }
            Ok(r) => done += r,
        }
    }
    Ok(())
}

/// The iovecs of `bufs` from byte `skip` on, and how many are used.
pub(crate) fn iovecs(bufs: &WriteBufs, mut skip: usize) -> ([libc::iovec; 2], usize) {
    let mut iov = [empty_iovec(); 2];
    let mut n = 0;
    for part in [&bufs.head, &bufs.body] {
        if skip >= part.len() {
            skip -= part.len();
            continue;
        }
        let rest = &part[skip..];
        skip = 0;
        iov[n] = libc::iovec {
            iov_base: rest.as_ptr() as *mut libc::c_void,
            iov_len: rest.len(),
        };
        n += 1;
    }
    (iov, n)
}

fn empty_iovec() -> libc::iovec {
    libc::iovec {
        iov_base: std::ptr::null_mut(),
        iov_len: 0,
    }
}

#[cfg(test)]
#[path = "inline_tests.rs"]
mod tests;
