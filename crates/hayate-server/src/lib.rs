//! Hayate's server: SQL over the PostgreSQL wire protocol (v3), so that psql, drivers and
//! benchmark tools talk to Hayate unmodified.
//!
//! Lifecycle:
//! 1. `serve` accepts connections on TCP and, as PostgreSQL does, on a Unix-domain socket
//!    (`unix_socket`) until its shutdown future completes.
//! 2. Each connection is a task on one of a few event loops (one thread each, as many as
//!    cores) running the protocol's message loop (`connection`): SSL requests are
//!    answered 'S' and the connection turns to TLS when the server has a certificate
//!    (`tls`), else 'N'; startup authenticates the user (`startup`: trust, cleartext password,
//!    MD5 or SCRAM-SHA-256) and sends the connection's cancel key (BackendKeyData), then
//!    simple queries and COPY go to the connection's `handler`, which owns a
//!    `hayate_sql::Session`, and the extended protocol to `extended`, read straight from
//!    the message frames.
//!    Statements run on the loop's thread and never wait there: the session defers waits
//!    (`hayate_sql::Session::set_defer_waits`): a commit is awaited asynchronously on the
//!    engine's log flusher, and a statement that would wait for a lock (or is DDL) runs
//!    again on a blocking thread (`handler`). Under load one loop thread serves a batch of
//!    ready connections per wakeup instead of one context switch per query, and sends
//!    their responses in one system call (`send_batch`).
//! 3. A cancel request (on a connection of its own) sets the interrupt flag of the
//!    connection its key names (`cancel`); the running statement stops with 57014.
//! 4. On shutdown the listener closes and open connections are ended; their sessions abort
//!    any open transaction. The caller then closes (checkpoints) the database.
//!
//! Layering: server -> hayate_sql -> hayate_engine.

pub mod auth;
pub mod cancel;
mod commit_wait;
mod connection;
pub mod databases;
mod extended;
mod fiber_task;
pub mod ha;
pub mod handler;
pub mod replication;
mod send_batch;
pub mod startup;
pub mod tls;
pub mod unix_socket;
pub mod wire;

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::io;
use std::sync::Arc;

use hayate_sql::Cluster;
use pgwire::api::auth::StartupHandler;
use pgwire::api::cancel::CancelHandler;
use pgwire::api::copy::CopyHandler;
use pgwire::api::query::SimpleQueryHandler;
use pgwire::api::PgWireServerHandlers;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch, Semaphore};

use cancel::CancelRegistry;
use handler::ConnectionState;
use startup::Startup;
use unix_socket::UnixSocket;

/// How clients prove who they are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AuthMethod {
    /// Every user name is accepted without a password.
    #[default]
    Trust,
    /// The password in clear text (only over a trusted network).
    Password,
    /// PostgreSQL's MD5 challenge (`md5(md5(password || user) || salt)`).
    Md5,
    /// SCRAM-SHA-256 (RFC 7677), PostgreSQL's default since version 14.
    ScramSha256,
}

impl AuthMethod {
    /// The method of a config file or flag: trust, password, md5 or scram-sha-256.
    pub fn parse(name: &str) -> Option<AuthMethod> {
        Some(match name.to_ascii_lowercase().as_str() {
            "trust" => AuthMethod::Trust,
            "password" | "cleartext" => AuthMethod::Password,
            "md5" => AuthMethod::Md5,
            "scram-sha-256" | "scram" => AuthMethod::ScramSha256,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            AuthMethod::Trust => "trust",
            AuthMethod::Password => "password",
            AuthMethod::Md5 => "md5",
            AuthMethod::ScramSha256 => "scram-sha-256",
        }
    }
}

/// What the server needs beyond its socket and catalog.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub auth: AuthMethod,
    /// User name -> password (every password method needs the user here).
    pub users: HashMap<String, String>,
    /// Connections served at once; more are refused with 53300.
    pub max_connections: usize,
    /// Memory for one sort or hash before it spills (shown by SHOW work_mem).
    pub work_mem: String,
    /// Event loop threads serving the connections (0: one per core).
    pub event_loops: usize,
    /// TLS for TCP clients that ask for it (`tls::load`); None: SSLRequest is answered 'N'.
    pub tls: Option<tls::TlsConfig>,
    /// TCP clients must use TLS (Unix-socket clients need not): others are refused (28000).
    pub tls_required: bool,
    /// How often the automatic analysis looks for tables due (`Autoanalyze`); None: never.
    pub autoanalyze_naptime: Option<std::time::Duration>,
}

