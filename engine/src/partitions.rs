//! A shard's table of partitions: where each stands (on disk, opening,
//! open, closing, failed), which open ones were used least recently (the
//! open-partition cap closes those), and the helpers of creating and
//! deleting one.

use crate::error::RequestError;
use crate::request::Request;
use corelog_segment::io::UringStorage;
use corelog_segment::log::{AppendError, OpenError as LogOpenError, PartitionLog};
use std::collections::{BTreeSet, HashMap};

/// A partition's log on a shard.
pub(crate) type Log = PartitionLog<UringStorage>;

/// Where a partition of a shard stands.
pub(crate) enum Slot {
    /// On disk, not opened yet (opened by its first request).
    OnDisk,
    /// Being opened; requests wait here in order.
    Opening(Vec<Request>),
    Open(Log),
    /// Being closed to stay under the open-partition cap; requests wait
    /// here and reopen it.
    Closing(Vec<Request>),
    Failed(LogOpenError),
}

/// The open partitions of a shard by last use, for the cap of open
/// partitions (`Config::max_open_partitions`).
#[derive(Debug, Default)]
pub(crate) struct Lru {
    tick: u64,
    last: HashMap<u64, u64>,
    order: BTreeSet<(u64, u64)>,
}

impl Lru {
    /// `partition` was used now (or opened).
    pub(crate) fn touch(&mut self, partition: u64) {
        self.tick += 1;
        if let Some(old) = self.last.insert(partition, self.tick) {
            self.order.remove(&(old, partition));
        }
        self.order.insert((self.tick, partition));
    }

    /// `partition` is no longer open.
    pub(crate) fn forget(&mut self, partition: u64) {
        if let Some(old) = self.last.remove(&partition) {
            self.order.remove(&(old, partition));
        }
    }

    /// How many partitions are open.
    pub(crate) fn len(&self) -> usize {
        self.last.len()
    }

    /// Open partitions, least recently used first.
    pub(crate) fn oldest(&self) -> impl Iterator<Item = u64> + '_ {
        self.order.iter().map(|&(_, p)| p)
    }
}

/// A replicated batch that a new (empty) partition would refuse anyway:
/// refused before the partition is created for it.
pub(crate) fn refused_by_a_new_partition(req: &Request, partition: u64) -> Option<AppendError> {
    let Request::Append {
        batch,
        stamped: true,
        ..
    } = req
    else {
        return None;
    };
    let b = batch.as_ref();
    if b.partition_id() != partition {
        return Some(AppendError::PartitionMismatch {
            expected: partition,
            found: b.partition_id(),
        });
    }
    (b.base_offset() != 0).then_some(AppendError::OffsetMismatch {
        expected: 0,
        found: b.base_offset(),
    })
}

/// Removes `parent/<p>` (if present) and syncs `parent`.
pub(crate) fn remove_partition_dir(parent: &std::path::Path, p: u64) -> Result<(), RequestError> {
    let dir = parent.join(p.to_string());
    match std::fs::remove_dir_all(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(RequestError::io("remove partition directory", &dir, e)),
    }
    std::fs::File::open(parent)
        .and_then(|d| d.sync_all())
        .map_err(|e| RequestError::io("sync directory", parent, e))
}
