//! MariaDB with InnoDB as the lab runs it: a private server the lab starts itself, its
//! connections, settings and errors, and the base `Driver`; the workloads are in `primitive`
//! and `tpcc`.
//!
//! Lifecycle:
//! 1. `MariadbDriver::open` finds the binaries, makes a lab directory under `--dir`, runs
//!    `mariadb-install-db` into it (as the `mysql` user when the lab is root) and starts
//!    `mariadbd` on a unix socket only, ignoring every system option file (`--no-defaults`):
//!    O_DIRECT data files, a durable redo log flush at each commit, the doublewrite buffer on,
//!    no binary log. `open_listening` also listens on TCP at 127.0.0.1 (for clients the lab
//!    runs as separate programs, like sysbench in `hayate-lab server`).
//! 2. `load_primitive` (`primitive`) loads the tables with multi-row INSERTs in large
//!    transactions, one connection per core, runs ANALYZE TABLE on each, then restarts the
//!    server so the run starts with every page flushed.
//! 3. `set_buffer_bytes` restarts the server with the new `innodb_buffer_pool_size` (InnoDB
//!    needs at least 6 MiB with 16 KiB pages and rounds the size; the effective value is
//!    recorded). The buffer pool is neither dumped at shutdown nor loaded at startup, so every
//!    size starts cold, as with the other engines.
//! 4. Sessions use server-side prepared statements in autocommit mode.
//! 5. `shutdown` (or drop) stops the server cleanly and removes the directory.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use mysql::consts::CapabilityFlags;
use mysql::prelude::Queryable;
use mysql::{Conn, OptsBuilder};

use crate::driver::{Driver, DriverError, DriverResult};
use crate::peers::server::{self, LabDirectory, LabServer, ServerProcess, ServerUser};

const SOCKET_NAME: &str = "mariadbd.sock";
pub const DATABASE: &str = "lab";
/// The user clients connect as (no password).
pub const USER: &str = "root";
/// InnoDB refuses a smaller buffer pool with its default 16 KiB pages.
const BUFFER_POOL_BYTES_MIN: u64 = 6 * 1024 * 1024;
const MAX_CONNECTIONS: u32 = 300;

/// Server variables recorded in the results.
const RECORDED_VARIABLES: &[&str] = &[
    "innodb_flush_method",
    "innodb_flush_log_at_trx_commit",
    "innodb_doublewrite",
    "log_bin",
    "sync_binlog",
    "innodb_buffer_pool_size",
    "innodb_buffer_pool_chunk_size",
    "innodb_page_size",
    "innodb_log_file_size",
    "innodb_log_buffer_size",
    "innodb_use_native_aio",
    "innodb_io_capacity",
    "innodb_flush_neighbors",
    "innodb_adaptive_hash_index",
    "innodb_buffer_pool_dump_at_shutdown",
    "innodb_buffer_pool_load_at_startup",
    "innodb_checksum_algorithm",
    "transaction_isolation",
    "max_connections",
];

pub fn install_hint() -> String {
    "MariaDB is not installed (no mariadbd/mysqld and mariadb-install-db in /usr/sbin, /usr/bin \
     or on PATH): install it with `apt-get install mariadb-server`"
        .to_string()
}

struct Binaries {
    server: PathBuf,
    install_db: PathBuf,
}

fn find_binaries() -> Result<Binaries, String> {
    let directories = [Path::new("/usr/sbin"), Path::new("/usr/bin")];
    let server = server::find_program(&["mariadbd", "mysqld"], &directories);
    let install_db =
        server::find_program(&["mariadb-install-db", "mysql_install_db"], &directories);
    match (server, install_db) {
        (Some(server), Some(install_db)) => Ok(Binaries { server, install_db }),
        _ => Err(install_hint()),
    }
}

pub fn check_installed() -> Result<(), String> {
    find_binaries().map(|_| ())
}

pub struct MariadbDriver {
    binaries: Binaries,
    user: Option<ServerUser>,
    data_dir: PathBuf,
    socket_path: PathBuf,
    /// The TCP port on 127.0.0.1 the server also listens on, if any.
    tcp_port: Option<u16>,
    log_path: PathBuf,
    state: Mutex<State>,
}

struct State {
    /// The server and its directory.
    lab: LabServer,
    buffer_bytes: u64,
    version: String,
    settings: BTreeMap<String, String>,
}

