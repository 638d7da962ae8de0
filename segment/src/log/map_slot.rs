//! A segment's mapping, made when a read needs it.
//!
//! The active segment (and one being sealed) keeps the mapping it was
//! created with. A sealed segment is mapped by the first read that needs
//! its bytes and given back when the partition holds more than
//! [`MAPPED_SEALED`] sealed mappings (the least recently read go), so a
//! process with 10,000 partitions of many segments each stays far under
//! `vm.max_map_count`. A poll reply holds its own `Mapping` (an `Arc`): a
//! mapping given back here stays valid until the last reply that holds it
//! is dropped.

use crate::io::{Mapping, Storage, StorageFile};
use std::cell::{Cell, OnceCell};
use std::io;
use std::path::Path;
use std::rc::Rc;

/// Sealed segments a partition keeps mapped between reads.
pub const MAPPED_SEALED: usize = 2;

/// Maps `len` bytes of the file at a path.
pub(crate) type Mapper = Rc<dyn Fn(&Path, usize) -> io::Result<Mapping>>;

/// A mapper over `storage`: opens the file, maps it and lets the
/// descriptor go (the mapping keeps the file, and no descriptor: a sealed
/// segment's bytes are sent from the mapping, never by descriptor).
pub(crate) fn mapper<S: Storage>(storage: &S) -> Mapper {
    let storage = storage.clone();
    Rc::new(move |path: &Path, len: usize| storage.open(path, false)?.map_alone(len))
}

thread_local! {
    /// Counts reads on this thread (shard): the age of a mapping's last use.
    static TICK: Cell<u64> = const { Cell::new(0) };
}

pub(crate) struct MapSlot {
    map: OnceCell<Mapping>,
    mapper: Mapper,
    /// The tick of the last read.
    used: Cell<u64>,
}

impl MapSlot {
    pub(crate) fn new(map: Option<Mapping>, mapper: Mapper) -> MapSlot {
        MapSlot {
            map: map.map(OnceCell::from).unwrap_or_default(),
            mapper,
            used: Cell::new(0),
        }
    }

    /// The mapping, made now (`len` bytes of `path`) if there is none.
    pub(crate) fn get(&self, path: &Path, len: u64) -> io::Result<&Mapping> {
        self.used.set(TICK.with(|t| {
            t.set(t.get() + 1);
            t.get()
        }));
        if let Some(m) = self.map.get() {
            return Ok(m);
        }
        let len = usize::try_from(len).map_err(|_| io::Error::other("segment too large to map"))?;
        let m = (self.mapper)(path, len)?;
        Ok(self.map.get_or_init(|| m))
    }

    /// The mapper, for the partition's next segment.
    pub(crate) fn mapper(&self) -> Mapper {
        self.mapper.clone()
    }

    pub(crate) fn is_mapped(&self) -> bool {
        self.map.get().is_some()
    }

    pub(crate) fn last_used(&self) -> u64 {
        self.used.get()
    }

    /// Gives the mapping back (readers holding it keep it).
    pub(crate) fn release(&mut self) {
        self.map.take();
    }
}

/// Keeps at most [`MAPPED_SEALED`] of `sealed` mapped: the most recently
/// read.
pub(crate) fn release_idle<'a>(sealed: impl Iterator<Item = &'a mut MapSlot>) {
    let mut mapped: Vec<&mut MapSlot> = sealed.filter(|s| s.is_mapped()).collect();
    if mapped.len() <= MAPPED_SEALED {
        return;
    }
    mapped.sort_by_key(|s| std::cmp::Reverse(s.last_used()));
    for slot in mapped.into_iter().skip(MAPPED_SEALED) {
        slot.release();
    }
}
