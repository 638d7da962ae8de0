//! The catalog: streams, topics, partitions, consumer groups, users and
//! their grants, and where it is kept. `model.rs` holds the types every
//! other file here builds on; the others add one concern each.

pub(crate) mod accounts;
pub(crate) mod groups;
pub(crate) mod model;
pub(crate) mod options;
pub(crate) mod permissions;
pub(crate) mod root;
pub(crate) mod store;
pub(crate) mod topics;
