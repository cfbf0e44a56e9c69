//! io_uring backend with O_DIRECT: the default on Linux.
//!
//! Lifecycle of one call (`read_at`, `write_at`, a batch, `sync_data`):
//! 1. take a ring from the shared pool (rings are not `Sync`; the pool creates up to
//!    `RING_COUNT_MAX` of them, so that many threads submit at once, and makes later callers
//!    wait for a free one);
//! 2. push the requests, at most `IN_FLIGHT_MAX` at a time (longer batches go in chunks), and
//!    submit them with one system call;
//! 3. wait for all completions; a short transfer, EINTR or EAGAIN resubmits the rest;
//! 4. return the ring to the pool and report the first error, if any.
//!
//! Invariant: a call never returns while the kernel may still access a caller's buffer; every
//! submitted request is waited for, even after an error.
//!
//! Reads on a fiber (`crate::fiber`, inside an `allow_io` region) of a thread that installed its
//! own ring (`install_thread_ring`, an event loop) do not wait: each request goes on the
//! thread's ring with a completion slot as its user data, is submitted at once (no wait), and
//! the fiber suspends until the host reaps the completion (`reap_thread_ring`, when the ring's
//! eventfd turns readable) and resumes it. The ring belongs to the thread, so nothing is shared
//! and no lock is taken. A fiber unwound while its read is in flight (its connection dropped)
//! waits for the completion before its buffer goes.

use std::cell::RefCell;
use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use io_uring::{opcode, squeue, types, IoUring};
use parking_lot::{Condvar, Mutex};

use super::sync_file::{
    file_exists, list_dir, open_file, remove_file, rename_file, sync_directory,
};
use super::{Io, IoFile, IoKind, OpenOptions, ReadRequest, WriteRequest, IO_ALIGN};
use crate::error::{Error, Result};
use crate::fiber::{self, IoWait, Wait};

/// Requests in flight per ring; also the ring's submission queue size.
pub const IN_FLIGHT_MAX: usize = 256;
/// Rings in the pool, that is, threads submitting at the same time.
pub const RING_COUNT_MAX: usize = 64;
/// Largest single request; longer buffers are transferred in several (1 GiB keeps the length
/// within the u32 of a submission entry and aligned for O_DIRECT).
const REQUEST_BYTES_MAX: usize = 1 << 30;

struct PoolState {
    idle: Vec<IoUring>,
    created: usize,
}

/// Rings shared by all files of a `UringIo`.
struct RingPool {
    state: Mutex<PoolState>,
    ring_freed: Condvar,
}

impl RingPool {
    fn new() -> RingPool {
        RingPool {
            state: Mutex::new(PoolState {
                idle: Vec::new(),
                created: 0,
            }),
            ring_freed: Condvar::new(),
        }
    }

    fn acquire(&self) -> std::io::Result<RingGuard<'_>> {
        let mut state = self.state.lock();
        loop {
            if let Some(ring) = state.idle.pop() {
                return Ok(RingGuard {
                    pool: self,
                    ring: Some(ring),
                });
            }
            if state.created < RING_COUNT_MAX {
                state.created += 1;
                drop(state);
                return match IoUring::new(IN_FLIGHT_MAX as u32) {
                    Ok(ring) => Ok(RingGuard {
                        pool: self,
                        ring: Some(ring),
                    }),
                    Err(error) => {
                        self.state.lock().created -= 1;
                        Err(error)
                    }
                };
            }
            self.ring_freed.wait(&mut state);
        }
    }
}

/// A ring taken from the pool; goes back on drop.
struct RingGuard<'a> {
    pool: &'a RingPool,
    ring: Option<IoUring>,
}

impl RingGuard<'_> {
    fn ring(&mut self) -> &mut IoUring {
        self.ring.as_mut().expect("ring is present until drop")
    }
}

impl Drop for RingGuard<'_> {
    fn drop(&mut self) {
        if let Some(ring) = self.ring.take() {
            self.pool.state.lock().idle.push(ring);
            self.pool.ring_freed.notify_one();
        }
    }
}