impl MariadbDriver {
    pub fn open(base_dir: &Path, buffer_bytes: u64) -> DriverResult<MariadbDriver> {
        Self::open_listening(base_dir, buffer_bytes, None)
    }

    /// Like `open`, and when `tcp_port` is given the server also listens on
    /// 127.0.0.1:`tcp_port` (user `USER` without a password, database `DATABASE`).
    pub fn open_listening(
        base_dir: &Path,
        buffer_bytes: u64,
        tcp_port: Option<u16>,
    ) -> DriverResult<MariadbDriver> {
        let binaries = find_binaries().map_err(DriverError::fatal)?;
        let user = server::server_user("mysql")?;
        let mut directory = LabDirectory::create(base_dir, "mariadb", user.as_ref())?;
        let socket_path = directory
            .socket_directory(SOCKET_NAME, user.as_ref())?
            .join(SOCKET_NAME);
        let data_dir = directory.path().join("data");
        let log_path = directory.path().join("server.log");
        let mut install = server::command_as(&binaries.install_db, user.as_ref());
        install
            .arg("--no-defaults")
            .arg(format!("--datadir={}", data_dir.display()))
            .args(["--auth-root-authentication-method=normal", "--skip-test-db"]);
        let setup_log_path = directory.path().join("setup.log");
        server::run_setup(
            "mariadb-install-db",
            install,
            &setup_log_path,
            server::STARTUP_TIMEOUT,
        )?;
        let driver = MariadbDriver {
            binaries,
            user,
            data_dir,
            socket_path,
            tcp_port,
            log_path,
            state: Mutex::new(State {
                lab: LabServer::new(directory),
                buffer_bytes,
                version: String::new(),
                settings: BTreeMap::new(),
            }),
        };
        driver.start(buffer_bytes)?;
        let mut conn = driver.connect_conn(None).map_err(mariadb_error)?;
        conn.query_drop(format!("CREATE DATABASE IF NOT EXISTS {DATABASE}"))
            .map_err(mariadb_error)?;
        if tcp_port.is_some() {
            // TCP clients come from 127.0.0.1 (names are not resolved, so not `localhost`).
            conn.query_drop(format!("CREATE USER IF NOT EXISTS '{USER}'@'127.0.0.1'"))
                .map_err(mariadb_error)?;
            conn.query_drop(format!("GRANT ALL ON *.* TO '{USER}'@'127.0.0.1'"))
                .map_err(mariadb_error)?;
        }
        Ok(driver)
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The TCP port on 127.0.0.1, when the server listens on one (`open_listening`).
    pub fn tcp_port(&self) -> Option<u16> {
        self.tcp_port
    }

    /// Restarts the server with the buffer it runs with: a clean shutdown writes every dirty
    /// page, like PostgreSQL's CHECKPOINT.
    pub(super) fn restart(&self) -> DriverResult<()> {
        let buffer_bytes = self.state().buffer_bytes;
        self.set_buffer_bytes(buffer_bytes)
    }

    /// The server's Unix-domain socket.
    pub fn socket_path(&self) -> &Path {
        &self.socket_path
    }

    pub(super) fn connect_conn(&self, database: Option<&str>) -> mysql::Result<Conn> {
        let options = OptsBuilder::new()
            .socket(Some(self.socket_path.display().to_string()))
            .prefer_socket(false)
            .user(Some(USER))
            .db_name(database)
            // Report matched rows, not changed rows: an update to the same C1 still finds it.
            .additional_capabilities(CapabilityFlags::CLIENT_FOUND_ROWS);
        Conn::new(options)
    }

    /// A connection to the lab's database.
    pub(super) fn connect_lab(&self) -> mysql::Result<Conn> {
        self.connect_conn(Some(DATABASE))
    }

    fn start(&self, buffer_bytes: u64) -> DriverResult<()> {
        let buffer_pool_bytes = buffer_bytes.max(BUFFER_POOL_BYTES_MIN);
        let mut command = server::command_as(&self.binaries.server, self.user.as_ref());
        command
            .arg("--no-defaults")
            .arg(format!("--datadir={}", self.data_dir.display()))
            .arg(format!("--socket={}", self.socket_path.display()))
            .arg(format!(
                "--pid-file={}",
                self.data_dir.join("mariadbd.pid").display()
            ))
            .arg("--skip-log-bin");
        match self.tcp_port {
            Some(port) => command
                .args(["--bind-address=127.0.0.1", "--skip-name-resolve"])
                .arg(format!("--port={port}")),
            None => command.arg("--skip-networking"),
        };
        command
            .arg(format!("--max-connections={MAX_CONNECTIONS}"))
            .arg(format!("--innodb-buffer-pool-size={buffer_pool_bytes}"))
            .args([
                "--innodb-flush-method=O_DIRECT",
                "--innodb-flush-log-at-trx-commit=1",
                "--innodb-doublewrite=1",
                "--innodb-buffer-pool-dump-at-shutdown=0",
                "--innodb-buffer-pool-load-at-startup=0",
            ]);
        let mut process = ServerProcess::spawn("MariaDB", command, &self.log_path, libc::SIGTERM)?;
        process.wait_ready(server::STARTUP_TIMEOUT, || {
            let mut conn = self.connect_conn(None).map_err(|error| error.to_string())?;
            conn.query_drop("SELECT 1")
                .map_err(|error| error.to_string())
        })?;
        let (version, mut settings) = self
            .read_settings()
            .map_err(|error| process.error(&error))?;
        settings.insert(
            "innodb_buffer_pool_size_requested".into(),
            buffer_bytes.to_string(),
        );
        let mut state = self.state();
        state.lab.set_process(process);
        state.buffer_bytes = buffer_bytes;
        state.version = version;
        state.settings = settings;
        Ok(())
    }

    fn read_settings(&self) -> Result<(String, BTreeMap<String, String>), String> {
        let mut conn = self.connect_conn(None).map_err(|error| error.to_string())?;
        let names: Vec<String> = RECORDED_VARIABLES
            .iter()
            .map(|name| format!("'{name}'"))
            .collect();
        let rows: Vec<(String, String)> = conn
            .query(format!(
                "SHOW GLOBAL VARIABLES WHERE Variable_name IN ({})",
                names.join(", ")
            ))
            .map_err(|error| error.to_string())?;
        let mut settings: BTreeMap<String, String> = rows.into_iter().collect();
        let version: Option<String> = conn
            .query_first("SELECT VERSION()")
            .map_err(|error| error.to_string())?;
        settings.insert(
            "data1_type".into(),
            "varchar(4096) character set ascii (MariaDB's CHAR holds at most 255)".into(),
        );
        settings.insert(
            "client".into(),
            "mysql crate over a unix socket, prepared statements, autocommit".into(),
        );
        settings.insert(
            "tpcc_isolation".into(),
            crate::peers::sql::tpcc_schema::ISOLATION.into(),
        );
        Ok((version.unwrap_or_default(), settings))
    }

    fn stop_server(&self) -> DriverResult<()> {
        self.state().lab.stop()
    }

    fn stop_and_remove(&self) -> DriverResult<()> {
        self.state().lab.stop_and_remove()
    }
}

impl Driver for MariadbDriver {
    fn engine(&self) -> &str {
        "mariadb"
    }

