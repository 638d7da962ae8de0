//! A client's connection: the per-connection loop, and the bytes beneath
//! it (plain TCP or TLS, each operation under a deadline).

pub(crate) mod by_reference;
pub(crate) mod connection;
pub(crate) mod deadline;
pub(crate) mod tcp;
pub(crate) mod tls;
pub(crate) mod transport;