fn is_retryable_errno(errno: i32) -> bool {
    errno == libc::EINTR || errno == libc::EAGAIN || errno == libc::EBUSY
}

/// Submits what is queued and waits for `want` completions, retrying interruptions.
fn submit_and_wait(ring: &IoUring, want: usize, in_flight: usize) -> std::io::Result<()> {
    loop {
        match ring.submit_and_wait(want) {
            Ok(_) => return Ok(()),
            // EBUSY: the completion queue is full; the caller reaps and comes back.
            Err(error) if error.raw_os_error() == Some(libc::EBUSY) => return Ok(()),
            Err(error) if error.raw_os_error().is_some_and(is_retryable_errno) => continue,
            Err(error) if in_flight == 0 => return Err(error),
            Err(error) => {
                // The kernel may still write into the caller's buffers; returning now would
                // let them be freed under it. There is no safe way on, so stop the process.
                log::error!("io_uring_enter failed with {in_flight} requests in flight: {error}");
                std::process::abort();
            }
        }
    }
}

/// Runs one request that has no buffer (fsync, nop) to completion; returns its result.
fn run_single(ring: &mut IoUring, entry: squeue::Entry) -> std::io::Result<i32> {
    loop {
        // SAFETY: the entry references no memory (fsync and nop take only a descriptor), and
        // the queue is empty between calls, so the push cannot fail.
        unsafe { ring.submission().push(&entry) }.expect("empty submission queue has room");
        submit_and_wait(ring, 1, 1)?;
        let mut completion = ring.completion();
        let Some(entry_done) = completion.next() else {
            continue;
        };
        let result = entry_done.result();
        if result < 0 && is_retryable_errno(-result) {
            continue;
        }
        return Ok(result);
    }
}

/// The ring of one thread for its fibers' reads, with the eventfd its completions signal.
struct ThreadRing {
    ring: IoUring,
    eventfd: OwnedFd,
    /// Requests queued or in flight.
    in_flight: usize,
    /// Requests are queued and submitted together by `submit_thread_ring` (the host calls it
    /// once per round of its loop) rather than one system call each.
    deferred: bool,
    /// Requests queued and not submitted yet.
    queued: usize,
}

thread_local! {
    static THREAD_RING: RefCell<Option<ThreadRing>> = const { RefCell::new(None) };
}

/// Creates the calling thread's ring for its fibers' reads (once; later calls return the same
/// descriptor) and returns an eventfd that turns readable when completions wait: the host
/// polls it and calls `reap_thread_ring`. Each read is submitted at once.
pub fn install_thread_ring() -> std::io::Result<RawFd> {
    install_ring(false)
}

/// `install_thread_ring` for a host that submits the queued reads itself, once per round of
/// its loop (`submit_thread_ring`): one system call for all the reads of a round.
pub fn install_thread_ring_deferred() -> std::io::Result<RawFd> {
    install_ring(true)
}

/// Submits the reads queued on the calling thread's ring (a deferred ring); returns how many.
pub fn submit_thread_ring() -> usize {
    THREAD_RING.with(|cell| {
        let mut cell = cell.borrow_mut();
        let Some(thread) = cell.as_mut() else {
            return 0;
        };
        let queued = std::mem::take(&mut thread.queued);
        if queued > 0 {
            // want 0: submit without waiting; requests are in flight, so a failure that would
            // leave them queued stops the process rather than let their buffers go.
            let _ = submit_and_wait(&thread.ring, 0, thread.in_flight);
        }
        queued
    })
}

fn install_ring(deferred: bool) -> std::io::Result<RawFd> {
    THREAD_RING.with(|cell| {
        let mut cell = cell.borrow_mut();
        if let Some(ring) = cell.as_ref() {
            return Ok(ring.eventfd.as_raw_fd());
        }
        let ring = IoUring::new(IN_FLIGHT_MAX as u32)?;
        // SAFETY: eventfd has no memory arguments; the result is checked.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: fd is a new descriptor that nothing else owns.
        let eventfd = unsafe { OwnedFd::from_raw_fd(fd) };
        ring.submitter().register_eventfd(fd)?;
        *cell = Some(ThreadRing {
            ring,
            eventfd,
            in_flight: 0,
            deferred,
            queued: 0,
        });
        Ok(fd)
    })
}

