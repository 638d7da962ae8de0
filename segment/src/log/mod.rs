//! The partition log: one partition's segments, appended through io_uring,
//! served from mmap, recovered on open.
//!
//! ```text
//! DIR/                                  (the partition's directory)
//!   00000000000000000000.log            stamped batches back to back
//!   00000000000000000000.index          sparse index, seal record once sealed
//!   00000000000000052311.log            next segment, named by its first offset
//!   00000000000000052311.index
//!   consumers/<consumer id>.offset      stored consumer offsets
//!   CLEAN                               after a clean close (recovery/clean.rs)
//!   CUT                                 a suffix cut not yet finished (cut.rs)
//! ```
//!
//! # Append path
//!
//! [`PartitionLog::append`] runs synchronously up to the write: it stamps the
//! batch (`base_offset` = next offset, `base_timestamp` never going back),
//! reserves its byte range in the active segment and spawns the write (a
//! vectored write of the stamped header and the untouched frames) on the
//! shard's ring. Several writes may be in flight; a FIFO of them advances
//! the *written mark* only over writes that completed, in order. Under
//! [`FsyncPolicy::Batch`] a sync round runs `fdatasync` over every file
//! with writes completed since the round before it started and advances the
//! *durable mark* to the written mark it saw when it started: one sync
//! acknowledges every batch it covers (group commit). Two rounds run at
//! once and publish in the order they started (`sync.rs`). Acknowledgements and the readers' visible end
//! follow the durable mark under `Batch`, the written mark otherwise.
//!
//! # Rotation
//!
//! When the active segment has reached `segment_bytes`, the next append
//! creates the next segment (named by the next offset), preallocates it in
//! the background, and the old one is sealed once its writes drain: an
//! `fdatasync`, a sync of the directory (so the next segment's name is
//! durable too), then its index rewritten with a seal record. Only then is
//! the segment *confirmed*: recovery trusts confirmed segments and recovers
//! the rest (see [`recovery`]).
//!
//! # Mapping
//!
//! The active segment is mapped once, at its full capacity (`segment_bytes`
//! plus the largest batch), when it is created or opened. The mapping never
//! moves, grows or shrinks; readers only read below the visible end, which
//! only covers completed writes, so no read touches a page past the end of
//! the file (no SIGBUS) and no write touches bytes a reader holds. A sealed
//! segment, whose file no longer changes, is mapped at its length by the
//! first read that needs it and given back when idle (`map_slot.rs`). A
//! mapping given back, or a deleted segment's, lives as long as the last
//! poll reply holding it.
//!
//! # Failures
//!
//! A failed write or sync poisons the log: every later append fails with
//! [`LogError::Poisoned`] until the log is reopened, which recovers it from
//! what is on disk. Nothing is acknowledged past the failure.

mod append;
mod commit;
mod config;
mod cut;
mod error;
mod event;
mod files;
pub mod index;
pub mod inspect;
pub(crate) mod map_slot;
mod offload;
mod offsets;
mod partition;
mod poll;
mod prealloc;
pub mod read_only;
pub mod recovery;
mod retention;
pub mod scan;
mod seal;
mod segment;
mod sync;
mod sync_gate;
mod sync_phase;
mod visible;
mod wait;
mod waiters;
mod written;

pub use append::AppendFuture;
pub use commit::CommitMarkError;
pub use config::{
    FsyncPolicy, LogConfig, OpenCheck, ParseFsyncError, Preallocation, Retention, SyncIssue,
};
pub use cut::{CutError, CUT_RECORD};
pub use error::{AppendError, Damage, LogError, OpenError, Poison};
pub use map_slot::MAPPED_SEALED;
pub use offload::SealedSegment;
pub use offsets::FIRST_RESERVED_CONSUMER;
pub use partition::{AppendAck, LogStats, PartitionLog};
pub use poll::{PollFrom, PollReply};
pub use prealloc::preallocated_ahead;
pub use recovery::{CleanClose, RecoveryReport, SetAsideFile, TailCut, ASIDE_DIR, CLEAN_RECORD};
pub use segment::{index_name, log_name, parse_log_name};
pub use sync::POISON_MARKER;
pub use wait::VisibleChanged;
pub use written::WrittenBatch;
