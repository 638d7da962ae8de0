//! The storage seam: the few file operations the partition log performs.
//!
//! [`UringStorage`] runs them on real files through a shard's io_uring
//! ([`Ring`]); `SimStorage` (feature `testing`) runs them in memory with a fault model
//! (power loss tearing unsynced writes, failed fsyncs, ENOSPC, bit flips).
//! The log is generic over [`Storage`], so one code path is exercised on
//! both.
//!
//! Operations whose latency matters (writes, syncs, preallocation,
//! truncation, reads) are async; rare metadata operations (open, list,
//! rename, remove) are synchronous system calls.

mod inline;
mod observer;
mod real;
mod seam;
#[cfg(feature = "testing")]
pub mod sim;
#[cfg(feature = "testing")]
mod sim_mem;
#[cfg(feature = "testing")]
mod sim_state;
mod uring;

pub use inline::InlineWrites;
pub use observer::{IoObserver, WriteWay};
pub use real::{map_file, UringFile, UringStorage};
pub use seam::{Mapping, Storage, StorageFile, WriteBufs};
#[cfg(feature = "testing")]
pub use sim::{SimFaults, SimStorage};
pub use uring::Ring;
