//! Typed errors of the engine.
//!
//! Bytes read from disk are untrusted: a bad checksum, a torn log record or a structurally
//! impossible page becomes `Error::Corruption` naming the file, page and LSN. A panic is kept
//! for broken invariants of our own code.

use std::fmt;

/// Where a corruption was found. Every field that is known is filled in.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Location {
    pub file: String,
    pub page_id: Option<u64>,
    pub offset: Option<u64>,
    pub lsn: Option<u64>,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "file {}", self.file)?;
        if let Some(page_id) = self.page_id {
            write!(f, ", page {page_id}")?;
        }
        if let Some(offset) = self.offset {
            write!(f, ", offset {offset}")?;
        }
        if let Some(lsn) = self.lsn {
            write!(f, ", lsn {lsn}")?;
        }
        Ok(())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("I/O error on {file}: {source}")]
    Io {
        file: String,
        #[source]
        source: std::io::Error,
    },
    #[error("disk full while writing {file}")]
    DiskFull { file: String },
    #[error("corruption at {location}: {detail}")]
    Corruption { location: Location, detail: String },
    /// A sync failed earlier; the engine no longer accepts writes (the state of unsynced data on
    /// the device is unknown, so retrying the sync could silently lose it).
    #[error("database is read-only after a failed sync: {0}")]
    Poisoned(String),
    #[error("could not serialize access due to concurrent update")]
    SerializationFailure,
    #[error("deadlock detected")]
    Deadlock,
    #[error("lock wait timed out after {0} ms")]
    LockTimeout(u64),
    #[error("table or index {0} does not exist")]
    NoSuchTable(String),
    #[error("table or index {0} already exists")]
    TableExists(String),
    #[error("key already exists")]
    DuplicateKey,
    #[error("transaction is read-only")]
    ReadOnlyTransaction,
    #[error("transaction is no longer active")]
    TransactionClosed,
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    #[error("value too large: {size} bytes (limit {limit})")]
    ValueTooLarge { size: usize, limit: usize },
    /// A snapshot needs a row version the rollback segment no longer holds.
    #[error("snapshot too old: an old row version was purged")]
    SnapshotTooOld,
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// A transaction in no-wait mode (`Transaction::set_nowait`) met a row lock held by
    /// another transaction, or a row whose last commit is not published yet: the write did
    /// not happen and nothing was recorded; the caller retries where it may wait.
    #[error("the operation would wait for another transaction")]
    WouldBlock,
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub fn io(file: impl Into<String>, source: std::io::Error) -> Error {
        let file = file.into();
        if source.raw_os_error() == Some(libc::ENOSPC) {
            return Error::DiskFull { file };
        }
        Error::Io { file, source }
    }

    pub fn corruption(location: Location, detail: impl Into<String>) -> Error {
        Error::Corruption {
            location,
            detail: detail.into(),
        }
    }

    /// True for errors after which the same transaction may be retried from the start.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            Error::SerializationFailure | Error::Deadlock | Error::LockTimeout(_)
        )
    }
}
