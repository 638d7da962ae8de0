//! Who may write a partition's manifest. On a single node, the node, under
//! term 0. In a cluster, only the leader of the partition's group, while a
//! majority confirms it, under its term: a manifest is written under its
//! writer's term, and the highest term's is in force, so a deposed leader's
//! late commit is hidden by its successor's (see `manifest.rs`).

/// A cluster's answer to "may this node write the manifest?".
pub trait Leadership: Send + Sync + std::fmt::Debug + 'static {
    /// The term under which this node leads `partition`'s group, while a
    /// majority confirms it; `None` when it does not lead.
    fn leading(&self, partition: u64) -> Option<u64>;
    /// The term of `partition`'s group as this node knows it; `None` while
    /// unknown (the cluster not started yet).
    fn term(&self, partition: u64) -> Option<u64>;
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
