//! A blocking client of Iggy's TCP protocol for the load test, plain or
//! TLS (rustls), with requests built by hand so that attackers can send
//! what no SDK would.

use iggy_binary_protocol::codec::WireEncode;
use iggy_binary_protocol::codes::LOGIN_REGISTER_CODE;
use iggy_binary_protocol::consensus::{Command, Operation, ReplyHeader, RequestHeader};
use iggy_binary_protocol::requests::users::LoginRegisterRequest;
use iggy_binary_protocol::{ClientVersionInfo, WireName, IGGY_PROTOCOL_VERSION};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

/// TLS for the client: the CA to trust and the name to check.
#[derive(Clone)]
pub struct Tls {
    config: Arc<rustls::ClientConfig>,
    domain: ServerName<'static>,
}

impl Tls {
    /// Trusts the certificates in `ca` (PEM) for `domain`.
    pub fn new(ca: &str, domain: &str) -> Result<Tls, String> {
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_file_iter(ca).map_err(|e| format!("{ca}: {e}"))? {
            roots
                .add(cert.map_err(|e| format!("{ca}: {e}"))?)
                .map_err(|e| format!("{ca}: {e}"))?;
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots)
            .with_no_client_auth();
        let domain = ServerName::try_from(domain.to_owned()).map_err(|e| e.to_string())?;
        Ok(Tls {
            config: Arc::new(config),
            domain,
        })
    }
}

/// A socket, plain or TLS.
pub enum Stream {
    /// Plain TCP.
    Plain(TcpStream),
    /// TLS over TCP.
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, TcpStream>>),
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => s.read(buf),
            Stream::Tls(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => s.write(buf),
            Stream::Tls(s) => s.write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Plain(s) => s.flush(),
            Stream::Tls(s) => s.flush(),
        }
    }
}

/// Connects to `addr`, from `source` when given.
pub fn tcp(addr: SocketAddr, source: Option<IpAddr>) -> io::Result<TcpStream> {
    let stream = match source {
        None => TcpStream::connect(addr)?,
        Some(ip) => {
            let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?;
            s.bind(&SocketAddr::new(ip, 0).into())?;
            s.connect(&addr.into())?;
            s.into()
        }
    };
    stream.set_nodelay(true)?;
    Ok(stream)
}

fn operation_of(code: u32) -> Operation {
    if code == LOGIN_REGISTER_CODE {
        Operation::Register
    } else {
        Operation::from_command_code(code).unwrap_or(Operation::NonReplicated)
    }
}

/// The 256-byte request header of command `code` with `payload_len`
/// payload bytes.
pub fn header(
    code: u32,
    payload_len: usize,
    client: u128,
    request: u64,
    session: u64,
) -> [u8; 256] {
    let operation = operation_of(code);
    let mut reserved = [0u8; 60];
    if operation == Operation::NonReplicated {
        reserved[..4].copy_from_slice(&code.to_le_bytes());
    }
    let h = RequestHeader {
        command: Command::Request,
        operation,
        size: u32::try_from(256 + payload_len).unwrap_or(u32::MAX),
        client,
        request,
        session,
        reserved,
        ..RequestHeader::default()
    };
    let mut out = [0u8; 256];
    out.copy_from_slice(bytemuck::bytes_of(&h));
    out
}

/// One connection speaking the protocol.
pub struct Client {
    pub stream: Stream,
    session: u64,
    request: u64,
    client_id: u128,
}

/// A reply: status and body (result section included).
pub struct Reply {
    pub status: u32,
    pub body: Vec<u8>,
}

impl Client {
    /// Over a connected socket (TLS handshake on first use).
    pub fn over(tcp: TcpStream, tls: Option<&Tls>) -> io::Result<Client> {
        tcp.set_read_timeout(Some(Duration::from_secs(30)))?;
        let stream = match tls {
            None => Stream::Plain(tcp),
            Some(t) => {
                let conn = rustls::ClientConnection::new(t.config.clone(), t.domain.clone())
                    .map_err(io::Error::other)?;
                Stream::Tls(Box::new(rustls::StreamOwned::new(conn, tcp)))
            }
        };
        Ok(Client {
            stream,
            session: 0,
            request: 1,
            client_id: (u128::from(fastrand::u64(1..)) << 64) | u128::from(fastrand::u64(..)),
        })
    }

    /// The 256-byte header of command `code` with `payload_len` bytes.
    pub fn header(&mut self, code: u32, payload_len: usize) -> [u8; 256] {
        let operation = operation_of(code);
        let request = if operation == Operation::Register {
            0
        } else {
            self.request
        };
        if operation != Operation::Register
            && operation != Operation::NonReplicated
            && !operation.is_partition()
        {
            self.request += 1;
        }
        header(code, payload_len, self.client_id, request, self.session)
    }

    /// Sends a request and reads its reply.
    pub fn call(&mut self, code: u32, payload: &[u8]) -> io::Result<Reply> {
        let header = self.header(code, payload.len());
        self.send_raw(&header, payload)?;
        self.read_reply()
    }

    /// Writes `header` and `payload` as they are.
    pub fn send_raw(&mut self, header: &[u8], payload: &[u8]) -> io::Result<()> {
        let mut whole = Vec::with_capacity(header.len() + payload.len());
        whole.extend_from_slice(header);
        whole.extend_from_slice(payload);
        self.stream.write_all(&whole)?;
        self.stream.flush()
    }

    /// Reads one reply.
    pub fn read_reply(&mut self) -> io::Result<Reply> {
        let mut h = [0u8; 256];
        self.stream.read_exact(&mut h)?;
        let reply: ReplyHeader = bytemuck::checked::try_pod_read_unaligned(&h)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "reply header"))?;
        if reply.command != Command::Reply || (reply.size as usize) < 256 {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "not a reply"));
        }
        let mut body = vec![0u8; reply.size as usize - 256];
        self.stream.read_exact(&mut body)?;
        Ok(Reply {
            status: reply.status,
            body,
        })
    }

    /// Signs in; returns the status.
    pub fn login(&mut self, user: &str, password: &str) -> io::Result<u32> {
        let name = |s: &str| WireName::new(s).map_err(|e| io::Error::other(e.to_string()));
        let req = LoginRegisterRequest {
            version_info: ClientVersionInfo {
                protocol_version: IGGY_PROTOCOL_VERSION,
                sdk_name: name("corelog-attack")?,
                sdk_version: name(env!("CARGO_PKG_VERSION"))?,
            },
            username: name(user)?,
            password: password.to_owned().into(),
            client_context: None,
        };
        let reply = self.call(LOGIN_REGISTER_CODE, &req.to_bytes())?;
        if reply.status == 0 {
            // [result count][user_id u32][session u64]...
            if let Some(s) = reply.body.get(8..16) {
                let mut b = [0u8; 8];
                b.copy_from_slice(s);
                self.session = u64::from_le_bytes(b);
            }
        }
        Ok(reply.status)
    }
}
