//! Iggy's TCP framing at 0.11.0-edge.4: headers, request payloads, and the
//! owned vectored write of a reply.

pub mod header;
pub mod iovec;
pub mod request;

use header::{parse_request_header, FramingError, HeaderError, RequestHead, HEADER_LEN};
use request::{decode_request, DecodeError, Request};

/// Why a whole request frame cannot be served.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    /// Fewer bytes than a header.
    #[error("{0} bytes, shorter than the 256-byte header")]
    Short(usize),
    /// The header cannot frame a request.
    #[error(transparent)]
    Framing(#[from] FramingError),
    /// The frame is shorter than its header says.
    #[error("header says {declared} payload bytes, {actual} follow")]
    Truncated {
        /// payload bytes declared
        declared: usize,
        /// payload bytes present
        actual: usize,
    },
    /// The header cannot be routed.
    #[error(transparent)]
    Header(#[from] HeaderError),
    /// The payload is not the command's layout.
    #[error(transparent)]
    Decode(#[from] DecodeError),
}

/// Decodes one whole request frame (header and payload), as the server
/// does piecewise off a socket. Pure: the fuzz target's entry point.
pub fn decode_frame(frame: &[u8], max_request: u64) -> Result<(RequestHead, Request), FrameError> {
    let header: &[u8; HEADER_LEN] = frame
        .get(..HEADER_LEN)
        .and_then(|h| h.try_into().ok())
        .ok_or(FrameError::Short(frame.len()))?;
    let framed = parse_request_header(header, max_request)?;
    let payload = &frame[HEADER_LEN..];
    if payload.len() < framed.payload_len {
        return Err(FrameError::Truncated {
            declared: framed.payload_len,
            actual: payload.len(),
        });
    }
    let head = framed.head?;
    let request = decode_request(head.code, &payload[..framed.payload_len])?;
    Ok((head, request))
}
