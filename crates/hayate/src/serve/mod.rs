//! `hayate serve`: the PostgreSQL wire protocol server on a database directory.
//!
//! 1. Read the settings: built-in defaults, then the config file (`--config`, TOML), then
//!    the flags given on the command line, each overriding the one before.
//! 2. Create the data directory if needed and open the database (recovering from the log
//!    after a crash), then load the SQL cluster.
//! 3. Listen (TCP, and the Unix-domain socket unless turned off) and serve connections
//!    until SIGTERM or SIGINT.
//! 4. Stop accepting, end the connections (open transactions abort), and close the
//!    database, which takes a checkpoint.

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::Args;
use hayate::error::{CliError, CliResult, Context};
use hayate::latency::{DeviceClassArg, LatencyIo};
use hayate_engine::{BufferSize, Database, DatabaseConfig};
use hayate_server::ha::HaConfig;
use hayate_server::replication::{
    Identity, Primary, ReplicationAuth, ReplicationPolicy, ReplicationSecret, ReplicationTls,
};
use hayate_server::unix_socket::UnixSocket;
use hayate_server::{AuthMethod, Listeners, ServerConfig};
use hayate_sql::Cluster;
use serde::Deserialize;

mod ha;

pub use ha::status;

const CONFIG_HELP: &str = "\
Config file (--config FILE, TOML; every key optional, flags override it):
  listen = \"127.0.0.1\"        # address to listen on
  port = 5432
  unix_socket_dir = \"/tmp\"    # local socket .s.PGSQL.<port> (psql -h /tmp); \"\" for none
  data_dir = \"./hayate-data\"  # created on first start
  auth = \"scram-sha-256\"      # trust | password | md5 | scram-sha-256
  max_connections = 100       # more connections are refused (SQLSTATE 53300)
  work_mem = \"4MB\"            # memory of one sort or hash (SHOW work_mem)
  buffer_size = \"4GB\"         # the engine's page cache (default: a quarter of memory, >= 128MB)
  event_loops = 0             # threads serving connections (0: one per core)
  log_level = \"info\"          # error | warn | info | debug | trace (RUST_LOG wins)
  ha_replication_listen = \"127.0.0.1:6433\"  # primary: standbys connect here; commits wait for one
  ha_follow = \"127.0.0.1:6433\"              # standby: follow this primary (read-only, hot)
  ha_etcd = \"http://127.0.0.1:2379\"         # HA through etcd (with ha_node, ha_replication_listen)
  ha_cluster = \"hayate\"                     # the cluster's name in etcd
  ha_node = \"a\"                             # this node's name
  ha_ttl = 2                                # leader lease, seconds
  ha_replication_secret = \"...\"            # replication connections prove it (the same on every node)
  allow_remote_trust = false                # let trust (or replication without a secret) listen beyond loopback
  tls_cert = \"server.crt\"                   # TLS for clients that ask (sslmode=require): PEM chain
  tls_key = \"server.key\"                    # and its private key (PEM)
  tls_required = false                      # refuse TCP clients without TLS (28000)
  ha_replication_tls = false                # replication in TLS too (tls_cert is presented)
  ha_replication_ca = \"ca.pem\"              # certificates trusted for the primary's (default: tls_cert)
  ha_alone_after = 10                       # primary: acknowledge alone after 10 s without a standby (default never)
  ha_max_slot_size = \"1GB\"                  # log kept for an absent standby while alone
  ha_peer_timeout = 10                      # drop a replication peer silent this long (seconds)
  emulate_device = \"real\"                   # measurements only: + a device class's I/O latency
  [users]                     # user = password, for every method but trust
  alice = \"secret\"
See docs/hayate.toml.example.";

