//! The servers `hayate-lab server` measures, each listening on TCP at 127.0.0.1 on a free
//! port and on a Unix-domain socket in its lab directory, each with durable commits and its
//! data in memory until restarted with another buffer.
//!
//! - Hayate: `hayate serve`, the product's binary next to the lab's (or `$HAYATE_BIN`), as
//!   a child process, its data directory and socket in a private lab directory under `--dir`.
//! - PostgreSQL and MariaDB: the lab's private servers (`lab::peers`), started with a TCP
//!   listener (`open_listening`) beside their socket.
//!
//! `Server::start` starts one; `Server::set_buffer_bytes` restarts it on the same data with
//! another buffer; `Server::stop` (or drop) stops it and removes its directory.

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::driver::{Driver, DriverError, DriverResult};
use crate::peers::mariadb::{self, MariadbDriver};
use crate::peers::postgres::{self, PostgresDriver};
use crate::peers::server::{self, LabDirectory, ServerProcess};

use super::sysbench::{Endpoint, Target};
use super::Transport;

/// The engines, in the order they run.
pub const ENGINES: &[&str] = &["hayate", "postgresql", "mariadb"];

/// How long `hayate serve` may take to answer.
const HAYATE_STARTUP_TIMEOUT: Duration = Duration::from_secs(60);

/// A started server.
pub enum Server {
    Hayate {
        process: ServerProcess,
        /// Dropped after the process (field order), removing the data.
        directory: LabDirectory,
        port: u16,
        /// The directory of its Unix-domain socket.
        socket_dir: PathBuf,
        /// The buffer it runs with (None: `hayate serve`'s default).
        buffer_bytes: Option<u64>,
    },
    Postgresql(Box<PostgresDriver>),
    Mariadb(Box<MariadbDriver>),
}

/// What the results record about a server.
pub struct Description {
    pub version: String,
    pub settings: BTreeMap<String, String>,
    pub isolation: String,
}

impl Server {
    /// Starts `engine` with a new empty database under `base_dir`; the peers get a buffer of
    /// `buffer_bytes`, Hayate `hayate serve`'s default.
    pub fn start(engine: &str, base_dir: &Path, buffer_bytes: u64) -> DriverResult<Server> {
        let port = free_port()?;
        match engine {
            "hayate" => {
                let (process, directory, socket_dir) = start_hayate(base_dir, port)?;
                Ok(Server::Hayate {
                    process,
                    directory,
                    port,
                    socket_dir,
                    buffer_bytes: None,
                })
            }
            "postgresql" => Ok(Server::Postgresql(Box::new(
                PostgresDriver::open_listening(base_dir, buffer_bytes, Some(port))?,
            ))),
            "mariadb" => Ok(Server::Mariadb(Box::new(MariadbDriver::open_listening(
                base_dir,
                buffer_bytes,
                Some(port),
            )?))),
            other => Err(DriverError::fatal(format!(
                "unknown engine {other:?}: the engines are {}",
                ENGINES.join(", ")
            ))),
        }
    }

    /// How sysbench reaches the server over `transport`.
    pub fn target(&self, transport: Transport) -> Target {
        let unix = transport == Transport::Unix;
        let (driver, endpoint) = match self {
            Server::Hayate {
                port, socket_dir, ..
            } => {
                let endpoint = match unix {
                    true => Endpoint::PostgresSocket {
                        dir: socket_dir.clone(),
                        port: *port,
                    },
                    false => Endpoint::Tcp { port: *port },
                };
                ("pgsql", endpoint)
            }
            Server::Postgresql(driver) => {
                let (dir, port) = driver.socket();
                let endpoint = match unix {
                    true => Endpoint::PostgresSocket {
                        dir: dir.to_path_buf(),
                        port,
                    },
                    false => Endpoint::Tcp {
                        port: driver.tcp_port().unwrap_or_default(),
                    },
                };
                ("pgsql", endpoint)
            }
            Server::Mariadb(driver) => {
                let endpoint = match unix {
                    true => Endpoint::MysqlSocket {
                        path: driver.socket_path().to_path_buf(),
                    },
                    false => Endpoint::Tcp {
                        port: driver.tcp_port().unwrap_or_default(),
                    },
                };
                ("mysql", endpoint)
            }
        };
        let (user, database) = match driver {
            "mysql" => (mariadb::USER, mariadb::DATABASE),
            _ => (postgres::LAB_USER, postgres::DATABASE),
        };
        Target {
            driver,
            endpoint,
            user: user.to_string(),
            database: database.to_string(),
        }
    }

