//! TLS on the client port: rustls' `ServerConnection`, driven by hand over
//! monoio's `TcpStream` (no adapter crate: rustls reads and writes TLS
//! records through in-memory buffers, and this file moves them to and from
//! the socket with the same deadline-bounded reads and writes as plain
//! TCP). The handshake happens on the first read, under the connection's
//! login deadline.
//!
//! Costs against plain TCP: every byte is encrypted or decrypted (AES-GCM
//! or ChaCha20-Poly1305, chosen by the client), and a poll reply can no
//! longer go from the mappings to the socket untouched: rustls reads the
//! mapped bytes and encrypts them into TLS records (one pass over the
//! bytes), which are then copied to the socket. Memory per connection: the
//! records of at most [`WRITE_CHUNK`] plaintext bytes while a reply is
//! being sent (at most [`KEEP_OUTGOING`] kept after it), one [`READ_CHUNK`]
//! of received records, and rustls' own buffers (received plaintext up to
//! 16 KiB).

use crate::net::tcp::{tcp_read, tcp_write_all, ReadError};
use monoio::net::TcpStream;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::ServerConnection;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// TLS records read from the socket at a time: two of the largest
/// records. The buffer is held by the pending read of every connection,
/// idle ones included, so it stays small.
const READ_CHUNK: usize = 32 << 10;
/// Capacity of the record buffer kept between writes; a larger one (after
/// a big poll reply) is given back.
const KEEP_OUTGOING: usize = 64 << 10;
/// Plaintext encrypted before the records are written out.
const WRITE_CHUNK: usize = 256 << 10;

/// Why the TLS set-up cannot be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    /// The certificate file cannot be read or parsed.
    #[error("--tls-cert {path}: {source}", path = path.display())]
    Cert {
        /// the file
        path: PathBuf,
        /// what is wrong
        source: rustls::pki_types::pem::Error,
    },
    /// The certificate file holds no certificate.
    #[error("--tls-cert {path}: no certificate in it", path = path.display())]
    NoCert {
        /// the file
        path: PathBuf,
    },
    /// The key file cannot be read or holds no private key.
    #[error("--tls-key {path}: {source}", path = path.display())]
    Key {
        /// the file
        path: PathBuf,
        /// what is wrong
        source: rustls::pki_types::pem::Error,
    },
    /// rustls refused the pair.
    #[error("TLS set-up: {0}")]
    Config(#[from] rustls::Error),
}

/// Where the certificate chain and key are (PEM files).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// The certificate chain, the server's first.
    pub cert: PathBuf,
    /// Its private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
}

/// The server's TLS set-up from a PEM certificate chain and private key.
pub fn server_config(cert: &Path, key: &Path) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let certs = CertificateDer::pem_file_iter(cert)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|source| TlsError::Cert {
            path: cert.to_owned(),
            source,
        })?;
    if certs.is_empty() {
        return Err(TlsError::NoCert {
            path: cert.to_owned(),
        });
    }
    let key_der = PrivateKeyDer::from_pem_file(key).map_err(|source| TlsError::Key {
        path: key.to_owned(),
        source,
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certs, key_der)?;
    Ok(Arc::new(config))
}

/// A TLS connection over a monoio socket.
pub struct TlsStream {
    tcp: TcpStream,
    conn: ServerConnection,
    /// Records read and not yet given to rustls: `incoming[consumed..]`.
    incoming: Vec<u8>,
    consumed: usize,
    /// Records to write, reused.
    outgoing: Vec<u8>,
}

impl std::fmt::Debug for TlsStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsStream")
            .field("handshaking", &self.conn.is_handshaking())
            .finish()
    }
}

impl TlsStream {
    /// A server-side TLS connection over `tcp`.
    pub fn new(
        tcp: TcpStream,
        config: Arc<rustls::ServerConfig>,
    ) -> Result<TlsStream, rustls::Error> {
        let mut conn = ServerConnection::new(config)?;
        conn.set_buffer_limit(Some(WRITE_CHUNK));
        Ok(TlsStream {
            tcp,
            conn,
            incoming: Vec::new(),
            consumed: 0,
            outgoing: Vec::new(),
        })
    }

    /// Appends up to `max` plaintext bytes to `buf`, reading and decrypting
    /// records (and completing the handshake) as needed; `Ok(0)` at the
    /// end of the stream.
    pub async fn read_into(
        &mut self,
        buf: &mut Vec<u8>,
        max: usize,
        deadline: Option<Instant>,
    ) -> Result<usize, ReadError> {
        if max == 0 {
            return Ok(0);
        }
        loop {
            let len = buf.len();
            buf.resize(len + max.min(READ_CHUNK), 0);
            let read = self.conn.reader().read(&mut buf[len..]);
            match read {
                Ok(n) => {
                    buf.truncate(len + n);
                    return Ok(n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => buf.truncate(len),
                Err(e) => {
                    buf.truncate(len);
                    return Err(ReadError::Io(e));
                }
            }
            if self.consumed < self.incoming.len() {
                self.take_records().await.map_err(ReadError::Io)?;
                continue;
            }
            // Nothing to decrypt: send what is due (handshake messages),
            // then wait for more records.
            self.flush(stall_for(deadline))
                .await
                .map_err(ReadError::Io)?;
            self.incoming.clear();
            self.consumed = 0;
            let n = tcp_read(&mut self.tcp, &mut self.incoming, READ_CHUNK, deadline).await?;
            if n == 0 {
                return Ok(0);
            }
        }
    }

    /// Gives rustls the records read; a record it refuses (a plain client,
    /// say) sends an alert and fails with `InvalidData`.
    async fn take_records(&mut self) -> io::Result<()> {
        let mut rd = &self.incoming[self.consumed..];
        let before = rd.len();
        let taken = self.conn.read_tls(&mut rd);
        self.consumed += before - rd.len();
        taken?;
        if let Err(e) = self.conn.process_new_packets() {
            let _ = self.flush(Duration::from_secs(1)).await;
            return Err(io::Error::new(io::ErrorKind::InvalidData, e));
        }
        Ok(())
    }

    /// Writes all of `bytes`.
    pub async fn write_all(&mut self, bytes: &[u8], stall: Duration) -> io::Result<()> {
        self.write_slices(&[bytes], stall).await
    }

    /// Encrypts and writes all of `slices`, [`WRITE_CHUNK`] at a time.
    pub async fn write_slices(&mut self, slices: &[&[u8]], stall: Duration) -> io::Result<()> {
        for slice in slices {
            let mut at = 0;
            while at < slice.len() {
                let n = self.conn.writer().write(&slice[at..])?;
                at += n;
                if n == 0 || self.conn.wants_write() && at < slice.len() {
                    self.flush(stall).await?;
                }
            }
        }
        self.flush(stall).await
    }

    /// Writes every record rustls has ready.
    async fn flush(&mut self, stall: Duration) -> io::Result<()> {
        while self.conn.wants_write() {
            let mut out = std::mem::take(&mut self.outgoing);
            out.clear();
            self.conn.write_tls(&mut out)?;
            let (written, mut back) = tcp_write_all(&mut self.tcp, out, stall).await;
            if back.capacity() > KEEP_OUTGOING {
                back = Vec::new();
            }
            self.outgoing = back;
            written?;
        }
        Ok(())
    }
}

/// How long a write during a read may make no progress.
fn stall_for(deadline: Option<Instant>) -> Duration {
    deadline.map_or(Duration::from_secs(10), |d| {
        d.saturating_duration_since(Instant::now())
            .max(Duration::from_millis(1))
    })
}
