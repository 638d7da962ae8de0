//! Iggy's TCP framing at 0.11.0-edge.4: headers, request payloads, and the
//! owned vectored write of a reply.

pub mod eviction;
pub mod header;
pub mod iovec;
pub(crate) mod poll_reply;
pub mod request;
pub(crate) mod status;

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

/// One request of a connection's byte stream, as [`decode_stream`] saw it.
#[derive(Debug)]
pub struct StreamFrame {
    /// Where its header starts in the stream.
    pub at: usize,
    /// Header and payload bytes.
    pub len: usize,
    /// What it decodes to, or why it does not (the connection answers
    /// with an error status and goes on).
    pub decoded: Result<(RequestHead, Request), FrameError>,
}

/// How a connection's byte stream ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamEnd {
    /// Every byte was part of a whole request.
    Clean,
    /// A header whose size cannot frame a request: the connection is
    /// closed there.
    Framing(FramingError),
    /// The stream stops inside a request (the client left, or stalled).
    Partial {
        /// bytes of the unfinished request
        have: usize,
    },
}

/// Splits a connection's byte stream into requests as the server's read
/// loop does (a header, then the payload it declares, then the next
/// header), stopping at a framing error. Pure: the fuzz target drives
/// sequences of requests through it.
pub fn decode_stream(bytes: &[u8], max_request: u64) -> (Vec<StreamFrame>, StreamEnd) {
    let mut frames = Vec::new();
    let mut at = 0;
    loop {
        let rest = &bytes[at..];
        if rest.is_empty() {
            return (frames, StreamEnd::Clean);
        }
        let Some(header) = rest
            .get(..HEADER_LEN)
            .and_then(|h| <&[u8; HEADER_LEN]>::try_from(h).ok())
        else {
            return (frames, StreamEnd::Partial { have: rest.len() });
        };
        let framed = match parse_request_header(header, max_request) {
            Ok(f) => f,
            Err(e) => return (frames, StreamEnd::Framing(e)),
        };
        let len = HEADER_LEN + framed.payload_len;
        let Some(frame) = rest.get(..len) else {
            return (frames, StreamEnd::Partial { have: rest.len() });
        };
        frames.push(StreamFrame {
            at,
            len,
            decoded: decode_frame(frame, max_request),
        });
        at += len;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iggy_binary_protocol::codes::PING_CODE;
    use iggy_binary_protocol::consensus::{Command, Operation, RequestHeader};

    fn request(code: u32, size: u32) -> Vec<u8> {
        let mut reserved = [0u8; 60];
        reserved[..4].copy_from_slice(&code.to_le_bytes());
        let h = RequestHeader {
            command: Command::Request,
            operation: Operation::NonReplicated,
            size,
            reserved,
            ..RequestHeader::default()
        };
        let mut out = bytemuck::bytes_of(&h).to_vec();
        out.resize(size.max(256) as usize, 0);
        out
    }

    #[test]
    fn a_stream_splits_into_its_requests_and_stops_where_the_connection_would() {
        let mut bytes = request(PING_CODE, 256);
        bytes.extend(request(60_000, 300));
        bytes.extend(&request(PING_CODE, 256)[..100]);
        let (frames, end) = decode_stream(&bytes, 4096);
        assert_eq!(
            frames.iter().map(|f| (f.at, f.len)).collect::<Vec<_>>(),
            [(0, 256), (256, 300)]
        );
        assert!(matches!(
            frames[1].decoded,
            Ok((_, Request::Unsupported { code: 60_000 }))
        ));
        assert_eq!(end, StreamEnd::Partial { have: 100 });

        let mut bytes = request(PING_CODE, 256);
        bytes.extend(request(PING_CODE, 8192));
        bytes.extend(request(PING_CODE, 256));
        let (frames, end) = decode_stream(&bytes, 4096);
        assert_eq!(frames.len(), 1, "nothing after a framing error");
        assert!(matches!(
            end,
            StreamEnd::Framing(FramingError::TooLarge { size: 8192, .. })
        ));
    }
}
