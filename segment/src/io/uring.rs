//! A shard's storage ring: the io_uring operations that monoio's file API
//! lacks (positional vectored write, fdatasync on any descriptor,
//! fallocate, ftruncate), driven from the monoio runtime of the same thread.
//!
//! Completions reach monoio through an eventfd registered with this ring: a
//! reaper task waits on the eventfd with monoio's own io_uring read, drains
//! our completion queue and wakes the operations. Each operation owns its
//! buffers (boxed, so their addresses stay put) until its completion
//! arrives, even when its future is dropped first: the buffers then move
//! into the slot and are freed by the reaper.
#![allow(unsafe_code)]

use super::inline::{iovecs, Inline, InlineWrites};
use super::observer::IoObserver;
use io_uring::{opcode, squeue, types, IoUring};
use slab::Slab;
use std::any::Any;
use std::cell::RefCell;
use std::ffi::CString;
use std::future::Future;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::pin::Pin;
use std::rc::{Rc, Weak};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

/// The io_uring instance of one shard's storage.
#[derive(Clone)]
pub struct Ring {
    inner: Rc<Inner>,
}

impl std::fmt::Debug for Ring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ring")
            .field("in_flight", &self.inner.ops.borrow().len())
            .finish()
    }
}

struct Inner {
    uring: RefCell<IoUring>,
    ops: RefCell<Slab<Slot>>,
    eventfd: OwnedFd,
    inline: Inline,
}

enum Slot {
    Waiting(Option<Waker>),
    Done(i32),
    /// The future was dropped; the kernel may still use these buffers.
    Orphaned(#[allow(dead_code)] Box<dyn Any>),
}

impl Ring {
    /// Creates a ring and starts its reaper on the current monoio runtime.
    ///
    /// Fails when the kernel refuses io_uring (seccomp, `io_uring_disabled`).
    pub fn new(entries: u32) -> io::Result<Ring> {
        // COOP_TASKRUN, not SINGLE_ISSUER + DEFER_TASKRUN: measured no
        // better at half of peak (docs/bench/ring-modes.md); every buffered
        // write on ext4 completes on an io-wq worker anyway.
        let uring = IoUring::builder().setup_coop_taskrun().build(entries)?;
        // SAFETY: eventfd(2) has no memory preconditions; the result is checked.
        let efd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
        if efd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `efd` is a fresh descriptor that nothing else owns.
        let owned = unsafe { OwnedFd::from_raw_fd(efd) };
        uring.submitter().register_eventfd(efd)?;
        let for_reaper = owned.try_clone()?;
        let inner = Rc::new(Inner {
            uring: RefCell::new(uring),
            ops: RefCell::new(Slab::with_capacity(entries as usize)),
            eventfd: owned,
            inline: Inline::new(),
        });
        let weak = Rc::downgrade(&inner);
        monoio::spawn(reap_forever(weak, for_reaper));
        Ok(Ring { inner })
    }

    /// Operations submitted and not yet reaped.
    pub fn in_flight(&self) -> usize {
        self.inner.ops.borrow().len()
    }

    /// Which writes this ring's thread makes itself (see `io/inline.rs`);
    /// none until set.
    pub fn set_inline_writes(&self, policy: InlineWrites) {
        self.inner.inline.set(policy);
    }

    /// Tells `observer` how each write was made.
    pub fn observe_writes(&self, observer: Arc<dyn IoObserver>) {
        self.inner.inline.observe(observer);
    }

