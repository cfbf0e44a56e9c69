//! Hayate's server: SQL over the PostgreSQL wire protocol (v3), so that psql, drivers and
//! benchmark tools talk to Hayate unmodified.
//!
//! Lifecycle:
//! 1. `serve` accepts TCP connections until its shutdown future completes.
//! 2. Each connection is a tokio task running pgwire's message loop: SSL requests are
//!    answered 'N', startup uses trust authentication (`startup`), then simple and extended
//!    queries go to the connection's `handler`, which owns a `hayate_sql::Session`.
//! 3. On shutdown the listener closes and open connections are ended; their sessions abort
//!    any open transaction. The caller then closes (checkpoints) the database.
//!
//! Layering: server -> hayate_sql -> hayate_engine.

pub mod handler;
pub mod startup;
pub mod wire;

use std::future::Future;
use std::io;
use std::sync::Arc;

use hayate_sql::Catalog;
use pgwire::api::auth::StartupHandler;
use pgwire::api::query::{ExtendedQueryHandler, SimpleQueryHandler};
use pgwire::api::{PgWireServerHandlers, RandomPidSecretKeyGenerator};
use tokio::net::TcpListener;
use tokio::task::JoinSet;

use handler::{ConnectionState, ExtendedHandler};
use startup::TrustStartup;

/// The handlers of one connection.
struct ConnectionHandlers {
    state: Arc<ConnectionState>,
    extended: Arc<ExtendedHandler>,
    startup: Arc<TrustStartup>,
}

impl PgWireServerHandlers for ConnectionHandlers {
    fn simple_query_handler(&self) -> Arc<impl SimpleQueryHandler> {
        self.state.clone()
    }

    fn extended_query_handler(&self) -> Arc<impl ExtendedQueryHandler> {
        self.extended.clone()
    }

    fn startup_handler(&self) -> Arc<impl StartupHandler> {
        self.startup.clone()
    }
}

/// Serves connections on `listener` until `shutdown` completes. Must run on a multi-thread
/// tokio runtime (statements use `block_in_place`).
pub async fn serve(
    listener: TcpListener,
    catalog: Arc<Catalog>,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    let pids = Arc::new(RandomPidSecretKeyGenerator::default());
    let mut connections = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => {
                let (socket, peer) = match accepted {
                    Ok(accepted) => accepted,
                    Err(error) => {
                        log::warn!("accepting a connection: {error}");
                        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let _ = socket.set_nodelay(true);
                let state = Arc::new(ConnectionState::new(catalog.clone()));
                let handlers = ConnectionHandlers {
                    extended: Arc::new(ExtendedHandler::new(state.clone())),
                    state,
                    startup: Arc::new(TrustStartup { pids: pids.clone() }),
                };
                connections.spawn(async move {
                    if let Err(error) = pgwire::tokio::process_socket(socket, None, handlers).await {
                        log::warn!("connection from {peer}: {error}");
                    }
                });
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    drop(listener);
    connections.shutdown().await;
    Ok(())
}

/// Builds the runtime `serve` needs.
pub fn runtime() -> io::Result<tokio::runtime::Runtime> {
    let workers = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .max(2);
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .thread_name("hayate-server")
        .enable_all()
        .build()
}
