//! The responses of many connections sent in one system call.
//!
//! An event loop serves a batch of ready connections per wakeup. Writing each response with
//! its own `send` costs a system call per query, and each send wakes a client that then
//! preempts the loop's thread before the next connection is served (on a busy machine the
//! client and the loop share a core): half the server's time per point select went to those
//! switches. Instead, each connection's responses wait in its own buffer and the loop sends
//! all of them with one `io_uring_enter` once every ready connection has been served.
//!
//! Lifecycle:
//! 1. An event loop's thread `install`s its batch (an io_uring of `RING_ENTRIES`) and spawns
//!    the batch's sender task (`run_sender`). Without io_uring (an old kernel, a sandbox that
//!    forbids it) there is no batch and connections write their responses themselves.
//! 2. A connection's `BatchedStream` appends what pgwire writes to its `Outgoing` buffer; a
//!    flush puts the connection on the loop's list (once) and wakes the sender, which tokio
//!    runs after the connections that were already ready.
//! 3. The sender submits one non-blocking send (`MSG_DONTWAIT`) per listed connection and
//!    waits for all of them; io_uring completes such sends inline, so the wait never blocks.
//! 4. What a full socket did not take stays in the buffer and the connection is `stalled`:
//!    its task is woken and writes the rest itself as the socket drains, before it reads
//!    again. A failed send is kept as the connection's error.
//! 5. A buffer past `BUFFERED_BYTES_MAX` (a large result) is written by the connection
//!    itself, so memory per connection stays bounded.
//!
//! The sender also submits the page reads the loop's statements queued this round on the
//! loop's read ring (`hayate_engine::submit_thread_ring`, before the sends, so the device
//! starts on them first): one system call for all of a round's misses (`crate::fiber_task`).

use std::cell::RefCell;
use std::future::Future;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll, Waker};

use io_uring::{opcode, types, IoUring};
use parking_lot::{Mutex, MutexGuard};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::tls;

/// Sends submitted in one system call at most (more wait for the next round).
const RING_ENTRIES: u32 = 64;
/// Bytes a connection keeps for the batch before it writes them itself.
const BUFFERED_BYTES_MAX: usize = 64 * 1024;
/// A buffer grown larger than this (by a large result) is freed once empty.
const RETAINED_CAPACITY_MAX: usize = 256 * 1024;

/// One event loop's pending sends.
struct SendBatch {
    ring: IoUring,
    /// Connections with bytes to send, each listed once (`Pending::listed`).
    listed: Vec<Arc<Outgoing>>,
    /// The sender task, woken when the list becomes non-empty.
    sender: Option<Waker>,
}

thread_local! {
    /// The batch of the event loop running on this thread, if any.
    static BATCH: RefCell<Option<SendBatch>> = const { RefCell::new(None) };
}

/// Sets up this thread's batch and returns its sender task, to be spawned on the thread's
/// (current-thread) runtime. None when io_uring is unavailable: connections then write
/// their responses themselves.
pub(crate) fn install() -> Option<impl Future<Output = ()> + Send> {
    let ring = match IoUring::new(RING_ENTRIES) {
        Ok(ring) => ring,
        Err(error) => {
            log::info!("io_uring unavailable ({error}); responses are sent one by one");
            return None;
        }
    };
    BATCH.with(|batch| {
        *batch.borrow_mut() = Some(SendBatch {
            ring,
            listed: Vec::new(),
            sender: None,
        })
    });
    Some(run_sender())
}

/// True if this thread has a batch (its sender task submits the loop's queued reads).
pub(crate) fn installed() -> bool {
    BATCH.with(|batch| batch.borrow().is_some())
}

/// Makes the sender task run this round (after the tasks already ready): a read was queued.
pub(crate) fn wake_sender() {
    BATCH.with(|batch| {
        if let Some(sender) = batch
            .borrow()
            .as_ref()
            .and_then(|batch| batch.sender.as_ref())
        {
            sender.wake_by_ref();
        }
    });
}

