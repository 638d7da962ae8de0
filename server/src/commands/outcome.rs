//! A command's answer: a body, a poll reply written from the mappings, an
//! Iggy error, or an eviction.

use crate::wire::iovec::WireVec;
use bytes::Bytes;
use iggy_binary_protocol::codec::WireEncode;
use iggy_binary_protocol::EvictionReason;
use iggy_common::IggyError;

/// A command's answer.
#[derive(Debug)]
pub enum Outcome {
    /// Status 0 and this body.
    Body(Bytes),
    /// A poll reply, written with one vectored write.
    Poll(WireVec),
    /// An error status and an empty body.
    Error(IggyError),
    /// No reply: an `Eviction` frame (`wire/eviction.rs`), and the
    /// connection is closed.
    Evict(EvictionReason),
}

impl Outcome {
    pub(super) fn encoded(value: &impl WireEncode) -> Outcome {
        Outcome::Body(value.to_bytes())
    }

    pub(super) fn empty() -> Outcome {
        Outcome::Body(Bytes::new())
    }
}

impl From<Result<Outcome, IggyError>> for Outcome {
    fn from(r: Result<Outcome, IggyError>) -> Outcome {
        r.unwrap_or_else(Outcome::Error)
    }
}
