//! One client connection: the protocol's message loop over a `BatchedStream`.
//!
//! pgwire's own entry points (`process_socket`) own a plain tokio socket; this is the same
//! loop over a socket whose responses leave in the event loop's batch (`send_batch`):
//! 1. TCP only: an SSLRequest is answered 'S' when the server has a TLS configuration, and
//!    the stream turns to TLS (`tls`); otherwise SSLRequest and GSSENCRequest are answered
//!    'N' (no encryption), as often as the client asks. A direct TLS handshake (without an
//!    SSLRequest) is closed. Unix-socket clients start at 2.
//! 2. Startup (`startup::Startup`) within `STARTUP_TIMEOUT`, read by pgwire's codec.
//! 3. Then the loop reads the messages' frames itself (`read_frame`: PostgreSQL's length
//!    limits, a bad length is FATAL 08P01): the extended protocol's go to `Protocol`
//!    (`extended`), read in place; the others (Query, COPY data, ...) are decoded by pgwire
//!    and go to its `process_message` and our handlers, until the client sends Terminate or
//!    hangs up, or a FATAL error ends the session. After an error in the extended protocol
//!    every message up to Sync is skipped, as in PostgreSQL.

use std::io;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, BytesMut};
use futures::{SinkExt, StreamExt};
use hayate_sql::{sqlstate, SqlError};
use pgwire::api::PgWireServerHandlers;
use pgwire::api::{ClientInfo, DefaultClient, ErrorHandler, NoopHandler, PgWireConnectionState};
use pgwire::error::PgWireError;
use pgwire::messages::response::{GssEncResponse, SslResponse};
use pgwire::messages::{
    DecodeContext, PgWireBackendMessage, PgWireFrontendMessage, SslNegotiationMetaMessage,
};
use pgwire::tokio::server::{process_error, process_message, PgWireMessageServerCodec};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};
use tokio_util::codec::Framed;

use crate::extended::{Client, Protocol};
use crate::handler::{user_error, ConnectionState};
use crate::send_batch::BatchedStream;
use crate::tls::{self, TlsConfig};
use crate::Peer;

/// A client that has not finished its startup by then is disconnected (as pgwire does).
const STARTUP_TIMEOUT: Duration = Duration::from_secs(60);