/// The sender task: each time it runs, sends what the listed connections have buffered.
/// It never ends; the loop's runtime drops it on shutdown.
async fn run_sender() {
    std::future::poll_fn(|cx| {
        BATCH.with(|batch| {
            if let Some(batch) = batch.borrow_mut().as_mut() {
                match &batch.sender {
                    Some(sender) if sender.will_wake(cx.waker()) => {}
                    _ => batch.sender = Some(cx.waker().clone()),
                }
                hayate_engine::submit_thread_ring();
                batch.send_listed();
            }
        });
        Poll::<()>::Pending
    })
    .await
}

impl SendBatch {
    /// Sends every listed connection's buffer, `RING_ENTRIES` per system call.
    fn send_listed(&mut self) {
        while !self.listed.is_empty() {
            let count = self.listed.len().min(RING_ENTRIES as usize);
            let round: Vec<Arc<Outgoing>> = self.listed.drain(..count).collect();
            // The guards are held across the system call: the buffers cannot move and a
            // connection dropped meanwhile (on another thread at shutdown) cannot close its
            // socket, whose descriptor could otherwise be reused by a new connection.
            let mut guards: Vec<MutexGuard<'_, Pending>> = round
                .iter()
                .map(|outgoing| outgoing.pending.lock())
                .collect();
            let mut submitted = 0;
            for (index, (outgoing, pending)) in round.iter().zip(guards.iter_mut()).enumerate() {
                pending.listed = false;
                if pending.closed || pending.stalled || pending.bytes.is_empty() {
                    continue;
                }
                let length = pending.bytes.len().min(u32::MAX as usize) as u32;
                let send =
                    opcode::Send::new(types::Fd(outgoing.fd), pending.bytes.as_ptr(), length)
                        .flags(libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL)
                        .build()
                        .user_data(index as u64);
                // SAFETY: the buffer stays alive and unmoved until the send completes: its
                // guard is held until `submit_and_wait` below has returned every completion.
                // The ring has room: at most RING_ENTRIES entries per round, all reaped.
                unsafe { self.ring.submission().push(&send) }.expect("a round fits the ring");
                submitted += 1;
            }
            if submitted == 0 {
                continue;
            }
            let mut completed = 0;
            while completed < submitted {
                if let Err(error) = self.ring.submit_and_wait(submitted - completed) {
                    if error.kind() == io::ErrorKind::Interrupted {
                        continue;
                    }
                    // The kernel refused the whole submission: each connection writes
                    // its own bytes instead.
                    for pending in guards
                        .iter_mut()
                        .filter(|pending| !pending.bytes.is_empty())
                    {
                        pending.stall();
                    }
                    log::warn!("sending responses through io_uring: {error}");
                    break;
                }
                for completion in self.ring.completion() {
                    completed += 1;
                    let pending = &mut guards[completion.user_data() as usize];
                    pending.sent(completion.result());
                }
            }
        }
    }
}

/// The bytes a connection has written but not yet sent.
pub(crate) struct Outgoing {
    fd: RawFd,
    pending: Mutex<Pending>,
}

#[derive(Default)]
struct Pending {
    bytes: Vec<u8>,
    /// On its loop's list, to be sent by the loop's sender.
    listed: bool,
    /// The socket was full: the connection sends the rest itself when it drains.
    stalled: bool,
    /// The connection is gone; nothing may be sent on its descriptor.
    closed: bool,
    /// A send failed; the connection's next read or write returns it.
    error: Option<io::Error>,
    /// The connection's task, woken when its send stalls or fails.
    task: Option<Waker>,
}

impl Pending {
    /// Records the result of a batched send of `bytes`.
    fn sent(&mut self, result: i32) {
        match result {
            sent if sent >= 0 => {
                self.bytes.drain(..sent as usize);
                if !self.bytes.is_empty() {
                    self.stall();
                } else if self.bytes.capacity() > RETAINED_CAPACITY_MAX {
                    self.bytes = Vec::new();
                }
            }
            error if -error == libc::EAGAIN => self.stall(),
            error => {
                self.error = Some(io::Error::from_raw_os_error(-error));
                self.wake_task();
            }
        }
    }

    fn stall(&mut self) {
        self.stalled = true;
        self.wake_task();
    }

