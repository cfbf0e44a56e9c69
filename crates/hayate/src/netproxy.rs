//! A user-space TCP proxy that emulates the network between two nodes on one machine
//! (netem is not available here): a one-way delay added to every byte in each direction, and
//! partitions. Tests cut replication and etcd links with it, and the lab adds network latency
//! between a primary and its standby.
//!
//! Lifecycle of a proxied connection:
//! 1. The accept thread takes a client connection on `address()` (127.0.0.1, a free port) and
//!    connects to the target; while partitioned it closes the client at once instead.
//! 2. Each direction has a reader thread, which stamps every chunk it reads with its due time
//!    (now + delay) and queues it, and a writer thread, which writes each chunk once due, so
//!    the delay is latency only: chunks in flight overlap, as on a real link.
//! 3. `partition` shuts every open connection down (both ends see it closed) and refuses new
//!    ones until `heal`. Dropping the proxy stops it the same way.
//! 4. `black_hole` is the silent failure (a dead host, a pulled cable): nothing passes and
//!    nothing is closed; new connections are taken and hang. On `heal` what was held passes
//!    on and the hanging connections are closed.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often idle threads look at the proxy's state.
const POLL: Duration = Duration::from_millis(10);

struct Shared {
    target: SocketAddr,
    /// One-way delay, nanoseconds.
    delay_ns: AtomicU64,
    partitioned: AtomicBool,
    /// Bytes are held and new connections hang (`black_hole`).
    silent: AtomicBool,
    /// Connections taken so far.
    accepted: AtomicU64,
    /// Bumped by `partition`: connections of an older generation end.
    generation: AtomicU64,
    stop: AtomicBool,
}

impl Shared {
    fn cut(&self, generation: u64) -> bool {
        self.stop.load(Ordering::Acquire) || self.generation.load(Ordering::Acquire) != generation
    }
}

/// A TCP proxy to one target address (module documentation).
pub struct Proxy {
    address: SocketAddr,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

impl Proxy {
    /// Listens on 127.0.0.1 (a free port) and forwards every connection to `target`.
    pub fn start(target: SocketAddr) -> io::Result<Proxy> {
        let listener = TcpListener::bind(("127.0.0.1", 0))?;
        listener.set_nonblocking(true)?;
        let address = listener.local_addr()?;
        let shared = Arc::new(Shared {
            target,
            delay_ns: AtomicU64::new(0),
            partitioned: AtomicBool::new(false),
            silent: AtomicBool::new(false),
            accepted: AtomicU64::new(0),
            generation: AtomicU64::new(0),
            stop: AtomicBool::new(false),
        });
        let accept_shared = shared.clone();
        let accept = std::thread::Builder::new()
            .name("netproxy-accept".into())
            .spawn(move || accept_loop(&listener, &accept_shared))?;
        Ok(Proxy {
            address,
            shared,
            accept: Some(accept),
        })
    }

    /// Where clients connect instead of the target.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Adds `delay` to every byte, each direction (a round trip gains twice it).
    pub fn set_delay(&self, delay: Duration) {
        self.shared
            .delay_ns
            .store(delay.as_nanos() as u64, Ordering::Release);
    }

    /// Cuts the link: open connections are shut down, new ones refused, until `heal`.
    pub fn partition(&self) {
        self.shared.partitioned.store(true, Ordering::Release);
        self.shared.generation.fetch_add(1, Ordering::AcqRel);
    }

    /// How many connections the proxy has taken (refused and hanging ones included): a
    /// client that connects again shows here.
    pub fn connections_accepted(&self) -> u64 {
        self.shared.accepted.load(Ordering::Acquire)
    }

    /// Fails silently: bytes stop passing, connections stay open, new ones hang, until
    /// `heal`.
    pub fn black_hole(&self) {
        self.shared.silent.store(true, Ordering::Release);
    }

