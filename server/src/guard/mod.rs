//! What keeps one client, or many, from taking the server: the limits,
//! the shared request budget and its reused buffers, connections per
//! address, the sign-in throttle, and the counters of what they refused.

pub(crate) mod budget;
pub(crate) mod buffers;
pub(crate) mod counters;
pub(crate) mod limits;
pub(crate) mod login;
pub(crate) mod per_address;
