//! # corelog-server
//!
//! Apache Iggy's TCP binary protocol (0.11.0-edge.4) over corelog, so that
//! Iggy's own SDK, CLI and benchmark produce to and consume from corelog.
//! Connections are served on the engine's shards (thread-per-core on the
//! wire too); a poll reply leaves from the mapped segments in one vectored
//! write. See the README for how to run it and point Iggy's tools at it.

pub mod accounts;
pub mod budget;
pub mod catalog;
pub mod catalog_groups;
pub mod catalog_topics;
pub mod clients;
pub mod cluster;
pub mod commands;
pub mod connection;
pub mod context;
pub mod counters;
pub mod deadline;
pub mod limits;
pub mod login;
pub mod membership;
pub mod metadata;
pub mod per_address;
pub mod permissions;
pub mod poll_reply;
pub mod pool;
pub mod process;
pub mod request_buffers;
pub mod server;
pub mod snapshot;
pub mod status;
pub mod tcp;
pub mod tls;
pub mod topic_options;
pub mod transport;
pub mod users;
pub mod wire;

pub use server::{Server, ServerConfig, ServerError};
