//! A replication connection's byte stream (docs/design.md 8.6): plain TCP, or TLS over it.
//!
//! The replication threads use blocking sockets with read timeouts, and a primary's follower
//! connection is read by one thread (acknowledgements) while another writes (log), each with
//! its own handle (`try_clone`). A TLS session is one state machine, so the handles of a TLS
//! link share it:
//! - reading takes the session's lock only to feed it bytes already read and to take
//!   plaintext out; the socket itself is read without the lock (a reader waiting for the
//!   peer never holds up a writer), and a read timeout leaves the session as it was;
//! - writing takes the link's write lock, then the session's: the plaintext is encrypted and
//!   the records written to the socket in the order the session made them (records carry
//!   sequence numbers), whichever handle made them (a reader answering a key update too).
//!
//! Handshakes run before any handle is cloned, within `HANDSHAKE_TIMEOUT`. The primary's side
//! is the TLS server (its certificate: the server's `tls_cert`), the connecting node's the
//! client, which checks the certificate against its trusted roots and the primary's address.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rustls::pki_types::ServerName;

use super::HANDSHAKE_TIMEOUT;

/// TLS of replication connections: the server side for a primary's listener, the client
/// side for a standby or a seeding node.
#[derive(Clone)]
pub struct ReplicationTls {
    pub server: Arc<rustls::ServerConfig>,
    pub client: Arc<rustls::ClientConfig>,
}

impl std::fmt::Debug for ReplicationTls {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("ReplicationTls(..)")
    }
}

/// One handle of a replication connection.
pub(crate) enum Link {
    Plain(TcpStream),
    Tls(TlsLink),
}

/// A handle of a TLS link (see the module docs).
pub(crate) struct TlsLink {
    socket: TcpStream,
    shared: Arc<Shared>,
}

struct Shared {
    session: Mutex<Session>,
    /// Held while records are taken out of the session and written to the socket.
    write: Mutex<()>,
}

struct Session {
    connection: rustls::Connection,
    /// Bytes read from the socket the session has not taken yet (it takes a record at a
    /// time while its plaintext waits to be read).
    received: Vec<u8>,
}

impl Link {
    /// The primary's side of a new connection: TLS when `tls` is given (a client that does
    /// not speak it fails the handshake).
    pub(crate) fn accept(socket: TcpStream, tls: Option<&ReplicationTls>) -> io::Result<Link> {
        match tls {
            None => Ok(Link::Plain(socket)),
            Some(tls) => {
                let session = rustls::ServerConnection::new(tls.server.clone())
                    .map_err(|error| io::Error::new(io::ErrorKind::InvalidData, error))?;
                TlsLink::handshake(socket, session.into(), &|| false)
            }
        }
    }

    /// The connecting node's side: TLS when `tls` is given, checking the primary's
    /// certificate for the host of `address` (host:port).
    pub(crate) fn connect(
        socket: TcpStream,
        address: &str,
        tls: Option<&ReplicationTls>,
        abandon: &dyn Fn() -> bool,
    ) -> io::Result<Link> {
        match tls {
            None => Ok(Link::Plain(socket)),
            Some(tls) => {
                let host = host_of(address);
                // Not InvalidInput: a standby takes that for a refusal only a new seed mends.
                let name = ServerName::try_from(host.to_string()).map_err(|error| {
                    io::Error::other(format!(
                        "{address}: not a host name or address to check a certificate for \
                         ({error})"
                    ))
                })?;
                let session = rustls::ClientConnection::new(tls.client.clone(), name)
                    .map_err(|error| io::Error::new(io::ErrorKind::InvalidData, error))?;
                TlsLink::handshake(socket, session.into(), abandon)
            }
        }
    }

    fn socket(&self) -> &TcpStream {
        match self {
            Link::Plain(socket) => socket,
            Link::Tls(link) => &link.socket,
        }
    }

    /// Another handle of the same connection (for a second thread).
    pub(crate) fn try_clone(&self) -> io::Result<Link> {
        Ok(match self {
            Link::Plain(socket) => Link::Plain(socket.try_clone()?),
            Link::Tls(link) => Link::Tls(TlsLink {
                socket: link.socket.try_clone()?,
                shared: link.shared.clone(),
            }),
        })
    }

    pub(crate) fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        self.socket().set_read_timeout(timeout)
    }

    pub(crate) fn shutdown(&self) {
        let _ = self.socket().shutdown(Shutdown::Both);
    }

    /// Whether something waits to be read (a message has begun to arrive), without waiting.
    pub(crate) fn readable(&self) -> io::Result<bool> {
        if let Link::Tls(link) = self {
            let mut session = link.shared.session.lock();
            if !session.received.is_empty() || session.has_plaintext() {
                return Ok(true);
            }
        }
        let socket = self.socket();
        socket.set_nonblocking(true)?;
        let waiting = socket.peek(&mut [0u8; 1]);
        socket.set_nonblocking(false)?;
        match waiting {
            Ok(_) => Ok(true), // 0: closed, which the next read reports
            Err(error) if super::is_timeout(&error) => Ok(false),
            Err(error) => Err(error),
        }
    }
}

impl Read for Link {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Link::Plain(socket) => socket.read(buf),
            Link::Tls(link) => link.read(buf),
        }
    }
}

impl Write for Link {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Link::Plain(socket) => socket.write(buf),
            Link::Tls(link) => {
                link.write_all_plaintext(buf)?;
                Ok(buf.len())
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Link::Plain(socket) => socket.flush(),
            Link::Tls(_) => Ok(()), // every write is on the socket when it returns
        }
    }
}