/// Reaps the calling thread's completions and wakes the fibers waiting for them; with `wait`,
/// first blocks until one completes (if any is in flight). Returns how many were reaped. The
/// eventfd is drained too, so the host's next poll waits for new completions.
pub fn reap_thread_ring(wait: bool) -> usize {
    let done: Vec<(usize, i32)> = THREAD_RING.with(|cell| {
        let mut cell = cell.borrow_mut();
        let Some(thread) = cell.as_mut() else {
            return Vec::new();
        };
        let mut counter = [0u8; 8];
        // SAFETY: reads 8 bytes into a local array from a non-blocking eventfd we own.
        unsafe { libc::read(thread.eventfd.as_raw_fd(), counter.as_mut_ptr().cast(), 8) };
        if wait && thread.in_flight > 0 && thread.ring.completion().is_empty() {
            // Submits what is queued too.
            thread.queued = 0;
            let _ = submit_and_wait(&thread.ring, 1, thread.in_flight);
        }
        let done: Vec<(usize, i32)> = thread
            .ring
            .completion()
            .map(|entry| (entry.user_data() as usize, entry.result()))
            .collect();
        thread.in_flight -= done.len();
        done
    });
    for &(slot, result) in &done {
        fiber::complete_io(slot, result);
    }
    done.len()
}

/// A host for `fiber::run_all` on a thread with its own ring: reaps completions (blocking when
/// every fiber waits for a read) and sleeps when every fiber waits for an instant.
pub fn reap_or_sleep(idle: fiber::Idle) {
    match idle {
        fiber::Idle::Poll => {
            reap_thread_ring(false);
        }
        fiber::Idle::Reads => {
            reap_thread_ring(true);
        }
        fiber::Idle::Until(deadline) => fiber::sleep_thread_until(deadline),
    }
}

/// Pushes one read on the thread's ring and submits it (or queues it, on a deferred ring); its
/// completion goes to `slot`. None if the thread has no ring or its ring is full (the caller
/// reads the blocking way).
fn submit_on_thread_ring(entry: squeue::Entry) -> Option<()> {
    THREAD_RING.with(|cell| {
        let mut cell = cell.borrow_mut();
        let thread = cell.as_mut()?;
        if thread.in_flight >= IN_FLIGHT_MAX {
            return None;
        }
        // SAFETY: the caller keeps the buffer valid until the completion is reaped (`Reads`
        // waits for it even when unwound); at most IN_FLIGHT_MAX requests are queued or in
        // flight, the queue's size, so the push cannot fail.
        unsafe { thread.ring.submission().push(&entry) }.expect("submission queue has room");
        thread.in_flight += 1;
        if thread.deferred {
            thread.queued += 1;
        } else {
            // want 0: submit without waiting; in_flight > 0, so a failure that would leave
            // the request queued stops the process rather than let the buffer go.
            let _ = submit_and_wait(&thread.ring, 0, thread.in_flight);
        }
        Some(())
    })
}

/// Reads submitted by a fiber, by completion slot; on drop, waits for any still in flight
/// (an unwound fiber's buffer must outlive the kernel's use of it) and frees the slots.
struct Reads {
    slots: Vec<(usize, usize)>,
}

