//! The inline-write policy's table, row by row, on real files.
#![allow(clippy::unwrap_used)]

use super::*;
use bytes::Bytes;
use std::os::fd::AsRawFd;
use std::sync::Mutex;

#[derive(Debug, Default)]
struct Ways(Mutex<Vec<WriteWay>>);

impl IoObserver for Ways {
    fn synced(&self, _: Duration) {}
    fn wrote(&self, way: WriteWay) {
        self.0.lock().unwrap().push(way);
    }
}

impl Ways {
    fn take(&self) -> Vec<WriteWay> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

fn inline(policy: InlineWrites) -> (Inline, Arc<Ways>) {
    let i = Inline::new();
    i.set(policy);
    let ways = Arc::new(Ways::default());
    i.observe(ways.clone());
    (i, ways)
}

fn bufs(head: &[u8], body: &[u8]) -> WriteBufs {
    WriteBufs {
        head: Bytes::copy_from_slice(head),
        body: Bytes::copy_from_slice(body),
    }
}

#[test]
fn a_write_up_to_the_bound_is_made_here_with_its_bytes_where_they_belong() {
    let tmp = tempfile::NamedTempFile::new().unwrap();
    let fd = tmp.as_file().as_raw_fd();
    let (i, ways) = inline(InlineWrites::up_to(10));
    // Exactly the bound: inline.
    assert!(i.try_write(fd, 3, &bufs(b"head", b"body12")).is_some());
    // An empty head, and a body alone.
    assert!(i.try_write(fd, 13, &bufs(b"", b"tail")).is_some());
    assert_eq!(ways.take(), vec![WriteWay::Inline, WriteWay::Inline]);
    assert_eq!(
        std::fs::read(tmp.path()).unwrap(),
        b"\0\0\0headbody12tail".to_vec()
    );
    // One byte past it: the ring's, and nothing written here.
    assert!(i.try_write(fd, 0, &bufs(b"head", b"body123")).is_none());
    assert_eq!(ways.take(), vec![WriteWay::Ring]);
    assert_eq!(std::fs::read(tmp.path()).unwrap().len(), 17);
}

#[test]
fn off_writes_nothing_here() {
    let tmp = tempfile::NamedTempFile::new().unwrap();
    let (i, ways) = inline(InlineWrites::OFF);
    assert!(i
        .try_write(tmp.as_file().as_raw_fd(), 0, &bufs(b"x", b""))
        .is_none());
    assert_eq!(ways.take(), vec![WriteWay::Ring]);
    assert_eq!(std::fs::read(tmp.path()).unwrap(), b"");
}

#[test]
fn a_file_busy_with_an_inode_locking_operation_is_written_by_the_ring() {
    let a = tempfile::NamedTempFile::new().unwrap();
    let b = tempfile::NamedTempFile::new().unwrap();
    let (fa, fb) = (a.as_file().as_raw_fd(), b.as_file().as_raw_fd());
    let (i, ways) = inline(InlineWrites::up_to(64));
    {
        let _busy = i.busy(fa);
        let _twice = i.busy(fa);
        assert!(i.try_write(fa, 0, &bufs(b"a", b"")).is_none());
        // Another file is not held up.
        assert!(i.try_write(fb, 0, &bufs(b"b", b"")).is_some());
        drop(_twice);
        // Still one in flight.
        assert!(i.try_write(fa, 0, &bufs(b"a", b"")).is_none());
    }
    assert!(i.try_write(fa, 0, &bufs(b"a", b"")).is_some());
    assert_eq!(
        ways.take(),
        vec![
            WriteWay::Ring,
            WriteWay::Inline,
            WriteWay::Ring,
            WriteWay::Inline
        ]
    );
}

#[test]
fn a_slow_write_sends_the_next_ones_to_the_ring_until_its_cool_off_ends() {
    let tmp = tempfile::NamedTempFile::new().unwrap();
    let fd = tmp.as_file().as_raw_fd();
    // Any write is slower than no time at all plus a nanosecond a byte.
    let (i, ways) = inline(InlineWrites {
        max_bytes: 64,
        slow_after: Duration::ZERO,
    });
    assert!(i.try_write(fd, 0, &bufs(b"slow", b"")).is_some());
    assert!(i.try_write(fd, 4, &bufs(b"next", b"")).is_none());
    assert_eq!(ways.take(), vec![WriteWay::InlineSlow, WriteWay::Ring]);
    let until = i.off_until.get().unwrap();
    let left = until - Instant::now();
    assert!(
        left > Duration::from_millis(900) && left <= cool_off(0),
        "{left:?}"
    );
    // The cool-off over: inline again, and a second slow one in a row
    // cools off twice as long.
    i.off_until.set(Some(Instant::now()));
    assert!(i.try_write(fd, 4, &bufs(b"next", b"")).is_some());
    assert_eq!(ways.take(), vec![WriteWay::InlineSlow]);
    assert!(i.off_until.get().unwrap() - Instant::now() > cool_off(0));
    // A write in time ends the run of slow ones.
    i.set(InlineWrites::up_to(64));
    i.off_until.set(None);
    assert!(i.try_write(fd, 8, &bufs(b"fast", b"")).is_some());
    assert_eq!(ways.take(), vec![WriteWay::Inline]);
    assert_eq!(i.strikes.get(), 0);
    assert_eq!(std::fs::read(tmp.path()).unwrap(), b"slownextfast");
}

#[test]
fn cool_offs_double_up_to_sixteen_seconds() {
    let secs: Vec<u64> = (0..7).map(|s| cool_off(s).as_secs()).collect();
    assert_eq!(secs, vec![1, 2, 4, 8, 16, 16, 16]);
    assert_eq!(cool_off(u32::MAX).as_secs(), 16);
}

#[test]
fn a_failed_inline_write_says_why() {
    let tmp = tempfile::NamedTempFile::new().unwrap();
    let ro = std::fs::File::open(tmp.path()).unwrap();
    let (i, _) = inline(InlineWrites::up_to(64));
    let e = i
        .try_write(ro.as_raw_fd(), 0, &bufs(b"x", b""))
        .unwrap()
        .unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EBADF), "{e}");
}

