//! The standby's side of replication (module documentation of `replication`).

use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use hayate_engine::Database;
use hayate_sql::Cluster;
use parking_lot::{Condvar, Mutex};

use super::{
    answer_challenge, keepalive_interval, lsn_of, read_message_within, write_message, Identity,
    Link, Primary, ReplicationAuth, HELLO_MAGIC, POLL, PROMOTE_FILE, RECONNECT_PAUSE,
    REFUSED_PAUSE,
};

/// Where a standby is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StandbyState {
    /// Following (or trying to reach) its primary.
    Following,
    /// Promoted: the database takes writes; this is its identity (with the new epoch).
    Promoted(Identity),
    /// Its primary refused it: its data must be seeded again (why).
    NeedsSeed(String),
    /// Its log forked from its primary's: it must be rewound to the fork point
    /// (`Database::rewind`), or else seeded again.
    NeedsRewind {
        /// Where the primary's log left this node's.
        fork: u64,
        /// The primary's words.
        why: String,
    },
    /// Stopped by its owner.
    Stopped,
}

/// What a standby follows and how it calls itself.
#[derive(Clone)]
pub struct StandbyConfig {
    /// The primary's replication address.
    pub primary: String,
    /// The data directory (identity file, `promote` file).
    pub dir: PathBuf,
    /// The name the primary knows it by (the synchronous set records it).
    pub name: String,
    /// The primary this node becomes when promoted (`Primary::prepare`d): installed as the
    /// log shipper before the first write, so the new primary acknowledges nothing its own
    /// standby lacks. None: the promoted node acknowledges alone (manual promotion without a
    /// replication address).
    pub successor: Option<Arc<Primary>>,
    /// The replication secret the primary asks for and TLS (`ReplicationAuth`).
    pub auth: ReplicationAuth,
    /// A primary that sent nothing for this long (it sends a keepalive at least every
    /// `KEEPALIVE_INTERVAL`) is left, and the standby connects again (to the primary it was
    /// last told of).
    pub peer_timeout: Duration,
}

struct Shared {
    db: Database,
    cluster: Arc<Cluster>,
    config: StandbyConfig,
    primary: Mutex<String>,
    identity: Mutex<Option<Identity>>,
    stop: AtomicBool,
    /// Nonzero: promote, to at least this epoch.
    promote_to: AtomicU64,
    state: Mutex<StandbyState>,
    received: Received,
}

/// The standby's side: a thread that follows the primary until promoted or stopped, and one
/// that applies what it received (so acknowledging the next bytes never waits for applying).
pub struct Standby {
    shared: Arc<Shared>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

/// Wakes the applier: bytes were received.
#[derive(Default)]
struct Received {
    pending: Mutex<bool>,
    wake: Condvar,
}

impl Received {
    fn notify(&self) {
        *self.pending.lock() = true;
        self.wake.notify_one();
    }