    /// `pwritev2` of all of `bufs` at `pos`, on this thread when the inline
    /// policy allows it, else on the ring; resubmits after a short write.
    pub async fn write_all_at(
        &self,
        fd: RawFd,
        pos: u64,
        bufs: crate::io::WriteBufs,
    ) -> io::Result<()> {
        let total = bufs.len();
        let mut done = 0usize;
        if let Some(r) = self.inner.inline.try_write(fd, pos, &bufs) {
            return r;
        }
        // The iovecs are filled before each submission, below.
        let mut res = Box::new(WritevRes {
            bufs,
            iov: Default::default(),
        });
        while done < total {
            let (iov, n) = iovecs(&res.bufs, done);
            res.iov = iov;
            let n = n as u32;
            let (r, back) = self
                .submit(res, |r| {
                    opcode::Writev::new(types::Fd(fd), r.iov.as_ptr(), n)
                        .offset(pos + done as u64)
                        .build()
                })
                .await;
            res = back;
            if r < 0 {
                return Err(io::Error::from_raw_os_error(-r));
            }
            if r == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::WriteZero,
                    "write returned 0 bytes",
                ));
            }
            done += r as usize;
        }
        Ok(())
    }

    /// `pread` of up to `len` bytes at `pos` (short at end of file).
    pub async fn read_at(&self, fd: RawFd, pos: u64, len: usize) -> io::Result<Vec<u8>> {
        let mut out = Vec::with_capacity(len);
        while out.len() < len {
            let want = (len - out.len()).min(1 << 30);
            let buf = Box::new(vec![0u8; want]);
            let at = pos + out.len() as u64;
            let (r, buf) = self
                .submit(buf, |b| {
                    opcode::Read::new(types::Fd(fd), b.as_ptr() as *mut u8, want as u32)
                        .offset(at)
                        .build()
                })
                .await;
            if r < 0 {
                return Err(io::Error::from_raw_os_error(-r));
            }
            if r == 0 {
                break;
            }
            out.extend_from_slice(&buf[..r as usize]);
        }
        Ok(out)
    }

    /// `fdatasync` (or `fsync` when `data_only` is false).
    pub async fn sync(&self, fd: RawFd, data_only: bool) -> io::Result<()> {
        let flags = if data_only {
            types::FsyncFlags::DATASYNC
        } else {
            types::FsyncFlags::empty()
        };
        let (r, _) = self
            .submit(Box::new(()), |_| {
                opcode::Fsync::new(types::Fd(fd)).flags(flags).build()
            })
            .await;
        check(r)
    }

    /// Sleeps for `d` on the kernel's high-resolution timer (monoio's own
    /// timers tick in milliseconds; a load generator pacing sends needs
    /// microseconds). A seam for the bench (feature `testing`): the storage
    /// engine never sleeps on its ring.
    #[cfg(feature = "testing")]
    pub async fn sleep(&self, d: std::time::Duration) {
        let ts = Box::new(
            types::Timespec::new()
                .sec(d.as_secs())
                .nsec(d.subsec_nanos()),
        );
        // Completes with -ETIME when the timer fires: the expected outcome.
        let _ = self
            .submit(ts, |t| {
                opcode::Timeout::new(t as *const types::Timespec).build()
            })
            .await;
    }

    /// `fallocate(fd, 0, 0, len)`: allocates blocks and extends the size.
    pub async fn allocate(&self, fd: RawFd, len: u64) -> io::Result<()> {
        // It holds the inode lock: no write to `fd` inline meanwhile.
        let _busy = self.inner.inline.busy(fd);
        let (r, _) = self
            .submit(Box::new(()), |_| {
                opcode::Fallocate::new(types::Fd(fd), len).build()
            })
            .await;
        check(r)
    }

    /// `renameat(AT_FDCWD, from, AT_FDCWD, to)`.
    pub async fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let c = |p: &Path| {
            CString::new(p.as_os_str().as_bytes())
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a path with a NUL byte"))
        };
        // The names live in the boxed pair, which the operation owns until
        // its completion arrives (moving the box moves no string bytes).
        let names = Box::new((c(from)?, c(to)?));
        let (r, _) = self
            .submit(names, |n| {
                opcode::RenameAt::new(
                    types::Fd(libc::AT_FDCWD),
                    n.0.as_ptr(),
                    types::Fd(libc::AT_FDCWD),
                    n.1.as_ptr(),
                )
                .build()
            })
            .await;
        check(r)
    }

    /// `ftruncate(fd, len)`.
    pub async fn truncate(&self, fd: RawFd, len: u64) -> io::Result<()> {
        let _busy = self.inner.inline.busy(fd);
        let (r, _) = self
            .submit(Box::new(()), |_| {
                opcode::Ftruncate::new(types::Fd(fd), len).build()
            })
            .await;
        check(r)
    }

    fn submit<T: 'static>(&self, res: Box<T>, build: impl FnOnce(&T) -> squeue::Entry) -> Op<T> {
        let key = self.inner.ops.borrow_mut().insert(Slot::Waiting(None));
        let entry = build(&res).user_data(key as u64);
        if let Err(e) = self.inner.push(&entry) {
            let errno = e.raw_os_error().unwrap_or(libc::EIO);
            self.inner.ops.borrow_mut()[key] = Slot::Done(-errno);
        }
        Op {
            ring: self.inner.clone(),
            key,
            res: Some(res),
        }
    }
}

fn check(r: i32) -> io::Result<()> {
    if r < 0 {
        Err(io::Error::from_raw_os_error(-r))
    } else {
        Ok(())
    }
}