impl Session {
    /// Hands the session what it can take of `received`; false when it took nothing (its
    /// plaintext must be read first).
    fn feed(&mut self) -> io::Result<bool> {
        let mut taken_any = false;
        while !self.received.is_empty() {
            let mut slice = &self.received[..];
            let taken = match self.connection.read_tls(&mut slice) {
                Ok(taken) => taken,
                // Its buffer of plaintext is full: that is read first.
                Err(error) if error.kind() == io::ErrorKind::Other => break,
                Err(error) => return Err(error),
            };
            if taken == 0 {
                break;
            }
            self.received.drain(..taken);
            taken_any = true;
            self.connection
                .process_new_packets()
                .map_err(|error| io::Error::new(io::ErrorKind::InvalidData, error))?;
        }
        Ok(taken_any)
    }

    fn has_plaintext(&mut self) -> bool {
        self.connection
            .process_new_packets()
            .is_ok_and(|state| state.plaintext_bytes_to_read() > 0)
    }
}

impl TlsLink {
    /// Runs the handshake on `socket` (blocking, with its read timeout between steps),
    /// giving up at `HANDSHAKE_TIMEOUT` however slowly the peer sends, or when `abandon`
    /// says so (a standby stopping or promoted).
    fn handshake(
        mut socket: TcpStream,
        mut connection: rustls::Connection,
        abandon: &dyn Fn() -> bool,
    ) -> io::Result<Link> {
        // Whole messages are encrypted at once (a catch-up message is megabytes): the records
        // leave for the socket right after, so nothing accumulates.
        connection.set_buffer_limit(None);
        let deadline = Instant::now() + HANDSHAKE_TIMEOUT;
        while connection.is_handshaking() {
            if Instant::now() >= deadline {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "the TLS handshake of a replication connection did not finish",
                ));
            }
            if abandon() {
                return Err(io::Error::new(
                    io::ErrorKind::Interrupted,
                    "connecting to the primary given up",
                ));
            }
            match connection.complete_io(&mut socket) {
                Ok(_) => {}
                Err(error) if super::is_timeout(&error) => {}
                Err(error) => {
                    // The alert that says why, if the session has one to send.
                    let _ = connection.write_tls(&mut socket);
                    return Err(io::Error::new(
                        error.kind(),
                        format!("TLS handshake of a replication connection: {error}"),
                    ));
                }
            }
        }
        // What the handshake left to send (a server's session tickets).
        while connection.wants_write() {
            connection.write_tls(&mut socket)?;
        }
        Ok(Link::Tls(TlsLink {
            socket,
            shared: Arc::new(Shared {
                session: Mutex::new(Session {
                    connection,
                    received: Vec::new(),
                }),
                write: Mutex::new(()),
            }),
        }))
    }

    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut raw = [0u8; 16 * 1024];
        loop {
            {
                let mut session = self.shared.session.lock();
                if let Err(error) = session.feed() {
                    // The alert that tells the peer why.
                    drop(session);
                    let _ = self.send_records();
                    return Err(error);
                }
                match session.connection.reader().read(buf) {
                    Ok(read) => {
                        let answer = session.connection.wants_write();
                        drop(session);
                        if answer {
                            self.send_records()?;
                        }
                        return Ok(read);
                    }
                    Err(error) if error.kind() == io::ErrorKind::WouldBlock => {}
                    // Closed without a close_notify: the end of the stream.
                    Err(error) if error.kind() == io::ErrorKind::UnexpectedEof => return Ok(0),
                    Err(error) => return Err(error),
                }
                if session.connection.wants_write() {
                    drop(session);
                    self.send_records()?;
                }
            }
            // Without the lock: a timeout here is the caller's (nothing was consumed).
            let read = self.socket.read(&mut raw)?;
            if read == 0 {
                return Ok(0);
            }
            self.shared
                .session
                .lock()
                .received
                .extend_from_slice(&raw[..read]);
        }
    }

    fn write_all_plaintext(&mut self, plaintext: &[u8]) -> io::Result<()> {
        let _writing = self.shared.write.lock();
        let records = {
            let mut session = self.shared.session.lock();
            session.connection.writer().write_all(plaintext)?;
            take_records(&mut session.connection)?
        };
        (&self.socket).write_all(&records)
    }

    /// Writes what the session has to send (an alert, a key update's answer).
    fn send_records(&self) -> io::Result<()> {
        let _writing = self.shared.write.lock();
        let records = take_records(&mut self.shared.session.lock().connection)?;
        (&self.socket).write_all(&records)
    }
}

fn take_records(connection: &mut rustls::Connection) -> io::Result<Vec<u8>> {
    let mut records = Vec::new();
    while connection.wants_write() {
        connection.write_tls(&mut records)?;
    }
    Ok(records)
}

/// The host part of host:port (an IPv6 address in brackets without them).
fn host_of(address: &str) -> &str {
    let host = address.rsplit_once(':').map_or(address, |(host, _)| host);
    host.trim_start_matches('[').trim_end_matches(']')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_of_an_address_is_what_the_certificate_is_checked_for() {
        assert_eq!(host_of("127.0.0.1:6433"), "127.0.0.1");
        assert_eq!(host_of("db-a.example:6433"), "db-a.example");
        assert_eq!(host_of("[::1]:6433"), "::1");
        assert_eq!(host_of("db-a"), "db-a");
    }
}
