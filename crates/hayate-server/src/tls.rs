//! TLS of client connections (docs/design.md 8.1): rustls, driven by the connection's own
//! stream so that encrypted responses still leave in the event loop's batch (`send_batch`).
//!
//! `load_trusted` makes the client side for the replication connections a standby opens
//! (`replication::ReplicationTls`).
//!
//! 1. `load` reads the server's certificate chain and private key (PEM files, as
//!    PostgreSQL's `ssl_cert_file` and `ssl_key_file`) into a rustls configuration: TLS 1.2
//!    and 1.3, no client certificates.
//! 2. A client's SSLRequest is answered 'S' when the server has a configuration
//!    (`connection`); its stream then starts a `Layer` and every later byte is TLS.
//! 3. Writes: what pgwire writes is encrypted at once and the records are appended to the
//!    connection's outgoing buffer, which the batch (or the connection itself) sends.
//! 4. Reads: the session reads records from the socket (`read_tls` through `PollReader`) and
//!    hands out the plaintext; what the session has to say meanwhile (its handshake
//!    flights, session tickets, alerts) is appended to the outgoing buffer and written at
//!    once by the connection, not left for a batch.

use std::fs::File;
use std::io::{self, BufReader, Read, Write};
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::io::{AsyncRead, ReadBuf};

/// A server's TLS configuration: its certificate chain and key.
pub type TlsConfig = Arc<rustls::ServerConfig>;

/// Reads the certificate chain (leaf first) and the private key (PKCS#8, PKCS#1 or SEC1)
/// from PEM files. A missing or unreadable file, a file without a certificate or key, and
/// a key that does not match the certificate are errors naming the file.
pub fn load(certificate: &Path, key: &Path) -> io::Result<TlsConfig> {
    let named = |path: &Path, what: String| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{}: {what}", path.display()),
        )
    };
    let open = |path: &Path| {
        File::open(path)
            .map(BufReader::new)
            .map_err(|error| named(path, error.to_string()))
    };
    let chain = CertificateDer::pem_reader_iter(open(certificate)?)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| named(certificate, format!("not a PEM certificate file ({error})")))?;
    if chain.is_empty() {
        return Err(named(certificate, "holds no certificate".into()));
    }
    let key_der = PrivateKeyDer::from_pem_reader(open(key)?)
        .map_err(|error| named(key, format!("holds no private key in PEM ({error})")))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|error| io::Error::other(error.to_string()))?
        .with_no_client_auth()
        .with_single_cert(chain, key_der)
        .map_err(|error| named(key, format!("does not fit the certificate ({error})")))?;
    Ok(Arc::new(config))
}

/// The client side of TLS for connections this server makes (to a primary, as a standby):
/// the certificates it trusts, from a PEM file of one or more. A peer presenting one of them
/// exactly is trusted (nodes sharing one self-signed certificate, which may be marked as a CA
/// as `openssl req -x509` makes it); any other certificate must chain to one of them and name
/// the host connected to (a CA's file).
pub fn load_trusted(roots: &Path) -> io::Result<Arc<rustls::ClientConfig>> {
    let named = |what: String| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{}: {what}", roots.display()),
        )
    };
    let file = File::open(roots).map_err(|error| named(error.to_string()))?;
    let pinned = CertificateDer::pem_reader_iter(BufReader::new(file))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| named(format!("not a PEM certificate file ({error})")))?;
    if pinned.is_empty() {
        return Err(named("holds no certificate".into()));
    }
    let mut store = rustls::RootCertStore::empty();
    for certificate in &pinned {
        store
            .add(certificate.clone())
            .map_err(|error| named(format!("a certificate that cannot be trusted ({error})")))?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let chained =
        rustls::client::WebPkiServerVerifier::builder_with_provider(store.into(), provider.clone())
            .build()
            .map_err(|error| named(error.to_string()))?;
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|error| io::Error::other(error.to_string()))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(Trusted { pinned, chained }))
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// `load_trusted`'s check of a peer's certificate: one of `pinned` exactly, or one that
/// `chained` (WebPKI: a chain to them, the host's name, validity) accepts. The handshake's
/// signatures are checked the same way either way.
#[derive(Debug)]
struct Trusted {
    pinned: Vec<CertificateDer<'static>>,
    chained: Arc<rustls::client::WebPkiServerVerifier>,
}

