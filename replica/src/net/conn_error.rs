//! Why an incoming replica connection ended: what its reader logs (at
//! debug; a wrong proof is logged as an error where it is found).

use super::frame::{FrameError, Kind};
use std::net::SocketAddr;

/// Why an incoming connection (a peer's messages, a fetch, forwarded
/// sends) was ended by this node.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnError {
    /// The socket failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The peer did not prove it holds the cluster's secret.
    #[error("from {peer}: {source}", peer = peer.map_or("?".into(), |a| a.to_string()))]
    Auth {
        /// the peer, when the socket still knows it
        peer: Option<SocketAddr>,
        /// what went wrong
        source: super::auth::AuthError,
    },
    /// A frame could not be read.
    #[error("{0}")]
    Frame(#[from] FrameError),
    /// A first frame shorter than its kind's fields.
    #[error("a short {0:?} frame")]
    Short(Kind),
    /// The peer runs another number of data groups.
    #[error("the peer runs {theirs} data groups, this node {ours}")]
    GroupCount {
        /// the peer's
        theirs: u32,
        /// this node's
        ours: u32,
    },
    /// A first frame that opens no connection.
    #[error("first frame is {0:?}")]
    First(Kind),
    /// A frame of another kind where Raft messages or requests go.
    #[error("a {kind:?} frame from node {from} where it has no place")]
    Misplaced {
        /// the frame's kind
        kind: Kind,
        /// the sending node
        from: u64,
    },
    /// A Raft message for a group this node does not run.
    #[error("no group {0}")]
    NoGroup(u32),
    /// A Raft message that does not decode.
    #[error("{0}")]
    Raft(#[from] super::raft_frame::DecodeError),
    /// A Raft message not from the connection's node, or not to this one.
    #[error("message from {from} to {to} on node {peer}'s connection to {me}")]
    Misrouted {
        /// the message's sender
        from: u64,
        /// the message's addressee
        to: u64,
        /// the connection's node
        peer: u64,
        /// this node
        me: u64,
    },
    /// Serving a fetch failed.
    #[error("fetch: {0}")]
    Fetch(std::io::Error),
}