/// What a file receives from `write_all_with` when each call writes at
/// most `step` bytes, after `interrupted` calls that fail with EINTR.
fn written_in_steps(pos: u64, b: &WriteBufs, step: usize, mut interrupted: usize) -> Vec<u8> {
    let mut file = vec![b'.'; pos as usize];
    write_all_with(pos, b, |iov, at| {
        if interrupted > 0 {
            interrupted -= 1;
            return Err(io::Error::from_raw_os_error(libc::EINTR));
        }
        let mut left = step;
        let mut at = at as usize;
        for v in iov {
            let part = bytes_of(v);
            let take = part.len().min(left);
            if file.len() < at + take {
                file.resize(at + take, 0);
            }
            file[at..at + take].copy_from_slice(&part[..take]);
            at += take;
            left -= take;
        }
        Ok(step - left)
    })
    .unwrap();
    file
}

#[test]
fn short_and_interrupted_writes_resume_where_they_stopped() {
    let b = bufs(b"HEADER", b"frames!");
    for step in 1..=14 {
        assert_eq!(
            written_in_steps(2, &b, step, 2),
            b"..HEADERframes!".to_vec(),
            "{step} bytes a call"
        );
    }
    // A write of nothing is an error, not a loop.
    let e = write_all_with(0, &b, |_, _| Ok(0)).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::WriteZero);
    // Any other error ends the write.
    let e = write_all_with(0, &b, |_, _| {
        Err(io::Error::from_raw_os_error(libc::ENOSPC))
    })
    .unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ENOSPC));
}

/// The bytes an iovec points at (in these tests, into a live `WriteBufs`).
fn bytes_of(v: &libc::iovec) -> Vec<u8> {
    // SAFETY: every iovec these tests make points into a `WriteBufs` that
    // outlives the call.
    unsafe { std::slice::from_raw_parts(v.iov_base as *const u8, v.iov_len) }.to_vec()
}

#[test]
fn iovecs_start_at_any_byte_of_head_or_body() {
    let b = bufs(b"abc", b"defg");
    let seen = |skip| {
        let (iov, n) = iovecs(&b, skip);
        iov[..n].iter().map(bytes_of).collect::<Vec<_>>()
    };
    assert_eq!(seen(0), vec![b"abc".to_vec(), b"defg".to_vec()]);
    assert_eq!(seen(2), vec![b"c".to_vec(), b"defg".to_vec()]);
    assert_eq!(seen(3), vec![b"defg".to_vec()]);
    assert_eq!(seen(5), vec![b"fg".to_vec()]);
    assert!(seen(7).is_empty());
    let body_only = bufs(b"", b"xy");
    let (_, n) = iovecs(&body_only, 0);
    assert_eq!(n, 1);
}