    /// Waits until something was received (or `POLL` passed); true if it was.
    fn wait(&self) -> bool {
        let mut pending = self.pending.lock();
        if !*pending {
            self.wake.wait_for(&mut pending, POLL);
        }
        std::mem::take(&mut *pending)
    }
}

/// The applier: applies what was received and reloads the SQL catalog when the applied
/// records changed it.
fn apply_loop(shared: &Shared) {
    let (db, cluster) = (&shared.db, &shared.cluster);
    while !shared.stop.load(Ordering::Acquire) && db.is_standby() {
        if !shared.received.wait() {
            continue;
        }
        let applied = match db.apply_received() {
            Ok(applied) => applied,
            Err(error) => {
                log::error!("replication: applying the primary's log: {error}");
                std::thread::sleep(REFUSED_PAUSE);
                continue;
            }
        };
        let catalog_changed = applied.ddl
            || cluster
                .catalog_trees()
                .iter()
                .any(|tree| applied.trees.contains(tree));
        if catalog_changed {
            if let Err(error) = cluster.reload() {
                log::error!("replication: reloading the catalog: {error}");
            }
        }
    }
}

impl Standby {
    /// Makes `db` a standby (if it is not one already) and follows the primary named in
    /// `config`. A `promote` file appearing in the data directory promotes it.
    pub fn start(
        db: Database,
        cluster: Arc<Cluster>,
        config: StandbyConfig,
    ) -> io::Result<Standby> {
        let identity = Identity::load(&config.dir)?;
        let shared = Arc::new(Shared {
            db,
            cluster,
            primary: Mutex::new(config.primary.clone()),
            config,
            identity: Mutex::new(identity),
            stop: AtomicBool::new(false),
            promote_to: AtomicU64::new(0),
            state: Mutex::new(StandbyState::Following),
            received: Received::default(),
        });
        let _ = std::fs::remove_file(shared.config.dir.join(PROMOTE_FILE));
        let applier_shared = shared.clone();
        let applier = std::thread::Builder::new()
            .name("hayate-repl-apply".into())
            .spawn(move || apply_loop(&applier_shared))?;
        let follower_shared = shared.clone();
        let follower = std::thread::Builder::new()
            .name("hayate-repl-follow".into())
            .spawn(move || {
                let end = follow(&follower_shared);
                *follower_shared.state.lock() = end;
            })?;
        Ok(Standby {
            shared,
            threads: Mutex::new(vec![follower, applier]),
        })
    }

    /// Where it is now.
    pub fn state(&self) -> StandbyState {
        self.shared.state.lock().clone()
    }

    /// Follows another primary from its next connection on.
    pub fn set_primary(&self, primary: &str) {
        *self.shared.primary.lock() = primary.to_string();
    }

    /// Its log end and the position past the last record applied.
    pub fn positions(&self) -> (u64, u64) {
        (self.shared.db.log_end_lsn(), self.shared.db.applied_lsn())
    }

    /// The primary it follows.
    pub fn primary(&self) -> String {
        self.shared.primary.lock().clone()
    }

    /// The identity of its data (None until a primary sent one, for data copied offline).
    pub fn identity(&self) -> Option<Identity> {
        self.shared.identity.lock().clone()
    }

    /// Asks it to promote itself, starting an epoch numbered at least `epoch` (and above its
    /// own); `state` says when it did.
    pub fn request_promotion(&self, epoch: u64) {
        self.shared
            .promote_to
            .store(epoch.max(1), Ordering::Release);
    }

