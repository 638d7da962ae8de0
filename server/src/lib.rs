//! # corelog-server
//!
//! Apache Iggy's TCP binary protocol (0.11.0-edge.4) over corelog, so that
//! Iggy's own SDK, CLI and benchmark produce to and consume from corelog.
//! Connections are served on the engine's shards (thread-per-core on the
//! wire too); a poll reply leaves from the mapped segments in one vectored
//! write. See the README for how to run it and point Iggy's tools at it.

mod catalog;
mod commands;
mod guard;
mod net;
mod node;
pub mod wire;

pub use catalog::root::{DEFAULT_PASSWORD, DEFAULT_USERNAME};
pub use guard::counters::{CloseReason, CountersSnapshot, Refusal};
pub use guard::limits::{Limits, LimitsError};
pub use net::tls::{TlsError, TlsFiles};
pub use node::server::{ClusterSetup, Server, ServerConfig, ServerError};

/// What the fuzz targets and tests reach inside (cargo feature `testing`):
/// the catalog model and the permission check.
#[cfg(feature = "testing")]
pub mod testing {
    pub use crate::catalog::accounts::{NewUser, STATUS_ACTIVE};
    pub use crate::catalog::model::Catalog;
    pub use crate::commands::authz::{authorize, need, Need};
}
