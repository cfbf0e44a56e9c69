//! TPC-C's side of the driver interface (`crate::driver`).
//!
//! Lifecycle on a `TpccDriver`:
//! 1. `load_tpcc` creates the nine tables and loads the initial database of a scale.
//! 2. For each buffer size: `Driver::set_buffer_bytes`, then terminals, each on its own
//!    session (`connect_tpcc`, the five transactions of `txn::TpccSession`), or
//!    `run_tpcc_native` when the engine runs many terminals per thread itself.
//! 3. `tpcc_check_data` reads one snapshot for the consistency conditions (`check`).
//! 4. `Driver::shutdown`.

use super::check::CheckData;
use super::metrics::{TpccJob, TpccOutcome};
use super::spec::Scale;
use super::txn::TpccSession;
use crate::driver::{Driver, DriverResult};

/// A database that runs TPC-C (see the module docs for the lifecycle).
pub trait TpccDriver: Driver {
    /// Creates the nine tables (and whatever indexes the engine's transactions use) and loads
    /// the initial database of `scale` (`tpcc::rows`, generated from `seed`); calls `progress`
    /// with rows loaded so far.
    fn load_tpcc(
        &self,
        scale: &Scale,
        seed: u64,
        progress: &(dyn Fn(u64) + Sync),
    ) -> DriverResult<()>;
    /// A new connection running the five transactions.
    fn connect_tpcc(&self) -> DriverResult<Box<dyn TpccSession>>;
    /// The columns the consistency conditions read, of every row (one snapshot).
    fn tpcc_check_data(&self) -> DriverResult<CheckData>;
    /// TPC-C with the engine's own concurrency model; `None`: one session per thread.
    fn run_tpcc_native(&self, _job: &TpccJob) -> Option<DriverResult<TpccOutcome>> {
        None
    }
}
