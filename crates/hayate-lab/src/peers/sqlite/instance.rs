//! SQLite as the lab runs it: one database file in a lab directory under `--dir`, its
//! connections, settings and errors, and the base `Driver`; the workloads are in `primitive`
//! and `tpcc`.
//!
//! SQLite is the bundled amalgamation (rusqlite's `bundled` feature): the version measured is
//! the one pinned in Cargo.lock, whatever the distribution ships, and no system package is
//! needed. Lifecycle:
//! 1. `SqliteDriver::open` creates the file with 8 KiB pages (a 4 KiB row does not fit a
//!    default 4 KiB page and would need an overflow page per row) in WAL mode.
//! 2. `load_primitive` (`primitive`) inserts each table in transactions of 10,000 rows, then
//!    ANALYZE and a truncating WAL checkpoint.
//! 3. Every connection (one per session) sets `synchronous=FULL` (the WAL is fsynced at each
//!    commit), `cache_size` to the buffer size (a per-connection page cache: SQLite has no
//!    shared one) and a busy timeout; `set_buffer_bytes` applies to connections made after it.
//! 4. Selects run in autocommit; updates run in `BEGIN IMMEDIATE ... COMMIT`. Writers take
//!    turns on SQLite's one write lock; SQLITE_BUSY after the timeout is retryable.
//! 5. `shutdown` (or drop) removes the directory.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use rusqlite::{Connection, ErrorCode, OpenFlags};

use crate::driver::{Driver, DriverError, DriverResult};
use crate::peers::server::LabDirectory;

const PAGE_SIZE_BYTES: u64 = 8192;
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);
/// Prepared statements kept per connection: a select and an update per table, and more.
const STATEMENT_CACHE_CAPACITY: usize = 512;

pub struct SqliteDriver {
    path: PathBuf,
    directory: Mutex<Option<LabDirectory>>,
    buffer_bytes: AtomicU64,
}

impl SqliteDriver {
    pub fn open(base_dir: &Path, buffer_bytes: u64) -> DriverResult<SqliteDriver> {
        let directory = LabDirectory::create(base_dir, "sqlite", None)?;
        let path = directory.path().join("primitive.sqlite");
        let driver = SqliteDriver {
            path,
            directory: Mutex::new(Some(directory)),
            buffer_bytes: AtomicU64::new(buffer_bytes),
        };
        let connection = Connection::open(&driver.path).map_err(sqlite_error)?;
        // The page size is fixed when the first page is written, so before WAL mode.
        connection
            .execute_batch(&format!(
                "PRAGMA page_size = {PAGE_SIZE_BYTES}; PRAGMA journal_mode = WAL;"
            ))
            .map_err(sqlite_error)?;
        Ok(driver)
    }

    /// A connection with the lab's settings; the file must exist.
    pub(super) fn open_connection(&self) -> rusqlite::Result<Connection> {
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let connection = Connection::open_with_flags(&self.path, flags)?;
        let cache_kib = self
            .buffer_bytes
            .load(Ordering::Relaxed)
            .div_ceil(1024)
            .max(1);
        // A negative cache_size is in KiB rather than pages.
        connection.execute_batch(&format!(
            "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; \
             PRAGMA cache_size = -{cache_kib};"
        ))?;
        connection.busy_timeout(BUSY_TIMEOUT)?;
        connection.set_prepared_statement_cache_capacity(STATEMENT_CACHE_CAPACITY);
        Ok(connection)
    }

    fn read_settings(&self) -> rusqlite::Result<BTreeMap<String, String>> {
        let connection = self.open_connection()?;
        let pragma = |name: &str| -> rusqlite::Result<String> {
            connection.query_row(&format!("PRAGMA {name}"), [], |row| {
                Ok(match row.get_ref(0)? {
                    rusqlite::types::ValueRef::Integer(value) => value.to_string(),
                    rusqlite::types::ValueRef::Text(text) => {
                        String::from_utf8_lossy(text).into_owned()
                    }
                    other => format!("{other:?}"),
                })
            })
        };
        let mut settings = BTreeMap::new();
        for name in [
            "journal_mode",
            "page_size",
            "cache_size",
            "busy_timeout",
            "wal_autocheckpoint",
            "locking_mode",
            "mmap_size",
            "fullfsync",
        ] {
            settings.insert(name.to_string(), pragma(name)?);
        }
        let synchronous = match pragma("synchronous")?.as_str() {
            "0" => "OFF".to_string(),
            "1" => "NORMAL".to_string(),
            "2" => "FULL".to_string(),
            "3" => "EXTRA".to_string(),
            other => other.to_string(),
        };
        settings.insert("synchronous".into(), synchronous);
        settings.insert(
            "tpcc_isolation".into(),
            "serializable: BEGIN IMMEDIATE for New-Order, Payment and Delivery, a WAL snapshot \
             (deferred BEGIN) for Order-Status, Stock-Level and the check"
                .into(),
        );
        let buffer_bytes = self.buffer_bytes.load(Ordering::Relaxed);
        settings.insert(
            "cache_size_bytes_per_connection".into(),
            buffer_bytes.to_string(),
        );
        settings.insert(
            "os_page_cache".into(),
            "used: SQLite reads and writes through the OS page cache besides its own".into(),
        );
        settings.insert(
            "client".into(),
            "rusqlite (bundled SQLite), one connection per session, updates in BEGIN IMMEDIATE"
                .into(),
        );
        Ok(settings)
    }
}

impl Driver for SqliteDriver {
    fn engine(&self) -> &str {
        "sqlite"
    }

    fn version(&self) -> String {
        rusqlite::version().to_string()
    }

    fn settings(&self) -> BTreeMap<String, String> {
        self.read_settings().unwrap_or_else(|error| {
            BTreeMap::from([(
                "error".to_string(),
                format!("cannot read the settings: {error}"),
            )])
        })
    }

    fn page_size(&self) -> u64 {
        PAGE_SIZE_BYTES
    }

    fn write_policy(&self) -> String {
        "in-place B-tree pages, WAL checkpointed into the database file".to_string()
    }

    fn set_buffer_bytes(&self, bytes: u64) -> DriverResult<()> {
        self.buffer_bytes.store(bytes, Ordering::Relaxed);
        Ok(())
    }

    fn shutdown(&self) -> DriverResult<()> {
        let directory = self
            .directory
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        directory.map(LabDirectory::remove).unwrap_or(Ok(()))
    }
}

/// SQLITE_BUSY and SQLITE_LOCKED (another connection holds the lock past the busy timeout)
/// are retryable; everything else ends the run with SQLite's message.
pub(crate) fn sqlite_error(error: rusqlite::Error) -> DriverError {
    let message = format!("SQLite: {error}");
    match error.sqlite_error_code() {
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => {
            DriverError::retryable(message)
        }
        _ => DriverError::fatal(message),
    }
}
