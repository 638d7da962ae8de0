//! The 256-byte request and reply headers of Iggy's protocol at
//! 0.11.0-edge.4 (`iggy_binary_protocol::consensus`). Every request is a
//! [`RequestHeader`] followed by `size - 256` payload bytes; every reply is a
//! [`ReplyHeader`] (command `Reply`, the request's `operation`, `client` and
//! `request` copied, `status` 0 or an Iggy error code) followed by its body.

use iggy_binary_protocol::codes::{LOGIN_REGISTER_CODE, LOGOUT_USER_CODE};
use iggy_binary_protocol::consensus::{
    read_size_field, Command, Operation, ReplyHeader, RequestHeader, HEADER_SIZE,
};
use std::mem::offset_of;

/// Bytes of a request or reply header.
pub const HEADER_LEN: usize = HEADER_SIZE;

/// Where a non-replicated request carries its legacy command code: the
/// first four bytes of `RequestHeader::reserved`.
const CODE_OFFSET: usize = offset_of!(RequestHeader, reserved);

const _: () = assert!(HEADER_LEN == 256);
const _: () = assert!(std::mem::size_of::<ReplyHeader>() == HEADER_LEN);
const _: () = assert!(CODE_OFFSET + 4 <= HEADER_LEN);

/// A header whose size cannot frame a request: the connection cannot find
/// the next request and is closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FramingError {
    /// `size` is below the header's own 256 bytes.
    #[error("request size {size} is below the 256-byte header")]
    TooSmall {
        /// the declared size
        size: u32,
    },
    /// `size` is above the server's request limit.
    #[error("request size {size} is over the {max}-byte request limit")]
    TooLarge {
        /// the declared size
        size: u32,
        /// the limit
        max: u64,
    },
}

/// A well-framed header that is not a request this server can route; the
/// payload is read and the request answered with an error status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HeaderError {
    /// The header's `command`/`operation` bytes are no valid value.
    #[error("header has an unknown command or operation byte")]
    Undecodable,
    /// The header is not a `Request`.
    #[error("header command is {command:?}, not Request")]
    NotARequest {
        /// what it is
        command: Command,
    },
    /// The operation has no client command.
    #[error("operation {operation:?} is not a client command")]
    NoCommand {
        /// the operation
        operation: Operation,
    },
}

/// What routes a request, taken from its header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestHead {
    /// The VSR operation (copied into the reply).
    pub operation: Operation,
    /// The legacy command code (`iggy_binary_protocol::codes`).
    pub code: u32,
    /// The client's id (copied into the reply).
    pub client: u128,
    /// The request number (copied into the reply).
    pub request: u64,
    /// The session the client claims.
    pub session: u64,
}

/// A header's framing: the payload length, and the routed head or why the
/// request cannot be routed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Framed {
    /// Bytes after the header.
    pub payload_len: usize,
    /// The head, or why there is none.
    pub head: Result<RequestHead, HeaderError>,
}

/// Reads a request header. A pure function: the connection's framing and
/// the fuzz target go through it.
pub fn parse_request_header(header: &[u8; HEADER_LEN], max: u64) -> Result<Framed, FramingError> {
    let size = read_size_field(header).unwrap_or(0);
    if (size as usize) < HEADER_LEN {
        return Err(FramingError::TooSmall { size });
    }
    if u64::from(size) > max {
        return Err(FramingError::TooLarge { size, max });
    }
    Ok(Framed {
        payload_len: size as usize - HEADER_LEN,
        head: route(header),
    })
}

fn route(header: &[u8; HEADER_LEN]) -> Result<RequestHead, HeaderError> {
    let typed: RequestHeader =
        bytemuck::checked::try_pod_read_unaligned(header).map_err(|_| HeaderError::Undecodable)?;
    if typed.command != Command::Request {
        return Err(HeaderError::NotARequest {
            command: typed.command,
        });
    }
    let code = match typed.operation {
        Operation::Register => LOGIN_REGISTER_CODE,
        Operation::Logout => LOGOUT_USER_CODE,
        Operation::NonReplicated => {
            let mut code = [0u8; 4];
            code.copy_from_slice(&header[CODE_OFFSET..CODE_OFFSET + 4]);
            u32::from_le_bytes(code)
        }
        op => op
            .to_command_code()
            .ok_or(HeaderError::NoCommand { operation: op })?,
    };
    Ok(RequestHead {
        operation: typed.operation,
        code,
        client: typed.client,
        request: typed.request,
        session: typed.session,
    })
}

