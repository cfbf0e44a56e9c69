//! PostgreSQL as the lab runs it: a private server the lab starts itself, its connections,
//! settings and errors, and the base `Driver`; the workloads are in `primitive` and `tpcc`.
//!
//! Lifecycle:
//! 1. `PostgresDriver::open` finds the binaries, makes a lab directory under `--dir`, runs
//!    `initdb` into it (as the `postgres` user when the lab is root) and starts `postgres` on a
//!    unix socket only, with durable commits (fsync, synchronous_commit, full_page_writes on).
//!    `open_listening` also listens on TCP at 127.0.0.1 (for clients the lab runs as separate
//!    programs, like sysbench in `hayate-lab server`); the port is then that TCP port, which
//!    also names the unix socket.
//! 2. `load_primitive` (`primitive`) loads the tables with COPY, one connection per core, each
//!    table then gets its primary key (Data1 is stored PLAIN: uncompressed, in the heap page,
//!    like the other engines); then ANALYZE and CHECKPOINT.
//! 3. `set_buffer_bytes` restarts the server with the new `shared_buffers`.
//! 4. Sessions (`sql::primitive::SqlSession` over `Client`) use prepared statements in
//!    autocommit mode: each statement is one transaction.
//! 5. `shutdown` (or drop) stops the server with a fast shutdown and removes the directory.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use postgres::{Client, NoTls};

use crate::driver::{Driver, DriverError, DriverResult};
use crate::peers::server::{self, LabDirectory, LabServer, ServerProcess, ServerUser};

/// The port of a server on a unix socket only (it names the socket, `.s.PGSQL.5432`).
const SOCKET_PORT: u16 = 5432;
pub const LAB_USER: &str = "lab";
pub const DATABASE: &str = "postgres";
/// PostgreSQL refuses fewer than 16 buffers of 8 KiB, and with many connections a pool of a
/// few hundred buffers runs out of unpinned ones ("no unpinned buffers available"); 8 MiB
/// (1,024 buffers) is the floor. The effective size is recorded in the settings.
const SHARED_BUFFERS_BYTES_MIN: u64 = 8 << 20;
/// Enough for any concurrency the lab runs plus the lab's own connections.
const MAX_CONNECTIONS: u32 = 300;

/// The settings recorded in the results, read back from the server with SHOW.
const RECORDED_SETTINGS: &[&str] = &[
    "fsync",
    "synchronous_commit",
    "full_page_writes",
    "wal_sync_method",
    "wal_level",
    "wal_buffers",
    "wal_writer_delay",
    "wal_compression",
    "commit_delay",
    "commit_siblings",
    "checkpoint_timeout",
    "max_wal_size",
    "shared_buffers",
    "block_size",
    "data_checksums",
    "huge_pages",
    "effective_io_concurrency",
    "max_connections",
    "default_transaction_isolation",
];

pub fn install_hint() -> String {
    "PostgreSQL is not installed (no initdb and postgres under /usr/lib/postgresql/*/bin or on \
     PATH): install it with `apt-get install postgresql`"
        .to_string()
}

/// The directory holding `initdb` and `postgres`: the newest Debian version, else PATH.
pub fn find_binaries() -> Result<PathBuf, String> {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse::<u32>().ok()?;
            Some((version, entry.path().join("bin")))
        })
        .filter(|(_, bin)| bin.join("initdb").is_file() && bin.join("postgres").is_file())
        .collect();
    versions.sort();
    if let Some((_, bin)) = versions.pop() {
        return Ok(bin);
    }
    let postgres = server::find_program(&["postgres"], &[]).ok_or_else(install_hint)?;
    let bin = postgres.parent().map(Path::to_path_buf).unwrap_or_default();
    if bin.join("initdb").is_file() {
        Ok(bin)
    } else {
        Err(install_hint())
    }
}

pub struct PostgresDriver {
    bin: PathBuf,
    user: Option<ServerUser>,
    data_dir: PathBuf,
    socket_dir: PathBuf,
    /// The server's port: `SOCKET_PORT` on a unix socket only, else the TCP port.
    port: u16,
    /// Whether the server also listens on TCP at 127.0.0.1:`port`.
    tcp: bool,
    log_path: PathBuf,
    state: Mutex<State>,
}

struct State {
    /// The server and its directory.
    lab: LabServer,
    version: String,
    settings: BTreeMap<String, String>,
}