    /// Stops following (the database stays a standby unless it was promoted).
    pub fn stop(&self) {
        self.shared.stop.store(true, Ordering::Release);
        for thread in self.threads.lock().drain(..) {
            let _ = thread.join();
        }
        let mut state = self.shared.state.lock();
        if *state == StandbyState::Following {
            *state = StandbyState::Stopped;
        }
    }
}

impl Shared {
    fn promotion_requested(&self) -> bool {
        self.promote_to.load(Ordering::Acquire) != 0 || self.config.dir.join(PROMOTE_FILE).exists()
    }
}

/// The standby's loop: connect, receive, acknowledge, apply; promote when asked. Returns how
/// it ended.
fn follow(shared: &Shared) -> StandbyState {
    while !shared.stop.load(Ordering::Acquire) {
        if shared.promotion_requested() {
            return promote(shared);
        }
        let primary = shared.primary.lock().clone();
        match follow_once(shared, &primary) {
            Ok(()) => std::thread::sleep(RECONNECT_PAUSE),
            Err(error) if error.kind() == io::ErrorKind::PermissionDenied => {
                log::error!("replication: {error}");
                std::thread::sleep(REFUSED_PAUSE);
            }
            Err(error) if error.kind() == io::ErrorKind::InvalidInput => {
                log::error!("replication: {error}");
                if let Some(forked) = error.get_ref().and_then(|e| e.downcast_ref::<Forked>()) {
                    return StandbyState::NeedsRewind {
                        fork: forked.fork,
                        why: forked.why.clone(),
                    };
                }
                return StandbyState::NeedsSeed(error.to_string());
            }
            Err(error) => {
                log::warn!("replication: following {primary}: {error}");
                std::thread::sleep(RECONNECT_PAUSE);
            }
        }
    }
    StandbyState::Stopped
}

fn promote(shared: &Shared) -> StandbyState {
    let _ = std::fs::remove_file(shared.config.dir.join(PROMOTE_FILE));
    let successor = shared.config.successor.clone();
    let shipper = successor
        .clone()
        .map(|primary| primary as Arc<dyn hayate_engine::LogShipper>);
    let shipped_from = match shared.db.promote_shipping_to(shipper) {
        Ok(shipped_from) => shipped_from,
        Err(error) => {
            log::error!("replication: promotion failed: {error}");
            return StandbyState::NeedsSeed(format!("promotion failed: {error}"));
        }
    };
    let mut identity = shared
        .identity
        .lock()
        .clone()
        .unwrap_or_else(Identity::new_system);
    let epoch = (identity.current().number + 1).max(shared.promote_to.load(Ordering::Acquire));
    // The epoch starts where the log ended when the node opened for writes (`shipped_from`),
    // not where it ends now: a write since then is of the new epoch, and the start is the
    // fork point an old primary is rewound to.
    identity.begin_epoch(epoch, shipped_from);
    if let Err(error) = identity.store(&shared.config.dir) {
        log::error!("replication: writing the identity after promotion: {error}");
    }
    log::warn!(
        "replication: promoted, this node takes writes now (epoch {epoch} from log position \
         {shipped_from})"
    );
    if let Err(error) = shared.cluster.reload() {
        log::error!("replication: reloading the catalog after promotion: {error}");
    }
    if let Some(primary) = successor {
        if let Err(error) = primary.activate(identity.clone(), shipped_from) {
            log::error!("replication: serving standbys after promotion: {error}");
        }
    }
    StandbyState::Promoted(identity)
}

/// `A`: the log is durable up to `durable` and applied up to `applied`.
fn acknowledge(socket: &mut Link, durable: u64, applied: u64) -> io::Result<()> {
    write_message(
        socket,
        b'A',
        &[&durable.to_be_bytes(), &applied.to_be_bytes()],
    )
}

/// The primary's `W`: this node's log left the primary's at `fork`.
#[derive(Debug)]
struct Forked {
    fork: u64,
    why: String,
}

impl std::fmt::Display for Forked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "this node's log forked from its primary's at {}: {}",
            self.fork, self.why
        )
    }
}

impl std::error::Error for Forked {}