#[derive(Debug, Args)]
#[command(after_help = CONFIG_HELP)]
pub struct ServeArgs {
    /// Config file (TOML, see below); flags given here override its values.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Address to listen on [default: 127.0.0.1].
    #[arg(long)]
    pub listen: Option<IpAddr>,
    /// TCP port [default: 5432]; it also names the Unix-domain socket.
    #[arg(long)]
    pub port: Option<u16>,
    /// Directory of the Unix-domain socket `.s.PGSQL.<port>` for local clients (`psql -h
    /// /tmp`); an empty value listens on TCP only [default: /tmp].
    #[arg(long, value_name = "DIR", value_parser = empty_allowed)]
    pub unix_socket_dir: Option<PathBuf>,
    /// Database directory, created on first start; after a crash the log is replayed on
    /// open (`--log-level info` shows the recovery report) [default: ./hayate-data].
    #[arg(long, value_name = "DIR", alias = "data")]
    pub data_dir: Option<PathBuf>,
    /// Authentication: trust, password (cleartext), md5 or scram-sha-256; the users and
    /// passwords come from the config file [default: trust].
    #[arg(long, value_name = "METHOD")]
    pub auth: Option<String>,
    /// Connections served at once [default: 100].
    #[arg(long, value_name = "N")]
    pub max_connections: Option<usize>,
    /// Memory of one sort or hash before it spills, e.g. 4MB [default: 4MB].
    #[arg(long, value_name = "SIZE")]
    pub work_mem: Option<String>,
    /// Memory of the buffer pool (the engine's page cache), e.g. 128MB, 4GB; a bare number
    /// is kB [default: a quarter of the memory the server may use, at least 128MB].
    #[arg(long, value_name = "SIZE")]
    pub buffer_size: Option<String>,
    /// Threads serving the connections, each an event loop running many of them; 0 is one
    /// per core [default: 0].
    #[arg(long, value_name = "N")]
    pub event_loops: Option<usize>,
    /// Log level: error, warn, info, debug or trace [default: warn].
    #[arg(long, value_name = "LEVEL")]
    pub log_level: Option<String>,
    /// Primary with a synchronous standby: standbys connect to this address, and every
    /// commit is acknowledged only once durable on the standby too (with no standby
    /// connected, commits wait).
    #[arg(long, value_name = "ADDR")]
    pub ha_replication_listen: Option<std::net::SocketAddr>,
    /// Standby: follow the primary whose replication address this is; serve read-only
    /// queries (writes fail with 25006) until `hayate promote`. The data directory must be a
    /// copy of the primary's taken while it was stopped.
    #[arg(long, value_name = "HOST:PORT")]
    pub ha_follow: Option<String>,
    /// High availability through etcd: the endpoints (comma-separated URLs). The node that
    /// holds the leader key is the primary; the others seed themselves from it, follow it,
    /// and the synchronous standby takes over when its lease runs out. Needs --ha-node and
    /// --ha-replication-listen.
    #[arg(long, value_name = "URLS")]
    pub ha_etcd: Option<String>,
    /// The cluster's name in etcd [default: hayate].
    #[arg(long, value_name = "NAME")]
    pub ha_cluster: Option<String>,
    /// This node's name, unique in the cluster.
    #[arg(long, value_name = "NAME")]
    pub ha_node: Option<String>,
    /// The leader lease's time to live in seconds: a dead primary is replaced after about
    /// this long [default: 2].
    #[arg(long, value_name = "SECONDS")]
    pub ha_ttl: Option<u64>,
    /// A primary whose commits waited this long (at least 1) for a synchronous standby
    /// acknowledges them alone (durable on this node only; with etcd, once the sync set records it alone, so
    /// that no standby lacking them can take over), until a standby has caught up again
    /// [default: never: strict, commits wait for a standby].
    #[arg(long, value_name = "SECONDS")]
    pub ha_alone_after: Option<f64>,
    /// While commits are acknowledged alone, the log kept for the absent standby is released
    /// past this size (the standby is then seeded again when it returns); 0 for no cap
    /// [default: 1GB].
    #[arg(long, value_name = "SIZE")]
    pub ha_max_slot_size: Option<String>,
    /// A replication peer that sent nothing for this long is dropped: the primary
    /// disconnects a silent standby, a standby leaves a silent primary and connects again
    /// (each side sends a keepalive every 250 ms) [default: 10].
    #[arg(long, value_name = "SECONDS")]
    pub ha_peer_timeout: Option<f64>,
    /// Let `--auth trust` (any user name, no password) or a replication listener without a
    /// secret serve on an address other than loopback (refused otherwise: anyone who can reach
    /// the address could read and write everything).
    #[arg(long)]
    pub allow_remote_trust: bool,
    /// The server's certificate chain (PEM, leaf first): clients that ask for TLS
    /// (sslmode=require, verify-full) get it; needs --tls-key [default: no TLS].
    #[arg(long, value_name = "FILE")]
    pub tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM: PKCS#8, PKCS#1 or SEC1).
    #[arg(long, value_name = "FILE")]
    pub tls_key: Option<PathBuf>,
    /// Refuse TCP clients that do not use TLS (28000); Unix-socket clients need none.
    #[arg(long)]
    pub tls_required: bool,
    /// Replication connections in TLS: the listener presents --tls-cert and takes nothing
    /// else, and this node checks its primary's certificate against --ha-replication-ca.
    #[arg(long)]
    pub ha_replication_tls: bool,
    /// Certificates a standby trusts for its primary's (PEM: a CA's, or the nodes' own)
    /// [default: the --tls-cert file, for nodes that share one certificate].
    #[arg(long, value_name = "FILE")]
    pub ha_replication_ca: Option<PathBuf>,
    /// Device emulation, for measurements only: adds a device class's latency to every I/O of
    /// this node (e.g. a standby whose data directory is on tmpfs standing for a separate
    /// server's low-latency SSD, as the lab's `ha` experiment runs it) [default: real].
    #[arg(long, value_name = "CLASS", value_enum)]
    pub emulate_device: Option<DeviceClassArg>,
}

/// How long a stopping primary lets its standby acknowledge the commits in flight.
const HA_SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(2);
/// Where PostgreSQL itself puts its socket unless built otherwise.
const UNIX_SOCKET_DIR_DEFAULT: &str = "/tmp";
/// The smallest buffer accepted.
const BUFFER_BYTES_MIN: u64 = 1 << 20;

