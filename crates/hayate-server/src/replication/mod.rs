//! Log shipping between two servers over TCP (docs/design.md 8.6): the transport of the
//! engine's synchronous replication (`hayate_engine::LogShipper`, design 5.6).
//!
//! A connection begins with a challenge: the primary sends `C` (32 random bytes), the
//! connecting node answers `P` (HMAC-SHA-256 of them keyed with the replication secret, empty
//! without one), and a primary with a secret refuses (`E`) a wrong or missing proof.
//!
//! Messages, each a tag byte, a big-endian u32 payload length and the payload:
//! - `H` (standby -> primary): `HELLO_MAGIC`, the u64 log position the standby needs, its
//!   system id and epoch (0: none yet), its name.
//! - `B` (standby -> primary): `HELLO_MAGIC` and its name: send a base backup (`seed`).
//! - `A` (standby -> primary): the u64 position up to which the standby's log is durable, then
//!   the u64 position up to which it applied the log (pg_stat_replication's replay).
//! - `I` (primary -> standby): the primary's identity (`identity`).
//! - `D` (primary -> standby): the u64 position of the bytes, then log bytes.
//! - `K` (primary -> standby): a keepalive when nothing was sent for `KEEPALIVE_INTERVAL`:
//!   the u64 position the primary's log is durable to. The standby repeats its `A` as often.
//!   Either side drops a connection that brought nothing for its peer timeout.
//! - `F`, `Z` (primary -> standby): a base backup's pieces and its end.
//! - `E` (primary -> standby): why the primary refuses to serve it (text); `R`: a refusal only
//!   a new seed mends (the primary no longer holds the log the standby needs); `W`: the
//!   standby's log forked from the primary's (an old primary's unacknowledged tail): the u64
//!   fork point, then why; it must be rewound there (`Database::rewind`) or seeded again.
//!
//! Primary (`Primary::start`, or `prepare` then `activate` for a standby's successor): a
//! listener thread accepts standbys; the newest one's acknowledgements count, once the sync
//! gate recorded it. Its sender thread sends what the standby lacks: from the primary's files
//! while it is behind (`Database::read_log`), then each flush's bytes as the flush leader hands
//! them over (`ship`, before the primary's own write); its reader thread takes the
//! acknowledgements. `wait_replicated` returns once the standby acknowledged the position:
//! strict, so with no standby connected commits wait; past the lease deadline it fails.
//!
//! Standby (`Standby::start`): a thread connects to the primary (again every
//! `RECONNECT_PAUSE` while it cannot), says where its log ends, and for each `D` message makes
//! the bytes durable (`Database::receive_log`), acknowledges and wakes the applier thread,
//! which applies them (`apply_received`) and reloads the SQL catalog when they changed it. A
//! `promote` file in the data directory (`hayate promote`) or `request_promotion` ends the
//! standby: it applies what it holds, installs its successor primary, and opens for writes.
//!
//! Strict by default: with no standby connected commits wait. `ReplicationPolicy::alone_after`
//! lets them be acknowledged alone after a wait, once the sync gate recorded the primary alone
//! (a standby may not take over then); a standby that comes back counts again once it holds
//! every commit acknowledged alone. Meanwhile the log kept for it is capped
//! (`max_slot_bytes`), past which it must be seeded again.
//!
//! With `ReplicationAuth::tls` every connection is TLS (`link`): the connecting node checks
//! the primary's certificate, and the challenge then runs inside the encrypted session.

mod identity;
mod link;
mod primary;
mod seed;
mod standby;

pub use identity::{Epoch, Identity};
pub use link::ReplicationTls;
pub use primary::{Primary, ReplicationPolicy, SyncGate};
pub use seed::seed_from;
pub use standby::{Standby, StandbyConfig, StandbyState};

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

pub(crate) use link::Link;

use hayate_engine::Lsn;

/// First bytes of a standby's hello: the protocol and its version (2: the primary's challenge
/// comes first).
pub(crate) const HELLO_MAGIC: &[u8; 12] = b"HAYATE-REPL2";
/// How long either side waits for the challenge and its answer.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// The answer to a challenge is an HMAC-SHA-256 (32 bytes) or nothing.
const PROOF_BYTES_MAX: usize = 64;

/// Reads one message of at most `limit` bytes before `HANDSHAKE_TIMEOUT` passes (a peer that
/// has not proven anything yet gets neither a large buffer nor an endless wait); None if
/// nothing came.
fn read_small_message(socket: &mut Link, limit: usize) -> io::Result<Option<(u8, Vec<u8>)>> {
    let deadline = std::time::Instant::now() + HANDSHAKE_TIMEOUT;
    let mut message = Vec::with_capacity(5 + limit);
    let mut chunk = [0u8; 128];
    loop {
        if message.len() >= 5 {
            let length = u32::from_be_bytes(message[1..5].try_into().expect("4 bytes")) as usize;
            if length > limit {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("a handshake message of {length} bytes"),
                ));
            }
            if message.len() >= 5 + length {
                message.truncate(5 + length);
                return Ok(Some((message[0], message[5..].to_vec())));
            }
        }
        if std::time::Instant::now() > deadline {
            return if message.is_empty() {
                Ok(None)
            } else {
                Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "a handshake message cut short",
                ))
            };
        }
        // One message at most: never read past its end (what follows is the hello).
        let wanted = if message.len() < 5 {
            5 - message.len()
        } else {
            5 + u32::from_be_bytes(message[1..5].try_into().expect("4 bytes")) as usize
                - message.len()
        };
        let wanted = wanted.min(chunk.len());
        match socket.read(&mut chunk[..wanted]) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(read) => message.extend_from_slice(&chunk[..read]),
            Err(error) if is_timeout(&error) || error.kind() == io::ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    }
}