    /// Restarts the server on its data with a buffer of `bytes`: Hayate's buffer pool,
    /// PostgreSQL's shared_buffers, InnoDB's buffer pool. A clean shutdown first writes every
    /// dirty page; the buffer starts cold.
    pub fn set_buffer_bytes(&mut self, bytes: u64) -> DriverResult<()> {
        match self {
            Server::Hayate {
                process,
                directory,
                port,
                socket_dir,
                buffer_bytes,
            } => {
                process.stop(server::SHUTDOWN_TIMEOUT)?;
                *process = spawn_hayate(directory.path(), *port, Some(bytes), Some(socket_dir))?;
                *buffer_bytes = Some(bytes);
                Ok(())
            }
            Server::Postgresql(driver) => driver.set_buffer_bytes(bytes),
            Server::Mariadb(driver) => driver.set_buffer_bytes(bytes),
        }
    }

    pub fn describe(&self) -> Description {
        match self {
            Server::Hayate { buffer_bytes, .. } => Description {
                version: env!("CARGO_PKG_VERSION").to_string(),
                settings: hayate_settings(*buffer_bytes),
                isolation: "READ COMMITTED (Hayate's default: a snapshot per statement; \
                            UPDATE/DELETE lock and recheck the latest version)"
                    .to_string(),
            },
            Server::Postgresql(driver) => Description {
                version: driver.version(),
                settings: driver.settings(),
                isolation: "READ COMMITTED (PostgreSQL's default; sysbench does not set one)"
                    .to_string(),
            },
            Server::Mariadb(driver) => Description {
                version: driver.version(),
                settings: driver.settings(),
                isolation: "REPEATABLE READ (InnoDB's default; sysbench does not set one)"
                    .to_string(),
            },
        }
    }

    /// The server's processes (with their descendants, they are the server's CPU time).
    pub fn pids(&self) -> Vec<u32> {
        match self {
            Server::Hayate { process, .. } => process.pids(),
            Server::Postgresql(driver) => driver.server_pids(),
            Server::Mariadb(driver) => driver.server_pids(),
        }
    }

    /// Stops the server and removes its directory.
    pub fn stop(self) -> DriverResult<()> {
        match self {
            Server::Hayate {
                mut process,
                directory,
                ..
            } => {
                let stopped = process.stop(server::SHUTDOWN_TIMEOUT);
                stopped.and(directory.remove())
            }
            Server::Postgresql(driver) => driver.shutdown(),
            Server::Mariadb(driver) => driver.shutdown(),
        }
    }
}

/// A TCP port on 127.0.0.1 that nothing listens on right now.
pub fn free_port() -> DriverResult<u16> {
    let listener = TcpListener::bind(("127.0.0.1", 0))
        .map_err(|error| DriverError::fatal(format!("cannot find a free port: {error}")))?;
    listener
        .local_addr()
        .map(|address| address.port())
        .map_err(|error| DriverError::fatal(format!("cannot find a free port: {error}")))
}

/// `hayate serve` from this executable, as a child of the lab, on 127.0.0.1:`port` and a
/// Unix-domain socket with a new database in a lab directory under `base_dir` (removed when
/// the directory is dropped). Returns the socket's directory too.
pub fn start_hayate(
    base_dir: &Path,
    port: u16,
) -> DriverResult<(ServerProcess, LabDirectory, PathBuf)> {
    let mut directory = LabDirectory::create(base_dir, "hayate", None)?;
    let socket_dir = directory.socket_directory(&format!(".s.PGSQL.{port}"), None)?;
    let process = spawn_hayate(directory.path(), port, None, Some(&socket_dir))?;
    Ok((process, directory, socket_dir))
}

/// The product's `hayate` binary: `$HAYATE_BIN` if set, else `hayate` next to this executable
/// (`cargo build --release -p hayate -p hayate-lab` puts both in target/release).
fn hayate_executable() -> DriverResult<PathBuf> {
    if let Some(path) = std::env::var_os("HAYATE_BIN") {
        return Ok(PathBuf::from(path));
    }
    let lab = std::env::current_exe().map_err(|error| {
        DriverError::fatal(format!("cannot find the hayate-lab executable: {error}"))
    })?;
    let sibling = lab.with_file_name("hayate");
    if sibling.is_file() {
        Ok(sibling)
    } else {
        Err(DriverError::fatal(format!(
            "the hayate binary is not at {} (next to hayate-lab): build it with \
             `cargo build --release -p hayate`, or set HAYATE_BIN",
            sibling.display()
        )))
    }
}