/// A path that may be empty (clap's own path parser refuses an empty value).
fn empty_allowed(value: &str) -> Result<PathBuf, std::convert::Infallible> {
    Ok(PathBuf::from(value))
}

/// The config file, as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    listen: Option<IpAddr>,
    port: Option<u16>,
    unix_socket_dir: Option<PathBuf>,
    data_dir: Option<PathBuf>,
    auth: Option<String>,
    max_connections: Option<usize>,
    work_mem: Option<String>,
    buffer_size: Option<String>,
    event_loops: Option<usize>,
    log_level: Option<String>,
    ha_replication_listen: Option<std::net::SocketAddr>,
    ha_follow: Option<String>,
    ha_etcd: Option<String>,
    ha_cluster: Option<String>,
    ha_node: Option<String>,
    ha_ttl: Option<u64>,
    ha_alone_after: Option<f64>,
    ha_max_slot_size: Option<String>,
    ha_peer_timeout: Option<f64>,
    ha_replication_secret: Option<String>,
    allow_remote_trust: Option<bool>,
    tls_cert: Option<PathBuf>,
    tls_key: Option<PathBuf>,
    tls_required: Option<bool>,
    ha_replication_tls: Option<bool>,
    ha_replication_ca: Option<PathBuf>,
    emulate_device: Option<String>,
    #[serde(default)]
    users: HashMap<String, String>,
}

/// The settings a server runs with, after the file and the flags.
#[derive(Debug)]
pub struct Settings {
    pub listen: IpAddr,
    pub port: u16,
    /// The directory of the Unix-domain socket (None: TCP only).
    pub unix_socket_dir: Option<PathBuf>,
    pub data_dir: PathBuf,
    pub log_level: String,
    /// Bytes of the buffer pool.
    pub buffer_bytes: u64,
    pub server: ServerConfig,
    /// Where standbys connect (a primary with a synchronous standby).
    pub ha_replication_listen: Option<std::net::SocketAddr>,
    /// The primary this standby follows.
    pub ha_follow: Option<String>,
    /// High availability through etcd.
    pub ha: Option<HaConfig>,
    /// Latency added to every I/O (device emulation).
    pub emulate_device: DeviceClassArg,
    /// How a primary waits for its standby.
    pub replication_policy: ReplicationPolicy,
    /// What replication connections prove they know (`ha_replication_secret`, or the
    /// environment's HAYATE_REPLICATION_SECRET), and their TLS (`ha_replication_tls`).
    pub replication_auth: ReplicationAuth,
}

fn read_config(path: &Path) -> CliResult<ConfigFile> {
    let text = std::fs::read_to_string(path)
        .context(|| format!("reading config file {}", path.display()))?;
    toml::from_str(&text).context(|| format!("config file {}", path.display()))
}

