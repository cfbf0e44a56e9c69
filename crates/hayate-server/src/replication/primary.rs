//! The primary's side of replication (module documentation of `replication`).

use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use hayate_engine::{Database, Error, LogShipper, Lsn};
use hayate_sql::catalog::{ReplicationSource, ReplicationStat};
use parking_lot::{Condvar, Mutex, MutexGuard};

use super::{
    challenge, keepalive_interval, lsn_of, read_message, read_message_within, write_message,
    Identity, Link, ReplicationAuth, CATCH_UP_BYTES_MAX, HELLO_MAGIC, PEER_TIMEOUT_DEFAULT, POLL,
};

#[derive(Default)]
struct ShipperState {
    /// Flushed ranges handed over and not yet sent to the current standby, in order, and
    /// their bytes.
    queue: std::collections::VecDeque<(Lsn, Arc<Vec<u8>>)>,
    queued_bytes: usize,
    /// The synchronous standby's durable log end.
    acked: Lsn,
    /// Counts standby connections: a sender or reader of an older one ends.
    connection: u64,
    /// Whether a standby is connected now.
    connected: bool,
    /// The server stops: waits end.
    stop: bool,
    /// The connected standby's name and address, and the position sent to it up to.
    standby: Option<(String, SocketAddr)>,
    sent: Lsn,
    /// Name of the standby whose acknowledgements count (recorded in the synchronous set
    /// through `SyncGate` before any of them acknowledges a commit).
    sync_name: Option<String>,
    /// The connected standby's last reported applied position.
    replayed: Option<Lsn>,
    /// How long a commit waits for a standby before this primary acknowledges alone (None:
    /// strict, never; `ReplicationPolicy`).
    alone_after: Option<Duration>,
    alone: Alone,
    /// A waiter is recording "alone" through the sync gate now.
    going_alone: bool,
    /// The log kept for the standby from here on (the slot), and at most this many bytes of
    /// it while commits are acknowledged alone (None: no cap).
    retained: Lsn,
    max_slot_bytes: Option<u64>,
    /// The cap released log the standby had not acknowledged: it must be seeded again.
    slot_released: bool,
    /// A standby silent this long is disconnected (`ReplicationPolicy`).
    peer_timeout: Duration,
    /// Lags as pg_stat_replication shows them.
    flush_lag: LagTracker,
    replay_lag: LagTracker,
}

/// What a sender sends next.
enum Next {
    /// Log bytes from a position.
    Bytes(Lsn, Arc<Vec<u8>>),
    /// Nothing to send for a while: a `K`, so the standby knows the link is alive.
    Keepalive,
}

/// How a primary waits for its standby.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplicationPolicy {
    /// Commits that waited this long for a synchronous standby are acknowledged alone, once
    /// the sync gate recorded this primary alone (a standby then may not take over), until a
    /// standby has caught up again. None (the default): strict, commits wait however long.
    pub alone_after: Option<Duration>,
    /// While commits are acknowledged alone, the log kept for the absent standby is released
    /// past this many bytes (reported; the standby is seeded again when it returns). None:
    /// kept however large.
    pub max_slot_bytes: Option<u64>,
    /// A standby that sent nothing for this long (it acknowledges at least every
    /// `KEEPALIVE_INTERVAL`) is disconnected.
    pub peer_timeout: Duration,
}

impl Default for ReplicationPolicy {
    fn default() -> ReplicationPolicy {
        ReplicationPolicy {
            alone_after: None,
            max_slot_bytes: Some(1 << 30),
            peer_timeout: PEER_TIMEOUT_DEFAULT,
        }
    }
}

/// Whether commits are acknowledged without a standby.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum Alone {
    /// Commits wait for the synchronous standby.
    #[default]
    No,
    /// The sync set records this primary alone: commits are acknowledged once durable here;
    /// `through` is the end of the last one.
    Yes { through: Lsn },
    /// A standby caught up to about `through`: commits wait again, and it counts (recorded in
    /// the sync set) once it has acknowledged `through`, every commit acknowledged alone.
    Leaving { through: Lsn },
}