impl Default for ServerConfig {
    fn default() -> ServerConfig {
        ServerConfig {
            auth: AuthMethod::Trust,
            users: HashMap::new(),
            max_connections: 100,
            work_mem: "4MB".into(),
            event_loops: 0,
            tls: None,
            tls_required: false,
            autoanalyze_naptime: Some(hayate_sql::catalog::analyze::AUTOANALYZE_NAPTIME),
        }
    }
}

/// The handlers of one connection.
struct ConnectionHandlers {
    state: Arc<ConnectionState>,
    startup: Arc<Startup>,
    cancels: Arc<CancelRegistry>,
}

impl PgWireServerHandlers for ConnectionHandlers {
    fn simple_query_handler(&self) -> Arc<impl SimpleQueryHandler> {
        self.state.clone()
    }

    fn startup_handler(&self) -> Arc<impl StartupHandler> {
        self.startup.clone()
    }

    fn copy_handler(&self) -> Arc<impl CopyHandler> {
        self.state.clone()
    }

    fn cancel_handler(&self) -> Arc<impl CancelHandler> {
        self.cancels.clone()
    }
}

/// Where the server accepts connections: TCP, and a Unix-domain socket for local clients
/// unless there is none.
pub struct Listeners {
    pub tcp: TcpListener,
    pub unix: Option<UnixSocket>,
}

impl From<TcpListener> for Listeners {
    fn from(tcp: TcpListener) -> Listeners {
        Listeners { tcp, unix: None }
    }
}

impl Listeners {
    /// The next connection on either listener. A failed accept is logged and retried after
    /// a pause (it is usually a process out of file descriptors).
    async fn accept(&self) -> (Socket, Peer) {
        loop {
            let accepted = tokio::select! {
                accepted = self.tcp.accept() => accepted.and_then(|(socket, peer)| {
                    let _ = socket.set_nodelay(true);
                    Ok((Socket::Tcp(socket.into_std()?), Peer::Tcp(peer)))
                }),
                accepted = accept_local(&self.unix) => accepted
                    .and_then(|socket| Ok((Socket::Unix(socket.into_std()?), Peer::Local))),
            };
            match accepted {
                Ok(accepted) => return accepted,
                Err(error) => {
                    log::warn!("accepting a connection: {error}");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
            }
        }
    }
}

async fn accept_local(unix: &Option<UnixSocket>) -> io::Result<tokio::net::UnixStream> {
    match unix {
        Some(unix) => unix.accept().await,
        None => std::future::pending().await,
    }
}

/// An accepted connection's socket, detached from the accepting runtime so that an event
/// loop can adopt it.
enum Socket {
    Tcp(std::net::TcpStream),
    Unix(std::os::unix::net::UnixStream),
}

/// Who is on the other end, for the log.
#[derive(Debug, Clone, Copy)]
pub enum Peer {
    Tcp(std::net::SocketAddr),
    /// A client on the Unix-domain socket (PostgreSQL logs it as `[local]`).
    Local,
}

impl fmt::Display for Peer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Peer::Tcp(address) => address.fmt(f),
            Peer::Local => f.write_str("[local]"),
        }
    }
}

/// Serves connections on `listeners` with the default configuration (trust
/// authentication) until `shutdown` completes.
pub async fn serve(
    listeners: impl Into<Listeners>,
    cluster: Arc<Cluster>,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    serve_with(listeners, cluster, ServerConfig::default(), shutdown).await
}