/// The message loop: startup as pgwire's loop does it, then frames read here, the extended
/// protocol's to `Protocol` and the rest to pgwire's `process_message`. An error is reported
/// to the client, and a FATAL one ends the session.
/// `peer` says which socket this is: TCP, or the Unix-domain socket (no encryption requests
/// come there).
pub(crate) async fn serve<S, H>(
    socket: S,
    peer: Peer,
    handlers: H,
    state: Arc<ConnectionState>,
) -> io::Result<()>
where
    S: AsyncRead + AsyncWrite + AsRawFd + Unpin + Send + Sync + 'static,
    H: PgWireServerHandlers,
{
    let address = match peer {
        Peer::Tcp(address) => address,
        // PostgreSQL reports local clients without an address; pgwire's Unix path uses this.
        Peer::Local => SocketAddr::from(([127, 0, 0, 1], 0)),
    };
    let mut client: Client<BatchedStream<S>> = Framed::new(
        BatchedStream::new(socket),
        PgWireMessageServerCodec::new(DefaultClient::new(address, false)),
    );
    let timeout = tokio::time::sleep(STARTUP_TIMEOUT);
    tokio::pin!(timeout);
    if let Peer::Tcp(_) = peer {
        tokio::select! {
            _ = &mut timeout => return Ok(()),
            negotiated = negotiate_encryption(&mut client, state.tls()) => {
                match negotiated? {
                    Negotiated::Startup => {}
                    Negotiated::Close => return Ok(()),
                    Negotiated::Refuse(error) => {
                        process_error(&mut client, error, false).await?;
                        return Ok(());
                    }
                }
            }
        }
    } else {
        client.set_state(PgWireConnectionState::AwaitingStartup);
    }
    let startup = handlers.startup_handler();
    let simple = handlers.simple_query_handler();
    let extended = Arc::new(NoopHandler); // every extended-protocol message goes to `Protocol`
    let copy = handlers.copy_handler();
    let cancel = handlers.cancel_handler();
    let errors = handlers.error_handler();
    // Startup: pgwire's codec reads the startup, password and cancel messages.
    while matches!(
        client.state(),
        PgWireConnectionState::AwaitingStartup | PgWireConnectionState::AuthenticationInProgress
    ) {
        let message = tokio::select! {
            _ = &mut timeout => None,
            message = client.next() => message,
        };
        let Some(Ok(message)) = message else {
            return Ok(());
        };
        if matches!(message, PgWireFrontendMessage::Terminate(_)) {
            return Ok(());
        }
        // A CancelRequest comes on a connection of its own, which then ends.
        let is_cancel_request = matches!(message, PgWireFrontendMessage::CancelRequest(_));
        let processed = process_message(
            message,
            &mut client,
            startup.clone(),
            simple.clone(),
            extended.clone(),
            copy.clone(),
            cancel.clone(),
        )
        .await;
        if let Err(mut error) = processed {
            errors.on_error(&client, &mut error);
            let fatal = error.is_fatal();
            process_error(&mut client, error, false).await?;
            if fatal {
                return Ok(());
            }
        }
        if is_cancel_request {
            return Ok(());
        }
    }
    // Queries: frames from the socket, starting with what the codec read ahead.
    let mut inbox = BytesMut::with_capacity(INBOX_BYTES);
    inbox.extend_from_slice(client.read_buffer());
    client.read_buffer_mut().clear();
    let terminate = state.terminate_signal().clone();
    let mut protocol = Protocol::new(state);
    let mut context = DecodeContext::new(client.protocol_version());
    context.awaiting_frontend_ssl = false;
    context.awaiting_frontend_startup = false;
    loop {
        // An ended connection (DROP DATABASE ... WITH (FORCE)) closes between statements.
        let frame = tokio::select! {
            biased;
            _ = terminate.notified() => {
                let error = fatal(
                    sqlstate::ADMIN_SHUTDOWN,
                    "terminating connection due to administrator command",
                );
                process_error(&mut client, error, false).await?;
                return Ok(());
            }
            frame = read_frame(&mut client, &mut inbox) => frame,
        };
        let length = match frame {
            Ok(Some(length)) => length,
            Ok(None) => return Ok(()),
            Err(FrameError::Closed) => return Ok(()),
            Err(FrameError::Length(length)) => {
                let error = fatal(
                    sqlstate::PROTOCOL_VIOLATION,
                    &format!("invalid message length {length}"),
                );
                process_error(&mut client, error, false).await?;
                return Ok(());
            }
        };
        let kind = inbox[0];
        // Terminate: the client is leaving and some (asyncpg) wait for the close.
        if kind == b'X' {
            return Ok(());
        }
        let copying = matches!(client.state(), PgWireConnectionState::CopyInProgress(_));
        let skipping = matches!(client.state(), PgWireConnectionState::AwaitingSync);
        let processed = if !copying && Protocol::handles(kind) {
            // After an error every message up to Sync is skipped.
            let processed = match (skipping, kind) {
                (true, b'S') => protocol.sync(&mut client).await,
                (true, _) => Ok(()),
                (false, _) => {
                    let body = &inbox[FRAME_HEADER_BYTES..length];
                    protocol.handle(&mut client, kind, body).await
                }
            };
            inbox.advance(length);
            processed
        } else if skipping {
            inbox.advance(length);
            Ok(())
        } else {
            let mut frame = inbox.split_to(length);
            match PgWireFrontendMessage::decode(&mut frame, &context) {
                Ok(Some(message)) => {
                    let processed = process_message(
                        message,
                        &mut client,
                        startup.clone(),
                        simple.clone(),
                        extended.clone(),
                        copy.clone(),
                        cancel.clone(),
                    )
                    .await;
                    protocol.forget_deallocated();
                    processed
                }
                Ok(None) => Err(PgWireError::InvalidMessageType(kind)),
                Err(error) => Err(error),
            }
        };
        if let Err(mut error) = processed {
            errors.on_error(&client, &mut error);
            let fatal = error.is_fatal();
            let in_extended_query = match client.state() {
                PgWireConnectionState::CopyInProgress(extended) => extended,
                _ => Protocol::handles(kind),
            };
            process_error(&mut client, error, in_extended_query).await?;
            if fatal {
                return Ok(());
            }
        }
    }
}

/// The type byte and length that start every message after startup.
const FRAME_HEADER_BYTES: usize = 5;
/// Room the input buffer starts with (and keeps free before each read).
const INBOX_BYTES: usize = 8 * 1024;
/// PostgreSQL's limits on a message's length: 1 GB for the kinds that carry data (Bind,
/// Parse, Query, CopyData, FunctionCall, password), 10,000 bytes for the others.
const LARGE_MESSAGE_BYTES_MAX: usize = 0x3fff_ffff;
const SMALL_MESSAGE_BYTES_MAX: usize = 10_000;

enum FrameError {
    /// The connection failed (the client is gone).
    Closed,
    /// A length below 4 or past the limit of its kind.
    Length(i64),
}

