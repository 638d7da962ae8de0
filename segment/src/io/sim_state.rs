//! The simulated disk's state: its files (volatile and durable images,
//! the changes between them), names, directories and counters.

use super::sim_mem::SimMem;
use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::PathBuf;
use std::sync::Arc;

/// Failures to inject.
#[derive(Debug, Clone, Default)]
pub struct SimFaults {
    /// The n-th `sync_data` (counting from 0) fails with EIO.
    pub fail_sync_at: Option<u64>,
    /// The n-th write (counting from 0) fails with EIO, writing nothing.
    pub fail_write_at: Option<u64>,
    /// Total bytes the disk holds; beyond it writes and allocations fail
    /// with ENOSPC.
    pub space_limit: Option<u64>,
    /// Each operation yields up to this many times before completing.
    pub max_yields: u32,
}

/// Counts of what the simulated disk was asked to do.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SimCounters {
    /// `sync_data` calls.
    pub syncs: u64,
    /// `sync_dir` calls.
    pub dir_syncs: u64,
    /// Writes.
    pub writes: u64,
    /// Bytes written.
    pub bytes_written: u64,
}

pub(super) struct State {
    pub(super) rng: fastrand::Rng,
    pub(super) faults: SimFaults,
    pub(super) counters: SimCounters,
    pub(super) file_capacity: usize,
    pub(super) next_ino: u64,
    pub(super) inodes: BTreeMap<u64, Inode>,
    pub(super) names: BTreeMap<PathBuf, u64>,
    pub(super) durable_names: BTreeMap<PathBuf, u64>,
    pub(super) dirs: BTreeSet<PathBuf>,
    pub(super) durable_dirs: BTreeSet<PathBuf>,
    /// Tickets of the directory syncs, in the order they were called.
    pub(super) next_dir_sync: u64,
    /// Per directory, the ticket of the latest-called sync that landed.
    pub(super) dir_synced: BTreeMap<PathBuf, u64>,
}

pub(super) struct Inode {
    /// The volatile image; its length is the file's length.
    pub(super) mem: Arc<SimMem>,
    pub(super) durable: Vec<u8>,
    /// Changes since the last sync, in the order they completed.
    pub(super) unsynced: Vec<Change>,
    /// The number of the first of `unsynced` (changes are numbered from 0
    /// over the file's life), so a sync can name the changes it covers.
    pub(super) unsynced_from: u64,
}

impl Inode {
    /// The number the next change will take.
    pub(super) fn next_change(&self) -> u64 {
        self.unsynced_from + self.unsynced.len() as u64
    }

    /// Removes and returns the unsynced changes numbered below `upto`.
    pub(super) fn take_changes(&mut self, upto: u64) -> Vec<Change> {
        let n = upto
            .saturating_sub(self.unsynced_from)
            .min(self.unsynced.len() as u64);
        self.unsynced_from += n;
        self.unsynced.drain(..n as usize).collect()
    }

    /// Whether a mapping of the file is alive (the inode holds one
    /// reference to its memory; every mapping holds another).
    pub(super) fn is_mapped(&self) -> bool {
        Arc::strong_count(&self.mem) > 1
    }
}

#[derive(Clone)]
pub(super) enum Change {
    Write { pos: usize, data: Vec<u8> },
    SetLen(usize),
}

pub(super) fn apply_write(image: &mut Vec<u8>, pos: usize, data: &[u8]) {
    if image.len() < pos + data.len() {
        image.resize(pos + data.len(), 0);
    }
    image[pos..pos + data.len()].copy_from_slice(data);
}

pub(super) fn gone() -> io::Error {
    io::Error::new(io::ErrorKind::NotFound, "simulated file no longer exists")
}