/// Serves connections on `listeners` until `shutdown` completes. Each connection is a task
/// on one of the event loops (`EventLoops`); on shutdown the listener closes, every
/// connection is told to end, and this returns once all have ended and the loops' threads
/// have exited.
pub async fn serve_with(
    listeners: impl Into<Listeners>,
    cluster: Arc<Cluster>,
    config: ServerConfig,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    let listeners = listeners.into();
    let databases = Arc::new(databases::Databases::new(cluster));
    let config = Arc::new(config);
    let cancels = Arc::new(CancelRegistry::default());
    // DROP DATABASE ... WITH (FORCE) ends the connections using the database.
    let terminator = cancels.clone();
    databases
        .cluster()
        .set_session_terminator(Some(Arc::new(move |database: &str| {
            terminator.terminate_database(database)
        })));
    // pg_cancel_backend and pg_terminate_backend reach the connections here too.
    let signaller = cancels.clone();
    databases
        .cluster()
        .activities()
        .set_signaller(Some(Arc::new(move |pid, signal| {
            signaller.signal(pid, signal)
        })));
    let slots = Arc::new(Semaphore::new(config.max_connections));
    let (stop, stopped) = watch::channel(false);
    // Every connection task holds a sender; `recv` answers None once all have ended.
    let (alive, mut all_ended) = mpsc::channel::<()>(1);
    let loops = EventLoops::start(config.event_loops, &stopped)?;
    let autoanalyze = match config.autoanalyze_naptime {
        Some(naptime) => Some(Autoanalyze::start(databases.cluster().clone(), naptime)?),
        None => None,
    };
    tokio::pin!(shutdown);
    loop {
        let (socket, peer) = tokio::select! {
            _ = &mut shutdown => break,
            accepted = listeners.accept() => accepted,
        };
        let state = ConnectionState::new(databases.clone(), config.clone());
        let startup = Startup::new(
            config.clone(),
            cancels.clone(),
            state.interrupt().clone(),
            slots.clone().try_acquire_owned().ok(),
            peer,
            state.clone(),
        )
        .standby(databases.database().is_standby());
        let handlers = ConnectionHandlers {
            state,
            startup: Arc::new(startup),
            cancels: cancels.clone(),
        };
        let connection = Connection {
            socket,
            peer,
            handlers,
            stopped: stopped.clone(),
            _alive: alive.clone(),
        };
        loops.next().spawn(connection.run());
    }
    drop(listeners);
    if let Some(autoanalyze) = autoanalyze {
        autoanalyze.stop();
    }
    databases.cluster().set_session_terminator(None);
    databases.cluster().activities().set_signaller(None);
    let _ = stop.send(true);
    drop(alive);
    while all_ended.recv().await.is_some() {}
    loops.join().await;
    Ok(())
}

/// The background worker that analyzes the tables enough of whose rows changed
/// (`Cluster::autoanalyze`), every naptime (`ServerConfig::autoanalyze_naptime`), as
/// PostgreSQL's autovacuum launcher does.
struct Autoanalyze {
    stop: Arc<(std::sync::Mutex<bool>, std::sync::Condvar)>,
    thread: std::thread::JoinHandle<()>,
}

impl Autoanalyze {
    fn start(cluster: Arc<Cluster>, naptime: std::time::Duration) -> io::Result<Autoanalyze> {
        let stop = Arc::new((std::sync::Mutex::new(false), std::sync::Condvar::new()));
        let signal = stop.clone();
        let thread = std::thread::Builder::new()
            .name("hayate-analyze".into())
            .spawn(move || {
                let (stopped, wake) = &*signal;
                let mut guard = stopped.lock().unwrap_or_else(|e| e.into_inner());
                loop {
                    guard = match wake.wait_timeout(guard, naptime) {
                        Ok((guard, _)) => guard,
                        Err(poisoned) => poisoned.into_inner().0,
                    };
                    if *guard {
                        return;
                    }
                    drop(guard);
                    let stopping = || *stopped.lock().unwrap_or_else(|e| e.into_inner());
                    for (database, table) in cluster.autoanalyze(&stopping) {
                        log::info!("automatic analysis of table \"{database}.{table}\"");
                    }
                    guard = stopped.lock().unwrap_or_else(|e| e.into_inner());
                }
            })?;
        Ok(Autoanalyze { stop, thread })
    }