impl PostgresDriver {
    pub fn open(base_dir: &Path, buffer_bytes: u64) -> DriverResult<PostgresDriver> {
        Self::open_listening(base_dir, buffer_bytes, None)
    }

    /// Like `open`, and when `tcp_port` is given the server also listens on
    /// 127.0.0.1:`tcp_port` (trust authentication, user `LAB_USER`, database `DATABASE`).
    pub fn open_listening(
        base_dir: &Path,
        buffer_bytes: u64,
        tcp_port: Option<u16>,
    ) -> DriverResult<PostgresDriver> {
        let bin = find_binaries().map_err(DriverError::fatal)?;
        let user = server::server_user("postgres")?;
        let mut directory = LabDirectory::create(base_dir, "postgresql", user.as_ref())?;
        let port = tcp_port.unwrap_or(SOCKET_PORT);
        let socket_name = format!(".s.PGSQL.{port}");
        let socket_dir = directory.socket_directory(&socket_name, user.as_ref())?;
        let data_dir = directory.path().join("data");
        let log_path = directory.path().join("server.log");
        let mut initdb = server::command_as(&bin.join("initdb"), user.as_ref());
        initdb.arg("--pgdata").arg(&data_dir).args([
            "--username",
            LAB_USER,
            "--auth=trust",
            "--encoding=UTF8",
            "--locale=C",
        ]);
        let setup_log_path = directory.path().join("setup.log");
        server::run_setup("initdb", initdb, &setup_log_path, server::STARTUP_TIMEOUT)?;
        let driver = PostgresDriver {
            bin,
            user,
            data_dir,
            socket_dir,
            port,
            tcp: tcp_port.is_some(),
            log_path,
            state: Mutex::new(State {
                lab: LabServer::new(directory),
                version: String::new(),
                settings: BTreeMap::new(),
            }),
        };
        driver.start(buffer_bytes)?;
        Ok(driver)
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The TCP port on 127.0.0.1, when the server listens on one (`open_listening`).
    pub fn tcp_port(&self) -> Option<u16> {
        self.tcp.then_some(self.port)
    }

    /// The Unix-domain socket's directory and port (the socket is `.s.PGSQL.<port>` in it).
    pub fn socket(&self) -> (&Path, u16) {
        (&self.socket_dir, self.port)
    }

    pub(crate) fn connect_client(&self) -> Result<Client, postgres::Error> {
        postgres::Config::new()
            .host_path(&self.socket_dir)
            .port(self.port)
            .user(LAB_USER)
            .dbname(DATABASE)
            .application_name("hayate-lab")
            .connect(NoTls)
    }

    fn start(&self, buffer_bytes: u64) -> DriverResult<()> {
        let listen = if self.tcp { "127.0.0.1" } else { "" };
        let command = server_command(
            &self.bin,
            self.user.as_ref(),
            ServerPlace {
                data_dir: &self.data_dir,
                socket_dir: &self.socket_dir,
                port: self.port,
                listen,
            },
            buffer_bytes,
        );
        let process = spawn_ready("PostgreSQL", command, &self.log_path, || {
            self.connect_client()
        })?;
        let (version, settings) = self
            .read_settings()
            .map_err(|error| process.error(&error))?;
        let mut state = self.state();
        state.lab.set_process(process);
        state.version = version;
        state.settings = settings;
        Ok(())
    }

    fn read_settings(&self) -> Result<(String, BTreeMap<String, String>), String> {
        let mut client = self.connect_client().map_err(|error| error.to_string())?;
        let mut show = |name: &str| -> Result<String, String> {
            let row = client
                .query_one(&format!("SHOW {name}"), &[])
                .map_err(|error| format!("SHOW {name}: {error}"))?;
            Ok(row.get::<_, String>(0))
        };
        let version = show("server_version")?;
        let mut settings = BTreeMap::new();
        for name in RECORDED_SETTINGS {
            settings.insert(name.to_string(), show(name)?);
        }
        let row = client
            .query_one(
                "SELECT (setting::bigint * 8192)::text FROM pg_settings \
                 WHERE name = 'shared_buffers'",
                &[],
            )
            .map_err(|error| error.to_string())?;
        settings.insert("shared_buffers_bytes".into(), row.get::<_, String>(0));
        settings.insert(
            "os_page_cache".into(),
            "used: PostgreSQL reads and writes through the OS page cache besides shared_buffers"
                .into(),
        );
        settings.insert(
            "data1_storage".into(),
            "char(4096) STORAGE PLAIN (no TOAST)".into(),
        );
        settings.insert(
            "client".into(),
            "postgres crate over a unix socket, prepared statements, autocommit".into(),
        );
        settings.insert(
            "tpcc_isolation".into(),
            crate::peers::sql::tpcc_schema::ISOLATION.into(),
        );
        Ok((version, settings))
    }

    /// A streaming standby of this server in a lab directory under `base_dir`: a base backup
    /// (`pg_basebackup -X stream -R`) with a physical replication slot, so that the standby
    /// may stop and catch up later, started as a hot standby with a buffer of `buffer_bytes`.
    /// It counts for commits only once `set_synchronous(true)`.
    pub fn start_standby(
        &self,
        base_dir: &Path,
        buffer_bytes: u64,
    ) -> DriverResult<PostgresStandby> {
        let mut directory =
            LabDirectory::create(base_dir, "postgresql-standby", self.user.as_ref())?;
        let port = self.port + 1;
        let socket_dir =
            directory.socket_directory(&format!(".s.PGSQL.{port}"), self.user.as_ref())?;
        let data_dir = directory.path().join("data");
        let mut client = self.connect_client().map_err(postgres_error)?;
        client
            .batch_execute(&format!(
                "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots \
                 WHERE slot_name = '{STANDBY_SLOT}'"
            ))
            .map_err(postgres_error)?;
        let mut backup = server::command_as(&self.bin.join("pg_basebackup"), self.user.as_ref());
        backup
            .arg("--pgdata")
            .arg(&data_dir)
            .arg("--host")
            .arg(&self.socket_dir)
            .args(["--port", &self.port.to_string(), "--username", LAB_USER])
            .args([
                "--wal-method=stream",
                "--write-recovery-conf",
                "--create-slot",
            ])
            .args(["--slot", STANDBY_SLOT, "--checkpoint=fast"]);
        let setup_log = directory.path().join("basebackup.log");
        server::run_setup("pg_basebackup", backup, &setup_log, server::STARTUP_TIMEOUT)?;
        let mut standby = PostgresStandby {
            bin: self.bin.clone(),
            user: self.user.clone(),
            log_path: directory.path().join("server.log"),
            data_dir,
            socket_dir,
            port,
            buffer_bytes,
            lab: LabServer::new(directory),
        };
        standby.start()?;
        Ok(standby)
    }

    /// Makes every standby synchronous (`synchronous_standby_names = '*'`: a commit returns
    /// once its WAL is flushed on the standby, `synchronous_commit = on`) or none.
    pub fn set_synchronous(&self, synchronous: bool) -> DriverResult<()> {
        let names = if synchronous { "*" } else { "" };
        let mut client = self.connect_client().map_err(postgres_error)?;
        // Two statements: ALTER SYSTEM refuses to run in a transaction block.
        client
            .batch_execute(&format!(
                "ALTER SYSTEM SET synchronous_standby_names = '{names}'"
            ))
            .and_then(|_| client.batch_execute("SELECT pg_reload_conf()"))
            .map_err(postgres_error)
    }

    fn stop_server(&self) -> DriverResult<()> {
        self.state().lab.stop()
    }

    fn stop_and_remove(&self) -> DriverResult<()> {
        self.state().lab.stop_and_remove()
    }
}

impl Driver for PostgresDriver {
    fn engine(&self) -> &str {
        "postgresql"
    }