/// A standby this close to the end of what was acknowledged alone ends the alone mode: from
/// then on commits wait for it while it acknowledges the rest.
const LEAVE_ALONE_WITHIN: u64 = 1 << 20;

/// Measures a standby's lag as PostgreSQL's walsender does: the time each flushed position
/// was handed over for shipping, and, when the standby reports a position, the time since the
/// newest sample it covers.
#[derive(Default)]
struct LagTracker {
    samples: std::collections::VecDeque<(Lsn, Instant)>,
    last: Option<Duration>,
}

impl LagTracker {
    /// Samples kept; past that the newest one stands for later positions too (which can only
    /// overstate the lag).
    const SAMPLES_MAX: usize = 4096;

    fn shipped(&mut self, end: Lsn, at: Instant) {
        if self.samples.len() >= Self::SAMPLES_MAX {
            if let Some(newest) = self.samples.back_mut() {
                newest.0 = end;
            }
            return;
        }
        self.samples.push_back((end, at));
    }

    fn reported(&mut self, position: Lsn, now: Instant) {
        let mut covered = None;
        while let Some(&(end, at)) = self.samples.front() {
            if end > position {
                break;
            }
            covered = Some(at);
            self.samples.pop_front();
        }
        if let Some(at) = covered {
            self.last = Some(now.saturating_duration_since(at));
        }
    }
}

/// Records a standby as the synchronous one (in etcd) before its acknowledgements count, or
/// (None) this primary as acknowledging alone before it does; false: not recorded, its
/// acknowledgements do not count yet (asked again at its next one), or commits keep waiting.
pub type SyncGate = Arc<dyn Fn(Option<&str>) -> bool + Send + Sync>;

/// The primary's side: the engine's `LogShipper` and the threads serving the standby.
pub struct Primary {
    db: Database,
    /// This node's system id and epochs (set by `activate`).
    identity: Mutex<Option<Identity>>,
    /// The bound listener until `activate` starts accepting on it.
    listener: Mutex<Option<TcpListener>>,
    sync_gate: Option<SyncGate>,
    /// Held across every sync gate call and the state change it decides (going alone,
    /// recording a standby), so etcd's sync set and this primary never disagree. Taken
    /// before `state`.
    gate_lock: Mutex<()>,
    /// What connecting standbys must prove they know (no secret: anyone may connect), and
    /// the TLS every connection must speak.
    auth: ReplicationAuth,
    /// Nanoseconds after `clock_base` past which commits are no longer acknowledged (the
    /// leader lease's deadline); `u64::MAX`: none.
    lease_deadline: AtomicU64,
    clock_base: Instant,
    state: Mutex<ShipperState>,
    changed: Condvar,
    listen: SocketAddr,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

/// Bytes of flushes queued for the standby at most; past it, the sender reads them from the
/// files (a slow standby while commits are acknowledged alone must not grow memory).
const QUEUE_BYTES_MAX: usize = 64 << 20;

impl LogShipper for Primary {
    fn ship(&self, lsn: Lsn, bytes: &[u8]) {
        let mut state = self.state.lock();
        if state.connected && state.queued_bytes + bytes.len() <= QUEUE_BYTES_MAX {
            state.queue.push_back((lsn, Arc::new(bytes.to_vec())));
            state.queued_bytes += bytes.len();
            let (end, now) = (lsn + bytes.len() as u64, Instant::now());
            state.flush_lag.shipped(end, now);
            state.replay_lag.shipped(end, now);
            self.changed.notify_all();
        }
    }