/// The reply header for a request, with `body_len` bytes following.
pub fn reply_header(head: Option<&RequestHead>, status: u32, body_len: usize) -> [u8; HEADER_LEN] {
    let size = u32::try_from(HEADER_LEN + body_len).unwrap_or(u32::MAX);
    let reply = ReplyHeader {
        command: Command::Reply,
        size,
        client: head.map_or(0, |h| h.client),
        request: head.map_or(0, |h| h.request),
        operation: head.map_or(Operation::Reserved, |h| h.operation),
        status,
        ..ReplyHeader::default()
    };
    let mut out = [0u8; HEADER_LEN];
    out.copy_from_slice(bytemuck::bytes_of(&reply));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use iggy_binary_protocol::codes::{CREATE_STREAM_CODE, PING_CODE};

    fn request(operation: Operation, size: u32, code: u32) -> [u8; HEADER_LEN] {
        let mut reserved = [0u8; 60];
        reserved[..4].copy_from_slice(&code.to_le_bytes());
        let h = RequestHeader {
            command: Command::Request,
            operation,
            size,
            client: 7,
            request: 3,
            session: 9,
            reserved,
            ..RequestHeader::default()
        };
        let mut out = [0u8; HEADER_LEN];
        out.copy_from_slice(bytemuck::bytes_of(&h));
        out
    }

    #[test]
    fn non_replicated_code_comes_from_reserved() {
        let f = parse_request_header(&request(Operation::NonReplicated, 260, PING_CODE), 1 << 20)
            .expect("framed");
        assert_eq!(f.payload_len, 4);
        assert_eq!(f.head.expect("head").code, PING_CODE);
    }

    #[test]
    fn replicated_code_comes_from_operation() {
        let f = parse_request_header(&request(Operation::CreateStream, 256, 0), 1 << 20)
            .expect("framed");
        let head = f.head.expect("head");
        assert_eq!(head.code, CREATE_STREAM_CODE);
        assert_eq!((head.client, head.request, head.session), (7, 3, 9));
    }

    #[test]
    fn sizes_outside_the_frame_are_framing_errors() {
        let small = request(Operation::NonReplicated, 255, PING_CODE);
        assert_eq!(
            parse_request_header(&small, 1 << 20),
            Err(FramingError::TooSmall { size: 255 })
        );
        let large = request(Operation::NonReplicated, 5000, PING_CODE);
        assert!(matches!(
            parse_request_header(&large, 4096),
            Err(FramingError::TooLarge { size: 5000, .. })
        ));
    }

    #[test]
    fn unknown_operation_byte_is_a_header_error() {
        let mut h = request(Operation::NonReplicated, 256, PING_CODE);
        h[offset_of!(RequestHeader, operation)] = 250;
        let f = parse_request_header(&h, 1 << 20).expect("framed");
        assert_eq!(f.head, Err(HeaderError::Undecodable));
    }

    #[test]
    fn reply_copies_the_request() {
        let head = parse_request_header(&request(Operation::CreateStream, 256, 0), 1 << 20)
            .expect("framed")
            .head
            .expect("head");
        let bytes = reply_header(Some(&head), 1009, 4);
        let reply: ReplyHeader = bytemuck::checked::pod_read_unaligned(&bytes);
        assert_eq!(reply.command, Command::Reply);
        assert_eq!(reply.size, 260);
        assert_eq!(reply.status, 1009);
        assert_eq!(reply.operation, Operation::CreateStream);
        assert_eq!((reply.client, reply.request), (7, 3));
    }
}