    fn version(&self) -> String {
        self.state().version.clone()
    }

    fn settings(&self) -> BTreeMap<String, String> {
        self.state().settings.clone()
    }

    fn page_size(&self) -> u64 {
        let state = self.state();
        state
            .settings
            .get("block_size")
            .and_then(|size| size.parse().ok())
            .unwrap_or(8192)
    }

    fn write_policy(&self) -> String {
        "in-place heap pages with MVCC versions, WAL with full-page writes".to_string()
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

impl Drop for PostgresDriver {
    fn drop(&mut self) {
        if let Err(error) = self.stop_and_remove() {
            log::warn!("{error}");
        }
    }
}

/// The name of the standby's physical replication slot.
const STANDBY_SLOT: &str = "hayate_lab_standby";

/// Where a `postgres` server lives and listens.
struct ServerPlace<'a> {
    data_dir: &'a Path,
    /// Its Unix-domain socket's directory; `port` names the socket.
    socket_dir: &'a Path,
    port: u16,
    /// TCP address (empty: none).
    listen: &'a str,
}

/// `postgres` with the lab's settings: a buffer of `buffer_bytes`, durable commits.
fn server_command(
    bin: &Path,
    user: Option<&ServerUser>,
    place: ServerPlace,
    buffer_bytes: u64,
) -> std::process::Command {
    let shared_buffers_kib = buffer_bytes.max(SHARED_BUFFERS_BYTES_MIN) / 1024;
    let mut command = server::command_as(&bin.join("postgres"), user);
    command.arg("-D").arg(place.data_dir);
    let mut setting = |name: &str, value: String| {
        command.arg("-c").arg(format!("{name}={value}"));
    };
    setting("listen_addresses", place.listen.to_string());
    setting(
        "unix_socket_directories",
        place.socket_dir.display().to_string(),
    );
    setting("port", place.port.to_string());
    setting("max_connections", MAX_CONNECTIONS.to_string());
    setting("shared_buffers", format!("{shared_buffers_kib}kB"));
    // Durable commits; wal_sync_method stays the platform default (fdatasync on Linux).
    setting("fsync", "on".into());
    setting("synchronous_commit", "on".into());
    setting("full_page_writes", "on".into());
    command
}

/// Starts `postgres` and returns once a connection (`connect`) answers a query.
fn spawn_ready(
    name: &'static str,
    command: std::process::Command,
    log_path: &Path,
    connect: impl Fn() -> Result<Client, postgres::Error>,
) -> DriverResult<ServerProcess> {
    let mut process = ServerProcess::spawn(name, command, log_path, libc::SIGINT)?;
    process.wait_ready(server::STARTUP_TIMEOUT, || {
        let mut client = connect().map_err(|error| error.to_string())?;
        client
            .simple_query("SELECT 1")
            .map(|_| ())
            .map_err(|error| error.to_string())
    })?;
    Ok(process)
}

/// A hot standby of a `PostgresDriver`'s server (`start_standby`), streaming from it through
/// a replication slot. Stopped and removed on drop.
pub struct PostgresStandby {
    bin: PathBuf,
    user: Option<ServerUser>,
    data_dir: PathBuf,
    socket_dir: PathBuf,
    port: u16,
    buffer_bytes: u64,
    log_path: PathBuf,
    lab: LabServer,
}

impl PostgresStandby {
    /// Starts it (again): it catches up from its slot and streams.
    pub fn start(&mut self) -> DriverResult<()> {
        let command = server_command(
            &self.bin,
            self.user.as_ref(),
            ServerPlace {
                data_dir: &self.data_dir,
                socket_dir: &self.socket_dir,
                port: self.port,
                listen: "",
            },
            self.buffer_bytes,
        );
        let process = spawn_ready("PostgreSQL standby", command, &self.log_path, || {
            self.connect()
        })?;
        self.lab.set_process(process);
        Ok(())
    }

