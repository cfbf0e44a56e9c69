//! The nodes of `hayate-lab ha`: Hayate's standby (`hayate serve --ha-follow` on a copy of
//! the stopped primary's directory), PostgreSQL's (`PostgresStandby`), and what a run asks of
//! both: that the standby is synchronous before measuring, a prewarm, and the check that it
//! applied every update.

use std::path::Path;
use std::time::{Duration, Instant};

use postgres::Client;

use super::Setting;
use crate::driver::{DriverError, DriverResult};
use crate::peers::hayate_wire::HayateWireDriver;
use crate::peers::postgres::{postgres_error, PostgresDriver, PostgresStandby};
use crate::peers::server::{self, LabDirectory, ServerProcess};
use crate::primitive::driver::{PrimitiveDriver, PrimitiveSpec};
use crate::server::engines;
use ::hayate::error::{CliError, CliResult};

/// How long a standby may take to become synchronous, or to apply what it received.
const STANDBY_WAIT: Duration = Duration::from_secs(120);

/// A primary the lab can also query directly.
pub trait HaPrimary: PrimitiveDriver {
    fn client(&self) -> DriverResult<Client>;
}

impl HaPrimary for HayateWireDriver {
    fn client(&self) -> DriverResult<Client> {
        self.connect_client()
    }
}

impl HaPrimary for PostgresDriver {
    fn client(&self) -> DriverResult<Client> {
        self.connect_client().map_err(postgres_error)
    }
}

/// A running standby.
pub trait Standby {
    /// A connection to it (read-only: it is a hot standby).
    fn client(&self) -> DriverResult<Client>;
    /// Returns once the primary (`primary`) counts it for its commits.
    fn wait_synchronous(&self, primary: &mut Client) -> DriverResult<()>;
    /// Its server's processes (for their CPU time).
    fn pids(&self) -> Vec<u32>;
}

/// Setting (b) needs a memory-backed file system.
pub fn check_tmpfs(dir: &Path) -> CliResult<()> {
    const TMPFS_MAGIC: i64 = 0x0102_1994;
    let path = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes())
        .map_err(|_| CliError::new(format!("{}: not a path", dir.display())))?;
    // SAFETY: `path` is NUL-terminated; `stat` is written by statfs before it is read.
    let mut stat: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statfs(path.as_ptr(), &mut stat) } != 0 {
        return Err(CliError::new(format!(
            "--tmpfs {}: {}",
            dir.display(),
            std::io::Error::last_os_error()
        )));
    }
    if stat.f_type as i64 != TMPFS_MAGIC {
        return Err(CliError::new(format!(
            "--tmpfs {} is not on tmpfs: setting (b) keeps the standby's files in memory \
             (mount one, or leave b out of --settings)",
            dir.display()
        )));
    }
    Ok(())
}