/// Defaults, then the config file, then the flags.
pub fn settings(args: &ServeArgs) -> CliResult<Settings> {
    let file = match &args.config {
        Some(path) => read_config(path)?,
        None => ConfigFile::default(),
    };
    let defaults = ServerConfig::default();
    let auth_name = args.auth.clone().or(file.auth).unwrap_or("trust".into());
    let auth = AuthMethod::parse(&auth_name).ok_or_else(|| {
        CliError::new(format!(
            "unknown auth method \"{auth_name}\" (trust, password, md5 or scram-sha-256)"
        ))
    })?;
    if auth != AuthMethod::Trust && file.users.is_empty() {
        return Err(CliError::new(format!(
            "auth method {} needs users: add a [users] table (name = \"password\") to the \
             config file",
            auth.name()
        )));
    }
    let log_level = args
        .log_level
        .clone()
        .or(file.log_level)
        .unwrap_or("warn".into());
    if log_level.parse::<log::LevelFilter>().is_err() {
        return Err(CliError::new(format!(
            "unknown log level \"{log_level}\" (error, warn, info, debug or trace)"
        )));
    }
    let max_connections = args
        .max_connections
        .or(file.max_connections)
        .unwrap_or(defaults.max_connections);
    if max_connections == 0 {
        return Err(CliError::new("max_connections must be at least 1"));
    }
    let work_mem = args
        .work_mem
        .clone()
        .or(file.work_mem)
        .unwrap_or(defaults.work_mem);
    hayate_sql::exec::parse_work_mem(&work_mem)
        .map_err(|error| CliError::new(format!("work_mem: {}", error.message)))?;
    let buffer_bytes = match args.buffer_size.clone().or(file.buffer_size) {
        Some(buffer_size) => hayate_sql::exec::memory_size_bytes(&buffer_size)
            .filter(|bytes| *bytes >= BUFFER_BYTES_MIN)
            .ok_or_else(|| {
                CliError::new(format!(
                    "invalid buffer_size \"{buffer_size}\": a size of at least 1MB such as \
                     128MB or 4GB (units B, kB, MB, GB, TB; a bare number is kB)"
                ))
            })?,
        None => hayate::memory::default_buffer_bytes(),
    };
    let emulate_device = match (args.emulate_device, file.emulate_device) {
        (Some(class), _) => class,
        (None, None) => DeviceClassArg::Real,
        (None, Some(name)) => {
            <DeviceClassArg as clap::ValueEnum>::from_str(&name, true).map_err(|_| {
                CliError::new(format!(
                    "unknown emulate_device \"{name}\" (real, low-latency, nand or external)"
                ))
            })?
        }
    };
    let alone_after = match args.ha_alone_after.or(file.ha_alone_after) {
        None => None,
        // At least a second: shorter, every slow acknowledgement would send the primary alone
        // and the sync set would flap between alone and the standby.
        Some(seconds) if seconds.is_finite() && (1.0..=86_400.0).contains(&seconds) => {
            Some(std::time::Duration::from_secs_f64(seconds))
        }
        Some(seconds) => {
            return Err(CliError::new(format!(
                "ha_alone_after must be 1 to 86400 seconds, not {seconds}"
            )))
        }
    };
    let max_slot_bytes = match args.ha_max_slot_size.clone().or(file.ha_max_slot_size) {
        None => ReplicationPolicy::default().max_slot_bytes,
        Some(size) if size.trim() == "0" => None,
        Some(size) => Some(hayate_sql::exec::memory_size_bytes(&size).ok_or_else(|| {
            CliError::new(format!(
                "invalid ha_max_slot_size \"{size}\": a size such as 1GB or 512MB, or 0 for no \
                 cap"
            ))
        })?)
        .filter(|bytes| *bytes > 0),
    };
    let peer_timeout = match args.ha_peer_timeout.or(file.ha_peer_timeout) {
        None => ReplicationPolicy::default().peer_timeout,
        Some(seconds) if (1.0..=3600.0).contains(&seconds) => {
            std::time::Duration::from_secs_f64(seconds)
        }
        Some(seconds) => {
            return Err(CliError::new(format!(
                "ha_peer_timeout must be 1 to 3600 seconds, not {seconds}"
            )))
        }
    };
    let replication_policy = ReplicationPolicy {
        alone_after,
        max_slot_bytes,
        peer_timeout,
    };
    let ha_follow = args.ha_follow.clone().or(file.ha_follow);
    let ha_replication_listen = args.ha_replication_listen.or(file.ha_replication_listen);
    let listen = args
        .listen
        .or(file.listen)
        .unwrap_or(IpAddr::from([127, 0, 0, 1]));
    let replication_secret = std::env::var("HAYATE_REPLICATION_SECRET")
        .ok()
        .filter(|secret| !secret.is_empty())
        .or(file.ha_replication_secret)
        .filter(|secret| !secret.is_empty())
        .map(|secret| ReplicationSecret::new(secret.as_bytes()));
    let allow_remote_trust = args.allow_remote_trust || file.allow_remote_trust.unwrap_or(false);
    if !allow_remote_trust {
        if auth == AuthMethod::Trust && !listen.is_loopback() {
            return Err(CliError::new(format!(
                "auth trust on {listen}, which is not a loopback address, would let anyone who \
                 reaches it in as any user: choose password, md5 or scram-sha-256 (with \
                 [users] in the config file), or pass --allow-remote-trust"
            )));
        }
        if let Some(address) = ha_replication_listen {
            if !address.ip().is_loopback() && replication_secret.is_none() {
                return Err(CliError::new(format!(
                    "the replication listener on {address} is not on a loopback address: set \
                     ha_replication_secret in the config file (or HAYATE_REPLICATION_SECRET), \
                     the same on every node, or pass --allow-remote-trust"
                )));
            }
        }
    }
    let tls_cert = args.tls_cert.clone().or(file.tls_cert);
    let tls = match (tls_cert.clone(), args.tls_key.clone().or(file.tls_key)) {
        (None, None) => None,
        (Some(certificate), Some(key)) => {
            Some(hayate_server::tls::load(&certificate, &key).context(|| "TLS".to_string())?)
        }
        (Some(_), None) | (None, Some(_)) => {
            return Err(CliError::new(
                "tls_cert and tls_key go together: the certificate chain and its private key",
            ))
        }
    };
    let tls_required = args.tls_required || file.tls_required.unwrap_or(false);
    if tls_required && tls.is_none() {
        return Err(CliError::new(
            "tls_required needs tls_cert and tls_key (the server's certificate and key)",
        ));
    }
    let replication_tls = if args.ha_replication_tls || file.ha_replication_tls.unwrap_or(false) {
        let (Some(server), Some(certificate)) = (tls.clone(), tls_cert) else {
            return Err(CliError::new(
                "ha_replication_tls needs tls_cert and tls_key (the certificate the replication \
                 listener presents)",
            ));
        };
        let trusted = args
            .ha_replication_ca
            .clone()
            .or(file.ha_replication_ca)
            .unwrap_or(certificate);
        let client = hayate_server::tls::load_trusted(&trusted)
            .context(|| "ha_replication_ca".to_string())?;
        Some(ReplicationTls { server, client })
    } else {
        if args.ha_replication_ca.is_some() || file.ha_replication_ca.is_some() {
            return Err(CliError::new(
                "ha_replication_ca is for ha_replication_tls, which is off",
            ));
        }
        None
    };
    let port = args.port.or(file.port).unwrap_or(5432);
    let ha = match args.ha_etcd.clone().or(file.ha_etcd) {
        None => None,
        Some(etcd) => {
            let node = args.ha_node.clone().or(file.ha_node).ok_or_else(|| {
                CliError::new("--ha-etcd needs --ha-node NAME (this node's name in the cluster)")
            })?;
            let replication = ha_replication_listen.ok_or_else(|| {
                CliError::new(
                    "--ha-etcd needs --ha-replication-listen HOST:PORT (where standbys reach \
                     this node)",
                )
            })?;
            if ha_follow.is_some() {
                return Err(CliError::new(
                    "--ha-follow and --ha-etcd exclude each other: with etcd the leader key \
                     names the primary",
                ));
            }
            let ttl = args.ha_ttl.or(file.ha_ttl).unwrap_or(2);
            if !(1..=3600).contains(&ttl) {
                return Err(CliError::new("ha_ttl must be 1 to 3600 seconds"));
            }
            Some(HaConfig {
                etcd,
                cluster: args
                    .ha_cluster
                    .clone()
                    .or(file.ha_cluster)
                    .unwrap_or("hayate".into()),
                node,
                ttl: std::time::Duration::from_secs(ttl),
                replication: replication.to_string(),
                client: format!("{listen}:{port}"),
            })
        }
    };
    Ok(Settings {
        ha,
        emulate_device,
        replication_policy,
        replication_auth: ReplicationAuth {
            secret: replication_secret,
            tls: replication_tls,
        },
        ha_replication_listen,
        ha_follow,
        listen,
        port,
        unix_socket_dir: Some(
            args.unix_socket_dir
                .clone()
                .or(file.unix_socket_dir)
                .unwrap_or(UNIX_SOCKET_DIR_DEFAULT.into()),
        )
        .filter(|dir| !dir.as_os_str().is_empty()),
        data_dir: args
            .data_dir
            .clone()
            .or(file.data_dir)
            .unwrap_or("./hayate-data".into()),
        log_level,
        buffer_bytes,
        server: ServerConfig {
            auth,
            users: file.users,
            max_connections,
            work_mem,
            event_loops: args
                .event_loops
                .or(file.event_loops)
                .unwrap_or(defaults.event_loops),
            tls,
            tls_required,
            autoanalyze_naptime: defaults.autoanalyze_naptime,
        },
    })
}