/// The secret replication connections prove they know (`ha_replication_secret`): the primary
/// sends a random challenge, the connecting node answers HMAC-SHA-256(secret, challenge).
#[derive(Clone)]
pub struct ReplicationSecret(std::sync::Arc<[u8]>);

impl ReplicationSecret {
    pub fn new(secret: &[u8]) -> ReplicationSecret {
        ReplicationSecret(secret.into())
    }

    fn mac(&self, challenge: &[u8]) -> hmac::Hmac<sha2::Sha256> {
        use hmac::{KeyInit, Mac};
        let mut mac = <hmac::Hmac<sha2::Sha256> as KeyInit>::new_from_slice(&self.0)
            .expect("HMAC takes any key");
        mac.update(challenge);
        mac
    }
}

impl std::fmt::Debug for ReplicationSecret {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("ReplicationSecret(..)")
    }
}

/// How replication connections are secured: the secret a connecting node proves it knows,
/// and TLS (both optional; the server refuses a replication listener beyond loopback without
/// a secret).
#[derive(Clone, Debug, Default)]
pub struct ReplicationAuth {
    pub secret: Option<ReplicationSecret>,
    pub tls: Option<ReplicationTls>,
}

/// The primary's side of the handshake: sends `C` (a random challenge) and checks the `P`
/// that answers it. With no secret every answer passes (the connecting node's is ignored).
pub(crate) fn challenge(socket: &mut Link, secret: Option<&ReplicationSecret>) -> io::Result<()> {
    use hmac::Mac;
    let nonce: [u8; 32] = rand::random();
    write_message(socket, b'C', &[&nonce])?;
    let refuse = |socket: &mut Link, message: &str| {
        let _ = write_message(socket, b'E', &[message.as_bytes()]);
        Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            message.to_string(),
        ))
    };
    let Some((tag, proof)) = read_small_message(socket, PROOF_BYTES_MAX)? else {
        return refuse(socket, "no answer to the replication challenge");
    };
    if tag != b'P' {
        return refuse(
            socket,
            "not a Hayate replication connection of this version (no answer to the challenge)",
        );
    }
    match secret {
        Some(secret) if secret.mac(&nonce).verify_slice(&proof).is_err() => refuse(
            socket,
            "replication authentication failed: the standby does not know this primary's \
             ha_replication_secret",
        ),
        _ => Ok(()),
    }
}

/// The connecting node's side: reads the primary's `C` and answers `P`, the proof of the
/// secret (empty without one).
pub(crate) fn answer_challenge(
    socket: &mut Link,
    secret: Option<&ReplicationSecret>,
    abandon: &dyn Fn() -> bool,
) -> io::Result<()> {
    use hmac::Mac;
    let started = std::time::Instant::now();
    let nonce = loop {
        match read_message(socket)? {
            Some((b'C', nonce)) => break nonce,
            Some((b'E', message)) => {
                return Err(io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    String::from_utf8_lossy(&message).into_owned(),
                ))
            }
            Some((tag, _)) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("replication message {tag:#x} before the challenge"),
                ))
            }
            None if started.elapsed() > HANDSHAKE_TIMEOUT => {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "no replication challenge from the primary",
                ))
            }
            // The node stops or is promoted meanwhile: no need to wait any longer.
            None if abandon() => {
                return Err(io::Error::new(
                    io::ErrorKind::Interrupted,
                    "connecting to the primary given up",
                ))
            }
            None => {}
        }
    };
    let proof = secret.map_or(Vec::new(), |secret| {
        secret.mac(&nonce).finalize().into_bytes().to_vec()
    });
    write_message(socket, b'P', &[&proof])
}
/// Largest message accepted (a flush is at most a log buffer, 16 MiB by default).
pub(crate) const MESSAGE_BYTES_MAX: usize = 256 << 20;
/// Pause between a standby's connection attempts.
pub(crate) const RECONNECT_PAUSE: Duration = Duration::from_millis(200);
/// Pause before trying again after the primary refused this standby (it must be seeded again).
pub(crate) const REFUSED_PAUSE: Duration = Duration::from_secs(5);
/// How often waiting threads look at their stop flags.
pub(crate) const POLL: Duration = Duration::from_millis(100);
/// Each side of a following connection sends something at least this often (the primary a
/// `K`, the standby an `A`), so that the other can tell a quiet link from a dead one: a
/// quarter of the shortest peer timeout allowed (1 s), so both sides' keepalives fit in the
/// other's timeout whatever either configured.
const KEEPALIVE_INTERVAL: Duration = Duration::from_millis(250);
/// How long connecting to a primary may take (an unanswered SYN would otherwise hold the
/// standby for minutes, away from its stop and promotion checks).
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// A following connection that brought nothing for this long is dropped by either side
/// (PostgreSQL's wal_sender_timeout and wal_receiver_timeout): a peer that vanished without
/// closing (a dead host, a cable, a black hole) is not waited for, and a standby moves on
/// to the primary it was told of.
pub const PEER_TIMEOUT_DEFAULT: Duration = Duration::from_secs(10);
/// Log bytes a sender reads from the files per message while the standby is behind.
pub(crate) const CATCH_UP_BYTES_MAX: u64 = 4 << 20;
/// The file whose appearance promotes a standby (`hayate promote`).
pub const PROMOTE_FILE: &str = "promote";

