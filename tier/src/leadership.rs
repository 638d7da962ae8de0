//! Who may write a partition's manifest. On a single node, the node, under
//! term 0. In a cluster, only the leader of the partition's group, while a
//! majority confirms it, under its term: a manifest is written under its
//! writer's term, and the highest term's is in force, so a deposed leader's
//! late commit is hidden by its successor's (see `manifest.rs`). A
//! cluster may also replicate each commit's end through the partition's
//! group ([`Leadership::committed`]), so that followers trim their local
//! copies by what their log says instead of reading the store.

/// A cluster's answer to "may this node write the manifest?".
pub trait Leadership: Send + Sync + std::fmt::Debug + 'static {
    /// The term under which this node leads `partition`'s group, while a
    /// majority confirms it; `None` when it does not lead.
    fn leading(&self, partition: u64) -> Option<u64>;
    /// The term of `partition`'s group as this node knows it; `None` while
    /// unknown (the cluster not started yet).
    fn term(&self, partition: u64) -> Option<u64>;
    /// A leader's manifest for `partition`, committed in the store, ends at
    /// `end`: a cluster that replicates commits proposes it to the
    /// partition's group (called on the tier's thread; must not block on
    /// the proposal). By default nothing is replicated.
    fn committed(&self, partition: u64, end: u64) {
        let _ = (partition, end);
    }
    /// The highest manifest end the partition's group has replicated and
    /// this node applied: a follower trims its local copies below it
    /// without asking the store. `None` (the default): this leadership
    /// replicates no commits, and a follower reads the store's manifest
    /// instead, trusting it only when its term is the group's current one.
    fn offloaded(&self, partition: u64) -> Option<u64> {
        let _ = partition;
        None
    }
}

/// What this node is for a partition at the start of a pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// It writes the manifest, under this term.
    Leads(u64),
    /// It follows; the group's term, when known.
    Follows(Option<u64>),
}

pub(crate) fn role(l: Option<&dyn Leadership>, partition: u64) -> Role {
    match l {
        None => Role::Leads(0),
        Some(l) => match l.leading(partition) {
            Some(term) => Role::Leads(term),
            None => Role::Follows(l.term(partition)),
        },
    }
}
