//! # corelog-tier
//!
//! Retention beyond the disk: a partition's sealed segments copied to an
//! S3-compatible object store, recorded in a per-partition manifest there,
//! and read back on demand through a bounded chunk cache.
//!
//! - [`store`]: the seam: [`ObjectStore`], its S3 implementation
//!   ([`S3Store`], `rusty-s3` signing and XML, `ureq` on the tier's own
//!   threads) and an in-memory one that tests can fault ([`MemoryStore`]).
//! - [`manifest`]: what the store holds for a partition, and where.
//! - [`upload`]: copy first, commit the manifest second; strays cleaned.
//! - [`read`]: polls below the local log, served from ranged GETs.
//!
//! The engine (`corelog`) runs the uploads on a thread of its own and
//! routes polls below a partition's local start here.

pub mod buffers;
pub mod cache;
pub mod error;
pub mod leadership;
pub mod manifest;
pub mod memory;
pub mod pass;
pub mod read;
pub mod s3;
pub mod store;
pub mod tier;
mod trust;
pub mod upload;

pub use cache::CacheStats;
pub use error::{StoreError, TierError};
pub use leadership::Leadership;
pub use manifest::{Manifest, RemoteSegment};
pub use memory::MemoryStore;
/// The credentials an [`S3Store`] signs with (`rusty-s3`'s).
pub use rusty_s3::Credentials;
pub use s3::{S3Location, S3Store};
pub use store::{ObjectInfo, ObjectStore};
pub use tier::{OffloadPass, Tier, TierConfig, TierCounters, TierFigures};
