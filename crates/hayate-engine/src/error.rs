//! Typed errors of the engine.
//!
//! Bytes read from disk are untrusted: a bad checksum, a torn log record or a structurally
//! impossible page becomes `Error::Corruption` naming the file, page and LSN. A panic is kept
//! for broken invariants of our own code.

use std::fmt;

/// Where a corruption was found. Every field that is known is filled in.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Location {
    /// The file (or, for a logical structure such as a tree, its name).
    pub file: String,
    /// The page the bad bytes belong to.
    pub page_id: Option<u64>,
    /// Byte offset in the file (or in the page, when `page_id` is set).
    pub offset: Option<u64>,
    /// Log position of the bad record.
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

/// Every error the engine returns.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A system call on a file failed (other than for a full disk).
    #[error("I/O error on {file}: {source}")]
    Io {
        /// The file the call was made on.
        file: String,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// A write or file extension failed with ENOSPC.
    #[error("disk full while writing {file}")]
    DiskFull {
        /// The file being written.
        file: String,
    },
    /// Bytes read from disk failed a checksum or a structural check.
    #[error("corruption at {location}: {detail}")]
    Corruption {
        /// Where the bad bytes are.
        location: Location,
        /// What check failed.
        detail: String,
    },
    /// A sync failed earlier; the engine no longer accepts writes (the state of unsynced data on
    /// the device is unknown, so retrying the sync could silently lose it).
    #[error("database is read-only after a failed sync: {0}")]
    Poisoned(String),
    /// A transaction wrote a row another transaction committed after its snapshot (first
    /// updater wins). Retryable; see `Error::is_retryable`.
    #[error("could not serialize access due to concurrent update")]
    SerializationFailure,
    /// A SERIALIZABLE transaction read a row or range that a transaction committed after its
    /// snapshot wrote (design 6, "Serializable"). Retryable.
    #[error("could not serialize access due to read/write dependencies among transactions")]
    ReadWriteConflict,
    /// Waiting for a row lock would close a cycle of waiting transactions. Retryable.
    #[error("deadlock detected")]
    Deadlock,
    /// A row lock was not granted within `LockConfig::timeout` (the payload, in
    /// milliseconds). Retryable.
    #[error("lock wait timed out after {0} ms")]
    LockTimeout(u64),
    /// No table or index has this name (or `#id`).
    #[error("table or index {0} does not exist")]
    NoSuchTable(String),
    /// A table or index of this name exists already.
    #[error("table or index {0} already exists")]
    TableExists(String),
    /// `Transaction::insert` met a row with the same key.
    #[error("key already exists")]
    DuplicateKey,
    /// A write in a transaction begun with `Database::begin_read_only`.
    #[error("transaction is read-only")]
    ReadOnlyTransaction,
    /// The transaction has committed or rolled back already.
    #[error("transaction is no longer active")]
    TransactionClosed,
    /// A caller passed a value the engine does not accept (empty or too long key, bad
    /// configuration, unknown savepoint, ...); the message says which.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A key, value or log record is larger than the engine can store.
    #[error("value too large: {size} bytes (limit {limit})")]
    ValueTooLarge {
        /// Size of the rejected key, value or record, in bytes.
        size: usize,
        /// Largest size accepted, in bytes.
        limit: usize,
    },
    /// A snapshot needs a row version the rollback segment no longer holds.
    #[error("snapshot too old: an old row version was purged")]
    SnapshotTooOld,
    /// A write on a standby: it applies the primary's log and accepts no writes of its own.
    #[error("cannot execute a write on a standby (read-only hot standby)")]
    Standby,
    /// This node is no longer the primary (its log shipping was stopped: fenced, or its
    /// synchronous standby was lost and the node stepped down); the message says why. A commit
    /// that fails with it was not acknowledged and may or may not survive on the new primary.
    #[error("this node is no longer the primary: {0}")]
    NotPrimary(String),
    /// A request the engine does not implement, or a limit of its design (such as the
    /// B+tree depth) was reached.
    #[error("unsupported: {0}")]
    Unsupported(String),
}

/// The engine's result type.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// An I/O error on `file`; ENOSPC becomes `Error::DiskFull`.
    pub fn io(file: impl Into<String>, source: std::io::Error) -> Error {
        let file = file.into();
        if source.raw_os_error() == Some(libc::ENOSPC) {
            return Error::DiskFull { file };
        }
        Error::Io { file, source }
    }

    /// A corruption found at `location`.
    pub fn corruption(location: Location, detail: impl Into<String>) -> Error {
        Error::Corruption {
            location,
            detail: detail.into(),
        }
    }

    /// True for errors after which the same transaction may be retried from the start. The
    /// failed transaction itself cannot commit, unless rolled back to a savepoint taken before
    /// the write that failed.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            Error::SerializationFailure
                | Error::ReadWriteConflict
                | Error::Deadlock
                | Error::LockTimeout(_)
        )
    }
}

/// A failure that many waiters report (a failed log flush), kept so each gets the same error:
/// a primary that lost its role stays `NotPrimary` (57P01 through SQL), anything else is
/// `Poisoned`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedFailure {
    not_primary: bool,
    reason: String,
}

impl SharedFailure {
    /// Keeps `error` for the waiters.
    pub fn of(error: &Error) -> SharedFailure {
        match error {
            Error::NotPrimary(reason) => SharedFailure {
                not_primary: true,
                reason: reason.clone(),
            },
            other => SharedFailure {
                not_primary: false,
                reason: other.to_string(),
            },
        }
    }

    /// The error a waiter gets.
    pub fn error(&self) -> Error {
        if self.not_primary {
            Error::NotPrimary(self.reason.clone())
        } else {
            Error::Poisoned(self.reason.clone())
        }
    }
}
