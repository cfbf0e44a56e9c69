//! Log shipping between two servers over TCP (docs/design.md 8.5): the transport of the
//! engine's synchronous replication (`hayate_engine::LogShipper`, design 5.6).
//!
//! Messages, each a tag byte, a big-endian u32 payload length and the payload:
//! - `H` (standby -> primary): `HELLO_MAGIC`, then the u64 log position the standby needs.
//! - `D` (primary -> standby): the u64 position of the bytes, then log bytes.
//! - `A` (standby -> primary): the u64 position up to which the standby's log is durable.
//! - `E` (primary -> standby): why the primary refuses to serve it (text).
//!
//! Primary (`Primary::start`): a listener thread accepts standbys; the newest one is the
//! synchronous standby (an older connection ends). Its sender thread sends what the standby
//! lacks: from the primary's files while it is behind (`Database::read_log`), then each flush's
//! bytes as the flush leader hands them over (`ship`, before the primary's own write); its
//! reader thread takes the acknowledgements. `wait_replicated` returns once the standby
//! acknowledged the position: strict, so with no standby connected commits wait.
//!
//! Standby (`Standby::start`): a thread connects to the primary (again every
//! `RECONNECT_PAUSE` while it cannot), says where its log ends, and for each `D` message makes
//! the bytes durable (`Database::receive_log`), acknowledges and wakes the applier thread,
//! which applies them (`apply_received`) and reloads the SQL catalog when they changed it. A `promote` file in
//! the data directory (`hayate promote`) ends the standby: it applies what it holds and
//! opens for writes (`Database::promote`).
//!
//! Not here yet: authentication and TLS of replication connections, system ids and epochs,
//! fencing through etcd (a primary waits for its standby indefinitely).

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use hayate_engine::{Database, Error, LogShipper, Lsn};
use hayate_sql::Catalog;
use parking_lot::{Condvar, Mutex};

/// First bytes of a standby's hello: the protocol and its version.
const HELLO_MAGIC: &[u8; 12] = b"HAYATE-REPL1";
/// Largest message accepted (a flush is at most a log buffer, 16 MiB by default).
const MESSAGE_BYTES_MAX: usize = 256 << 20;
/// Pause between a standby's connection attempts.
const RECONNECT_PAUSE: Duration = Duration::from_millis(200);
/// Pause before trying again after the primary refused this standby (it must be seeded again).
const REFUSED_PAUSE: Duration = Duration::from_secs(5);
/// How often waiting threads look at their stop flags.
const POLL: Duration = Duration::from_millis(100);
/// Log bytes a sender reads from the files per message while the standby is behind.
const CATCH_UP_BYTES_MAX: u64 = 4 << 20;
/// The file whose appearance promotes a standby (`hayate promote`).
pub const PROMOTE_FILE: &str = "promote";

fn write_message(socket: &mut TcpStream, tag: u8, parts: &[&[u8]]) -> io::Result<()> {
    let length: usize = parts.iter().map(|part| part.len()).sum();
    let mut message = Vec::with_capacity(5 + length);
    message.push(tag);
    message.extend_from_slice(&(length as u32).to_be_bytes());
    for part in parts {
        message.extend_from_slice(part);
    }
    socket.write_all(&message)
}

/// Reads one message. With a read timeout on the socket, returns `Ok(None)` when the timeout
/// passed before the first byte; once a message has begun it is read whole.
fn read_message(socket: &mut TcpStream) -> io::Result<Option<(u8, Vec<u8>)>> {
    let mut header = [0u8; 5];
    if !fill(socket, &mut header, false)? {
        return Ok(None);
    }
    let length = u32::from_be_bytes(header[1..5].try_into().expect("4 bytes")) as usize;
    if length > MESSAGE_BYTES_MAX {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("replication message of {length} bytes"),
        ));
    }
    let mut payload = vec![0u8; length];
    fill(socket, &mut payload, true)?;
    Ok(Some((header[0], payload)))
}

/// Fills `buf` from the socket. Returns false if a read timed out before any byte and
/// `begun` is false (nothing consumed); otherwise keeps reading through timeouts.
fn fill(socket: &mut TcpStream, buf: &mut [u8], mut begun: bool) -> io::Result<bool> {
    let mut filled = 0;
    while filled < buf.len() {
        match socket.read(&mut buf[filled..]) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(read) => {
                filled += read;
                begun = true;
            }
            Err(error) if is_timeout(&error) => {
                if !begun {
                    return Ok(false);
                }
            }
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    }
    Ok(true)
}