impl Drop for Reads {
    fn drop(&mut self) {
        for &(_, slot) in &self.slots {
            while fiber::io_result(slot).is_none() {
                reap_thread_ring(true);
            }
            fiber::release_io_slot(slot);
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    Read,
    Write,
}

/// One read or write of a call, with its progress.
struct Transfer {
    /// Start of the caller's buffer; valid for `len` bytes for the whole call.
    pointer: *mut u8,
    len: usize,
    offset: u64,
    done: usize,
}

/// The io_uring backend for one data directory.
pub struct UringIo {
    dir: PathBuf,
    pool: Arc<RingPool>,
}

impl UringIo {
    /// Opens (and creates if missing) a data directory. Fails if io_uring cannot be set up or
    /// lacks the operations used here, so that callers fall back to `SyncIo`.
    pub fn new(dir: &Path) -> Result<UringIo> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir.display().to_string(), e))?;
        let pool = Arc::new(RingPool::new());
        probe(&pool).map_err(|e| Error::io("io_uring", e))?;
        Ok(UringIo {
            dir: dir.to_path_buf(),
            pool,
        })
    }

    /// The data directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Opens a file, giving the concrete type (e.g. to ask whether O_DIRECT was granted).
    pub fn open_file(&self, name: &str, options: OpenOptions) -> Result<UringFile> {
        let (file, direct) = open_file(&self.dir, name, options)?;
        Ok(UringFile {
            name: name.to_string(),
            file,
            direct,
            aligned_io: options.direct,
            pool: self.pool.clone(),
        })
    }
}

/// Creates the first ring and checks that it runs requests and knows every opcode we use.
fn probe(pool: &RingPool) -> std::io::Result<()> {
    let mut guard = pool.acquire()?;
    let ring = guard.ring();
    let mut opcodes = io_uring::Probe::new();
    ring.submitter().register_probe(&mut opcodes)?;
    for code in [opcode::Read::CODE, opcode::Write::CODE, opcode::Fsync::CODE] {
        if !opcodes.is_supported(code) {
            let message = format!("io_uring opcode {code} not supported by this kernel");
            return Err(std::io::Error::new(
                std::io::ErrorKind::Unsupported,
                message,
            ));
        }
    }
    let result = run_single(ring, opcode::Nop::new().build())?;
    if result < 0 {
        return Err(std::io::Error::from_raw_os_error(-result));
    }
    Ok(())
}

impl Io for UringIo {
    fn kind(&self) -> IoKind {
        IoKind::Uring
    }

    fn open(&self, name: &str, options: OpenOptions) -> Result<Arc<dyn IoFile>> {
        Ok(Arc::new(self.open_file(name, options)?))
    }

    fn exists(&self, name: &str) -> Result<bool> {
        file_exists(&self.dir, name)
    }

    fn remove(&self, name: &str) -> Result<()> {
        remove_file(&self.dir, name)
    }

    fn rename(&self, source: &str, target: &str) -> Result<()> {
        rename_file(&self.dir, source, target)
    }

    fn list(&self) -> Result<Vec<String>> {
        list_dir(&self.dir)
    }

    fn sync_dir(&self) -> Result<()> {
        sync_directory(&self.dir)
    }
}

/// A file of a `UringIo`.
pub struct UringFile {
    name: String,
    file: File,
    /// O_DIRECT was granted (false on file systems without it, such as tmpfs).
    direct: bool,
    /// O_DIRECT was asked for, so the caller promised aligned I/O (checked in debug builds).
    aligned_io: bool,
    pool: Arc<RingPool>,
}

impl UringFile {
    /// True if the file bypasses the page cache.
    pub fn is_direct(&self) -> bool {
        self.direct
    }

    fn check_alignment(&self, pointer: *const u8, len: usize, offset: u64) {
        if self.aligned_io {
            debug_assert!(
                (pointer as usize).is_multiple_of(IO_ALIGN)
                    && len.is_multiple_of(IO_ALIGN)
                    && offset.is_multiple_of(IO_ALIGN as u64),
                "unaligned direct I/O on {}: buffer {pointer:?}, len {len}, offset {offset}",
                self.name
            );
        }
    }

