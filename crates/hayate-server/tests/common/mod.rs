//! A real server for tests: a database in a directory, the wire protocol on a free port of
//! 127.0.0.1, run on its own thread and runtime as `hayate serve` runs it.

#![allow(dead_code)] // each test file uses a part of it

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;

use hayate_engine::{Database, DatabaseConfig};

pub mod clients;
pub mod raw;

pub struct TestServer {
    pub addr: SocketAddr,
    pub dir: PathBuf,
    /// The directory of the Unix-domain socket, when the server listens on one.
    pub socket_dir: Option<PathBuf>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl TestServer {
    /// Opens (or creates) the database in `dir` and starts serving it.
    pub fn start(dir: &Path) -> TestServer {
        TestServer::start_with(dir, hayate_server::ServerConfig::default())
    }

    /// As `start`, with a server configuration (authentication, limits).
    pub fn start_with(dir: &Path, config: hayate_server::ServerConfig) -> TestServer {
        TestServer::start_on(dir, config, None)
    }

    /// As `start`, listening also on a Unix-domain socket in `socket_dir`.
    pub fn start_local(dir: &Path, socket_dir: &Path) -> TestServer {
        let config = hayate_server::ServerConfig::default();
        TestServer::start_on(dir, config, Some(socket_dir.to_path_buf()))
    }

    /// A server of a database on `io` (a simulated disk, for device emulation).
    pub fn start_on_io(
        io: Arc<dyn hayate_engine::Io>,
        db_config: DatabaseConfig,
        config: hayate_server::ServerConfig,
    ) -> TestServer {
        let db = Database::open_with_io(io, db_config).expect("open database");
        TestServer::serve_database(db, Path::new(""), config, None)
    }

    fn start_on(
        dir: &Path,
        config: hayate_server::ServerConfig,
        socket_dir: Option<PathBuf>,
    ) -> TestServer {
        let db = Database::open(dir, DatabaseConfig::default()).expect("open database");
        TestServer::serve_database(db, dir, config, socket_dir)
    }

    fn serve_database(
        db: Database,
        dir: &Path,
        config: hayate_server::ServerConfig,
        socket_dir: Option<PathBuf>,
    ) -> TestServer {
        let cluster = hayate_sql::Cluster::open(db.clone()).expect("open the databases");
        // The database the tests connect to (`connection_string`).
        cluster
            .create_database("test", true)
            .expect("create database test");
        let (addr_sender, addr_receiver) = std::sync::mpsc::channel();
        let (shutdown, shutdown_receiver) = tokio::sync::oneshot::channel::<()>();
        let local_dir = socket_dir.clone();
        let thread = std::thread::spawn(move || {
            let runtime = hayate_server::runtime().expect("runtime");
            runtime.block_on(async {
                let tcp = tokio::net::TcpListener::bind("127.0.0.1:0")
                    .await
                    .expect("bind");
                let addr = tcp.local_addr().expect("address");
                let unix = local_dir.map(|dir| {
                    hayate_server::unix_socket::UnixSocket::bind(&dir, addr.port())
                        .expect("bind the unix socket")
                });
                addr_sender.send(addr).expect("send");
                let shutdown = async {
                    let _ = shutdown_receiver.await;
                };
                let listeners = hayate_server::Listeners { tcp, unix };
                hayate_server::serve_with(listeners, cluster, config, shutdown)
                    .await
                    .expect("serve");
            });
            runtime.shutdown_timeout(std::time::Duration::from_secs(5));
            db.close().expect("close database");
        });
        let addr = addr_receiver.recv().expect("server address");
        TestServer {
            addr,
            dir: dir.to_path_buf(),
            socket_dir,
            shutdown: Some(shutdown),
            thread: Some(thread),
        }
    }

    pub fn connection_string(&self) -> String {
        format!(
            "host={} port={} user=tester dbname=test",
            self.addr.ip(),
            self.addr.port()
        )
    }

    pub fn connect(&self) -> postgres::Client {
        postgres::Client::connect(&self.connection_string(), postgres::NoTls).expect("connect")
    }

    /// Shuts down cleanly (the database is checkpointed and closed).
    pub fn stop(mut self) {
        self.stop_inner();
    }

    fn stop_inner(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(thread) = self.thread.take() {
            thread.join().expect("server thread");
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.stop_inner();
    }
}

/// The SQLSTATE of a failed statement.
/// A TCP port free on 127.0.0.1 now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .expect("a free port")
}

pub fn sqlstate(error: &postgres::Error) -> String {
    error
        .code()
        .map(|code| code.code().to_string())
        .unwrap_or_else(|| format!("no SQLSTATE: {error}"))
}

/// A CA and a server certificate it signed for localhost and 127.0.0.1, written as PEM
/// files in `dir`: (ca.pem, server.pem, server.key).
pub fn certificates(dir: &Path, name: &str) -> (PathBuf, PathBuf, PathBuf) {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, format!("{name} test CA"));
    let ca = rcgen::CertifiedIssuer::self_signed(ca_params, ca_key).unwrap();
    let server_key = rcgen::KeyPair::generate().unwrap();
    let server_params =
        rcgen::CertificateParams::new(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
    let server = server_params.signed_by(&server_key, &ca).unwrap();
    let paths = (
        dir.join(format!("{name}-ca.pem")),
        dir.join(format!("{name}-server.pem")),
        dir.join(format!("{name}-server.key")),
    );
    std::fs::write(&paths.0, ca.pem()).unwrap();
    std::fs::write(&paths.1, server.pem()).unwrap();
    std::fs::write(&paths.2, server_key.serialize_pem()).unwrap();
    paths
}