    fn version(&self) -> String {
        self.state().version.clone()
    }

    fn settings(&self) -> BTreeMap<String, String> {
        self.state().settings.clone()
    }

    fn page_size(&self) -> u64 {
        let state = self.state();
        let page_size = state.settings.get("innodb_page_size");
        page_size
            .and_then(|size| size.parse().ok())
            .unwrap_or(16384)
    }

    fn write_policy(&self) -> String {
        "in-place B+tree pages, redo log, doublewrite buffer".to_string()
    }

    fn set_buffer_bytes(&self, bytes: u64) -> DriverResult<()> {
        self.stop_server()?;
        self.start(bytes)
    }

    fn server_pids(&self) -> Vec<u32> {
        self.state().lab.pids()
    }

    fn shutdown(&self) -> DriverResult<()> {
        self.stop_and_remove()
    }
}

impl Drop for MariadbDriver {
    fn drop(&mut self) {
        if let Err(error) = self.stop_and_remove() {
            log::warn!("{error}");
        }
    }
}

/// Deadlocks (1213) and lock wait timeouts (1205) are retryable; everything else ends the run
/// with the server's message.
pub(crate) fn mariadb_error(error: mysql::Error) -> DriverError {
    match error {
        mysql::Error::MySqlError(server_error) => {
            let message = format!("MariaDB: {server_error}");
            if matches!(server_error.code, 1205 | 1213) {
                DriverError::retryable(message)
            } else {
                DriverError::fatal(message)
            }
        }
        other => DriverError::fatal(format!("MariaDB: {other}")),
    }
}
