//! The one interface the lab drives every database through, for Hayate and for every peer
//! (LeanStore's `Adapter`, redb's `BenchDatabase`).
//!
//! A driver owns one database (an embedded Hayate, a PostgreSQL/MariaDB server the lab
//! started, or an SQLite file). `Driver` is what every workload shares; each workload adds its
//! own trait on top, implemented by the engines that run it:
//! - `primitive::driver::PrimitiveDriver`: the primitive workload (load, sessions, native runs);
//! - `tpcc::driver::TpccDriver`: TPC-C (load, sessions, native runs, the check's snapshot).
//!
//! Lifecycle of an experiment:
//! 1. The workload's trait loads the database.
//! 2. For each buffer size: `Driver::set_buffer_bytes` (a server restarts with the new size),
//!    then the workload's runs; `Driver::server_pids` lets the runner count the servers' CPU.
//! 3. `Driver::shutdown` stops servers and removes what the lab made.
//!
//! Errors are `DriverError`s: retryable ones (serialization failure, deadlock, lock timeout)
//! make the runner retry the transaction, the others end the run.

use std::collections::BTreeMap;
use std::fmt;

/// An error of a driver. Retryable errors (serialization failure, deadlock, lock timeout) make
/// the runner retry the transaction and count a retry; others end the run.
#[derive(Debug, Clone)]
pub struct DriverError {
    pub message: String,
    pub retryable: bool,
}

impl DriverError {
    pub fn fatal(message: impl Into<String>) -> DriverError {
        DriverError {
            message: message.into(),
            retryable: false,
        }
    }

    #[cfg_attr(not(feature = "peers"), allow(dead_code))] // only peers build these
    pub fn retryable(message: impl Into<String>) -> DriverError {
        DriverError {
            message: message.into(),
            retryable: true,
        }
    }
}

impl fmt::Display for DriverError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl From<DriverError> for hayate::error::CliError {
    fn from(error: DriverError) -> hayate::error::CliError {
        hayate::error::CliError::new(error.to_string())
    }
}

impl From<hayate_engine::Error> for DriverError {
    fn from(error: hayate_engine::Error) -> DriverError {
        DriverError {
            retryable: error.is_retryable(),
            message: error.to_string(),
        }
    }
}

pub type DriverResult<T> = Result<T, DriverError>;

/// A database the lab drives (see the module docs for the lifecycle).
pub trait Driver: Send + Sync {
    /// "hayate", "postgresql", "mariadb", "sqlite" or "hayate-wire".
    fn engine(&self) -> &str;
    /// The version the engine reports.
    fn version(&self) -> String;
    /// Every durability and caching setting in effect, for the results.
    fn settings(&self) -> BTreeMap<String, String>;
    /// Page or block size of the engine's table storage.
    fn page_size(&self) -> u64;
    /// Write policy: "out-of-place"/"in-place" for Hayate, the peer's own otherwise.
    fn write_policy(&self) -> String;
    /// Sizes the engine's buffer (a server is restarted); index pages stay resident where the
    /// engine allows it.
    fn set_buffer_bytes(&self, bytes: u64) -> DriverResult<()>;
    /// Processes of the engine besides the lab's own (servers), for CPU accounting.
    fn server_pids(&self) -> Vec<u32> {
        Vec::new()
    }
    /// Stops servers and removes what the driver made.
    fn shutdown(&self) -> DriverResult<()>;
}