    /// The buffer it gets at its next start.
    pub fn set_buffer_bytes(&mut self, bytes: u64) {
        self.buffer_bytes = bytes;
    }

    /// A connection to it (read-only).
    pub fn connect(&self) -> Result<Client, postgres::Error> {
        postgres::Config::new()
            .host_path(&self.socket_dir)
            .port(self.port)
            .user(LAB_USER)
            .dbname(DATABASE)
            .application_name("hayate-lab")
            .connect(NoTls)
    }

    /// Its server's processes.
    pub fn pids(&self) -> Vec<u32> {
        self.lab.pids()
    }

    /// Stops it (a fast shutdown); its slot keeps the WAL it will need.
    pub fn stop(&mut self) -> DriverResult<()> {
        self.lab.stop()
    }
}

impl Drop for PostgresStandby {
    fn drop(&mut self) {
        if let Err(error) = self.lab.stop_and_remove() {
            log::warn!("{error}");
        }
    }
}

/// Serialization failures, deadlocks (SQLSTATE class 40) and lock timeouts are retryable;
/// everything else ends the run with the server's message.
pub(crate) fn postgres_error(error: postgres::Error) -> DriverError {
    let Some(database_error) = error.as_db_error() else {
        return DriverError::fatal(format!("PostgreSQL: {error}"));
    };
    let code = database_error.code().code();
    let message = format!("PostgreSQL: {} (SQLSTATE {code})", database_error.message());
    if code.starts_with("40") || code == "55P03" {
        DriverError::retryable(message)
    } else {
        DriverError::fatal(message)
    }
}
