//! The I/O layer: every durable byte of the engine passes through `Io` / `IoFile`.
//!
//! Implementations:
//! - `uring::UringIo`: io_uring with O_DIRECT (the default on Linux); batches keep many I/Os in
//!   flight in one submission.
//! - `sync_file::SyncIo`: plain pread/pwrite/fdatasync, the fallback when io_uring is unavailable.
//! - `sim::SimIo`: a simulated disk for tests. It keeps durable and not-yet-synced writes apart,
//!   and on a simulated crash drops, tears or reorders the unsynced ones; it can inject errors
//!   and add per-I/O latency. It stands in for a device, never for a component a user runs.
//!
//! Wrappers that record I/O traces or add a device class's latency are the lab's
//! (`hayate-lab`), built on these traits and handed to `Database::open_with_io`.
//!
//! Contract for callers (checked with debug assertions, enforced by O_DIRECT on real files):
//! buffers, offsets and lengths of data-file I/O are multiples of `IO_ALIGN`.

pub mod aligned;
pub mod sim;
pub mod sync_file;
pub mod uring;
pub mod wait;

use std::sync::Arc;

pub use aligned::AlignedBuf;

use crate::error::Result;

/// Alignment of buffers, offsets and lengths for direct I/O.
pub const IO_ALIGN: usize = 4096;

/// How a file is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenOptions {
    /// Create the file if it does not exist.
    pub create: bool,
    /// Bypass the OS page cache (O_DIRECT) where the backend supports it.
    pub direct: bool,
    /// Every write is durable when it returns (O_DSYNC): its data and the metadata needed to
    /// read it back (the file length) reach the media, as if `sync_data` followed it. Other
    /// changes (`set_len`, writes through other handles) still need `sync_data`.
    pub dsync: bool,
}

impl OpenOptions {
    /// Create if missing, with O_DIRECT.
    pub const CREATE_DIRECT: OpenOptions = OpenOptions {
        create: true,
        direct: true,
        dsync: false,
    };
    /// Open an existing file (error if missing), with O_DIRECT.
    pub const EXISTING_DIRECT: OpenOptions = OpenOptions {
        create: false,
        direct: true,
        dsync: false,
    };
}

/// One read of a batch: fill `buf` from `offset`.
pub struct ReadRequest<'a> {
    /// Byte offset in the file.
    pub offset: u64,
    /// Filled completely; its length is the read's length.
    pub buf: &'a mut [u8],
}

/// One write of a batch: write `buf` at `offset`.
pub struct WriteRequest<'a> {
    /// Byte offset in the file.
    pub offset: u64,
    /// Written whole.
    pub buf: &'a [u8],
}

/// An open file. All methods are safe to call from many threads at once.
pub trait IoFile: Send + Sync {
    /// Name relative to the data directory, used in errors and traces.
    fn name(&self) -> &str;
    /// Reads exactly `buf.len()` bytes at `offset`. Reading past the end is an error.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()>;
    /// Writes all of `buf` at `offset`, extending the file if needed. Durable when it returns
    /// if the file was opened with `dsync`, otherwise after the next `sync_data`.
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()>;
    /// Reads many ranges, with as many in flight at once as the backend allows.
    fn read_batch(&self, requests: &mut [ReadRequest<'_>]) -> Result<()> {
        for request in requests.iter_mut() {
            self.read_at(request.buf, request.offset)?;
        }
        Ok(())
    }
    /// Writes many ranges, with as many in flight at once as the backend allows. Not durable
    /// until `sync_data` returns (unless the file was opened with `dsync`).
    fn write_batch(&self, requests: &[WriteRequest<'_>]) -> Result<()> {
        for request in requests {
            self.write_at(request.buf, request.offset)?;
        }
        Ok(())
    }
    /// Makes every completed write durable (fdatasync).
    fn sync_data(&self) -> Result<()>;
    /// Current length in bytes, unsynced writes and `set_len` included.
    fn len(&self) -> Result<u64>;
    /// True if the file has no bytes.
    fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }
    /// Truncates or extends the file. Durable after the next `sync_data`.
    fn set_len(&self, len: u64) -> Result<()>;
}

/// Which implementation is behind an `Io`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoKind {
    /// io_uring (`UringIo`).
    Uring,
    /// pread/pwrite/fdatasync (`SyncIo`).
    Sync,
    /// A simulated disk in memory (`SimIo`).
    Simulated,
}

/// A directory of files. Names are flat (no subdirectories), e.g. "data.hyt", "wal.000001".
pub trait Io: Send + Sync {
    /// Which implementation this is (wrappers report the one they wrap).
    fn kind(&self) -> IoKind;
    /// Opens `name` for reading and writing; without `options.create` a missing file is an
    /// error. A file created here is durable in the directory after `sync_dir`.
    fn open(&self, name: &str, options: OpenOptions) -> Result<Arc<dyn IoFile>>;
    /// True if `name` is in the directory.
    fn exists(&self, name: &str) -> Result<bool>;
    /// Deletes `name` (an error if missing). Durable after `sync_dir`.
    fn remove(&self, name: &str) -> Result<()>;
    /// Atomically replaces `target` with `source` (rename). Durable after `sync_dir`.
    fn rename(&self, source: &str, target: &str) -> Result<()>;
    /// Names of all files, sorted.
    fn list(&self) -> Result<Vec<String>>;
    /// Makes creations, removals and renames durable (fsync of the directory).
    fn sync_dir(&self) -> Result<()>;
}

/// Opens the default backend for a directory: io_uring with O_DIRECT when the kernel allows it,
/// otherwise pread/pwrite (the choice is logged).
pub fn open_default(dir: &std::path::Path) -> Result<Arc<dyn Io>> {
    match uring::UringIo::new(dir) {
        Ok(io) => Ok(Arc::new(io)),
        Err(error) => {
            log::warn!("io_uring unavailable ({error}); falling back to pread/pwrite");
            Ok(Arc::new(sync_file::SyncIo::new(dir)?))
        }
    }
}