    /// Runs all transfers, `IN_FLIGHT_MAX` at a time, and returns the first error.
    fn run(&self, direction: Direction, transfers: &mut [Transfer]) -> Result<()> {
        for transfer in transfers.iter() {
            self.check_alignment(transfer.pointer, transfer.len, transfer.offset);
        }
        if direction == Direction::Read && fiber::io_may_suspend() {
            if let Some(result) = self.read_suspending(transfers) {
                return result;
            }
        }
        let mut guard = self.pool.acquire().map_err(|e| Error::io(&self.name, e))?;
        let mut first_error = None;
        for chunk in transfers.chunks_mut(IN_FLIGHT_MAX) {
            if let Err(error) = self.run_chunk(guard.ring(), direction, chunk) {
                first_error = Some(error);
                break;
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Reads on the thread's ring while the fiber is suspended (see the module docs); None if
    /// the thread has no ring or it is full. A transfer left short (EINTR, a short read) is
    /// finished the blocking way.
    fn read_suspending(&self, transfers: &mut [Transfer]) -> Option<Result<()>> {
        let mut reads = Reads {
            slots: Vec::with_capacity(transfers.len()),
        };
        for (index, transfer) in transfers.iter().enumerate() {
            if transfer.len == 0 {
                continue;
            }
            let slot = fiber::io_slot();
            let entry = self
                .entry(Direction::Read, transfer, index)
                .user_data(slot as u64);
            if submit_on_thread_ring(entry).is_none() {
                fiber::release_io_slot(slot);
                if reads.slots.is_empty() {
                    return None;
                }
                break; // the rest go the blocking way below
            }
            reads.slots.push((index, slot));
        }
        for &(_, slot) in &reads.slots {
            while fiber::io_result(slot).is_none() {
                fiber::suspend(Wait::Io(IoWait::new(slot)));
            }
        }
        let mut first_error = None;
        for &(index, slot) in &reads.slots {
            let result = fiber::io_result(slot).expect("completed");
            if let Err(error) = self.complete(Direction::Read, &mut transfers[index], result) {
                first_error.get_or_insert(error);
            }
        }
        drop(reads);
        if let Some(error) = first_error {
            return Some(Err(error));
        }
        // Short or interrupted transfers, and any the ring had no room for.
        let rest: Vec<usize> = (0..transfers.len())
            .filter(|&index| transfers[index].done < transfers[index].len)
            .collect();
        if rest.is_empty() {
            return Some(Ok(()));
        }
        let mut remaining: Vec<Transfer> = rest
            .iter()
            .map(|&index| Transfer {
                pointer: transfers[index].pointer,
                len: transfers[index].len,
                offset: transfers[index].offset,
                done: transfers[index].done,
            })
            .collect();
        Some(self.run_blocking_reads(&mut remaining))
    }

    /// `run` for reads through the shared ring pool (the blocking way).
    fn run_blocking_reads(&self, transfers: &mut [Transfer]) -> Result<()> {
        let mut guard = self.pool.acquire().map_err(|e| Error::io(&self.name, e))?;
        for chunk in transfers.chunks_mut(IN_FLIGHT_MAX) {
            self.run_chunk(guard.ring(), Direction::Read, chunk)?;
        }
        Ok(())
    }

    /// Builds the submission entry for the remaining part of transfer `index`.
    fn entry(&self, direction: Direction, transfer: &Transfer, index: usize) -> squeue::Entry {
        let fd = types::Fd(self.file.as_raw_fd());
        let len = (transfer.len - transfer.done).min(REQUEST_BYTES_MAX) as u32;
        let offset = transfer.offset + transfer.done as u64;
        // SAFETY: done < len, so the pointer stays inside the caller's buffer.
        let pointer = unsafe { transfer.pointer.add(transfer.done) };
        let entry = match direction {
            Direction::Read => opcode::Read::new(fd, pointer, len).offset(offset).build(),
            Direction::Write => opcode::Write::new(fd, pointer, len).offset(offset).build(),
        };
        entry.user_data(index as u64)
    }

    /// Submits up to `IN_FLIGHT_MAX` transfers together and waits until all are done or failed.
    fn run_chunk(
        &self,
        ring: &mut IoUring,
        direction: Direction,
        chunk: &mut [Transfer],
    ) -> Result<()> {
        debug_assert!(chunk.len() <= IN_FLIGHT_MAX);
        let mut to_submit: Vec<usize> = (0..chunk.len()).filter(|&i| chunk[i].len > 0).collect();
        let mut in_flight = 0usize;
        let mut first_error: Option<Error> = None;
        while !to_submit.is_empty() || in_flight > 0 {
            {
                let mut submission = ring.submission();
                for index in to_submit.drain(..) {
                    let entry = self.entry(direction, &chunk[index], index);
                    // SAFETY: the buffer outlives this call, which waits for every submitted
                    // request before returning; at most IN_FLIGHT_MAX entries are queued or in
                    // flight, the queue's size, so the push cannot fail.
                    unsafe { submission.push(&entry) }.expect("submission queue has room");
                    in_flight += 1;
                }
            }
            if let Err(error) = submit_and_wait(ring, in_flight, in_flight) {
                return Err(Error::io(&self.name, error));
            }
            for completion in ring.completion() {
                in_flight -= 1;
                let index = completion.user_data() as usize;
                match self.complete(direction, &mut chunk[index], completion.result()) {
                    Ok(true) => {}
                    Ok(false) if first_error.is_none() => to_submit.push(index),
                    Ok(false) => {}
                    Err(error) => {
                        first_error.get_or_insert(error);
                    }
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Accounts one completion: Ok(true) when the transfer is done, Ok(false) when its rest
    /// must be resubmitted (short transfer, EINTR, EAGAIN).
    fn complete(&self, direction: Direction, transfer: &mut Transfer, result: i32) -> Result<bool> {
        if result < 0 {
            let errno = -result;
            if is_retryable_errno(errno) {
                return Ok(false);
            }
            return Err(Error::io(
                &self.name,
                std::io::Error::from_raw_os_error(errno),
            ));
        }
        if result == 0 {
            let (kind, message) = match direction {
                Direction::Read => (std::io::ErrorKind::UnexpectedEof, "read past end of file"),
                Direction::Write => (std::io::ErrorKind::WriteZero, "write made no progress"),
            };
            return Err(Error::io(&self.name, std::io::Error::new(kind, message)));
        }
        transfer.done += result as usize;
        Ok(transfer.done >= transfer.len)
    }
}

impl IoFile for UringFile {
    fn name(&self) -> &str {
        &self.name
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        let transfer = Transfer {
            pointer: buf.as_mut_ptr(),
            len: buf.len(),
            offset,
            done: 0,
        };
        self.run(Direction::Read, &mut [transfer])
    }

    /// One write the caller waits for (a log flush, a checkpoint's control block) as a plain
    /// pwrite: ext4 cannot complete an O_DIRECT write that extends a file without blocking,
    /// so io_uring hands it to a kernel worker thread (`iou-wrk`, 6.5% of the server's CPU
    /// under durable updates), two more context switches per log flush for a caller that
    /// waits anyway. Batches (`write_batch`) and every read go through the ring.
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.file
            .write_all_at(buf, offset)
            .map_err(|e| Error::io(&self.name, e))
    }

    fn read_batch(&self, requests: &mut [ReadRequest<'_>]) -> Result<()> {
        let mut transfers: Vec<Transfer> = requests
            .iter_mut()
            .map(|request| Transfer {
                pointer: request.buf.as_mut_ptr(),
                len: request.buf.len(),
                offset: request.offset,
                done: 0,
            })
            .collect();
        self.run(Direction::Read, &mut transfers)
    }

    fn write_batch(&self, requests: &[WriteRequest<'_>]) -> Result<()> {
        let mut transfers: Vec<Transfer> = requests
            .iter()
            .map(|request| Transfer {
                pointer: request.buf.as_ptr().cast_mut(),
                len: request.buf.len(),
                offset: request.offset,
                done: 0,
            })
            .collect();
        self.run(Direction::Write, &mut transfers)
    }

    /// fdatasync as a plain system call: io_uring has no non-blocking fsync and hands an
    /// IORING_OP_FSYNC to a kernel worker thread, which costs two more context switches per
    /// sync for a caller that waits for it anyway (the log flush of every durable commit;
    /// sysbench oltp_update_non_index through the server, 16 threads, one idle-machine run
    /// each way: 17,010 and 16,349 tps through the ring, 20,119 and 18,125 plain).
    fn sync_data(&self) -> Result<()> {
        self.file.sync_data().map_err(|e| Error::io(&self.name, e))
    }

    fn len(&self) -> Result<u64> {
        Ok(self
            .file
            .metadata()
            .map_err(|e| Error::io(&self.name, e))?
            .len())
    }

    fn set_len(&self, len: u64) -> Result<()> {
        self.file.set_len(len).map_err(|e| Error::io(&self.name, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::AlignedBuf;

    /// A directory on the real disk (O_DIRECT works there, unlike on tmpfs).
    fn disk_dir() -> tempfile::TempDir {
        let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/tmp-test");
        std::fs::create_dir_all(&base).unwrap();
        tempfile::tempdir_in(base).unwrap()
    }

    /// A directory under TMPDIR (often tmpfs, where O_DIRECT falls back to buffered I/O).
    fn temp_dir() -> tempfile::TempDir {
        tempfile::tempdir_in(std::env::temp_dir()).unwrap()
    }

    /// The backend, or None where io_uring is unavailable (then the fallback is checked).
    fn uring(dir: &Path) -> Option<UringIo> {
        match UringIo::new(dir) {
            Ok(io) => Some(io),
            Err(error) => {
                eprintln!("io_uring unavailable, checking the fallback only: {error}");
                assert_eq!(crate::io::open_default(dir).unwrap().kind(), IoKind::Sync);
                None
            }
        }
    }

    fn filled(len: usize, seed: u8) -> AlignedBuf {
        let mut buf = AlignedBuf::new(len);
        for (index, byte) in buf.iter_mut().enumerate() {
            *byte = (index as u8).wrapping_mul(31).wrapping_add(seed);
        }
        buf
    }

    fn round_trip(dir: &Path) {
        let Some(io) = uring(dir) else { return };
        let file = io.open_file("data", OpenOptions::CREATE_DIRECT).unwrap();
        let data = filled(3 * IO_ALIGN, 1);
        file.write_at(&data, IO_ALIGN as u64).unwrap();
        file.sync_data().unwrap();
        assert_eq!(file.len().unwrap(), 4 * IO_ALIGN as u64);
        let mut back = AlignedBuf::new(3 * IO_ALIGN);
        file.read_at(&mut back, IO_ALIGN as u64).unwrap();
        assert_eq!(&back[..], &data[..]);
        let error = file.read_at(&mut back, 2 * IO_ALIGN as u64).unwrap_err();
        assert!(
            matches!(error, Error::Io { ref source, .. }
                if source.kind() == std::io::ErrorKind::UnexpectedEof),
            "{error}"
        );
        file.set_len(IO_ALIGN as u64).unwrap();
        assert_eq!(file.len().unwrap(), IO_ALIGN as u64);
        io.sync_dir().unwrap();
        assert_eq!(io.list().unwrap(), vec!["data".to_string()]);
        io.rename("data", "moved").unwrap();
        assert!(io.exists("moved").unwrap() && !io.exists("data").unwrap());
        assert!(io.open("data", OpenOptions::EXISTING_DIRECT).is_err());
        io.remove("moved").unwrap();
        assert!(io.list().unwrap().is_empty());
    }

    #[test]
    fn round_trip_on_disk() {
        let dir = disk_dir();
        round_trip(dir.path());
        if let Some(io) = uring(dir.path()) {
            let file = io.open_file("direct", OpenOptions::CREATE_DIRECT).unwrap();
            assert!(file.is_direct(), "ext4/xfs under target/ supports O_DIRECT");
        }
    }

    #[test]
    fn round_trip_in_temp_dir() {
        round_trip(temp_dir().path());
    }

    fn batch_round_trip(dir: &Path) {
        let Some(io) = uring(dir) else { return };
        let file = io.open("batch", OpenOptions::CREATE_DIRECT).unwrap();
        // More requests than IN_FLIGHT_MAX, so the batch goes in chunks.
        let count = IN_FLIGHT_MAX * 2 + 17;
        let buffers: Vec<AlignedBuf> = (0..count).map(|i| filled(IO_ALIGN, i as u8)).collect();
        let writes: Vec<WriteRequest> = buffers
            .iter()
            .enumerate()
            .map(|(i, buf)| WriteRequest {
                offset: (i * IO_ALIGN) as u64,
                buf,
            })
            .collect();
        file.write_batch(&writes).unwrap();
        file.sync_data().unwrap();
        let mut back: Vec<AlignedBuf> = (0..count).map(|_| AlignedBuf::new(IO_ALIGN)).collect();
        // Read in reverse order so that a mix-up of requests would show.
        let mut reads: Vec<ReadRequest> = back
            .iter_mut()
            .enumerate()
            .rev()
            .map(|(i, buf)| ReadRequest {
                offset: (i * IO_ALIGN) as u64,
                buf,
            })
            .collect();
        file.read_batch(&mut reads).unwrap();
        for (index, (written, read)) in buffers.iter().zip(&back).enumerate() {
            assert_eq!(&written[..], &read[..], "request {index}");
        }
        let mut past_end = [ReadRequest {
            offset: (count * IO_ALIGN) as u64,
            buf: &mut back[0],
        }];
        assert!(file.read_batch(&mut past_end).is_err());
    }

    #[test]
    fn batch_round_trip_on_disk() {
        batch_round_trip(disk_dir().path());
    }

    #[test]
    fn batch_round_trip_in_temp_dir() {
        batch_round_trip(temp_dir().path());
    }

    #[test]
    fn many_threads_submit_at_once() {
        let dir = disk_dir();
        let Some(io) = uring(dir.path()) else { return };
        let file = io.open("shared", OpenOptions::CREATE_DIRECT).unwrap();
        let thread_count = 16;
        let pages_per_thread = 64;
        std::thread::scope(|scope| {
            for thread in 0..thread_count {
                let file = file.clone();
                scope.spawn(move || {
                    let buffers: Vec<AlignedBuf> = (0..pages_per_thread)
                        .map(|_| filled(IO_ALIGN, thread as u8))
                        .collect();
                    let base = thread * pages_per_thread * IO_ALIGN;
                    let writes: Vec<WriteRequest> = buffers
                        .iter()
                        .enumerate()
                        .map(|(i, buf)| WriteRequest {
                            offset: (base + i * IO_ALIGN) as u64,
                            buf,
                        })
                        .collect();
                    file.write_batch(&writes).unwrap();
                    file.sync_data().unwrap();
                });
            }
        });
        let mut page = AlignedBuf::new(IO_ALIGN);
        for thread in 0..thread_count {
            let offset = ((thread * pages_per_thread + pages_per_thread - 1) * IO_ALIGN) as u64;
            file.read_at(&mut page, offset).unwrap();
            assert_eq!(
                &page[..],
                &filled(IO_ALIGN, thread as u8)[..],
                "thread {thread}"
            );
        }
    }

    #[test]
    fn buffered_file_handles_short_reads_at_the_end() {
        let dir = disk_dir();
        let Some(io) = uring(dir.path()) else { return };
        let options = OpenOptions {
            create: true,
            direct: false,
            dsync: false,
        };
        let file = io.open("small", options).unwrap();
        file.write_at(b"hello, world", 0).unwrap();
        let mut exact = [0u8; 12];
        file.read_at(&mut exact, 0).unwrap();
        assert_eq!(&exact, b"hello, world");
        // The kernel returns 12 bytes, the resubmitted rest returns 0: end of file.
        let mut longer = [0u8; 20];
        assert!(file.read_at(&mut longer, 0).is_err());
    }

    #[test]
    fn open_default_picks_uring() {
        let dir = disk_dir();
        if uring(dir.path()).is_some() {
            assert_eq!(
                crate::io::open_default(dir.path()).unwrap().kind(),
                IoKind::Uring
            );
        }
    }
}
