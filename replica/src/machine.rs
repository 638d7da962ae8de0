//! What an embedder provides: its metadata as the metadata group's state
//! machine.

use bytes::Bytes;

/// Why the embedder's machine could not apply an entry or a snapshot: its
/// own error type, kept whole (with its sources) for the log.
pub type MachineError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// The embedder's metadata as a replicated state machine (group 0).
///
/// Changes are proposed as opaque bytes computed from the metadata as of
/// [`version`](MetaMachine::version); every node applies them in log order.
pub trait MetaMachine: Send + Sync + 'static {
    /// The index of the last metadata entry applied, as recorded durably
    /// (entries up to it are not applied again after a restart).
    fn applied_index(&self) -> u64;
    /// The version changes are computed from: the index of the last entry
    /// that took effect.
    fn version(&self) -> u64;
    /// Applies entry `index`, a change made from version `base`, durably.
    /// When the version is no longer `base` it changes nothing and returns
    /// `false` (the proposer is told [`crate::ReplicaError::Conflict`]).
    fn apply(&self, index: u64, base: u64, data: &[u8]) -> Result<bool, MachineError>;
    /// The metadata as of [`applied_index`](MetaMachine::applied_index).
    fn snapshot(&self) -> Bytes;
    /// Replaces the metadata with a snapshot's, taken at `index`.
    fn restore(&self, index: u64, data: &[u8]) -> Result<(), MachineError>;
    /// Whether entries for `partition` still apply (false once the
    /// metadata deleted it, so a late entry cannot bring it back).
    fn keeps(&self, partition: u64) -> bool;
}