/// One connection to the primary, until it ends, a stop, or a promotion request. A refusal
/// that only a new seed or a rewind can mend is an `InvalidInput` error (`Forked` inside for
/// a rewind).
fn follow_once(shared: &Shared, primary: &str) -> io::Result<()> {
    let db = &shared.db;
    let abandon = || shared.stop.load(Ordering::Acquire) || shared.promotion_requested();
    let mut socket = super::connect(primary, shared.config.auth.tls.as_ref(), &abandon)?;
    answer_challenge(&mut socket, shared.config.auth.secret.as_ref(), &abandon)?;
    let timeout = shared.config.peer_timeout;
    let need = db.log_end_lsn();
    let (system_id, epoch) = shared.identity.lock().as_ref().map_or((0, 0), |identity| {
        (identity.system_id, identity.current().number)
    });
    write_message(
        &mut socket,
        b'H',
        &[
            HELLO_MAGIC,
            &need.to_be_bytes(),
            &system_id.to_be_bytes(),
            &epoch.to_be_bytes(),
            shared.config.name.as_bytes(),
        ],
    )?;
    // What this node holds durably counts at once: a standby seeded by a base backup may
    // hold bytes the primary's commits still wait for.
    let mut reported_applied = db.applied_lsn();
    acknowledge(&mut socket, db.log_local_durable_lsn(), reported_applied)?;
    let mut acknowledged = Instant::now();
    let mut heard = Instant::now();
    log::info!("replication: following {primary} from log position {need}");
    loop {
        if shared.stop.load(Ordering::Acquire) || shared.promotion_requested() {
            return Ok(());
        }
        let Some((tag, payload)) = read_message_within(&mut socket, timeout)? else {
            if heard.elapsed() >= timeout {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "the primary sent nothing for {:.1} s: connecting again",
                        heard.elapsed().as_secs_f64()
                    ),
                ));
            }
            // Idle: report what the applier did since (pg_stat_replication's replay), and
            // at least every KEEPALIVE_INTERVAL that this standby is alive.
            let applied = db.applied_lsn();
            if applied > reported_applied || acknowledged.elapsed() >= keepalive_interval(timeout) {
                reported_applied = applied;
                acknowledge(&mut socket, db.log_local_durable_lsn(), applied)?;
                acknowledged = Instant::now();
            }
            continue;
        };
        heard = Instant::now();
        match tag {
            b'D' => {
                // The primary's flushes overlap: take every range already here in one write
                // and sync (they are contiguous), and acknowledge once.
                let mut lsn = lsn_of(&payload)?;
                let mut bytes = payload;
                bytes.drain(..8);
                let mut next = drain_contiguous(&mut socket, lsn, &mut bytes, timeout)?;
                loop {
                    let durable = db.receive_log(lsn, &bytes).map_err(io::Error::other)?;
                    reported_applied = db.applied_lsn();
                    acknowledge(&mut socket, durable, reported_applied)?;
                    acknowledged = Instant::now();
                    shared.received.notify();
                    // A range that did not follow on (a resend) goes on its own.
                    match next.take() {
                        Some((b'D', payload)) => {
                            lsn = lsn_of(&payload)?;
                            bytes = payload[8..].to_vec();
                        }
                        Some((tag, payload)) => {
                            handle_control(shared, primary, tag, &payload)?;
                            break;
                        }
                        None => break,
                    }
                }
            }
            other => handle_control(shared, primary, other, &payload)?,
        }
    }
}

/// Reads the messages already in the socket without waiting: `D` ranges that continue
/// `bytes` (which starts at `lsn`) are appended to it, up to `BATCH_BYTES_MAX`; the first other
/// message is returned.
fn drain_contiguous(
    socket: &mut Link,
    lsn: u64,
    bytes: &mut Vec<u8>,
    stall_limit: Duration,
) -> io::Result<Option<(u8, Vec<u8>)>> {
    const BATCH_BYTES_MAX: usize = 8 << 20;
    while bytes.len() < BATCH_BYTES_MAX {
        // Whether a message has begun to arrive, without waiting; then it is read in the
        // socket's usual (blocking, with a read timeout) mode, so the rest of it is waited for
        // rather than spun on.
        if !socket.readable()? {
            return Ok(None);
        }
        match read_message_within(socket, stall_limit)? {
            Some((b'D', payload)) if lsn_of(&payload)? == lsn + bytes.len() as u64 => {
                bytes.extend_from_slice(&payload[8..]);
            }
            other => return Ok(other),
        }
    }
    Ok(None)
}

/// A message other than `D`: the primary's identity, or a refusal.
fn handle_control(shared: &Shared, primary: &str, tag: u8, payload: &[u8]) -> io::Result<()> {
    match tag {
        b'I' => {
            let identity = Identity::decode(payload)?;
            if shared.identity.lock().as_ref() != Some(&identity) {
                identity.store(&shared.config.dir)?;
                *shared.identity.lock() = Some(identity);
            }
            // The primary checked this node's log: a prefix of its own, which checkpoints
            // may now cover.
            shared.db.confirm_log();
        }
        // A keepalive: the link is alive (the caller noted it).
        b'K' => {}
        b'R' => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "the primary {primary} cannot feed this standby: {}",
                    String::from_utf8_lossy(payload)
                ),
            ))
        }
        b'W' => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                Forked {
                    fork: lsn_of(payload)?,
                    why: String::from_utf8_lossy(payload.get(8..).unwrap_or_default()).into_owned(),
                },
            ))
        }
        b'E' => {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "the primary {primary} refused this standby: {}",
                    String::from_utf8_lossy(payload)
                ),
            ))
        }
        other => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("replication message {other:#x}"),
            ))
        }
    }
    Ok(())
}