    fn wake_task(&mut self) {
        if let Some(task) = self.task.take() {
            task.wake();
        }
    }

    /// The error of a failed batched send, once.
    fn take_error(&mut self) -> io::Result<()> {
        match self.error.take() {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }

    /// Writes buffered bytes on `socket` itself until at most `keep` remain.
    fn write_down_to<S: AsyncWrite + Unpin>(
        &mut self,
        socket: &mut S,
        cx: &mut Context<'_>,
        keep: usize,
    ) -> Poll<io::Result<()>> {
        while self.bytes.len() > keep {
            let written = ready!(Pin::new(&mut *socket).poll_write(cx, &self.bytes))?;
            if written == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.bytes.drain(..written);
        }
        if self.bytes.is_empty() {
            self.stalled = false;
        }
        Poll::Ready(Ok(()))
    }
}

/// A socket whose writes wait for the event loop's batch (see the module documentation).
/// Once `start_tls` is called, the bytes on the socket are TLS: the buffer holds records.
pub(crate) struct BatchedStream<S: AsRawFd> {
    socket: S,
    outgoing: Arc<Outgoing>,
    tls: Option<Box<tls::Layer>>,
}

impl<S: AsRawFd> BatchedStream<S> {
    pub(crate) fn new(socket: S) -> BatchedStream<S> {
        let outgoing = Arc::new(Outgoing {
            fd: socket.as_raw_fd(),
            pending: Mutex::new(Pending::default()),
        });
        BatchedStream {
            socket,
            outgoing,
            tls: None,
        }
    }

    /// From now on the stream speaks TLS (what was written before leaves in the clear, first).
    pub(crate) fn start_tls(&mut self, layer: tls::Layer) {
        self.tls = Some(Box::new(layer));
    }

    pub(crate) fn is_tls(&self) -> bool {
        self.tls.is_some()
    }
}

impl<S: AsyncRead + AsyncWrite + AsRawFd + Unpin> AsyncRead for BatchedStream<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            {
                let mut pending = this.outgoing.pending.lock();
                pending.take_error()?;
                if pending.stalled {
                    // Pending means the socket is still full; the task is woken when it
                    // drains.
                    if let Poll::Ready(Err(error)) = pending.write_down_to(&mut this.socket, cx, 0)
                    {
                        return Poll::Ready(Err(error));
                    }
                }
            }
            let Some(tls) = this.tls.as_deref_mut() else {
                return Pin::new(&mut this.socket).poll_read(cx, buf);
            };
            if let Poll::Ready(read) = tls.read_plaintext(buf) {
                return Poll::Ready(read);
            }
            let records = tls.read_records(&mut this.socket, cx);
            // What the session answers (a handshake flight, an alert) goes out now, written
            // by the connection (the stalled path above) rather than waiting for a batch.
            let mut pending = this.outgoing.pending.lock();
            let answered = tls.drain(&mut pending.bytes)?;
            if answered {
                pending.stalled = true;
            }
            match records {
                Poll::Ready(Ok(())) => {}
                Poll::Ready(Err(error)) => {
                    // The alert leaves if the socket takes it at once.
                    let _ = pending.write_down_to(&mut this.socket, cx, 0);
                    return Poll::Ready(Err(error));
                }
                Poll::Pending if answered => {}
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

impl<S: AsyncRead + AsyncWrite + AsRawFd + Unpin> AsyncWrite for BatchedStream<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let mut pending = this.outgoing.pending.lock();
        pending.take_error()?;
        if pending.bytes.len() >= BUFFERED_BYTES_MAX {
            ready!(pending.write_down_to(&mut this.socket, cx, BUFFERED_BYTES_MAX / 2))?;
        }
        match this.tls.as_deref_mut() {
            Some(tls) => tls.encrypt(buf, &mut pending.bytes)?,
            None => pending.bytes.extend_from_slice(buf),
        }
        Poll::Ready(Ok(buf.len()))
    }