impl rustls::client::danger::ServerCertVerifier for Trusted {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &rustls::pki_types::ServerName<'_>,
        ocsp_response: &[u8],
        now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        if self
            .pinned
            .iter()
            .any(|pinned| pinned.as_ref() == end_entity.as_ref())
        {
            return Ok(rustls::client::danger::ServerCertVerified::assertion());
        }
        self.chained
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        certificate: &CertificateDer<'_>,
        signed: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.chained
            .verify_tls12_signature(message, certificate, signed)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        certificate: &CertificateDer<'_>,
        signed: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.chained
            .verify_tls13_signature(message, certificate, signed)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.chained.supported_verify_schemes()
    }
}

/// The most plaintext handed out per read (a TLS record holds at most 16 KiB).
const PLAINTEXT_CHUNK_BYTES: usize = 16 * 1024;

/// One connection's TLS session, between its socket and the protocol.
pub(crate) struct Layer {
    session: rustls::ServerConnection,
}

impl Layer {
    pub(crate) fn new(config: &TlsConfig) -> io::Result<Layer> {
        let mut session = rustls::ServerConnection::new(config.clone())
            .map_err(|error| io::Error::other(error.to_string()))?;
        // Plaintext written before the handshake ends waits in the session; after it, each
        // write is encrypted and moved out at once, so the connection bounds the memory.
        session.set_buffer_limit(None);
        Ok(Layer { session })
    }

    /// Encrypts `plaintext`, appending its records to `out`.
    pub(crate) fn encrypt(&mut self, mut plaintext: &[u8], out: &mut Vec<u8>) -> io::Result<()> {
        while !plaintext.is_empty() {
            let taken = self.session.writer().write(plaintext)?;
            self.drain(out)?;
            if taken == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
            plaintext = &plaintext[taken..];
        }
        Ok(())
    }

    /// Appends what the session has to send (handshake, tickets, alerts, records) to `out`;
    /// true if there was anything.
    pub(crate) fn drain(&mut self, out: &mut Vec<u8>) -> io::Result<bool> {
        let mut any = false;
        while self.session.wants_write() {
            self.session.write_tls(out)?;
            any = true;
        }
        Ok(any)
    }

    /// Plaintext into `buf` if the session holds some: Ready with `buf` filled, or with
    /// nothing added at the end of the stream (a close_notify or the socket's end); Pending
    /// when records must be read first.
    pub(crate) fn read_plaintext(&mut self, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        // A record's plaintext at a time: the caller's buffer may be a megabyte of fresh
        // memory, which need not be zeroed each call.
        let room = buf.remaining().min(PLAINTEXT_CHUNK_BYTES);
        match self.session.reader().read(buf.initialize_unfilled_to(room)) {
            Ok(read) => {
                buf.advance(read);
                Poll::Ready(Ok(()))
            }
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => Poll::Pending,
            // The peer closed the socket without a close_notify: the end of the stream.
            Err(error) if error.kind() == io::ErrorKind::UnexpectedEof => Poll::Ready(Ok(())),
            Err(error) => Poll::Ready(Err(error)),
        }
    }

    /// Reads records from `socket` and processes them; Pending when the socket has nothing.
    /// An invalid record or a failed handshake is an `InvalidData` error, after which `drain`
    /// gives the alert to send.
    pub(crate) fn read_records<S: AsyncRead + Unpin>(
        &mut self,
        socket: &mut S,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<()>> {
        match self.session.read_tls(&mut PollReader { socket, cx }) {
            Ok(_) => {} // 0: the socket's end, which the next plaintext read reports
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => return Poll::Pending,
            Err(error) => return Poll::Ready(Err(error)),
        }
        match self.session.process_new_packets() {
            Ok(_) => Poll::Ready(Ok(())),
            Err(error) => Poll::Ready(Err(io::Error::new(io::ErrorKind::InvalidData, error))),
        }
    }

    /// Tells the peer the session ends (its alert is then `drain`ed).
    pub(crate) fn close(&mut self) {
        self.session.send_close_notify();
    }
}

/// The socket as a `Read` for rustls: Pending becomes `WouldBlock` (the task is woken when
/// the socket has more).
struct PollReader<'a, 'b, S> {
    socket: &'a mut S,
    cx: &'a mut Context<'b>,
}

impl<S: AsyncRead + Unpin> Read for PollReader<'_, '_, S> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut buf = ReadBuf::new(buf);
        match Pin::new(&mut *self.socket).poll_read(self.cx, &mut buf) {
            Poll::Ready(Ok(())) => Ok(buf.filled().len()),
            Poll::Ready(Err(error)) => Err(error),
            Poll::Pending => Err(io::ErrorKind::WouldBlock.into()),
        }
    }
}
