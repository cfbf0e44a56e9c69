//! Hayate's storage engine.
//!
//! Layers, top to bottom (a lower layer never uses an upper one):
//! `db` (embedded API) -> `txn` (MVCC, locks, rollback segment) -> `btree` (access method) ->
//! `buffer` (buffer pool) -> `store` (page store: out-of-place or in-place) and `wal` -> `io`.

pub mod btree;
pub mod buffer;
pub mod checksum;
pub mod db;
pub mod error;
pub mod exec;
pub mod io;
pub mod page;
pub mod store;
pub mod temp;
pub mod txn;
pub mod wal;

pub use db::{BufferSize, CheckReport, Database, DatabaseConfig, DatabaseStats, IoBackend};
pub use error::{Error, Result};
pub use store::{StoreConfig, VictimPolicy, WritePolicy};
pub use temp::{
    ExternalSorter, HashJoin, Partitioner, Record, RunReader, RunWriter, Sorted, TempRun, TempSpace,
    TempStats,
};
pub use txn::{PendingCommit, Savepoint, Scan, Transaction, TreeId};