    fn wait_replicated(&self, lsn: Lsn) -> hayate_engine::Result<()> {
        let started = Instant::now();
        let mut state = self.state.lock();
        loop {
            if state.stop {
                return Err(Error::NotPrimary("the server is shutting down".into()));
            }
            if !self.lease_held() {
                return Err(Error::NotPrimary(
                    "the leader lease ran out: this node is no longer the primary".into(),
                ));
            }
            if state.acked >= lsn {
                return Ok(());
            }
            if let Alone::Yes { through } = state.alone {
                let through = through.max(lsn);
                state.alone = Alone::Yes { through };
                self.cap_slot(&mut state, through);
                return Ok(());
            }
            let waited_enough = state
                .alone_after
                .is_some_and(|after| started.elapsed() >= after);
            if waited_enough && !state.going_alone {
                // Only once the sync set says so (a standby that lacks these commits may
                // not take over then).
                state.going_alone = true;
                drop(state);
                let gate_held = self.gate_lock.lock();
                state = self.state.lock();
                let recorded = state.acked < lsn
                    && !matches!(state.alone, Alone::Yes { .. })
                    && MutexGuard::unlocked(&mut state, || {
                        self.sync_gate.as_ref().is_none_or(|gate| gate(None))
                    });
                state.going_alone = false;
                if recorded {
                    let through = match state.alone {
                        Alone::Leaving { through } => through.max(lsn),
                        _ => lsn,
                    };
                    log::warn!(
                        "replication: no synchronous standby for {:?}: acknowledging commits \
                         alone (the sync set records this primary alone)",
                        started.elapsed()
                    );
                    state.alone = Alone::Yes { through };
                    state.sync_name = None;
                    // No other node may take over now: checkpoints may cover this log.
                    self.db.confirm_log();
                    self.changed.notify_all();
                } else if !matches!(state.alone, Alone::Yes { .. }) && state.acked < lsn {
                    // The set could not be changed (etcd unreachable, or deposed): ask again
                    // later, not in a loop.
                    drop(gate_held);
                    self.changed.wait_for(&mut state, POLL);
                }
                continue;
            }
            self.changed.wait_for(&mut state, POLL);
        }
    }
}

impl Primary {
    /// Listens for standbys on `listen` and installs the shipper on `db`: from now on every
    /// commit waits for the synchronous standby. `identity`: this node's system id and epochs
    /// (sent to standbys, checked against theirs); `sync_gate`: how a standby becomes the
    /// synchronous one (None: at once); `secret`: what standbys must prove they know.
    pub fn start(
        db: Database,
        listen: SocketAddr,
        identity: Identity,
        sync_gate: Option<SyncGate>,
        auth: ReplicationAuth,
    ) -> io::Result<Arc<Primary>> {
        let primary = Primary::prepare(db.clone(), listen, sync_gate, auth)?;
        let shipped_from = db.set_log_shipper(Some(primary.clone()));
        primary.activate(identity, shipped_from)?;
        Ok(primary)
    }

    /// Binds the listener; nothing is shipped or accepted until `activate` (a standby
    /// prepares its successor before it promotes, `Database::promote_shipping_to`).
    pub fn prepare(
        db: Database,
        listen: SocketAddr,
        sync_gate: Option<SyncGate>,
        auth: ReplicationAuth,
    ) -> io::Result<Arc<Primary>> {
        let listener = TcpListener::bind(listen)?;
        listener.set_nonblocking(true)?;
        Ok(Arc::new(Primary {
            db,
            identity: Mutex::new(None),
            sync_gate,
            gate_lock: Mutex::new(()),
            auth,
            lease_deadline: AtomicU64::new(u64::MAX),
            clock_base: Instant::now(),
            state: Mutex::new(ShipperState {
                peer_timeout: PEER_TIMEOUT_DEFAULT,
                ..ShipperState::default()
            }),
            changed: Condvar::new(),
            listen: listener.local_addr()?,
            listener: Mutex::new(Some(listener)),
            threads: Mutex::new(Vec::new()),
        }))
    }

    /// Starts serving standbys, with this shipper installed on the database from
    /// `shipped_from` on.
    pub fn activate(self: &Arc<Self>, identity: Identity, shipped_from: Lsn) -> io::Result<()> {
        *self.identity.lock() = Some(identity);
        {
            // A slot: the log a standby still needs stays through checkpoints.
            let mut state = self.state.lock();
            state.acked = shipped_from;
            self.retain(&mut state, shipped_from);
        }
        let listener = self
            .listener
            .lock()
            .take()
            .ok_or_else(|| io::Error::other("the primary is active already"))?;
        let accepting = self.clone();
        let thread = std::thread::Builder::new()
            .name("hayate-repl-listen".into())
            .spawn(move || accepting.accept_loop(listener))?;
        self.threads.lock().push(thread);
        log::info!("replication: primary, standbys connect to {}", self.listen);
        Ok(())
    }

