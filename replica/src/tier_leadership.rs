//! Tiered storage in a cluster (`corelog::TierConfig::leadership`): a
//! partition's manifest is written only by the leader of its data group,
//! while a majority confirms it (the lease, `group/lease.rs`), under its
//! term. The engine is opened before the replica starts, so the answer is
//! "no" until [`TierLeadership::attach`] gives it the replica.
//!
//! Each commit's end is replicated through the partition's group
//! (`Command::Offloaded`): every node records the highest one applied in
//! the partition (`apply.rs`, [`OFFLOADED_TO`]), and a follower trims its
//! local copies below it without reading the store. The end a committed
//! entry names is held by the store for good: a later leader starts from
//! the manifest in force, which its predecessor wrote before proposing the
//! entry, and continues it (retention drops a manifest's oldest segments,
//! never its end).

use crate::apply::OFFLOADED_TO;
use crate::handle::ReplicaHandle;
use crate::status::Shared;
use corelog::tier::Leadership;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};

/// Who leads each partition's data group, for the engine's tier.
#[derive(Debug, Default)]
pub struct TierLeadership {
    attached: OnceLock<(ReplicaHandle, corelog::Handle)>,
}

impl TierLeadership {
    /// Not attached yet: this node leads nothing, knows no term.
    pub fn new() -> Arc<TierLeadership> {
        Arc::new(TierLeadership::default())
    }

    /// Answers from now on from `replica`'s groups (partition `p` is in
    /// data group [`ReplicaHandle::group_of`]`(p)`). Only the first call
    /// counts.
    pub fn attach(&self, replica: &ReplicaHandle, engine: corelog::Handle) {
        let _ = self.attached.set((replica.clone(), engine));
    }

    fn group(&self, partition: u64) -> Option<(&Shared, usize)> {
        let (replica, _) = self.attached.get()?;
        Some((&replica.shared, replica.group_of(partition) as usize))
    }
}

impl Leadership for TierLeadership {
    fn leading(&self, partition: u64) -> Option<u64> {
        let (shared, g) = self.group(partition)?;
        let status = shared.groups.get(g)?;
        let term = status.term.load(Ordering::Acquire);
        // The lease, then the term again: a term that moved meanwhile is
        // not the one confirmed.
        let confirmed = shared.confirmed_leader(g);
        (confirmed && status.term.load(Ordering::Acquire) == term).then_some(term)
    }

    fn term(&self, partition: u64) -> Option<u64> {
        let (shared, g) = self.group(partition)?;
        Some(shared.groups.get(g)?.term.load(Ordering::Acquire))
    }

    fn committed(&self, partition: u64, end: u64) {
        if let Some((replica, _)) = self.attached.get() {
            // Proposed now; the reply is not awaited: an entry lost with
            // a leadership change is proposed again by the next leader's
            // first pass, or with the next commit.
            drop(replica.offloaded(partition, end));
        }
    }

    fn offloaded(&self, partition: u64) -> Option<u64> {
        let (_, engine) = self.attached.get()?;
        match engine.load_offset(partition, OFFLOADED_TO).wait() {
            Ok(end) => Some(end.unwrap_or(0)),
            Err(e) => {
                tracing::warn!("tier: partition {partition}: the replicated manifest end: {e}");
                Some(0)
            }
        }
    }
}
