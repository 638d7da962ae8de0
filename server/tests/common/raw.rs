//! A raw client: request headers built by hand with the protocol crate's
//! types, for bytes the SDK would never send.
#![allow(dead_code)]

use iggy_binary_protocol::codec::WireEncode;
use iggy_binary_protocol::codes::LOGIN_REGISTER_CODE;
use iggy_binary_protocol::consensus::{
    Command, EvictionHeader, Operation, ReplyHeader, RequestHeader,
};
use iggy_binary_protocol::requests::messages::{RawMessage, SendMessagesEncoder};
use iggy_binary_protocol::requests::users::LoginRegisterRequest;
use iggy_binary_protocol::{
    ClientVersionInfo, WireIdentifier, WireName, WirePartitioning, IGGY_PROTOCOL_VERSION,
};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// A connection that writes requests and reads replies.
pub struct Raw {
    pub stream: TcpStream,
    pub session: u64,
    request: u64,
}

/// A reply: status and body.
#[derive(Debug)]
pub struct RawReply {
    pub status: u32,
    pub body: Vec<u8>,
}

impl Raw {
    pub fn connect(addr: std::net::SocketAddr) -> Raw {
        Raw::over(TcpStream::connect(addr).expect("connect"))
    }

    /// A connection from `source` (another loopback address, say).
    pub fn connect_from(source: std::net::IpAddr, addr: std::net::SocketAddr) -> Raw {
        let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)
            .expect("socket");
        socket
            .bind(&std::net::SocketAddr::new(source, 0).into())
            .expect("bind");
        socket.connect(&addr.into()).expect("connect");
        Raw::over(socket.into())
    }

    /// Over a connected stream.
    pub fn over(stream: TcpStream) -> Raw {
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        Raw {
            stream,
            session: 0,
            request: 0,
        }
    }

    /// The 256-byte header for `code`'s request with `payload_len` bytes.
    pub fn header(&mut self, code: u32, payload_len: usize) -> [u8; 256] {
        let operation = if code == LOGIN_REGISTER_CODE {
            Operation::Register
        } else {
            Operation::from_command_code(code).unwrap_or(Operation::NonReplicated)
        };
        let mut reserved = [0u8; 60];
        if operation == Operation::NonReplicated {
            reserved[..4].copy_from_slice(&code.to_le_bytes());
        }
        self.request += 1;
        let h = RequestHeader {
            command: Command::Request,
            operation,
            size: (256 + payload_len) as u32,
            client: 42,
            request: if operation == Operation::Register {
                0
            } else {
                self.request
            },
            session: self.session,
            reserved,
            ..RequestHeader::default()
        };
        let mut out = [0u8; 256];
        out.copy_from_slice(bytemuck::bytes_of(&h));
        out
    }

    /// Sends the last request again, under the same request number (as
    /// Iggy's SDK repeats a request whose outcome it did not learn).
    pub fn repeat(&mut self, code: u32, payload: &[u8]) -> RawReply {
        self.request -= 1;
        self.send(code, payload)
    }

    pub fn send(&mut self, code: u32, payload: &[u8]) -> RawReply {
        let header = self.header(code, payload.len());
        self.stream.write_all(&header).expect("write header");
        self.stream.write_all(payload).expect("write payload");
        self.read_reply().expect("reply")
    }

    pub fn read_reply(&mut self) -> std::io::Result<RawReply> {
        let mut h = [0u8; 256];
        self.stream.read_exact(&mut h)?;
        let reply: ReplyHeader = bytemuck::checked::pod_read_unaligned(&h);
        assert_eq!(reply.command, Command::Reply);
        let mut body = vec![0u8; reply.size as usize - 256];
        self.stream.read_exact(&mut body)?;
        Ok(RawReply {
            status: reply.status,
            body,
        })
    }

    /// Signs in as `user`/`password`; returns the status.
    pub fn login(&mut self, user: &str, password: &str) -> u32 {
        let req = LoginRegisterRequest {
            version_info: ClientVersionInfo {
                protocol_version: IGGY_PROTOCOL_VERSION,
                sdk_name: WireName::new("raw").expect("name"),
                sdk_version: WireName::new("0").expect("name"),
            },
            username: WireName::new(user).expect("name"),
            password: password.to_owned().into(),
            client_context: None,
        };
        let reply = self.send(LOGIN_REGISTER_CODE, &req.to_bytes());
        if reply.status == 0 {
            // [result count = 0][user_id u32][session u64]...
            let mut s = [0u8; 8];
            s.copy_from_slice(&reply.body[8..16]);
            self.session = u64::from_le_bytes(s);
        }
        reply.status
    }

    /// Writes `code`'s request and reads a header-only `Eviction` frame:
    /// its reason byte and the protocol window it carries.
    pub fn send_evicted(&mut self, code: u32, payload: &[u8]) -> (u8, (u32, u32)) {
        let header = self.header(code, payload.len());
        self.stream.write_all(&header).expect("write header");
        self.stream.write_all(payload).expect("write payload");
        let mut h = [0u8; 256];
        self.stream.read_exact(&mut h).expect("a frame");
        let e: EvictionHeader = bytemuck::checked::pod_read_unaligned(&h);
        assert_eq!(e.command, Command::Eviction, "an Eviction, not a Reply");
        assert_eq!((e.size, e.client), (256, 42));
        let window = (e.server_protocol_version, e.server_protocol_version_min);
        (e.reason as u8, window)
    }

    /// Whether the server closed the connection (reads EOF).
    pub fn closed_by_server(&mut self) -> bool {
        let mut b = [0u8; 1];
        matches!(self.stream.read(&mut b), Ok(0))
    }
}

/// A SEND_MESSAGES payload for s/t partition 0 with two messages.
pub fn send_payload() -> Vec<u8> {
    send_payload_ids([1, 2])
}

/// A SEND_MESSAGES payload for s/t partition 0 with two messages of these ids.
pub fn send_payload_ids(ids: [u128; 2]) -> Vec<u8> {
    send_payload_of(&[
        RawMessage {
            id: ids[0],
            origin_timestamp: 10,
            headers: None,
            payload: b"first",
        },
        RawMessage {
            id: ids[1],
            origin_timestamp: 11,
            headers: None,
            payload: b"second",
        },
    ])
}

/// A SEND_MESSAGES payload for s/t partition 0 with `msgs`.
pub fn send_payload_of(msgs: &[RawMessage<'_>]) -> Vec<u8> {
    let mut buf = bytes::BytesMut::new();
    SendMessagesEncoder::encode(
        &mut buf,
        &WireIdentifier::named("s").expect("id"),
        &WireIdentifier::named("t").expect("id"),
        &WirePartitioning::PartitionId(0),
        msgs,
    )
    .expect("encode");
    buf.to_vec()
}
