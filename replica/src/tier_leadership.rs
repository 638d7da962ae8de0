//! Tiered storage in a cluster (`corelog::TierConfig::leadership`): a
//! partition's manifest is written only by the leader of its data group,
//! while a majority confirms it (the lease, `group/lease.rs`), under its
//! term. The engine is opened before the replica starts, so the answer is
//! "no" until [`TierLeadership::attach`] gives it the replica.

use crate::handle::ReplicaHandle;
use crate::status::Shared;
use corelog::tier::Leadership;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};

/// Who leads each partition's data group, for the engine's tier.
#[derive(Debug, Default)]
pub struct TierLeadership {
    attached: OnceLock<(Arc<Shared>, corelog::Handle)>,
}

impl TierLeadership {
    /// Not attached yet: this node leads nothing, knows no term.
    pub fn new() -> Arc<TierLeadership> {
        Arc::new(TierLeadership::default())
    }

    /// Answers from now on from `replica`'s groups (partition `p` is in
    /// data group `1 + engine.shard_of(p)`). Only the first call counts.
    pub fn attach(&self, replica: &ReplicaHandle, engine: corelog::Handle) {
        let _ = self.attached.set((replica.shared.clone(), engine));
    }

    fn group(&self, partition: u64) -> Option<(&Shared, usize)> {
        let (shared, engine) = self.attached.get()?;
        Some((shared, 1 + engine.shard_of(partition)))
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
}