fn wait_until(what: &str, mut done: impl FnMut() -> DriverResult<bool>) -> DriverResult<()> {
    let deadline = Instant::now() + STANDBY_WAIT;
    while !done()? {
        if Instant::now() > deadline {
            return Err(DriverError::fatal(format!(
                "{what} did not happen within {} s",
                STANDBY_WAIT.as_secs()
            )));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}

fn query_error(error: postgres::Error) -> DriverError {
    postgres_error(error)
}

/// Reads every table whole (a sequential scan each), so that a full buffer starts warm.
pub fn prewarm(client: &mut Client, spec: &PrimitiveSpec) -> DriverResult<()> {
    for table in 0..spec.tables {
        let name = PrimitiveSpec::table_name(table);
        client
            .simple_query(&format!("SELECT count(*) FROM {name} WHERE data1 <> ''"))
            .map_err(query_error)?;
    }
    Ok(())
}

/// The sum of C1 over every table: equal on both nodes once the standby applied every update.
fn c1_total(client: &mut Client, spec: &PrimitiveSpec) -> DriverResult<i64> {
    let mut total = 0;
    for table in 0..spec.tables {
        let name = PrimitiveSpec::table_name(table);
        let row = client
            .query_one(&format!("SELECT sum(c1)::bigint FROM {name}"), &[])
            .map_err(query_error)?;
        total += row.get::<_, Option<i64>>(0).unwrap_or(0);
    }
    Ok(total)
}

/// Whether the standby applied every update the primary committed (the primary takes no more
/// writes now): waits for the standby's sum of C1 to reach the primary's.
pub fn standby_agrees(
    primary: &mut Client,
    standby: &mut Client,
    spec: &PrimitiveSpec,
) -> DriverResult<bool> {
    let expected = c1_total(primary, spec)?;
    let deadline = Instant::now() + STANDBY_WAIT;
    loop {
        if c1_total(standby, spec)? == expected {
            return Ok(true);
        }
        if Instant::now() > deadline {
            return Ok(false);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A self-signed certificate for 127.0.0.1 both nodes present and trust (replication in
/// TLS), in a lab directory of its own.
pub struct ReplicationCertificate {
    directory: LabDirectory,
}

impl ReplicationCertificate {
    pub fn create(base_dir: &Path) -> DriverResult<ReplicationCertificate> {
        let directory = LabDirectory::create(base_dir, "hayate-tls", None)?;
        let failed = |error: rcgen::Error| DriverError::fatal(format!("certificate: {error}"));
        let key = rcgen::KeyPair::generate().map_err(failed)?;
        let params = rcgen::CertificateParams::new(vec!["127.0.0.1".into(), "localhost".into()])
            .map_err(failed)?;
        let certificate = params.self_signed(&key).map_err(failed)?;
        let write = |name: &str, text: String| {
            std::fs::write(directory.path().join(name), text)
                .map_err(|error| DriverError::fatal(format!("writing {name}: {error}")))
        };
        write("node.pem", certificate.pem())?;
        write("node.key", key.serialize_pem())?;
        Ok(ReplicationCertificate { directory })
    }

    /// What `hayate serve` needs for replication in TLS with this certificate.
    pub fn serve_args(&self) -> Vec<String> {
        let file = |name: &str| self.directory.path().join(name).display().to_string();
        vec![
            "--tls-cert".into(),
            file("node.pem"),
            "--tls-key".into(),
            file("node.key"),
            "--ha-replication-tls".into(),
        ]
    }
}

/// `hayate serve --ha-follow` on a copy of the primary's directory, taken while the primary
/// was stopped; the primary restarts with `--ha-replication-listen`.
pub struct HayateStandby {
    /// Before `directory`: dropped first, so the server stops before its files go.
    process: ServerProcess,
    directory: LabDirectory,
    port: u16,
}

impl HayateStandby {
    /// Restarts `primary` as a primary with a synchronous standby and starts the standby in
    /// a lab directory under `base_dir`, with a buffer of `buffer_bytes` (and, in setting
    /// (b), the low-latency class's latency on every I/O).
    pub fn start(
        primary: &HayateWireDriver,
        base_dir: &Path,
        setting: Setting,
        buffer_bytes: u64,
        extra_args: &[String],
    ) -> DriverResult<HayateStandby> {
        let directory = LabDirectory::create(base_dir, "hayate-standby", None)?;
        let replication = format!("127.0.0.1:{}", engines::free_port()?);
        let standby_data = directory.path().join("data");
        let mut primary_args = vec!["--ha-replication-listen".to_string(), replication.clone()];
        primary_args.extend_from_slice(extra_args);
        primary.restart_with(primary_args, &mut |data| copy_tree(data, &standby_data))?;
        let port = engines::free_port()?;
        let mut args = vec!["--ha-follow".to_string(), replication];
        args.extend_from_slice(extra_args);
        if setting == Setting::B {
            args.extend(["--emulate-device".into(), "low-latency".into()]);
        }
        let process =
            engines::spawn_hayate_with(directory.path(), port, Some(buffer_bytes), None, &args)?;
        Ok(HayateStandby {
            process,
            directory,
            port,
        })
    }

    /// Stops the standby and removes its directory.
    pub fn stop(mut self) -> DriverResult<()> {
        self.process.stop(server::SHUTDOWN_TIMEOUT)?;
        self.directory.remove()
    }
}

impl Standby for HayateStandby {
    fn client(&self) -> DriverResult<Client> {
        engines::hayate_client(self.port)
    }

    fn pids(&self) -> Vec<u32> {
        self.process.pids()
    }

    /// Connected, then one commit through it (acknowledged only once the standby has it
    /// durable), then recorded as the synchronous one.
    fn wait_synchronous(&self, primary: &mut Client) -> DriverResult<()> {
        let count = |client: &mut Client, sql: &str| -> DriverResult<i64> {
            Ok(client.query_one(sql, &[]).map_err(query_error)?.get(0))
        };
        wait_until("the standby connecting", || {
            Ok(count(primary, "SELECT count(*) FROM pg_stat_replication")? == 1)
        })?;
        primary
            .batch_execute("UPDATE primitive_1 SET c1 = c1 WHERE sid = 1")
            .map_err(query_error)?;
        wait_until("the standby becoming synchronous", || {
            Ok(count(
                primary,
                "SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync'",
            )? == 1)
        })
    }
}

/// PostgreSQL's standby, stopped and started between runs (its slot keeps the WAL).
pub struct PostgresStandbyNode {
    standby: PostgresStandby,
}

impl PostgresStandbyNode {
    pub fn create(
        primary: &PostgresDriver,
        base_dir: &Path,
        buffer_bytes: u64,
    ) -> DriverResult<PostgresStandbyNode> {
        Ok(PostgresStandbyNode {
            standby: primary.start_standby(base_dir, buffer_bytes)?,
        })
    }

    pub fn set_buffer_bytes(&mut self, bytes: u64) {
        self.standby.set_buffer_bytes(bytes);
    }

    pub fn start(&mut self) -> DriverResult<()> {
        self.standby.start()
    }

    pub fn stop(&mut self) -> DriverResult<()> {
        self.standby.stop()
    }
}

impl Standby for PostgresStandbyNode {
    fn client(&self) -> DriverResult<Client> {
        self.standby.connect().map_err(postgres_error)
    }

    fn pids(&self) -> Vec<u32> {
        self.standby.pids()
    }

    fn wait_synchronous(&self, primary: &mut Client) -> DriverResult<()> {
        wait_until("the standby becoming synchronous", || {
            let rows = primary
                .query(
                    "SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync'",
                    &[],
                )
                .map_err(query_error)?;
            Ok(rows[0].get::<_, i64>(0) == 1)
        })
    }
}

/// Copies a directory tree (a stopped server's data directory).
fn copy_tree(from: &Path, to: &Path) -> DriverResult<()> {
    let fail = |what: &Path, error: std::io::Error| {
        DriverError::fatal(format!("copying {}: {error}", what.display()))
    };
    std::fs::create_dir_all(to).map_err(|error| fail(to, error))?;
    for entry in std::fs::read_dir(from).map_err(|error| fail(from, error))? {
        let entry = entry.map_err(|error| fail(from, error))?;
        let target = to.join(entry.file_name());
        let kind = entry
            .file_type()
            .map_err(|error| fail(&entry.path(), error))?;
        if kind.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), &target).map_err(|error| fail(&entry.path(), error))?;
        }
    }
    Ok(())
}