/// Reads until `inbox` starts with a whole message; its length with the type byte, or None
/// when the client closed the connection.
async fn read_frame<S>(
    client: &mut Client<BatchedStream<S>>,
    inbox: &mut BytesMut,
) -> Result<Option<usize>, FrameError>
where
    S: AsyncRead + AsyncWrite + AsRawFd + Unpin + Send + Sync + 'static,
{
    loop {
        if inbox.len() >= FRAME_HEADER_BYTES {
            let length = u32::from_be_bytes([inbox[1], inbox[2], inbox[3], inbox[4]]) as usize;
            let limit = match inbox[0] {
                b'B' | b'P' | b'Q' | b'd' | b'F' | b'p' => LARGE_MESSAGE_BYTES_MAX,
                _ => SMALL_MESSAGE_BYTES_MAX,
            };
            if !(4..=limit).contains(&length) {
                return Err(FrameError::Length(length as i64));
            }
            if inbox.len() > length {
                return Ok(Some(1 + length));
            }
            inbox.reserve((1 + length - inbox.len()).min(LARGE_READ_BYTES));
        }
        if inbox.capacity() - inbox.len() < INBOX_BYTES / 2 {
            inbox.reserve(INBOX_BYTES);
        }
        match client.get_mut().read_buf(inbox).await {
            Ok(0) => return Ok(None),
            Ok(_) => {}
            Err(_) => return Err(FrameError::Closed),
        }
    }
}

/// The most room reserved at once for a large message (it grows as its bytes come).
const LARGE_READ_BYTES: usize = 1 << 20;

/// How the encryption requests before the startup message ended.
enum Negotiated {
    /// The startup message comes next (in TLS if the client asked and the server has it).
    Startup,
    /// The client began a TLS handshake directly: it cannot be served.
    Close,
    /// The client broke the protocol: this FATAL error ends the connection.
    Refuse(PgWireError),
}

/// Answers SSLRequest with 'S' and starts TLS when the server has a configuration, else
/// 'N'; GSSENCRequest with 'N'; until the startup message comes (which stays unread for
/// the message loop).
async fn negotiate_encryption<S, T>(
    client: &mut Framed<BatchedStream<S>, PgWireMessageServerCodec<T>>,
    tls: Option<&TlsConfig>,
) -> io::Result<Negotiated>
where
    S: AsyncRead + AsyncWrite + AsRawFd + Unpin + Send + Sync + 'static,
{
    loop {
        let response = match client.next().await {
            Some(Ok(PgWireFrontendMessage::SslNegotiation(
                SslNegotiationMetaMessage::PostgresSsl(_),
            ))) => match tls {
                Some(config) if !client.get_ref().is_tls() => {
                    // Bytes sent after the request, before the answer, would be taken as
                    // part of the encrypted session (CVE-2021-23214): refused.
                    if !client.read_buffer().is_empty() {
                        return Ok(Negotiated::Refuse(fatal(
                            sqlstate::PROTOCOL_VIOLATION,
                            "received unencrypted data after SSL request",
                        )));
                    }
                    client
                        .send(PgWireBackendMessage::SslResponse(SslResponse::Accept))
                        .await?;
                    client.get_mut().start_tls(tls::Layer::new(config)?);
                    client.codec_mut().client_info.is_secure = true;
                    continue;
                }
                _ => PgWireBackendMessage::SslResponse(SslResponse::Refuse),
            },
            Some(Ok(PgWireFrontendMessage::SslNegotiation(
                SslNegotiationMetaMessage::PostgresGss(_),
            ))) => PgWireBackendMessage::GssEncResponse(GssEncResponse::Refuse),
            // In AwaitingSslRequest the codec yields SslNegotiation(None), consuming nothing,
            // for anything but an encryption request; a TLS ClientHello starts with 0x16.
            Some(Ok(_)) if client.read_buffer().first() == Some(&0x16) => {
                return Ok(Negotiated::Close)
            }
            Some(Ok(_)) => {
                client.set_state(PgWireConnectionState::AwaitingStartup);
                return Ok(Negotiated::Startup);
            }
            // Bytes that are no message, or a failed TLS handshake.
            Some(Err(error)) => return Err(io::Error::other(error.to_string())),
            None => return Ok(Negotiated::Close),
        };
        client.send(response).await?;
    }
}

/// A FATAL error with `code`, which ends the connection once sent.
fn fatal(code: &'static str, message: &str) -> PgWireError {
    let mut error = user_error(SqlError::new(code, message));
    if let PgWireError::UserError(info) = &mut error {
        info.severity = "FATAL".into();
    }
    error
}