struct WritevRes {
    bufs: crate::io::WriteBufs,
    iov: [libc::iovec; 2],
}

impl Inner {
    /// Pushes one entry and submits it.
    fn push(&self, entry: &squeue::Entry) -> io::Result<()> {
        let mut uring = self.uring.borrow_mut();
        loop {
            // SAFETY: the entry points only into the boxed resources of its
            // `Op`, which stay allocated until the completion is reaped
            // (the `Op` or, once dropped, its orphaned slot owns them).
            let pushed = unsafe { uring.submission().push(entry) };
            if pushed.is_ok() {
                break;
            }
            // Queue full: hand what is queued to the kernel, then retry.
            submit_retrying(&uring)?;
        }
        submit_retrying(&uring)?;
        Ok(())
    }

    fn reap(&self) {
        let mut uring = self.uring.borrow_mut();
        let mut ops = self.ops.borrow_mut();
        loop {
            for cqe in uring.completion() {
                Self::complete(&mut ops, cqe);
            }
            // Completions the CQ had no room for wait in the kernel's
            // overflow list, and nothing signals the eventfd for them
            // again: an io_uring_enter with GETEVENTS (which `submit` adds
            // while the overflow flag is up) moves them into the CQ. Without
            // it, more operations in flight than the CQ holds (10,000
            // partitions opening at once) could wait forever.
            if !uring.submission().cq_overflow() {
                return;
            }
            if let Err(e) = submit_retrying(&uring) {
                tracing::error!("storage ring: flushing overflowed completions: {e}");
                return;
            }
        }
    }

    fn complete(ops: &mut Slab<Slot>, cqe: io_uring::cqueue::Entry) {
        let key = cqe.user_data() as usize;
        let Some(slot) = ops.get_mut(key) else {
            return;
        };
        match slot {
            Slot::Waiting(waker) => {
                let waker = waker.take();
                *slot = Slot::Done(cqe.result());
                if let Some(w) = waker {
                    w.wake();
                }
            }
            Slot::Orphaned(_) => {
                ops.remove(key);
            }
            Slot::Done(_) => {}
        }
    }
}

fn submit_retrying(uring: &IoUring) -> io::Result<()> {
    loop {
        match uring.submit() {
            Ok(_) => return Ok(()),
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::EINTR) | Some(libc::EAGAIN) | Some(libc::EBUSY)
                ) =>
            {
                std::thread::yield_now();
            }
            Err(e) => return Err(e),
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Every Op holds an Rc to us, so only orphaned operations can be in
        // flight here. Their buffers must outlive the kernel's use of them:
        // wait for the completions before the slab (and the ring) go away.
        let uring = self.uring.get_mut();
        let ops = self.ops.get_mut();
        while ops.iter().any(|(_, s)| matches!(s, Slot::Orphaned(_))) {
            if uring.submit_and_wait(1).is_err() {
                break;
            }
            for cqe in uring.completion() {
                ops.try_remove(cqe.user_data() as usize);
            }
        }
        // Wake the reaper so it sees the ring is gone and ends.
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a live u64 to our eventfd.
        unsafe { libc::write(self.eventfd.as_raw_fd(), (&one as *const u64).cast(), 8) };
    }
}

async fn reap_forever(ring: Weak<Inner>, eventfd: OwnedFd) {
    let file = match monoio::fs::File::from_std(std::fs::File::from(eventfd)) {
        Ok(f) => f,
        Err(e) => {
            tracing::error!("storage ring: cannot watch eventfd: {e}");
            return;
        }
    };
    let mut buf = vec![0u8; 8];
    loop {
        match ring.upgrade() {
            Some(inner) => inner.reap(),
            None => return,
        }
        let (r, b) = file.read_at(buf, 0).await;
        buf = b;
        if let Err(e) = r {
            tracing::error!("storage ring: eventfd read failed: {e}");
            return;
        }
    }
}

/// One submitted operation; resolves to the CQE result and the resources.
struct Op<T: 'static> {
    ring: Rc<Inner>,
    key: usize,
    res: Option<Box<T>>,
}

impl<T: 'static> Future for Op<T> {
    type Output = (i32, Box<T>);

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        // Completions may already sit in the queue.
        this.ring.reap();
        let mut ops = this.ring.ops.borrow_mut();
        match &mut ops[this.key] {
            Slot::Done(r) => {
                let r = *r;
                ops.remove(this.key);
                drop(ops);
                match this.res.take() {
                    Some(res) => Poll::Ready((r, res)),
                    None => Poll::Pending, // polled after completion: never resolves twice
                }
            }
            Slot::Waiting(w) => {
                *w = Some(cx.waker().clone());
                Poll::Pending
            }
            Slot::Orphaned(_) => Poll::Pending,
        }
    }
}