pub(crate) fn write_message(socket: &mut Link, tag: u8, parts: &[&[u8]]) -> io::Result<()> {
    let length: usize = parts.iter().map(|part| part.len()).sum();
    let mut message = Vec::with_capacity(5 + length);
    message.push(tag);
    message.extend_from_slice(&(length as u32).to_be_bytes());
    for part in parts {
        message.extend_from_slice(part);
    }
    socket.write_all(&message)
}

/// How often a side sends a keepalive: `KEEPALIVE_INTERVAL`, or four times within a peer
/// timeout shorter than the one allowed (tests), so a healthy quiet link never reaches it.
pub(crate) fn keepalive_interval(timeout: Duration) -> Duration {
    KEEPALIVE_INTERVAL.min(timeout / 4)
}

/// Connects to `address` (host:port), each of its addresses within `CONNECT_TIMEOUT`, with
/// TLS when `tls` is given (its handshake given up when `abandon` says so); the socket has
/// no delay and reads time out after `POLL`.
pub(crate) fn connect(
    address: &str,
    tls: Option<&ReplicationTls>,
    abandon: &dyn Fn() -> bool,
) -> io::Result<Link> {
    use std::net::ToSocketAddrs;
    let mut last = io::Error::new(io::ErrorKind::NotFound, format!("{address}: no address"));
    for resolved in address.to_socket_addrs()? {
        match TcpStream::connect_timeout(&resolved, CONNECT_TIMEOUT) {
            Ok(socket) => {
                socket.set_nodelay(true)?;
                socket.set_read_timeout(Some(POLL))?;
                return Link::connect(socket, address, tls, abandon);
            }
            Err(error) => last = error,
        }
    }
    Err(last)
}

/// Reads one message. With a read timeout on the socket, returns `Ok(None)` when the timeout
/// passed before the first byte; once a message has begun it is read whole, unless no byte
/// of it comes for `PEER_TIMEOUT_DEFAULT` (a peer gone mid-message: `TimedOut`).
pub(crate) fn read_message(socket: &mut Link) -> io::Result<Option<(u8, Vec<u8>)>> {
    read_message_within(socket, PEER_TIMEOUT_DEFAULT)
}

/// `read_message`, giving up on a message that stalled for `stall_limit`.
pub(crate) fn read_message_within(
    socket: &mut Link,
    stall_limit: Duration,
) -> io::Result<Option<(u8, Vec<u8>)>> {
    let mut header = [0u8; 5];
    if !fill(socket, &mut header, false, stall_limit)? {
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
    fill(socket, &mut payload, true, stall_limit)?;
    Ok(Some((header[0], payload)))
}

/// Fills `buf` from the socket. Returns false if a read timed out before any byte and
/// `begun` is false (nothing consumed); otherwise keeps reading through timeouts, until no
/// byte came for `stall_limit` (`TimedOut`).
pub(crate) fn fill(
    socket: &mut Link,
    buf: &mut [u8],
    mut begun: bool,
    stall_limit: Duration,
) -> io::Result<bool> {
    let mut filled = 0;
    let mut progress = std::time::Instant::now();
    while filled < buf.len() {
        match socket.read(&mut buf[filled..]) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(read) => {
                filled += read;
                begun = true;
                progress = std::time::Instant::now();
            }
            Err(error) if is_timeout(&error) => {
                if !begun {
                    return Ok(false);
                }
                if progress.elapsed() >= stall_limit {
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!(
                            "a replication message stalled for {:.1} s",
                            progress.elapsed().as_secs_f64()
                        ),
                    ));
                }
            }
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    }
    Ok(true)
}

pub(crate) fn is_timeout(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

pub(crate) fn lsn_of(payload: &[u8]) -> io::Result<Lsn> {
    payload
        .get(..8)
        .map(|bytes| u64::from_be_bytes(bytes.try_into().expect("8 bytes")))
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "short replication message"))
}