/// The log level to start logging with (before `run`; a bad config falls back to warn and
/// `run` reports it).
pub fn log_level(args: &ServeArgs) -> String {
    settings(args).map_or("warn".into(), |settings| settings.log_level)
}

pub fn run(args: &ServeArgs) -> CliResult<()> {
    let settings = settings(args)?;
    let data_dir = &settings.data_dir;
    std::fs::create_dir_all(data_dir)
        .context(|| format!("creating data directory {}", data_dir.display()))?;
    if let Some(ha) = settings.ha.clone() {
        return ha::run_ha(&settings, ha);
    }
    let db = open_database(&settings, settings.ha_follow.is_some())?;
    let cluster = open_cluster(&db)?;
    let replication = start_replication(&settings, &db, &cluster)?;
    let primary = Arc::new(parking_lot::Mutex::new(replication.primary.clone()));
    let result = serve_until(&settings, cluster, &primary, None).map(|_| ());
    replication.stop();
    result.and(close_database(db))
}

/// The engine's settings of this server; `standby`: opened to follow a primary. A node of a
/// replicated pair holds its checkpoints until its log is known to be held by the node that
/// may take over, so that it can be rewound should that node's log go on without its tail
/// (`DatabaseConfig::hold_checkpoints`).
fn database_config(settings: &Settings, standby: bool) -> DatabaseConfig {
    DatabaseConfig {
        buffer_size: BufferSize::Bytes(settings.buffer_bytes),
        standby,
        hold_checkpoints: settings.ha.is_some() || settings.ha_replication_listen.is_some(),
        ..DatabaseConfig::default()
    }
}

fn open_database(settings: &Settings, standby: bool) -> CliResult<Database> {
    let data_dir = &settings.data_dir;
    let config = database_config(settings, standby);
    let db = match settings.emulate_device {
        DeviceClassArg::Real => Database::open(data_dir, config),
        class => {
            log::warn!(
                "device emulation: every I/O takes at least the {} class's latency (pread and \
                 pwrite underneath, sleeping waits)",
                class.name()
            );
            // Plain reads and writes underneath (on tmpfs, io_uring would hand every write to
            // a kernel worker thread, CPU a real device does not cost), and sleeping waits:
            // the node stands for a server of its own.
            hayate_engine::SyncIo::new(data_dir).and_then(|io| {
                let io = LatencyIo::sleeping(Arc::new(io), class.class());
                Database::open_with_io(Arc::new(io), config)
            })
        }
    }
    .context(|| format!("opening database in {}", data_dir.display()))?;
    Ok(db)
}

