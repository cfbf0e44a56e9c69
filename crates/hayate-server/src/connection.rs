//! One client connection: the protocol's message loop over a `BatchedStream`.
//!
//! pgwire's own entry points (`process_socket`) own a plain tokio socket; this is the same
//! loop over a socket whose responses leave in the event loop's batch (`send_batch`):
//! 1. TCP only: SSLRequest and GSSENCRequest are answered 'N' (no encryption), as often as
//!    the client asks; a direct TLS handshake is closed. Unix-socket clients start at 2.
//! 2. Startup (`startup::Startup`) within `STARTUP_TIMEOUT`, then messages go to pgwire's
//!    `process_message` and our handlers until the client sends Terminate or hangs up, or a
//!    FATAL error ends the session.

use std::io;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use pgwire::api::PgWireServerHandlers;
use pgwire::api::{ClientInfo, DefaultClient, ErrorHandler, PgWireConnectionState};
use pgwire::messages::response::{GssEncResponse, SslResponse};
use pgwire::messages::{PgWireBackendMessage, PgWireFrontendMessage, SslNegotiationMetaMessage};
use pgwire::tokio::server::{process_error, process_message, PgWireMessageServerCodec};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_util::codec::Framed;

use crate::send_batch::BatchedStream;
use crate::Peer;

/// A client that has not finished its startup by then is disconnected (as pgwire does).
const STARTUP_TIMEOUT: Duration = Duration::from_secs(60);

/// The message loop, as pgwire's: each message goes to `process_message`; an error is
/// reported to the client, and a FATAL one ends the session.
/// `peer` says which socket this is: TCP, or the Unix-domain socket (no encryption requests
/// come there).
pub(crate) async fn serve<S, H>(socket: S, peer: Peer, handlers: H) -> io::Result<()>
where
    S: AsyncRead + AsyncWrite + AsRawFd + Unpin + Send + Sync + 'static,
    H: PgWireServerHandlers,
{
    let address = match peer {
        Peer::Tcp(address) => address,
        // PostgreSQL reports local clients without an address; pgwire's Unix path uses this.
        Peer::Local => SocketAddr::from(([127, 0, 0, 1], 0)),
    };
    let mut client = Framed::new(
        BatchedStream::new(socket),
        PgWireMessageServerCodec::new(DefaultClient::new(address, false)),
    );
    let timeout = tokio::time::sleep(STARTUP_TIMEOUT);
    tokio::pin!(timeout);
    if let Peer::Tcp(_) = peer {
        tokio::select! {
            _ = &mut timeout => return Ok(()),
            encrypted = refuse_encryption(&mut client) => if encrypted? { return Ok(()) },
        }
    } else {
        client.set_state(PgWireConnectionState::AwaitingStartup);
    }
    let startup = handlers.startup_handler();
    let simple = handlers.simple_query_handler();
    let extended = handlers.extended_query_handler();
    let copy = handlers.copy_handler();
    let cancel = handlers.cancel_handler();
    let errors = handlers.error_handler();
    loop {
        let starting = matches!(
            client.state(),
            PgWireConnectionState::AwaitingStartup
                | PgWireConnectionState::AuthenticationInProgress
        );
        let message = if starting {
            tokio::select! {
                _ = &mut timeout => None,
                message = client.next() => message,
            }
        } else {
            client.next().await
        };
        let Some(Ok(message)) = message else {
            return Ok(());
        };
        // Terminate: the client is leaving and some (asyncpg) wait for the close.
        if matches!(message, PgWireFrontendMessage::Terminate(_)) {
            return Ok(());
        }
        let in_extended_query = match client.state() {
            PgWireConnectionState::CopyInProgress(extended) => extended,
            _ => message.is_extended_query(),
        };
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
            process_error(&mut client, error, in_extended_query).await?;
            if fatal {
                return Ok(());
            }
        }
        if is_cancel_request {
            return Ok(());
        }
    }
}

/// Answers SSLRequest and GSSENCRequest with 'N' until the startup message comes (which
/// stays unread for the message loop). True when the client began a TLS handshake
/// directly: it cannot be served without TLS.
async fn refuse_encryption<S, T>(
    client: &mut Framed<BatchedStream<S>, PgWireMessageServerCodec<T>>,
) -> io::Result<bool>
where
    S: AsyncRead + AsyncWrite + AsRawFd + Unpin + Send + Sync + 'static,
{
    loop {
        let response = match client.next().await {
            Some(Ok(PgWireFrontendMessage::SslNegotiation(
                SslNegotiationMetaMessage::PostgresSsl(_),
            ))) => PgWireBackendMessage::SslResponse(SslResponse::Refuse),
            Some(Ok(PgWireFrontendMessage::SslNegotiation(
                SslNegotiationMetaMessage::PostgresGss(_),
            ))) => PgWireBackendMessage::GssEncResponse(GssEncResponse::Refuse),
            // In AwaitingSslRequest the codec yields SslNegotiation(None), consuming nothing,
            // for anything but an encryption request; a TLS ClientHello starts with 0x16.
            _ => {
                client.set_state(PgWireConnectionState::AwaitingStartup);
                return Ok(client.read_buffer().first() == Some(&0x16));
            }
        };
        client.send(response).await?;
    }
}