    fn identity(&self) -> Identity {
        self.identity
            .lock()
            .clone()
            .expect("an active primary has an identity")
    }

    /// Where standbys connect.
    pub fn address(&self) -> SocketAddr {
        self.listen
    }

    /// The synchronous standby's acknowledged (durable) log position.
    pub fn acknowledged_lsn(&self) -> Lsn {
        self.state.lock().acked
    }

    /// Whether a standby is connected.
    pub fn standby_connected(&self) -> bool {
        self.state.lock().connected
    }

    /// Position just past the last byte of this primary's log.
    pub fn log_end_lsn(&self) -> Lsn {
        self.db.log_end_lsn()
    }

    /// The connected standby as pg_stat_replication shows it.
    pub fn replication_stats(&self) -> Vec<ReplicationStat> {
        let state = self.state.lock();
        let Some((name, address)) = state.standby.as_ref().filter(|_| state.connected) else {
            return Vec::new();
        };
        vec![ReplicationStat {
            application_name: name.clone(),
            client_addr: address.ip().to_string(),
            client_port: address.port(),
            sent_lsn: state.sent,
            flush_lsn: state.acked.min(state.sent),
            replay_lsn: state.replayed,
            flush_lag: state.flush_lag.last,
            replay_lag: state.replay_lag.last,
            sync_state: if state.sync_name.as_ref() == Some(name) {
                "sync"
            } else {
                "potential"
            },
        }]
    }

    /// What pg_stat_replication reads (`Catalog::set_replication_source`), for as long as
    /// this primary lives.
    pub fn stat_source(self: &Arc<Self>) -> ReplicationSource {
        let primary = Arc::downgrade(self);
        Arc::new(move || {
            primary
                .upgrade()
                .map_or(Vec::new(), |primary| primary.replication_stats())
        })
    }

    /// The synchronous standby's name, once recorded.
    pub fn sync_standby(&self) -> Option<String> {
        self.state.lock().sync_name.clone()
    }

    /// How this primary waits for its standby (`ReplicationPolicy`).
    pub fn set_policy(&self, policy: ReplicationPolicy) {
        let mut state = self.state.lock();
        state.alone_after = policy.alone_after;
        state.max_slot_bytes = policy.max_slot_bytes;
        state.peer_timeout = policy.peer_timeout;
        self.changed.notify_all();
    }

    /// Keeps the log from `lsn` on for the standby (a slot).
    fn retain(&self, state: &mut ShipperState, lsn: Lsn) {
        state.retained = lsn;
        self.db.retain_log_from(lsn);
    }

    /// Releases the slot's log beyond the cap behind `end`.
    fn cap_slot(&self, state: &mut ShipperState, end: Lsn) {
        let Some(cap) = state.max_slot_bytes else {
            return;
        };
        if end.saturating_sub(state.retained) <= cap {
            return;
        }
        if !state.slot_released {
            log::warn!(
                "replication: the log kept for the standby passed {cap} bytes while commits \
                 were acknowledged alone: it is released, and the standby will be seeded again"
            );
            state.slot_released = true;
        }
        self.retain(state, end - cap);
    }

    /// Whether commits are acknowledged without a standby now.
    pub fn acknowledging_alone(&self) -> bool {
        matches!(self.state.lock().alone, Alone::Yes { .. })
    }

    /// Commits are acknowledged only before `deadline` (the leader lease's end, on the
    /// monotonic clock); renewing the lease moves it.
    pub fn set_lease_deadline(&self, deadline: Instant) {
        let nanos = deadline
            .saturating_duration_since(self.clock_base)
            .as_nanos() as u64;
        self.lease_deadline.store(nanos, Ordering::Release);
        self.changed.notify_all();
    }

    fn lease_held(&self) -> bool {
        let deadline = self.lease_deadline.load(Ordering::Acquire);
        deadline == u64::MAX || (self.clock_base.elapsed().as_nanos() as u64) < deadline
    }

