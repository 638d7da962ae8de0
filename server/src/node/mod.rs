//! The running server: its start and stop, the state every connection
//! shares, the connected clients and consumer-group members, its place
//! in a cluster, and the pool its blocking work runs on.

pub(crate) mod changes;
pub(crate) mod cluster;
pub(crate) mod context;
pub(crate) mod membership;
pub(crate) mod pool;
pub(crate) mod process;
pub(crate) mod registry;
pub(crate) mod server;