    /// Lists the connection on its loop's batch; the bytes leave with the batch (or, without
    /// one or when the socket is full, are written here).
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let mut pending = this.outgoing.pending.lock();
        pending.take_error()?;
        if pending.bytes.is_empty() || pending.listed {
            return Poll::Ready(Ok(()));
        }
        if !pending.stalled && list(&this.outgoing) {
            pending.listed = true;
            match &pending.task {
                Some(task) if task.will_wake(cx.waker()) => {}
                _ => pending.task = Some(cx.waker().clone()),
            }
            return Poll::Ready(Ok(()));
        }
        pending.write_down_to(&mut this.socket, cx, 0)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        {
            let mut pending = this.outgoing.pending.lock();
            pending.take_error()?;
            if let Some(tls) = this.tls.as_deref_mut() {
                tls.close();
                tls.drain(&mut pending.bytes)?;
            }
            ready!(pending.write_down_to(&mut this.socket, cx, 0))?;
        }
        Pin::new(&mut this.socket).poll_shutdown(cx)
    }
}

impl<S: AsRawFd> Drop for BatchedStream<S> {
    /// What is still buffered (a last error message before a FATAL close) is sent if the
    /// socket takes it at once; the descriptor is never used by the batch again.
    fn drop(&mut self) {
        let mut pending = self.outgoing.pending.lock();
        pending.closed = true;
        // A TLS session ends with its close_notify (clients report a bare close as an
        // unexpected end of file).
        if let Some(tls) = self.tls.as_deref_mut() {
            tls.close();
            let _ = tls.drain(&mut pending.bytes);
        }
        let mut unsent: &[u8] = &pending.bytes;
        while !unsent.is_empty() {
            // SAFETY: the descriptor is open (the socket is dropped after this) and `unsent`
            // is a live slice of the given length.
            let sent = unsafe {
                libc::send(
                    self.socket.as_raw_fd(),
                    unsent.as_ptr().cast(),
                    unsent.len(),
                    libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
                )
            };
            if sent <= 0 {
                break;
            }
            unsent = &unsent[sent as usize..];
        }
    }
}