impl<T: 'static> Drop for Op<T> {
    fn drop(&mut self) {
        let Some(res) = self.res.take() else { return };
        let mut ops = self.ring.ops.borrow_mut();
        match ops.get(self.key) {
            Some(Slot::Waiting(_)) => ops[self.key] = Slot::Orphaned(res),
            Some(Slot::Done(_)) => {
                ops.remove(self.key);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::io::WriteWay;
    use std::os::fd::AsRawFd;

    /// Runs `f` on a fresh monoio runtime (the ring's reaper needs one).
    fn on_runtime<F: Future>(f: F) -> F::Output {
        monoio::RuntimeBuilder::<monoio::IoUringDriver>::new()
            .enable_timer()
            .build()
            .unwrap()
            .block_on(f)
    }

    /// More operations in flight than the completion queue holds (a ring of
    /// 2 entries has a CQ of 4), all submitted before the reaper runs: the
    /// kernel parks the completions it has no room for in its overflow
    /// list, and every operation must still complete.
    #[test]
    fn more_operations_in_flight_than_the_completion_queue_holds() {
        let tmp = tempfile::NamedTempFile::new().unwrap();
        let fd = tmp.as_file().as_raw_fd();
        on_runtime(async move {
            let ring = Ring::new(2).unwrap();
            // `submit` pushes at once (the async wrappers only when
            // polled).
            let ops: Vec<_> = (0..64)
                .map(|_| {
                    ring.submit(Box::new(()), |_| {
                        opcode::Fsync::new(types::Fd(fd))
                            .flags(types::FsyncFlags::DATASYNC)
                            .build()
                    })
                })
                .collect();
            // Let every fdatasync complete while nothing reaps.
            std::thread::sleep(std::time::Duration::from_millis(200));
            let all = async {
                for op in ops {
                    check(op.await.0).unwrap();
                }
            };
            monoio::select! {
                _ = all => {},
                _ = monoio::time::sleep(std::time::Duration::from_secs(10)) => {
                    panic!("operations whose completions overflowed the CQ never completed");
                }
            }
        });
    }

    #[derive(Debug, Default)]
    struct Ways(std::sync::Mutex<Vec<WriteWay>>);

    impl IoObserver for Ways {
        fn synced(&self, _: std::time::Duration) {}
        fn wrote(&self, way: WriteWay) {
            self.0.lock().unwrap().push(way);
        }
    }

    /// While a `fallocate` or `ftruncate` of a file (each holds its inode
    /// lock) is in flight, a write to it goes to the ring, not inline; once
    /// it is done, inline again.
    #[test]
    fn a_write_to_a_file_being_allocated_or_truncated_goes_to_the_ring() {
        let tmp = tempfile::NamedTempFile::new().unwrap();
        let fd = tmp.as_file().as_raw_fd();
        on_runtime(async move {
            let ring = Ring::new(8).unwrap();
            ring.set_inline_writes(InlineWrites::up_to(64));
            let ways = Arc::new(Ways::default());
            ring.observe_writes(ways.clone());
            let one = || crate::io::WriteBufs::one(bytes::Bytes::from_static(b"x"));
            for truncating in [false, true] {
                // The operation's first poll submits it; it completes
                // on a worker later, so its first poll is pending (tried
                // again in the rare case it is not).
                let mut tries = 0;
                loop {
                    let mut op: Pin<Box<dyn Future<Output = io::Result<()>>>> = if truncating {
                        Box::pin(ring.truncate(fd, 1 << 30))
                    } else {
                        Box::pin(ring.allocate(fd, 1 << 30))
                    };
                    let mut cx = Context::from_waker(Waker::noop());
                    if op.as_mut().poll(&mut cx).is_pending() {
                        ring.write_all_at(fd, 0, one()).await.unwrap();
                        op.await.unwrap();
                        break;
                    }
                    tries += 1;
                    assert!(tries < 100, "the operation never stayed in flight");
                }
                ring.write_all_at(fd, 1, one()).await.unwrap();
            }
            let ways = ways.0.lock().unwrap().clone();
            let (r, i) = (WriteWay::Ring, WriteWay::Inline);
            assert_eq!(ways, vec![r, i, r, i]);
        });
        assert_eq!(&std::fs::read(tmp.path()).unwrap()[..2], b"xx");
    }
}
