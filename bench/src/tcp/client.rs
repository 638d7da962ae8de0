//! A lean, blocking client of Iggy's TCP protocol (0.11.0-edge.4): one
//! request in flight per connection, as Iggy's SDK does, headers from the
//! protocol crate's types, payloads written with one vectored write from
//! the caller's buffers. Request numbering follows the SDK's rules, so it
//! also drives a real Iggy server.

use iggy_binary_protocol::codec::WireEncode;
use iggy_binary_protocol::codes::LOGIN_REGISTER_CODE;
use iggy_binary_protocol::consensus::{
    result_code, result_section_len, Command, Operation, ReplyHeader, RequestHeader,
};
use iggy_binary_protocol::requests::users::LoginRegisterRequest;
use iggy_binary_protocol::{ClientVersionInfo, WireName, IGGY_PROTOCOL_VERSION};
use std::io::{IoSlice, Read, Write};
use std::net::TcpStream;

/// A failed request.
#[derive(Debug)]
pub enum ClientError {
    /// The socket failed.
    Io(std::io::Error),
    /// The server answered with an Iggy error code.
    Status(u32),
    /// The reply is not a reply.
    Malformed(&'static str),
}

impl std::fmt::Display for ClientError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClientError::Io(e) => write!(f, "{e}"),
            ClientError::Status(code) => write!(
                f,
                "error status {code} ({})",
                iggy_common::IggyError::from_code_as_string(*code)
            ),
            ClientError::Malformed(why) => write!(f, "malformed reply: {why}"),
        }
    }
}

impl From<std::io::Error> for ClientError {
    fn from(e: std::io::Error) -> ClientError {
        ClientError::Io(e)
    }
}

/// One connection.
pub struct Client {
    stream: TcpStream,
    client_id: u128,
    session: u64,
    /// The SDK's request counter: starts at 1, advanced by metadata ops.
    request: u64,
    body: Vec<u8>,
}

impl Client {
    /// Connects to `addr` and signs in.
    pub fn connect(addr: &str, username: &str, password: &str) -> Result<Client, ClientError> {
        let stream = TcpStream::connect(addr)?;
        stream.set_nodelay(true)?;
        let mut c = Client {
            stream,
            client_id: (u128::from(fastrand::u64(1..)) << 64) | u128::from(fastrand::u64(..)),
            session: 0,
            request: 1,
            body: Vec::new(),
        };
        let login = LoginRegisterRequest {
            version_info: ClientVersionInfo {
                protocol_version: IGGY_PROTOCOL_VERSION,
                sdk_name: WireName::new("corelog-bench")
                    .map_err(|_| ClientError::Malformed("name"))?,
                sdk_version: WireName::new(env!("CARGO_PKG_VERSION"))
                    .map_err(|_| ClientError::Malformed("version"))?,
            },
            username: WireName::new(username).map_err(|_| ClientError::Malformed("username"))?,
            password: password.to_owned().into(),
            client_context: None,
        };
        let body = c.call(LOGIN_REGISTER_CODE, &[&login.to_bytes()])?;
        // [user_id u32][session u64]...
        let session = body
            .get(4..12)
            .and_then(|s| s.try_into().ok())
            .map(u64::from_le_bytes)
            .ok_or(ClientError::Malformed("login reply"))?;
        c.session = session;
        Ok(c)
    }

    /// Sends command `code` with the concatenation of `parts` as payload;
    /// returns the reply body (result section removed).
    pub fn call(&mut self, code: u32, parts: &[&[u8]]) -> Result<&[u8], ClientError> {
        let header = self.header(code, parts.iter().map(|p| p.len()).sum());
        let mut slices: Vec<IoSlice<'_>> = Vec::with_capacity(parts.len() + 1);
        slices.push(IoSlice::new(&header));
        slices.extend(parts.iter().map(|p| IoSlice::new(p)));
        write_all_vectored(&mut self.stream, &mut slices)?;
        self.read_reply()
    }

    fn header(&mut self, code: u32, payload_len: usize) -> [u8; 256] {
        let (operation, request, session) = if code == LOGIN_REGISTER_CODE {
            (Operation::Register, 0, 0)
        } else {
            let op = Operation::from_command_code(code).unwrap_or(Operation::NonReplicated);
            let request = self.request;
            if op != Operation::NonReplicated && !op.is_partition() {
                self.request += 1;
            }
            (op, request, self.session)
        };
        let mut reserved = [0u8; 60];
        if operation == Operation::NonReplicated {
            reserved[..4].copy_from_slice(&code.to_le_bytes());
        }
        let h = RequestHeader {
            command: Command::Request,
            operation,
            size: u32::try_from(256 + payload_len).unwrap_or(u32::MAX),
            client: self.client_id,
            request,
            session,
            reserved,
            ..RequestHeader::default()
        };
        let mut out = [0u8; 256];
        out.copy_from_slice(bytemuck::bytes_of(&h));
        out
    }

    fn read_reply(&mut self) -> Result<&[u8], ClientError> {
        let mut h = [0u8; 256];
        self.stream.read_exact(&mut h)?;
        let reply: ReplyHeader = bytemuck::checked::try_pod_read_unaligned(&h)
            .map_err(|_| ClientError::Malformed("reply header"))?;
        if reply.command != Command::Reply {
            return Err(ClientError::Malformed("not a reply"));
        }
        let len = (reply.size as usize)
            .checked_sub(256)
            .ok_or(ClientError::Malformed("size below the header"))?;
        self.body.resize(len, 0);
        self.stream.read_exact(&mut self.body)?;
        if reply.status != 0 {
            return Err(ClientError::Status(reply.status));
        }
        let framed = reply.operation.is_result_framed()
            || (reply.operation == Operation::Register && !self.body.is_empty());
        if !framed {
            return Ok(&self.body);
        }
        match result_code(&self.body) {
            Some(0) => {
                let at = result_section_len(&self.body).ok_or(ClientError::Malformed("result"))?;
                Ok(&self.body[at..])
            }
            Some(code) => Err(ClientError::Status(code)),
            None => Err(ClientError::Malformed("result section")),
        }
    }
}

fn write_all_vectored(
    stream: &mut TcpStream,
    mut slices: &mut [IoSlice<'_>],
) -> std::io::Result<()> {
    while !slices.is_empty() {
        match stream.write_vectored(slices) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => IoSlice::advance_slices(&mut slices, n),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
