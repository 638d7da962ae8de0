//! The bytes of a simulated file: the simulator's one use of `unsafe`.
#![allow(unsafe_code)]

use super::seam::Mapped;
use std::cell::UnsafeCell;
use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A simulated file's bytes: a fixed-capacity buffer that never moves, so
/// mappings can hand out slices while later bytes are written.
///
/// It also holds the file's length: a mapping, like a real one, has no bytes
/// past the end of the file. A real mapping faults there (`SIGBUS`);
/// [`Mapped::slice`] answers `None`, so a log that reads past the end
/// is caught by the tests instead of reading zeros.
pub(super) struct SimMem {
    cells: Box<[UnsafeCell<u8>]>,
    len: AtomicUsize,
}

// SAFETY: access follows the mapping contract (see `Mapping`), the same
// as for a real mapping: readers only read ranges below a visible end,
// the log only writes above it, and the simulator's own writes around the
// log's back (`corrupt`, `set_len`, `put_file`) are refused while a
// mapping is alive; the simulated disk itself lives on one thread.
unsafe impl Sync for SimMem {}
// SAFETY: the buffer is plain bytes with no thread affinity.
unsafe impl Send for SimMem {}

impl SimMem {
    pub(super) fn new(cap: usize) -> SimMem {
        // A zeroed allocation (calloc: untouched pages cost nothing).
        let bytes: Box<[u8]> = vec![0u8; cap].into_boxed_slice();
        let raw = Box::into_raw(bytes) as *mut [UnsafeCell<u8>];
        // SAFETY: UnsafeCell<u8> is repr(transparent) over u8, so the
        // allocation has the same layout; ownership moves to the new Box.
        let cells = unsafe { Box::from_raw(raw) };
        SimMem {
            cells,
            len: AtomicUsize::new(0),
        }
    }

    pub(super) fn cap(&self) -> usize {
        self.cells.len()
    }

    /// The file's length.
    pub(super) fn len(&self) -> usize {
        self.len.load(Ordering::Acquire)
    }

    /// Sets the file's length (the bytes are written or zeroed first).
    pub(super) fn set_len(&self, len: usize) {
        assert!(
            len <= self.cap(),
            "a simulated file's length past its capacity"
        );
        self.len.store(len, Ordering::Release);
    }

    pub(super) fn write(&self, pos: usize, data: &[u8]) {
        let end = (pos + data.len()).min(self.cap());
        if pos >= end {
            return;
        }
        // SAFETY: [pos, end) is inside the buffer; UnsafeCell allows writes
        // through a shared reference, and no reader holds a slice of these
        // bytes (see the Sync note).
        unsafe {
            std::ptr::copy_nonoverlapping(
                data.as_ptr(),
                UnsafeCell::raw_get(self.cells.as_ptr().add(pos)),
                end - pos,
            );
        }
    }

    pub(super) fn zero(&self, range: Range<usize>) {
        let end = range.end.min(self.cap());
        if range.start >= end {
            return;
        }
        // SAFETY: as for `write`.
        unsafe {
            std::ptr::write_bytes(
                UnsafeCell::raw_get(self.cells.as_ptr().add(range.start)),
                0,
                end - range.start,
            );
        }
    }

    /// The bytes of `range` (the simulator's own reads, up to the length
    /// it checked).
    pub(super) fn read(&self, range: Range<usize>) -> &[u8] {
        self.bytes(range).unwrap_or(&[])
    }

    fn bytes(&self, range: Range<usize>) -> Option<&[u8]> {
        if range.start > range.end || range.end > self.cap() {
            return None;
        }
        // SAFETY: the range is inside the buffer; UnsafeCell<u8> has the
        // layout of u8; no write touches a range a reader was given.
        Some(unsafe {
            std::slice::from_raw_parts(
                UnsafeCell::raw_get(self.cells.as_ptr().add(range.start)),
                range.len(),
            )
        })
    }
}

impl Mapped for SimMem {
    fn capacity(&self) -> usize {
        self.cap()
    }

    /// `None` past the end of the file, where a real mapping would fault.
    fn slice(&self, range: Range<usize>) -> Option<&[u8]> {
        if range.end > self.len() {
            return None;
        }
        self.bytes(range)
    }
}