    /// Lets connections through again.
    pub fn heal(&self) {
        self.shared.partitioned.store(false, Ordering::Release);
        self.shared.silent.store(false, Ordering::Release);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        if let Some(accept) = self.accept.take() {
            let _ = accept.join();
        }
    }
}

fn accept_loop(listener: &TcpListener, shared: &Arc<Shared>) {
    // Connections taken during a black hole, closed when it ends.
    let mut hanging = Vec::new();
    while !shared.stop.load(Ordering::Acquire) {
        if !shared.silent.load(Ordering::Acquire) {
            hanging.clear();
        }
        let accepted = listener.accept();
        if accepted.is_ok() {
            shared.accepted.fetch_add(1, Ordering::AcqRel);
        }
        match accepted {
            Ok((client, _)) if shared.silent.load(Ordering::Acquire) => hanging.push(client),
            Ok((client, _)) => {
                // The generation first: a partition after this load ends the connection.
                let generation = shared.generation.load(Ordering::Acquire);
                if shared.partitioned.load(Ordering::Acquire) {
                    let _ = client.shutdown(Shutdown::Both);
                    continue;
                }
                match TcpStream::connect(shared.target) {
                    Ok(server) => {
                        if let Err(error) = forward(client, server, shared, generation) {
                            log::warn!("netproxy: {error}");
                        }
                    }
                    Err(_) => {
                        let _ = client.shutdown(Shutdown::Both);
                    }
                }
            }
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => std::thread::sleep(POLL),
            Err(error) => {
                log::warn!("netproxy: accepting: {error}");
                std::thread::sleep(POLL);
            }
        }
    }
}

/// Starts both directions of one connection.
fn forward(
    client: TcpStream,
    server: TcpStream,
    shared: &Arc<Shared>,
    generation: u64,
) -> io::Result<()> {
    for socket in [&client, &server] {
        socket.set_nodelay(true)?;
        socket.set_read_timeout(Some(POLL))?;
    }
    let directions = [(client.try_clone()?, server.try_clone()?), (server, client)];
    for (from, to) in directions {
        let (sender, receiver) = mpsc::channel::<(Instant, Vec<u8>)>();
        let reader_shared = shared.clone();
        let reader_from = from.try_clone()?;
        // When the reader ends, its queue's sender goes: the writer passes the close on once
        // the queue is empty.
        std::thread::Builder::new()
            .name("netproxy-read".into())
            .spawn(move || read_side(reader_from, &sender, &reader_shared, generation))?;
        let writer_shared = shared.clone();
        std::thread::Builder::new()
            .name("netproxy-write".into())
            .spawn(move || write_side(to, from, &receiver, &writer_shared, generation))?;
    }
    Ok(())
}

fn read_side(
    mut from: TcpStream,
    queue: &mpsc::Sender<(Instant, Vec<u8>)>,
    shared: &Shared,
    generation: u64,
) {
    let mut buffer = vec![0u8; 64 << 10];
    while !shared.cut(generation) {
        match from.read(&mut buffer) {
            Ok(0) => break,
            Ok(read) => {
                let delay = Duration::from_nanos(shared.delay_ns.load(Ordering::Acquire));
                if queue
                    .send((Instant::now() + delay, buffer[..read].to_vec()))
                    .is_err()
                {
                    break;
                }
            }
            Err(error)
                if matches!(
                    error.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) => {}
            Err(_) => break,
        }
    }
    if shared.cut(generation) {
        let _ = from.shutdown(Shutdown::Both);
    }
}

fn write_side(
    mut to: TcpStream,
    from: TcpStream,
    queue: &mpsc::Receiver<(Instant, Vec<u8>)>,
    shared: &Shared,
    generation: u64,
) {
    loop {
        if shared.cut(generation) {
            break;
        }
        if shared.silent.load(Ordering::Acquire) {
            std::thread::sleep(POLL);
            continue;
        }
        match queue.recv_timeout(POLL) {
            Ok((due, bytes)) => {
                let now = Instant::now();
                if due > now {
                    std::thread::sleep(due - now);
                }
                // A chunk taken as the black hole began waits for it to end.
                while shared.silent.load(Ordering::Acquire) && !shared.cut(generation) {
                    std::thread::sleep(POLL);
                }
                if shared.cut(generation) || to.write_all(&bytes).is_err() {
                    break;
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            // The reader ended (its side closed): pass the close on.
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                let _ = to.shutdown(Shutdown::Write);
                return;
            }
        }
    }
    // Cut: both ends see the connection end.
    let _ = to.shutdown(Shutdown::Both);
    let _ = from.shutdown(Shutdown::Both);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An echo server on 127.0.0.1.
    fn echo() -> SocketAddr {
        let listener = TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let address = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                std::thread::spawn(move || {
                    let mut stream = stream;
                    let mut buffer = [0u8; 4096];
                    while let Ok(read) = stream.read(&mut buffer) {
                        if read == 0 || stream.write_all(&buffer[..read]).is_err() {
                            break;
                        }
                    }
                });
            }
        });
        address
    }

    fn round_trip(stream: &mut TcpStream, message: &[u8]) -> io::Result<Vec<u8>> {
        stream.write_all(message)?;
        let mut reply = vec![0u8; message.len()];
        stream.read_exact(&mut reply)?;
        Ok(reply)
    }

    #[test]
    fn forwards_adds_latency_and_partitions() {
        let proxy = Proxy::start(echo()).unwrap();
        let mut stream = TcpStream::connect(proxy.address()).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        assert_eq!(round_trip(&mut stream, b"hello").unwrap(), b"hello");

        proxy.set_delay(Duration::from_millis(30));
        let started = Instant::now();
        assert_eq!(round_trip(&mut stream, b"slow").unwrap(), b"slow");
        assert!(
            started.elapsed() >= Duration::from_millis(60),
            "a round trip crosses the delay twice: {:?}",
            started.elapsed()
        );
        proxy.set_delay(Duration::ZERO);

        proxy.partition();
        assert!(
            round_trip(&mut stream, b"cut").is_err(),
            "an open connection is cut"
        );
        let mut refused = TcpStream::connect(proxy.address()).unwrap();
        refused
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        assert!(
            round_trip(&mut refused, b"refused").is_err(),
            "a new one is closed at once"
        );

        proxy.heal();
        let mut healed = TcpStream::connect(proxy.address()).unwrap();
        healed
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        assert_eq!(round_trip(&mut healed, b"again").unwrap(), b"again");
    }

    #[test]
    fn a_black_hole_holds_bytes_without_closing_and_lets_them_pass_when_healed() {
        let proxy = Proxy::start(echo()).unwrap();
        let mut stream = TcpStream::connect(proxy.address()).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        assert_eq!(round_trip(&mut stream, b"hello").unwrap(), b"hello");
        proxy.black_hole();
        assert_eq!(proxy.connections_accepted(), 1);
        let error = round_trip(&mut stream, b"held").unwrap_err();
        assert!(
            matches!(
                error.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ),
            "silence, not a close: {error}"
        );
        let mut hanging = TcpStream::connect(proxy.address()).unwrap();
        hanging
            .set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        let error = round_trip(&mut hanging, b"new").unwrap_err();
        assert!(matches!(
            error.kind(),
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
        ));
        assert_eq!(proxy.connections_accepted(), 2);
        proxy.heal();
        // What the black hole held arrives, in order, on the connection that stayed open.
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let mut reply = [0u8; 4];
        stream.read_exact(&mut reply).unwrap();
        assert_eq!(&reply, b"held");
        assert_eq!(round_trip(&mut stream, b"after").unwrap(), b"after");
    }
}