    /// Stops the worker (an analysis running stops within 4,096 rows).
    fn stop(self) {
        let (stopped, wake) = &*self.stop;
        *stopped.lock().unwrap_or_else(|e| e.into_inner()) = true;
        wake.notify_all();
        let _ = self.thread.join();
    }
}

/// The threads that serve connections, each running a single-threaded tokio runtime until
/// the server stops. Connections go to them in turn.
struct EventLoops {
    handles: Vec<tokio::runtime::Handle>,
    threads: Vec<std::thread::JoinHandle<()>>,
    next: std::cell::Cell<usize>,
}

impl EventLoops {
    /// Starts `count` loops (0: one per core).
    fn start(count: usize, stopped: &watch::Receiver<bool>) -> io::Result<EventLoops> {
        let count = match count {
            0 => std::thread::available_parallelism().map_or(1, usize::from),
            count => count,
        };
        let mut handles = Vec::with_capacity(count);
        let mut threads = Vec::with_capacity(count);
        for index in 0..count {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .thread_name("hayate-stmt")
                .build()?;
            handles.push(runtime.handle().clone());
            let mut stopped = stopped.clone();
            threads.push(
                std::thread::Builder::new()
                    .name(format!("hayate-loop-{index}"))
                    // A fiber's size: the extended protocol parses and binds on the loop
                    // itself, as deep as a statement's fiber may (only touched pages are
                    // backed).
                    .stack_size(hayate_engine::fiber::STACK_BYTES)
                    .spawn(move || {
                        if let Some(sender) = send_batch::install() {
                            runtime.spawn(sender);
                        }
                        if let Some(reaper) = fiber_task::reaper() {
                            runtime.spawn(reaper);
                        }
                        runtime.block_on(async move {
                            let _ = stopped.wait_for(|stopped| *stopped).await;
                        });
                    })?,
            );
        }
        Ok(EventLoops {
            handles,
            threads,
            next: std::cell::Cell::new(0),
        })
    }

    /// The loop for the next connection.
    fn next(&self) -> &tokio::runtime::Handle {
        let index = self.next.get();
        self.next.set((index + 1) % self.handles.len());
        &self.handles[index]
    }

    /// Waits until every loop thread has ended (after the stop signal).
    async fn join(self) {
        let threads = self.threads;
        let _ = tokio::task::spawn_blocking(move || {
            for thread in threads {
                let _ = thread.join();
            }
        })
        .await;
    }
}

/// One accepted connection, a task on an event loop.
struct Connection {
    socket: Socket,
    peer: Peer,
    handlers: ConnectionHandlers,
    /// Becomes true when the server shuts down.
    stopped: watch::Receiver<bool>,
    /// Dropped when the thread ends (see `serve_with`).
    _alive: mpsc::Sender<()>,
}

impl Connection {
    /// Runs pgwire's message loop until the client leaves or the server shuts down
    /// (dropping the loop drops the session, which aborts an open transaction).
    async fn run(mut self) {
        let peer = self.peer;
        let handlers = self.handlers;
        let state = handlers.state.clone();
        let served = async {
            match self.socket {
                Socket::Tcp(socket) => {
                    let socket = tokio::net::TcpStream::from_std(socket)?;
                    connection::serve(socket, peer, handlers, state).await
                }
                Socket::Unix(socket) => {
                    let socket = tokio::net::UnixStream::from_std(socket)?;
                    connection::serve(socket, peer, handlers, state).await
                }
            }
        };
        tokio::select! {
            result = served => {
                if let Err(error) = result {
                    log::warn!("connection from {peer}: {error}");
                }
            }
            _ = self.stopped.wait_for(|stopped| *stopped) => {}
        }
    }
}

/// Builds the runtime `serve` needs: one thread, which only accepts connections (they are
/// served by the event loops `serve_with` starts).
pub fn runtime() -> io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
}
