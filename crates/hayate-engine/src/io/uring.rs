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

use std::fs::File;
use std::os::fd::AsRawFd;
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
