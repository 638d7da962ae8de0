//! The bugs a test plants in the simulated nodes, to see the checkers
//! catch them.

/// Planted bugs, each of which the checkers must catch.
#[derive(Debug, Clone, Copy, Default)]
pub struct Bugs {
    /// Append and vote responses sent before the journal's sync and the
    /// batches' writes are durable.
    pub ack_before_durable: bool,
    /// The commit mark moved when a batch is written, not when it commits.
    pub serve_uncommitted: bool,
    /// A replaced suffix is not cut from the log.
    pub no_cut: bool,
    /// A restart does not cut the log past the journal's last pointer.
    pub no_reconcile: bool,
    /// A node whose journal is new (a wiped disk) votes at once.
    pub no_fence: bool,
}