fn open_cluster(db: &Database) -> CliResult<Arc<Cluster>> {
    Cluster::open(db.clone()).map_err(|error| CliError::new(format!("catalog: {error}")))
}

fn close_database(db: Database) -> CliResult<()> {
    let closed = match db.close() {
        // Commits were logged here but never acknowledged (their standby was gone): no final
        // checkpoint; the next start recovers them from the log.
        Err(hayate_engine::Error::NotPrimary(reason)) => {
            eprintln!("hayate: no final checkpoint: {reason}");
            Ok(())
        }
        other => other.context(|| "closing the database".into()),
    };
    eprintln!("hayate: stopped");
    closed
}

/// Why `serve_until` returned.
#[derive(Debug, PartialEq, Eq)]
enum Served {
    /// SIGTERM or SIGINT.
    Signal,
    /// The node changes role (HA): serve again after reopening.
    Restart,
}

/// Serves SQL until a signal or, with `restart`, until it is notified. A primary in
/// `primary` (when there is one) gets `HA_SHUTDOWN_GRACE` after a signal for its standby to
/// acknowledge the commits in flight; then they fail (57P01) rather than hold their
/// connections, and so the shutdown, forever.
fn serve_until(
    settings: &Settings,
    cluster: Arc<Cluster>,
    primary: &Arc<parking_lot::Mutex<Option<Arc<Primary>>>>,
    restart: Option<Arc<tokio::sync::Notify>>,
) -> CliResult<Served> {
    let runtime = hayate_server::runtime().context(|| "starting the async runtime".into())?;
    let address = (settings.listen, settings.port);
    let data_dir = &settings.data_dir;
    let served = Arc::new(parking_lot::Mutex::new(Served::Signal));
    let result = runtime.block_on(async {
        let tcp = tokio::net::TcpListener::bind(address)
            .await
            .context(|| format!("listening on {}:{}", settings.listen, settings.port))?;
        let unix =
            match &settings.unix_socket_dir {
                Some(dir) => Some(UnixSocket::bind(dir, settings.port).context(|| {
                    format!("listening on a Unix-domain socket in {}", dir.display())
                })?),
                None => None,
            };
        let local = unix.as_ref().map_or(String::new(), |unix| {
            format!(" and {}", unix.path().display())
        });
        let tls = match (&settings.server.tls, settings.server.tls_required) {
            (None, _) => "",
            (Some(_), false) => ", TLS",
            (Some(_), true) => ", TLS required",
        };
        eprintln!(
            "hayate: serving PostgreSQL protocol on {}:{}{local} (data in {}, buffer {} MiB, \
             auth {}{tls})",
            settings.listen,
            settings.port,
            data_dir.display(),
            settings.buffer_bytes >> 20,
            settings.server.auth.name()
        );
        let listeners = Listeners { tcp, unix };
        let shutdown = async {
            let restarted = async {
                match &restart {
                    Some(notify) => notify.notified().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = shutdown_signal() => {
                    if let Some(primary) = primary.lock().clone() {
                        std::thread::spawn(move || {
                            std::thread::sleep(HA_SHUTDOWN_GRACE);
                            primary.release_waiters();
                        });
                    }
                }
                _ = restarted => *served.lock() = Served::Restart,
            }
        };
        hayate_server::serve_with(listeners, cluster, settings.server.clone(), shutdown)
            .await
            .context(|| "serving".into())
    });
    runtime.shutdown_timeout(std::time::Duration::from_secs(5));
    result?;
    let served = std::mem::replace(&mut *served.lock(), Served::Signal);
    Ok(served)
}

/// The replication role a server runs in (`--ha-follow`, `--ha-replication-listen`).
struct Replication {
    primary: Option<Arc<Primary>>,
    standby: Option<hayate_server::replication::Standby>,
}

impl Replication {
    fn stop(self) {
        if let Some(standby) = self.standby {
            standby.stop();
        }
        if let Some(primary) = self.primary {
            primary.stop();
        }
    }
}

/// Starts following the primary (a standby) or serving standbys (a primary).
fn start_replication(
    settings: &Settings,
    db: &Database,
    cluster: &Arc<Cluster>,
) -> CliResult<Replication> {
    use hayate_server::replication::{Standby, StandbyConfig};
    if let Some(primary) = &settings.ha_follow {
        // A replication address makes the promoted node a primary with a synchronous standby
        // of its own; without one it acknowledges alone after `hayate promote`.
        let successor = match settings.ha_replication_listen {
            Some(address) => {
                let successor =
                    Primary::prepare(db.clone(), address, None, settings.replication_auth.clone())
                        .context(|| format!("listening for standbys on {address}"))?;
                successor.set_policy(settings.replication_policy);
                cluster.set_replication_source(Some(successor.stat_source()));
                Some(successor)
            }
            None => None,
        };
        let config = StandbyConfig {
            primary: primary.clone(),
            dir: settings.data_dir.clone(),
            name: String::new(),
            successor,
            auth: settings.replication_auth.clone(),
            peer_timeout: settings.replication_policy.peer_timeout,
        };
        let standby = Standby::start(db.clone(), cluster.clone(), config)
            .context(|| "starting the standby".into())?;
        eprintln!("hayate: standby of {primary} (read-only until `hayate promote`)");
        return Ok(Replication {
            primary: None,
            standby: Some(standby),
        });
    }
    let primary = match settings.ha_replication_listen {
        Some(address) => {
            let identity = Identity::load_or_new(&settings.data_dir)
                .context(|| "reading the identity".into())?;
            identity
                .store(&settings.data_dir)
                .context(|| "writing the identity".into())?;
            let primary = Primary::start(
                db.clone(),
                address,
                identity,
                None,
                settings.replication_auth.clone(),
            )
            .context(|| format!("listening for standbys on {address}"))?;
            primary.set_policy(settings.replication_policy);
            cluster.set_replication_source(Some(primary.stat_source()));
            eprintln!(
                "hayate: primary; standbys connect to {} (commits wait for one)",
                primary.address()
            );
            Some(primary)
        }
        None => None,
    };
    Ok(Replication {
        primary,
        standby: None,
    })
}

/// `hayate promote`: asks the standby serving `dir` to take over (it watches for the file).
pub fn request_promotion(dir: &Path) -> CliResult<()> {
    let file = dir.join(hayate_server::replication::PROMOTE_FILE);
    if !dir.is_dir() {
        return Err(CliError::new(format!(
            "{} is not a directory",
            dir.display()
        )));
    }
    std::fs::write(&file, b"").context(|| format!("writing {}", file.display()))?;
    eprintln!("hayate: promotion requested ({})", file.display());
    Ok(())
}

/// Completes on SIGTERM or SIGINT.
pub(super) async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let terminate = signal(SignalKind::terminate());
    let interrupt = signal(SignalKind::interrupt());
    match (terminate, interrupt) {
        (Ok(mut terminate), Ok(mut interrupt)) => {
            tokio::select! {
                _ = terminate.recv() => {}
                _ = interrupt.recv() => {}
            }
        }
        _ => {
            log::error!("cannot install signal handlers; stop the server with SIGKILL");
            std::future::pending::<()>().await
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(config: Option<PathBuf>) -> ServeArgs {
        ServeArgs {
            config,
            listen: None,
            port: None,
            unix_socket_dir: None,
            data_dir: None,
            auth: None,
            max_connections: None,
            work_mem: None,
            buffer_size: None,
            event_loops: None,
            log_level: None,
            ha_replication_listen: None,
            ha_follow: None,
            ha_etcd: None,
            ha_cluster: None,
            ha_node: None,
            ha_ttl: None,
            ha_alone_after: None,
            ha_max_slot_size: None,
            ha_peer_timeout: None,
            allow_remote_trust: false,
            tls_cert: None,
            tls_key: None,
            tls_required: false,
            ha_replication_tls: false,
            ha_replication_ca: None,
            emulate_device: None,
        }
    }

    #[test]
    fn replication_and_emulation_settings_come_from_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hayate.toml");
        std::fs::write(
            &path,
            "ha_alone_after = 2.5\nha_max_slot_size = \"64MB\"\nemulate_device = \"low-latency\"\n\
             ha_replication_secret = \"s3cret\"\nlisten = \"0.0.0.0\"\nallow_remote_trust = true\n",
        )
        .unwrap();
        let from_file = settings(&args(Some(path.clone()))).unwrap();
        assert_eq!(
            from_file.replication_policy.alone_after,
            Some(std::time::Duration::from_millis(2500))
        );
        assert_eq!(from_file.replication_policy.max_slot_bytes, Some(64 << 20));
        assert_eq!(from_file.emulate_device, DeviceClassArg::LowLatency);
        assert!(from_file.replication_auth.secret.is_some());
        std::fs::write(&path, "ha_max_slot_size = \"0\"\n").unwrap();
        let defaults = settings(&args(Some(path))).unwrap();
        assert_eq!(
            defaults.replication_policy.max_slot_bytes, None,
            "0: no cap"
        );
        assert_eq!(
            defaults.replication_policy.alone_after, None,
            "strict by default"
        );
        assert_eq!(defaults.emulate_device, DeviceClassArg::Real);
    }

    #[test]
    fn an_empty_socket_directory_flag_turns_the_socket_off() {
        use clap::Parser;
        #[derive(Parser)]
        struct Command {
            #[command(flatten)]
            serve: ServeArgs,
        }
        let parsed = Command::try_parse_from(["serve", "--unix-socket-dir", ""]).unwrap();
        assert_eq!(settings(&parsed.serve).unwrap().unix_socket_dir, None);
        let parsed = Command::try_parse_from(["serve", "--unix-socket-dir", "/run/x"]).unwrap();
        assert_eq!(
            settings(&parsed.serve).unwrap().unix_socket_dir,
            Some(PathBuf::from("/run/x"))
        );
    }

    #[test]
    fn flags_override_the_config_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hayate.toml");
        std::fs::write(
            &path,
            "port = 6000\nunix_socket_dir = \"\"\ndata_dir = \"/srv/hayate\"\nauth = \"md5\"\nwork_mem = \"64MB\"\n\
             max_connections = 7\nbuffer_size = \"1GB\"\n[users]\nalice = \"secret\"\n",
        )
        .unwrap();
        let from_file = settings(&args(Some(path.clone()))).unwrap();
        assert_eq!(from_file.port, 6000);
        assert_eq!(
            from_file.unix_socket_dir, None,
            "an empty directory turns it off"
        );
        assert_eq!(from_file.data_dir, PathBuf::from("/srv/hayate"));
        assert_eq!(from_file.server.auth, AuthMethod::Md5);
        assert_eq!(from_file.server.work_mem, "64MB");
        assert_eq!(from_file.server.max_connections, 7);
        assert_eq!(from_file.buffer_bytes, 1 << 30);
        assert_eq!(from_file.server.users["alice"], "secret");
        assert_eq!(from_file.listen, IpAddr::from([127, 0, 0, 1]));

        let mut flags = args(Some(path));
        flags.port = Some(6001);
        flags.unix_socket_dir = Some("/run/hayate".into());
        flags.auth = Some("scram-sha-256".into());
        flags.work_mem = Some("1MB".into());
        flags.buffer_size = Some("64MB".into());
        let overridden = settings(&flags).unwrap();
        assert_eq!(overridden.port, 6001);
        assert_eq!(
            overridden.unix_socket_dir,
            Some(PathBuf::from("/run/hayate"))
        );
        assert_eq!(overridden.server.auth, AuthMethod::ScramSha256);
        assert_eq!(overridden.server.work_mem, "1MB");
        assert_eq!(overridden.buffer_bytes, 64 << 20);
        assert_eq!(overridden.data_dir, PathBuf::from("/srv/hayate"));

        let defaults = settings(&args(None)).unwrap();
        assert_eq!(defaults.port, 5432);
        assert_eq!(defaults.unix_socket_dir, Some(PathBuf::from("/tmp")));
        assert_eq!(defaults.server.auth, AuthMethod::Trust);
        assert_eq!(
            defaults.buffer_bytes,
            hayate::memory::default_buffer_bytes()
        );
        assert!(defaults.buffer_bytes >= 128 << 20);
    }

    #[test]
    fn bad_configs_are_clear_errors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.toml");
        for (text, expected) in [
            ("prot = 1\n", "unknown field"),
            ("auth = \"kerberos\"\n", "unknown auth method"),
            ("auth = \"md5\"\n", "needs users"),
            ("port = \"x\"\n", "config file"),
            ("log_level = \"loud\"\n", "unknown log level"),
            ("buffer_size = \"lots\"\n", "invalid buffer_size"),
            ("buffer_size = \"16kB\"\n", "invalid buffer_size"),
            ("work_mem = \"4 parsecs\"\n", "work_mem: invalid value"),
            ("work_mem = \"1kB\"\n", "outside the valid range"),
            ("ha_etcd = \"http://127.0.0.1:2379\"\n", "needs --ha-node"),
            (
                "ha_etcd = \"http://127.0.0.1:2379\"\nha_node = \"a\"\n",
                "needs --ha-replication-listen",
            ),
            (
                "ha_etcd = \"http://127.0.0.1:2379\"\nha_node = \"a\"\n\
                 ha_replication_listen = \"127.0.0.1:6433\"\nha_ttl = 0\n",
                "ha_ttl must be",
            ),
            (
                "ha_etcd = \"http://127.0.0.1:2379\"\nha_node = \"a\"\n\
                 ha_replication_listen = \"127.0.0.1:6433\"\nha_follow = \"127.0.0.1:1\"\n",
                "exclude each other",
            ),
            ("ha_alone_after = -1\n", "ha_alone_after must be"),
            ("ha_alone_after = 0.5\n", "ha_alone_after must be"),
            ("ha_peer_timeout = 0\n", "ha_peer_timeout must be"),
            ("ha_max_slot_size = \"big\"\n", "invalid ha_max_slot_size"),
            ("emulate_device = \"floppy\"\n", "unknown emulate_device"),
            ("listen = \"0.0.0.0\"\n", "--allow-remote-trust"),
            (
                "ha_replication_listen = \"0.0.0.0:6433\"\n",
                "ha_replication_secret",
            ),
            ("tls_cert = \"server.pem\"\n", "go together"),
            ("tls_required = true\n", "tls_required needs"),
            (
                "tls_cert = \"/nonexistent/a.pem\"\ntls_key = \"/nonexistent/a.key\"\n",
                "TLS: /nonexistent/a.pem",
            ),
            (
                "ha_replication_tls = true\n",
                "ha_replication_tls needs tls_cert",
            ),
            (
                "ha_replication_ca = \"ca.pem\"\n",
                "ha_replication_tls, which is off",
            ),
        ] {
            std::fs::write(&path, text).unwrap();
            let error = settings(&args(Some(path.clone()))).unwrap_err().to_string();
            assert!(error.contains(expected), "{text}: {error}");
        }
        let missing = settings(&args(Some(dir.path().join("none.toml")))).unwrap_err();
        assert!(missing.to_string().contains("reading config file"));
    }
}