/// `hayate serve` on the database in `directory` (created on first start), with a buffer of
/// `buffer_bytes` (`hayate serve`'s default if None), on TCP and, when `socket_dir` is given,
/// a Unix-domain socket in it; returns once it answers a query.
pub fn spawn_hayate(
    directory: &Path,
    port: u16,
    buffer_bytes: Option<u64>,
    socket_dir: Option<&Path>,
) -> DriverResult<ServerProcess> {
    spawn_hayate_with(directory, port, buffer_bytes, socket_dir, &[])
}

/// `spawn_hayate` with more arguments of `hayate serve` (replication, device emulation).
pub fn spawn_hayate_with(
    directory: &Path,
    port: u16,
    buffer_bytes: Option<u64>,
    socket_dir: Option<&Path>,
    extra_args: &[String],
) -> DriverResult<ServerProcess> {
    let executable = hayate_executable()?;
    let data_dir = directory.join("data");
    let log_path = directory.join("server.log");
    let mut command = server::command_as(&executable, None);
    command
        .arg("serve")
        .args(["--listen", "127.0.0.1"])
        .arg("--port")
        .arg(port.to_string())
        .arg("--data-dir")
        .arg(&data_dir)
        .arg("--unix-socket-dir")
        .arg(socket_dir.unwrap_or(Path::new("")));
    if let Some(bytes) = buffer_bytes {
        command.arg("--buffer-size").arg(format!("{bytes}B"));
    }
    command.args(extra_args);
    let mut process = ServerProcess::spawn("Hayate", command, &log_path, libc::SIGTERM)?;
    process.wait_ready(HAYATE_STARTUP_TIMEOUT, || {
        let mut client = hayate_client(port).map_err(|error| error.message)?;
        client
            .simple_query("SELECT 1")
            .map(|_| ())
            .map_err(|error| error.to_string())
    })?;
    Ok(process)
}

/// A connection to `hayate serve` on 127.0.0.1:`port` as the lab's user.
pub fn hayate_client(port: u16) -> DriverResult<::postgres::Client> {
    ::postgres::Config::new()
        .host("127.0.0.1")
        .port(port)
        .user(postgres::LAB_USER)
        .dbname(postgres::DATABASE)
        .application_name("hayate-lab")
        .connect(::postgres::NoTls)
        .map_err(|error| DriverError::fatal(format!("Hayate server on port {port}: {error}")))
}

/// Hayate's durability and caching as `hayate serve` runs it: its defaults, with a buffer of
/// `buffer_bytes` when given (`--buffer-size`).
pub fn hayate_settings(buffer_bytes: Option<u64>) -> BTreeMap<String, String> {
    let config = hayate_engine::DatabaseConfig::default();
    let mut settings = BTreeMap::new();
    let mut set = |name: &str, value: String| {
        settings.insert(name.to_string(), value);
    };
    set(
        "commit",
        "durable: a commit returns after its log records are written and synced (group commit)"
            .into(),
    );
    set("wal_sync_mode", format!("{:?}", config.wal.sync_mode));
    set("wal_direct_io", config.wal.direct.to_string());
    set(
        "wal_group_commit_delay_us",
        config.wal.group_commit_delay.as_micros().to_string(),
    );
    match buffer_bytes {
        Some(bytes) => {
            set("buffer_bytes", bytes.to_string());
            set("buffer", format!("hayate serve --buffer-size {bytes}B"));
        }
        None => {
            let bytes = ::hayate::memory::default_buffer_bytes();
            set("buffer_bytes", bytes.to_string());
            set(
                "buffer",
                format!(
                    "{} MiB (hayate serve's default: a quarter of the memory it may use)",
                    bytes >> 20
                ),
            );
        }
    }
    set(
        "data_io",
        "O_DIRECT: the data file is read and written past the OS page cache".into(),
    );
    set("io_backend", format!("{:?}", config.io_backend));
    set(
        "checkpoint_interval_s",
        config.checkpoint_interval.as_secs().to_string(),
    );
    set(
        "server",
        "hayate serve (pgwire; event loops, one per core)".into(),
    );
    settings
}