/// Puts `outgoing` on this thread's batch and wakes the sender; false without a batch.
fn list(outgoing: &Arc<Outgoing>) -> bool {
    BATCH.with(|batch| {
        let Ok(mut batch) = batch.try_borrow_mut() else {
            return false;
        };
        let Some(batch) = batch.as_mut() else {
            return false;
        };
        if batch.listed.is_empty() {
            if let Some(sender) = &batch.sender {
                sender.wake_by_ref();
            }
        }
        batch.listed.push(outgoing.clone());
        true
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::UnixStream;

    /// A current-thread runtime like an event loop's, with the batch installed on it.
    fn run_on_loop<F: Future>(test: impl FnOnce() -> F) -> F::Output {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let sender = install().expect("io_uring works on the machines Hayate runs on");
            tokio::spawn(sender);
            test().await
        })
    }

    /// Bytes numbered so that a lost, repeated or reordered chunk shows.
    fn pattern(start: usize, length: usize) -> Vec<u8> {
        (start..start + length).map(|i| (i % 251) as u8).collect()
    }

    /// Writes `pattern(0, total)` in uneven chunks, flushed after each (as pgwire does per
    /// message): the batch sends some, the socket fills, the rest goes through the stalled
    /// path.
    async fn write_uneven_chunks(stream: &mut BatchedStream<UnixStream>, total: usize) {
        let mut written = 0;
        for length in (1..).map(|i| (i * 7919) % 70_000 + 1) {
            let length = length.min(total - written);
            stream.write_all(&pattern(written, length)).await.unwrap();
            stream.flush().await.unwrap();
            written += length;
            if written == total {
                break;
            }
        }
    }

    #[test]
    fn several_connections_flushed_together_each_get_their_bytes() {
        run_on_loop(|| async {
            let mut streams = Vec::new();
            let mut peers = Vec::new();
            for _ in 0..5 {
                let (ours, theirs) = UnixStream::pair().unwrap();
                streams.push(BatchedStream::new(ours));
                peers.push(theirs);
            }
            for (index, stream) in streams.iter_mut().enumerate() {
                stream
                    .write_all(&pattern(index, 100 + index))
                    .await
                    .unwrap();
                stream.flush().await.unwrap();
                // Listed, not yet sent: the sender runs after this task yields.
                assert!(stream.outgoing.pending.lock().listed);
            }
            for (index, peer) in peers.iter_mut().enumerate() {
                let mut received = vec![0; 100 + index];
                peer.read_exact(&mut received).await.unwrap();
                assert_eq!(received, pattern(index, 100 + index));
            }
        });
    }

    #[test]
    fn a_response_larger_than_the_socket_buffer_arrives_whole_and_in_order() {
        let total = 8 << 20;
        let received = run_on_loop(|| async move {
            let (ours, mut theirs) = UnixStream::pair().unwrap();
            let reader = tokio::spawn(async move {
                let mut received = Vec::new();
                theirs.read_to_end(&mut received).await.unwrap();
                received
            });
            let mut stream = BatchedStream::new(ours);
            write_uneven_chunks(&mut stream, total).await;
            stream.shutdown().await.unwrap();
            drop(stream);
            reader.await.unwrap()
        });
        assert_eq!(received.len(), total);
        assert!(received == pattern(0, total), "bytes lost or out of order");
    }

    #[test]
    fn over_tls_a_request_and_a_large_response_arrive_whole_and_in_order() {
        let total = 8 << 20;
        let certified = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        let key =
            rustls::pki_types::PrivateKeyDer::Pkcs8(certified.signing_key.serialize_der().into());
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let server = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![certified.cert.der().clone()], key)
            .unwrap();
        let mut roots = rustls::RootCertStore::empty();
        roots.add(certified.cert.der().clone()).unwrap();
        let client = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
        // The client: blocking rustls on its own thread, checking the server's certificate.
        let client = std::thread::spawn(move || {
            let name = "localhost".try_into().unwrap();
            let session = rustls::ClientConnection::new(Arc::new(client), name).unwrap();
            let mut stream = rustls::StreamOwned::new(session, theirs);
            std::io::Write::write_all(&mut stream, b"request").unwrap();
            let mut received = Vec::new();
            std::io::Read::read_to_end(&mut stream, &mut received).unwrap();
            received
        });
        run_on_loop(|| async move {
            ours.set_nonblocking(true).unwrap();
            let mut stream = BatchedStream::new(UnixStream::from_std(ours).unwrap());
            stream.start_tls(tls::Layer::new(&Arc::new(server)).unwrap());
            let mut request = [0; 7];
            stream.read_exact(&mut request).await.unwrap();
            assert_eq!(&request, b"request");
            write_uneven_chunks(&mut stream, total).await;
            // The close_notify ends the client's read cleanly.
            stream.shutdown().await.unwrap();
        });
        let received = client.join().unwrap();
        assert_eq!(received.len(), total);
        assert!(received == pattern(0, total), "bytes lost or out of order");
    }

    #[test]
    fn without_a_batch_a_flush_sends_at_once() {
        // A thread without an installed batch (io_uring unavailable): nothing is listed.
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let (ours, mut theirs) = UnixStream::pair().unwrap();
            let mut stream = BatchedStream::new(ours);
            stream.write_all(&pattern(0, 300)).await.unwrap();
            stream.flush().await.unwrap();
            assert!(!stream.outgoing.pending.lock().listed);
            assert!(stream.outgoing.pending.lock().bytes.is_empty());
            let mut received = vec![0; 300];
            theirs.read_exact(&mut received).await.unwrap();
            assert_eq!(received, pattern(0, 300));
        });
    }

    #[test]
    fn a_send_to_a_closed_peer_fails_the_connection() {
        run_on_loop(|| async {
            let (ours, theirs) = UnixStream::pair().unwrap();
            drop(theirs);
            let mut stream = BatchedStream::new(ours);
            let mut failure = None;
            for _ in 0..10 {
                let attempt = async {
                    stream.write_all(b"ErrorResponse").await?;
                    stream.flush().await
                };
                if let Err(error) = attempt.await {
                    failure = Some(error);
                    break;
                }
                tokio::task::yield_now().await;
            }
            let failure = failure.expect("the failed batched send is reported");
            assert_eq!(failure.kind(), io::ErrorKind::BrokenPipe);
        });
    }
}