    /// Makes commits waiting for the standby fail with `Error::NotPrimary` (a shutdown), and
    /// every later one: this node stops acknowledging.
    pub fn release_waiters(&self) {
        self.state.lock().stop = true;
        self.changed.notify_all();
    }

    /// Stops serving standbys and uninstalls the shipper (`release_waiters` first).
    pub fn stop(&self) {
        self.release_waiters();
        self.db.set_log_shipper(None);
        for thread in self.threads.lock().drain(..) {
            let _ = thread.join();
        }
    }

    fn stopping(&self) -> bool {
        self.state.lock().stop
    }

    fn accept_loop(self: Arc<Self>, listener: TcpListener) {
        while !self.stopping() {
            match listener.accept() {
                Ok((socket, peer)) => {
                    // The handshake on a thread of its own: a peer that never finishes it
                    // (it has a deadline) holds up nobody else.
                    let primary = self.clone();
                    let spawned = std::thread::Builder::new()
                        .name("hayate-repl-hello".into())
                        .spawn(move || {
                            if let Err(error) = primary.serve_standby(socket, peer) {
                                log::warn!("replication: standby {peer}: {error}");
                            }
                        });
                    if let Err(error) = spawned {
                        log::warn!("replication: standby {peer}: {error}");
                    }
                }
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(error) => {
                    log::warn!("replication: accepting a standby: {error}");
                    std::thread::sleep(POLL);
                }
            }
        }
    }

    /// Reads the standby's hello; a base backup request is served on a thread of its own,
    /// a follower gets the identity and its sender and reader threads.
    fn serve_standby(self: Arc<Self>, socket: TcpStream, peer: SocketAddr) -> io::Result<()> {
        socket.set_nonblocking(false)?;
        socket.set_nodelay(true)?;
        socket.set_read_timeout(Some(POLL))?;
        let mut socket = Link::accept(socket, self.auth.tls.as_ref())?;
        socket.set_read_timeout(Some(Duration::from_secs(10)))?;
        challenge(&mut socket, self.auth.secret.as_ref())?;
        let (tag, payload) = read_message(&mut socket)?
            .ok_or_else(|| io::Error::new(io::ErrorKind::TimedOut, "no hello within 10 s"))?;
        let Some(body) = payload.strip_prefix(HELLO_MAGIC) else {
            let _ = write_message(&mut socket, b'E', &[b"not a Hayate replication hello"]);
            return Err(io::Error::new(io::ErrorKind::InvalidData, "bad hello"));
        };
        match tag {
            b'B' => {
                let name = String::from_utf8_lossy(body).into_owned();
                let primary = self.clone();
                let thread = std::thread::Builder::new()
                    .name("hayate-repl-backup".into())
                    .spawn(move || {
                        if let Err(error) = primary.send_backup(socket, &name) {
                            log::warn!("replication: base backup for {name} ({peer}): {error}");
                        }
                    })?;
                self.threads.lock().push(thread);
                Ok(())
            }
            b'H' => self.start_following(socket, peer, body),
            _ => {
                let _ = write_message(&mut socket, b'E', &[b"not a Hayate replication hello"]);
                Err(io::Error::new(io::ErrorKind::InvalidData, "bad hello"))
            }
        }
    }

    /// Streams a base backup (`Database::base_backup`): the identity, the files, the end.
    fn send_backup(&self, mut socket: Link, name: &str) -> io::Result<()> {
        log::info!("replication: base backup for standby {name} begins");
        write_message(&mut socket, b'I', &[&self.identity().encode()])?;
        let report = self
            .db
            .base_backup(&mut |file, offset, bytes| {
                write_message(
                    &mut socket,
                    b'F',
                    &[
                        &(file.len() as u16).to_be_bytes(),
                        file.as_bytes(),
                        &offset.to_be_bytes(),
                        bytes,
                    ],
                )
                .map_err(|error| Error::io("replication socket", error))
            })
            .map_err(io::Error::other)?;
        // The seeded standby follows from about the copy's end (earlier if its recovery cuts
        // an incomplete commit): keep the log the copy holds.
        {
            let mut state = self.state.lock();
            let from = report.log_start.min(state.acked);
            self.retain(&mut state, from);
        }
        write_message(&mut socket, b'Z', &[&report.log_end.to_be_bytes()])?;
        log::info!(
            "replication: base backup for standby {name} sent: {} files, {} bytes, log to {}",
            report.files,
            report.bytes,
            report.log_end
        );
        Ok(())
    }

