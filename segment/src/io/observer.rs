//! What a shard's storage tells its owner about its I/O: how long each
//! `fdatasync` took and which way each write went (the engine's metrics).

/// Told how long each file's `fdatasync` took and how each write was made
/// ([`UringStorage::observe`](super::UringStorage::observe)): an
/// embedder's metrics, from the shard's thread (keep it cheap).
pub trait IoObserver: std::fmt::Debug + Send + Sync {
    /// One `fdatasync` returned after `took`.
    fn synced(&self, took: std::time::Duration);
    /// One write was made `way`.
    fn wrote(&self, way: WriteWay);
}

/// How one write was made (told to an [`IoObserver`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteWay {
    /// On the shard's thread, in time.
    Inline,
    /// On the shard's thread, slowly: a cool-off started.
    InlineSlow,
    /// Handed to the ring (an io-wq worker, where the filesystem cannot
    /// take it without blocking).
    Ring,
}