fn is_timeout(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

fn lsn_of(payload: &[u8]) -> io::Result<Lsn> {
    payload
        .get(..8)
        .map(|bytes| u64::from_be_bytes(bytes.try_into().expect("8 bytes")))
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "short replication message"))
}

#[derive(Default)]
struct ShipperState {
    /// Flushed ranges handed over and not yet sent to the current standby, in order.
    queue: std::collections::VecDeque<(Lsn, Arc<Vec<u8>>)>,
    /// The synchronous standby's durable log end.
    acked: Lsn,
    /// Counts standby connections: a sender or reader of an older one ends.
    connection: u64,
    /// Whether a standby is connected now.
    connected: bool,
    /// The server stops: waits end.
    stop: bool,
}

/// The primary's side: the engine's `LogShipper` and the threads serving the standby.
pub struct Primary {
    db: Database,
    state: Mutex<ShipperState>,
    changed: Condvar,
    listen: SocketAddr,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl LogShipper for Primary {
    fn ship(&self, lsn: Lsn, bytes: &[u8]) {
        let mut state = self.state.lock();
        if state.connected {
            state.queue.push_back((lsn, Arc::new(bytes.to_vec())));
            self.changed.notify_all();
        }
    }

    fn wait_replicated(&self, lsn: Lsn) -> hayate_engine::Result<()> {
        let mut state = self.state.lock();
        while state.acked < lsn {
            if state.stop {
                return Err(Error::NotPrimary("the server is shutting down".into()));
            }
            self.changed.wait_for(&mut state, POLL);
        }
        Ok(())
    }
}

impl Primary {
    /// Listens for standbys on `listen` and installs the shipper on `db`: from now on every
    /// commit waits for the synchronous standby.
    pub fn start(db: Database, listen: SocketAddr) -> io::Result<Arc<Primary>> {
        let listener = TcpListener::bind(listen)?;
        listener.set_nonblocking(true)?;
        let primary = Arc::new(Primary {
            db: db.clone(),
            state: Mutex::new(ShipperState::default()),
            changed: Condvar::new(),
            listen: listener.local_addr()?,
            threads: Mutex::new(Vec::new()),
        });
        let shipped_from = db.set_log_shipper(Some(primary.clone()));
        primary.state.lock().acked = shipped_from;
        // A slot: the log a standby still needs stays through checkpoints (no size cap yet).
        db.retain_log_from(shipped_from);
        let accepting = primary.clone();
        let thread = std::thread::Builder::new()
            .name("hayate-repl-listen".into())
            .spawn(move || accepting.accept_loop(listener))?;
        primary.threads.lock().push(thread);
        log::info!(
            "replication: primary, standbys connect to {}",
            primary.listen
        );
        Ok(primary)
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
                    if let Err(error) = self.clone().serve_standby(socket, peer) {
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

    /// Reads the standby's hello and starts its sender and reader threads.
    fn serve_standby(self: Arc<Self>, mut socket: TcpStream, peer: SocketAddr) -> io::Result<()> {
        socket.set_nonblocking(false)?;
        socket.set_nodelay(true)?;
        socket.set_read_timeout(Some(Duration::from_secs(10)))?;
        let (tag, payload) = read_message(&mut socket)?
            .ok_or_else(|| io::Error::new(io::ErrorKind::TimedOut, "no hello within 10 s"))?;
        if tag != b'H' || !payload.starts_with(HELLO_MAGIC) {
            let _ = write_message(&mut socket, b'E', &[b"not a Hayate replication hello"]);
            return Err(io::Error::new(io::ErrorKind::InvalidData, "bad hello"));
        }
        let need = lsn_of(&payload[HELLO_MAGIC.len()..])?;
        if need > self.db.log_end_lsn() {
            let message = format!(
                "the standby's log ends at {need}, past this primary's end {}: it is not a copy \
                 of this database, or it has commits this primary never had",
                self.db.log_end_lsn()
            );
            let _ = write_message(&mut socket, b'E', &[message.as_bytes()]);
            return Err(io::Error::new(io::ErrorKind::InvalidData, message));
        }
        let durable = self.db.log_local_durable_lsn();
        if need < durable {
            if let Err(error) = self.db.read_log(need, need + 1) {
                let message = format!(
                    "the log from position {need} is no longer here ({error}): seed the standby \
                     again from a copy of this primary"
                );
                let _ = write_message(&mut socket, b'E', &[message.as_bytes()]);
                return Err(io::Error::other(message));
            }
        }
        socket.set_read_timeout(Some(POLL))?;
        let connection = {
            let mut state = self.state.lock();
            state.connection += 1;
            state.connected = true;
            state.queue.clear();
            state.connection
        };
        self.changed.notify_all();
        log::info!("replication: standby {peer} connected, needs the log from {need}");
        let reader_socket = socket.try_clone()?;
        let reader = self.clone();
        let sender = self.clone();
        let mut threads = self.threads.lock();
        threads.retain(|thread| !thread.is_finished());
        threads.push(
            std::thread::Builder::new()
                .name("hayate-repl-acks".into())
                .spawn(move || reader.read_acks(reader_socket, connection, peer))?,
        );
        threads.push(
            std::thread::Builder::new()
                .name("hayate-repl-send".into())
                .spawn(move || {
                    if let Err(error) = sender.send_log(socket, connection, need) {
                        log::warn!("replication: sending to standby {peer}: {error}");
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
        }
    }

    /// What the sender sends next, from `sent` on: queued bytes, or bytes from the files.
    fn next_bytes(&self, connection: u64, sent: Lsn) -> Option<(Lsn, Arc<Vec<u8>>)> {
        let mut state = self.state.lock();
        loop {
            if state.stop || state.connection != connection {
                return None;
            }
            while let Some((lsn, bytes)) = state.queue.front() {
                if lsn + bytes.len() as u64 <= sent {
                    state.queue.pop_front();
                    continue;
                }
                if *lsn <= sent {
                    let (lsn, bytes) = state.queue.pop_front().expect("front exists");
                    let skip = (sent - lsn) as usize;
                    if skip == 0 {
                        return Some((lsn, bytes));
                    }
                    return Some((sent, Arc::new(bytes[skip..].to_vec())));
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
                    Ok(bytes) => Some((sent, Arc::new(bytes))),
                    Err(error) => {
                        log::error!("replication: reading the log {sent}..{until}: {error}");
                        None
                    }
                };
            }
            self.changed.wait_for(&mut state, POLL);
        }
    }

    fn send_log(&self, mut socket: TcpStream, connection: u64, mut sent: Lsn) -> io::Result<()> {
        while let Some((lsn, bytes)) = self.next_bytes(connection, sent) {
            write_message(&mut socket, b'D', &[&lsn.to_be_bytes(), &bytes])?;
            sent = lsn + bytes.len() as u64;
        }
        let _ = socket.shutdown(std::net::Shutdown::Both);
        Ok(())
    }

    fn read_acks(&self, mut socket: TcpStream, connection: u64, peer: SocketAddr) {
        loop {
            {
                let state = self.state.lock();
                if state.stop || state.connection != connection {
                    return;
                }
            }
            match read_message(&mut socket) {
                Ok(None) => continue,
                Ok(Some((b'A', payload))) => match lsn_of(&payload) {
                    Ok(lsn) => {
                        let mut state = self.state.lock();
                        if state.connection == connection && lsn > state.acked {
                            state.acked = lsn;
                            self.db.retain_log_from(lsn);
                            self.changed.notify_all();
                        }
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
        let _ = socket.shutdown(std::net::Shutdown::Both);
        self.changed.notify_all();
    }
}

/// The standby's side: a thread that follows the primary until promoted or stopped, and one
/// that applies what it received (so acknowledging the next bytes never waits for applying).
pub struct Standby {
    stop: Arc<AtomicBool>,
    promoted: Arc<AtomicBool>,
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
fn apply_loop(db: &Database, catalog: &Catalog, received: &Received, stop: &AtomicBool) {
    let catalog_trees = catalog.catalog_trees();
    while !stop.load(Ordering::Acquire) && db.is_standby() {
        if !received.wait() {
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
            || catalog_trees
                .iter()
                .any(|tree| applied.trees.contains(tree));
        if catalog_changed {
            if let Err(error) = catalog.reload() {
                log::error!("replication: reloading the catalog: {error}");
            }
        }
    }
}

impl Standby {
    /// Makes `db` a standby (if it is not one already) and follows the primary at `primary`.
    /// `promote_file`: a file whose appearance promotes it.
    pub fn start(
        db: Database,
        catalog: Arc<Catalog>,
        primary: String,
        promote_file: Option<PathBuf>,
    ) -> io::Result<Standby> {
        let stop = Arc::new(AtomicBool::new(false));
        let promoted = Arc::new(AtomicBool::new(false));
        let received = Arc::new(Received::default());
        let (applier_db, applier_catalog, applier_received, applier_stop) =
            (db.clone(), catalog.clone(), received.clone(), stop.clone());
        let applier = std::thread::Builder::new()
            .name("hayate-repl-apply".into())
            .spawn(move || {
                apply_loop(
                    &applier_db,
                    &applier_catalog,
                    &applier_received,
                    &applier_stop,
                )
            })?;
        let (thread_stop, thread_promoted) = (stop.clone(), promoted.clone());
        let follower = std::thread::Builder::new()
            .name("hayate-repl-follow".into())
            .spawn(move || {
                let promote_file = promote_file.as_deref();
                follow(
                    &db,
                    &catalog,
                    &primary,
                    promote_file,
                    &received,
                    &thread_stop,
                );
                if !thread_stop.load(Ordering::Acquire) {
                    thread_promoted.store(true, Ordering::Release);
                }
            })?;
        Ok(Standby {
            stop,
            promoted,
            threads: Mutex::new(vec![follower, applier]),
        })
    }

    /// True once the standby was promoted (its thread ended and the database takes writes).
    pub fn promoted(&self) -> bool {
        self.promoted.load(Ordering::Acquire)
    }

    /// Stops following (the database stays a standby).
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Release);
        for thread in self.threads.lock().drain(..) {
            let _ = thread.join();
        }
    }
}

/// The standby's loop: connect, receive, acknowledge, apply; promote when asked.
fn follow(
    db: &Database,
    catalog: &Catalog,
    primary: &str,
    promote_file: Option<&std::path::Path>,
    received: &Received,
    stop: &AtomicBool,
) {
    let promote_requested = || promote_file.is_some_and(|file| file.exists());
    while !stop.load(Ordering::Acquire) {
        if promote_requested() {
            promote(db, catalog, promote_file);
            return;
        }
        match follow_once(db, primary, received, stop, &promote_requested) {
            Ok(()) => std::thread::sleep(RECONNECT_PAUSE),
            Err(error) if error.kind() == io::ErrorKind::PermissionDenied => {
                log::error!("replication: {error}");
                std::thread::sleep(REFUSED_PAUSE);
            }
            Err(error) => {
                log::warn!("replication: following {primary}: {error}");
                std::thread::sleep(RECONNECT_PAUSE);
            }
        }
    }
}

fn promote(db: &Database, catalog: &Catalog, promote_file: Option<&std::path::Path>) {
    match db.promote() {
        Ok(()) => {
            log::warn!("replication: promoted, this node takes writes now");
            if let Err(error) = catalog.reload() {
                log::error!("replication: reloading the catalog after promotion: {error}");
            }
        }
        Err(error) => log::error!("replication: promotion failed: {error}"),
    }
    if let Some(file) = promote_file {
        let _ = std::fs::remove_file(file);
    }
}

/// One connection to the primary, until it ends, a stop, or a promotion request.
fn follow_once(
    db: &Database,
    primary: &str,
    received: &Received,
    stop: &AtomicBool,
    promote_requested: &dyn Fn() -> bool,
) -> io::Result<()> {
    let mut socket = TcpStream::connect(primary)?;
    socket.set_nodelay(true)?;
    socket.set_read_timeout(Some(POLL))?;
    let need = db.log_end_lsn();
    write_message(&mut socket, b'H', &[HELLO_MAGIC, &need.to_be_bytes()])?;
    log::info!("replication: following {primary} from log position {need}");
    loop {
        if stop.load(Ordering::Acquire) || promote_requested() {
            return Ok(());
        }
        let Some((tag, payload)) = read_message(&mut socket)? else {
            continue;
        };
        match tag {
            b'D' => {
                let lsn = lsn_of(&payload)?;
                let durable = db
                    .receive_log(lsn, &payload[8..])
                    .map_err(io::Error::other)?;
                write_message(&mut socket, b'A', &[&durable.to_be_bytes()])?;
                received.notify();
            }
            b'E' => {
                return Err(io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    format!(
                        "the primary {primary} refused this standby: {}",
                        String::from_utf8_lossy(&payload)
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
    }
}