    /// Checks a follower's hello (`need | system id | epoch | name`) against this primary's
    /// identity and log, then starts its threads.
    fn start_following(
        self: Arc<Self>,
        mut socket: Link,
        peer: SocketAddr,
        body: &[u8],
    ) -> io::Result<()> {
        if body.len() < 24 {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "short hello"));
        }
        let need = lsn_of(body)?;
        let system_id = lsn_of(&body[8..])?;
        let epoch = lsn_of(&body[16..])?;
        let name = String::from_utf8_lossy(&body[24..]).into_owned();
        let refuse = |socket: &mut Link, tag: u8, message: String| {
            let _ = write_message(socket, tag, &[message.as_bytes()]);
            Err(io::Error::new(io::ErrorKind::InvalidData, message))
        };
        let identity = self.identity();
        if system_id != 0 && system_id != identity.system_id {
            return refuse(
                &mut socket,
                b'E',
                format!(
                    "the standby belongs to database system {system_id:016x}, this primary to \
                     {:016x}",
                    identity.system_id
                ),
            );
        }
        if system_id != 0 {
            match identity.fork_point(epoch) {
                Err(message) => return refuse(&mut socket, b'R', message),
                Ok(Some(fork)) if need > fork => {
                    // The standby will follow from the fork point once rewound: this primary
                    // must still hold its log from there, else only a new seed serves.
                    if fork < self.db.log_local_durable_lsn() {
                        if let Err(error) = self.db.read_log(fork, fork + 1) {
                            let message = format!(
                                "the standby's log forked from this primary's at {fork}, and \
                                 the log from there is no longer here ({error}): the standby \
                                 must be seeded again"
                            );
                            return refuse(&mut socket, b'R', message);
                        }
                    }
                    let message = format!(
                        "the standby's log ends at {need}, past position {fork} where this \
                         primary's epoch {} began: it holds commits that were never \
                         acknowledged",
                        identity.current().number
                    );
                    let _ = write_message(
                        &mut socket,
                        b'W',
                        &[&fork.to_be_bytes(), message.as_bytes()],
                    );
                    return Err(io::Error::new(io::ErrorKind::InvalidData, message));
                }
                Ok(_) => {}
            }
        }
        if need > self.db.log_end_lsn() {
            let message = format!(
                "the standby's log ends at {need}, past this primary's end {}: it is not a copy \
                 of this database, or it has commits this primary never had",
                self.db.log_end_lsn()
            );
            return refuse(&mut socket, b'R', message);
        }
        let durable = self.db.log_local_durable_lsn();
        if need < durable {
            if let Err(error) = self.db.read_log(need, need + 1) {
                let message = format!(
                    "the log from position {need} is no longer here ({error}): the standby \
                     must be seeded again"
                );
                return refuse(&mut socket, b'R', message);
            }
        }
        write_message(&mut socket, b'I', &[&identity.encode()])?;
        let peer_name = if name.is_empty() {
            peer.to_string()
        } else {
            name
        };
        socket.set_read_timeout(Some(POLL))?;
        let connection = {
            let mut state = self.state.lock();
            state.connection += 1;
            state.connected = true;
            state.queue.clear();
            state.queued_bytes = 0;
            state.standby = Some((peer_name.clone(), peer));
            state.sent = need;
            state.replayed = None;
            state.connection
        };
        let reader_name = peer_name.clone();
        self.changed.notify_all();
        log::info!(
            "replication: standby {peer_name} ({peer}) connected, needs the log from {need}"
        );
        let reader_socket = socket.try_clone()?;
        let reader = self.clone();
        let sender = self.clone();
        let mut threads = self.threads.lock();
        threads.retain(|thread| !thread.is_finished());
        threads.push(
            std::thread::Builder::new()
                .name("hayate-repl-acks".into())
                .spawn(move || reader.read_acks(reader_socket, connection, &reader_name))?,
        );
        threads.push(
            std::thread::Builder::new()
                .name("hayate-repl-send".into())
                .spawn(move || {
                    if let Err(error) = sender.send_log(socket, connection, need) {
                        log::warn!("replication: sending to standby {peer_name}: {error}");
                    }
                    sender.disconnected(connection);
                })?,
        );
        Ok(())
    }

    fn disconnected(&self, connection: u64) {
        let mut state = self.state.lock();
        if state.connection == connection {
            state.connected = false;
            state.queue.clear();
            state.queued_bytes = 0;
        }
    }

    /// What the sender sends next, from `sent` on: queued bytes, bytes from the files, or a
    /// keepalive once nothing was sent for `KEEPALIVE_INTERVAL` (since `last_sent`).
    fn next_bytes(&self, connection: u64, sent: Lsn, last_sent: Instant) -> Option<Next> {
        let mut state = self.state.lock();
        loop {
            if state.stop || state.connection != connection {
                return None;
            }
            // Everything before `sent` went out (pg_stat_replication's sent_lsn).
            state.sent = sent;
            while let Some((lsn, bytes)) = state.queue.front() {
                if lsn + bytes.len() as u64 <= sent {
                    state.queued_bytes -= bytes.len();
                    state.queue.pop_front();
                    continue;
                }
                if *lsn <= sent {
                    let (lsn, bytes) = state.queue.pop_front().expect("front exists");
                    state.queued_bytes -= bytes.len();
                    let skip = (sent - lsn) as usize;
                    if skip == 0 {
                        return Some(Next::Bytes(lsn, bytes));
                    }
                    return Some(Next::Bytes(sent, Arc::new(bytes[skip..].to_vec())));
                }
                break;
            }
            // Behind the queue (or nothing queued): what the files hold. The flush that ended
            // where the queue starts is durable here, since flushes run one at a time.
            let until = match state.queue.front() {
                Some((lsn, _)) => *lsn,
                None => self.db.log_local_durable_lsn(),
            };
            if until > sent {
                drop(state);
                let until = until.min(sent + CATCH_UP_BYTES_MAX);
                return match self.db.read_log(sent, until) {
                    Ok(bytes) => Some(Next::Bytes(sent, Arc::new(bytes))),
                    Err(error) => {
                        log::error!("replication: reading the log {sent}..{until}: {error}");
                        None
                    }
                };
            }
            if last_sent.elapsed() >= keepalive_interval(state.peer_timeout) {
                return Some(Next::Keepalive);
            }
            self.changed.wait_for(&mut state, POLL);
        }
    }

    fn send_log(&self, mut socket: Link, connection: u64, mut sent: Lsn) -> io::Result<()> {
        let mut last_sent = Instant::now();
        while let Some(next) = self.next_bytes(connection, sent, last_sent) {
            match next {
                Next::Bytes(lsn, bytes) => {
                    write_message(&mut socket, b'D', &[&lsn.to_be_bytes(), &bytes])?;
                    sent = lsn + bytes.len() as u64;
                }
                Next::Keepalive => {
                    let durable = self.db.log_local_durable_lsn();
                    write_message(&mut socket, b'K', &[&durable.to_be_bytes()])?;
                }
            }
            last_sent = Instant::now();
        }
        socket.shutdown();
        Ok(())
    }

    fn read_acks(&self, mut socket: Link, connection: u64, peer: &str) {
        // An acknowledgement the sync gate has not let count yet (etcd unreachable): tried
        // again at each read timeout, since commits waiting for it send no new bytes, and so
        // the standby no new acknowledgements.
        let mut unrecorded = None;
        let mut heard = Instant::now();
        loop {
            let timeout = {
                let state = self.state.lock();
                if state.stop || state.connection != connection {
                    return;
                }
                state.peer_timeout
            };
            let message = read_message_within(&mut socket, timeout);
            if let Ok(Some(_)) = message {
                heard = Instant::now();
            }
            match message {
                Ok(None) if heard.elapsed() >= timeout => {
                    log::warn!(
                        "replication: standby {peer} sent nothing for {:.1} s: disconnecting it",
                        heard.elapsed().as_secs_f64()
                    );
                    break;
                }
                Ok(None) => {
                    if let Some(lsn) = unrecorded.take() {
                        unrecorded = self.acknowledged(connection, peer, lsn);
                    }
                }
                Ok(Some((b'A', payload))) => match lsn_of(&payload) {
                    Ok(lsn) => {
                        if let Some(applied) = payload.get(8..).and_then(|rest| lsn_of(rest).ok()) {
                            self.replayed(connection, applied);
                        }
                        unrecorded = self.acknowledged(connection, peer, lsn);
                    }
                    Err(error) => {
                        log::warn!("replication: standby {peer}: {error}");
                        break;
                    }
                },
                Ok(Some((tag, _))) => {
                    log::warn!("replication: standby {peer} sent message {tag:#x}");
                    break;
                }
                Err(error) => {
                    log::info!("replication: standby {peer} disconnected: {error}");
                    break;
                }
            }
        }
        self.disconnected(connection);
        socket.shutdown();
        self.changed.notify_all();
    }

    /// Records the position up to which the standby applied the log (pg_stat_replication).
    fn replayed(&self, connection: u64, applied: Lsn) {
        let mut state = self.state.lock();
        if state.connection != connection || state.replayed.is_some_and(|seen| seen >= applied) {
            return;
        }
        state.replayed = Some(applied);
        state.replay_lag.reported(applied, Instant::now());
    }

    /// Counts the standby's acknowledgement of `lsn`. The first one that raises the
    /// acknowledged position makes it the synchronous standby, recorded through the sync
    /// gate first (it holds every acknowledged commit now); returns `lsn` if the gate did not
    /// record it (to be tried again).
    fn acknowledged(&self, connection: u64, peer: &str, lsn: Lsn) -> Option<Lsn> {
        let mut state = self.state.lock();
        if state.connection != connection {
            return None;
        }
        // After acknowledging alone, a standby counts only once it holds every commit
        // acknowledged alone: when it is close, commits wait again (`Leaving`), and it is
        // recorded once it reached the end of what was acknowledged alone.
        match state.alone {
            Alone::Yes { through } if lsn.saturating_add(LEAVE_ALONE_WITHIN) >= through => {
                log::info!("replication: {peer} caught up to {lsn}: commits wait for it again");
                state.alone = Alone::Leaving { through };
                if lsn < through {
                    return None;
                }
            }
            Alone::Yes { .. } => return None,
            Alone::Leaving { through } if lsn < through => return None,
            _ => {}
        }
        if lsn <= state.acked && state.alone == Alone::No {
            return None;
        }
        let mut _gate_held = None;
        if state.sync_name.as_deref() != Some(peer) {
            drop(state);
            _gate_held = Some(self.gate_lock.lock());
            state = self.state.lock();
            // Checked again under the gate lock: the primary may have gone alone meanwhile.
            if state.connection != connection
                || matches!(state.alone, Alone::Yes { .. })
                || matches!(state.alone, Alone::Leaving { through } if lsn < through)
            {
                return None;
            }
            let recorded = MutexGuard::unlocked(&mut state, || {
                self.sync_gate.as_ref().is_none_or(|gate| gate(Some(peer)))
            });
            if state.connection != connection {
                return None;
            }
            if !recorded {
                return Some(lsn);
            }
            log::info!("replication: {peer} is the synchronous standby");
            state.sync_name = Some(peer.to_string());
        }
        if matches!(state.alone, Alone::Leaving { .. }) {
            log::warn!(
                "replication: {peer} holds every commit acknowledged alone: it counts again"
            );
            state.alone = Alone::No;
        }
        // The synchronous standby holds this log past where it ended when this primary
        // started (`acked` began there): checkpoints may cover it.
        self.db.confirm_log();
        state.acked = state.acked.max(lsn);
        state.flush_lag.reported(lsn, Instant::now());
        state.slot_released = false;
        let acked = state.acked;
        self.retain(&mut state, acked);
        self.changed.notify_all();
        None
    }
}
