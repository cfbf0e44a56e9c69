//! Hayate's storage engine.
//!
//! Layers, top to bottom (a lower layer never uses an upper one):
//! `db` (embedded API) -> `txn` (MVCC, locks, rollback segment) -> `btree` (access method) ->
//! `buffer` (buffer pool) -> `store` (page store: out-of-place or in-place) and `wal` -> `io`.
//! `exec` runs many transactions per thread as tasks; `phase` (a leaf) accounts where a
//! thread's time goes; `temp` is the temporary space of sorts and joins that spill.
//!
//! The modules are private: what other crates may use is the surface below, in groups.
//! 1. The embedded database: open, configure, run transactions, check and measure it.
//! 2. Tasks: many transactions per thread, suspended on page misses, lock and log waits;
//!    fibers (`fiber`, the one public module), on which the synchronous API suspends instead
//!    of blocking.
//! 3. The temporary space of sorts and joins larger than memory.
//! 4. The I/O layer: the `Io` / `IoFile` traits every durable byte passes through, their
//!    implementations, and the simulated disk used for fault injection and device emulation.
//! 5. Components below the database (B+tree, buffer pool, page stores, write-ahead log), for
//!    micro benchmarks and component tests.
#![deny(missing_docs)]

mod btree;
mod buffer;
mod checksum;
mod db;
mod error;
mod exec;
pub mod fiber;
mod io;
mod page;
mod phase;
mod store;
mod temp;
mod txn;
mod wal;

// 1. The embedded database.
pub use btree::{compare_keys, TreeCheckReport};
pub use buffer::{BufferStats, LatchConfig};
pub use db::{
    is_backup_file, ApplyReport, BackupReport, BackupWriter, BufferSize, CheckReport, Database,
    DatabaseConfig, DatabaseStats, IoBackend, RewindReport,
};
pub use error::{Error, Result, SharedFailure};
pub use page::{validate_page_size, PAGE_SIZE_DEFAULT};
pub use store::control::{ControlFile, CONTROL_FILE};
pub use store::{CleanerConfig, StoreConfig, StoreStats, VictimPolicy, WritePolicy};
pub use txn::{
    LockConfig, LockStats, Locked, PendingCommit, Savepoint, Scan, Transaction, TreeId, TreeInfo,
    TreeKind, TxnStats, UndoConfig, UndoStats,
};
pub use wal::{LogShipper, Lsn, RecoveryReport, StreamDecoder, SyncMode, WalConfig, WalStats};

// 2. Tasks and the accounting of a thread's time.
pub use exec::flusher::Durable;
pub use phase::{
    enter as enter_phase, finish_accounting, set_in_flight, start_accounting, Phase, PhaseGuard,
    PhaseReport, PhaseSpan,
};

// 3. The temporary space.
pub use temp::{
    ExternalSorter, HashJoin, Partitioner, Record, RunReader, RunWriter, Sorted, TempRun,
    TempSpace, TempStats,
};

// 4. The I/O layer.
pub use io::sim::{FaultKind, SimConfig, SimIo};
pub use io::sync_file::SyncIo;
pub use io::uring::{
    install_thread_ring, install_thread_ring_deferred, reap_or_sleep, reap_thread_ring,
    submit_thread_ring, UringFile, UringIo,
};
pub use io::wait::{wait_for, wait_until};
pub use io::{
    open_default, AlignedBuf, Io, IoFile, IoKind, OpenOptions, ReadRequest, WriteRequest, IO_ALIGN,
};

// 5. Components below the database.
pub use btree::{BTree, TryLookup};
pub use buffer::{BufferPool, BufferPoolConfig};
pub use store::memory::MemoryStore;
pub use store::PageStore;
pub use wal::{LogRecord, Op, Wal};
