//! The primitive workload's side of the driver interface (`crate::driver`): its schema, its
//! two transactions, and what a run asks of an engine.
//!
//! Lifecycle of a primitive experiment on a `PrimitiveDriver`:
//! 1. `load_primitive` creates the N tables and loads the rows (reporting progress).
//! 2. For each buffer size: `Driver::set_buffer_bytes`, `prewarm` when the buffer holds all
//!    the data, then the run: either `run_native` when the engine runs many transactions per
//!    thread itself (Hayate's tasks), or `concurrency` threads each with its own `Session`
//!    (`connect`), each drawing keys from a `KeyGenerator` and running `run_one`.
//! 3. `Driver::shutdown`.
//!
//! The transactions are the same for everyone: `select` reads one row by SID and commits,
//! `update` sets C1 of one row by SID and commits durably.

use std::time::{Duration, Instant};

use crate::driver::{Driver, DriverError, DriverResult};

/// The primitive workload's schema: `tables` tables named `primitive_1..N`, each with
/// `SID integer primary key, C1 integer, Data1 char(4096)` and SIDs 1..=rows_per_table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrimitiveSpec {
    pub tables: u32,
    pub rows_per_table: u64,
}

/// Width of Data1 (char(4096)).
pub const DATA1_BYTES: usize = 4096;

impl PrimitiveSpec {
    pub fn table_name(table: u32) -> String {
        format!("primitive_{}", table + 1)
    }

    /// Bytes of row data (SID, C1 and Data1 of every row): what buffer percentages refer to.
    pub fn data_bytes(&self) -> u64 {
        self.tables as u64 * self.rows_per_table * (8 + 8 + DATA1_BYTES as u64)
    }

    /// The initial Data1 of a row: printable, different per row, exactly `DATA1_BYTES` long.
    pub fn data1(table: u32, sid: i64) -> String {
        let stamp = format!("t{}-r{}|", table + 1, sid);
        stamp.repeat(DATA1_BYTES / stamp.len() + 1)[..DATA1_BYTES].to_string()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Read one row by a uniformly random SID, commit.
    Select,
    /// Set C1 of one row by a uniformly random SID, commit (durably).
    Update,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Select => "select",
            Mode::Update => "update",
        }
    }
}

/// One client connection, used by one thread.
pub trait Session: Send {
    /// Reads the row `sid` of `table` (0-based) and commits; returns whether it exists.
    fn select(&mut self, table: u32, sid: i64) -> DriverResult<bool>;
    /// Sets C1 of row `sid` of `table` to `c1` and commits durably; returns whether it exists.
    fn update(&mut self, table: u32, sid: i64, c1: i64) -> DriverResult<bool>;
}

/// What one run asks of a driver.
#[derive(Debug, Clone, Copy)]
pub struct RunJob {
    pub spec: PrimitiveSpec,
    pub mode: Mode,
    /// Transactions in flight at once.
    pub concurrency: u32,
    pub duration: Duration,
    pub seed: u64,
}

/// What one worker (thread) measured; the runner merges them.
#[derive(Debug, Clone, Default)]
pub struct WorkerOutcome {
    pub transactions: u64,
    pub retries: u64,
    /// Latency of every committed transaction, nanoseconds.
    pub latency: hayate::report::Histogram,
    /// Sum of the latencies, for the mean.
    pub latency_sum_ns: u128,
    pub worker_threads: u32,
}

impl WorkerOutcome {
    /// Counts one committed transaction that took `latency`.
    pub fn record(&mut self, latency: Duration) {
        let nanos = latency.as_nanos();
        self.latency.record(nanos as u64);
        self.latency_sum_ns += nanos;
        self.transactions += 1;
    }

    pub fn latency_total_ns(&self) -> u128 {
        self.latency_sum_ns
    }

    pub fn merge(&mut self, other: &WorkerOutcome) {
        self.latency_sum_ns += other.latency_sum_ns;
        self.transactions += other.transactions;
        self.retries += other.retries;
        self.latency.merge(&other.latency);
        self.worker_threads += other.worker_threads;
    }
}

/// A database that runs the primitive workload (see the module docs for the lifecycle).
pub trait PrimitiveDriver: Driver {
    /// Creates the tables and loads every row; calls `progress` with rows loaded so far.
    fn load_primitive(
        &self,
        spec: &PrimitiveSpec,
        progress: &(dyn Fn(u64) + Sync),
    ) -> DriverResult<()>;
    /// Brings the whole database into the buffer (for runs whose buffer holds all the data,
    /// so that the measurement starts warm). Default: nothing; the warm-up run warms.
    fn prewarm(&self, _spec: &PrimitiveSpec) -> DriverResult<()> {
        Ok(())
    }
    /// A new connection.
    fn connect(&self) -> DriverResult<Box<dyn Session>>;
    /// Runs the job with the engine's own concurrency model; `None` when the engine has none
    /// and the lab should run one session per thread.
    fn run_native(&self, _job: &RunJob) -> Option<DriverResult<WorkerOutcome>> {
        None
    }
}

/// A uniform random SID source for one worker (xorshift64*: cheap, no shared state).
#[derive(Debug, Clone)]
pub struct KeyGenerator {
    state: u64,
    rows: u64,
    tables: u32,
}

impl KeyGenerator {
    pub fn new(spec: &PrimitiveSpec, seed: u64, worker: u64) -> KeyGenerator {
        let state = (seed ^ 0x9e37_79b9_7f4a_7c15)
            .wrapping_mul(worker.wrapping_add(1).wrapping_mul(0x2545_f491_4f6c_dd1d))
            | 1;
        KeyGenerator {
            state,
            rows: spec.rows_per_table.max(1),
            tables: spec.tables.max(1),
        }
    }

    fn next_u64(&mut self) -> u64 {
        self.state ^= self.state >> 12;
        self.state ^= self.state << 25;
        self.state ^= self.state >> 27;
        self.state.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A table (0-based) and a SID (1-based), both uniform.
    pub fn next(&mut self) -> (u32, i64) {
        let table = (self.next_u64() % self.tables as u64) as u32;
        let sid = (self.next_u64() % self.rows) as i64 + 1;
        (table, sid)
    }
}

/// What `run_one` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attempt {
    /// Committed after this many retries.
    Committed { retries: u64 },
    /// Still failing with retryable errors (busy, serialization) when the run ended: not
    /// counted, and not an error.
    GaveUp { retries: u64 },
}

/// Runs one transaction of `mode` on a session, retrying retryable failures until the
/// deadline.
pub fn run_one(
    session: &mut dyn Session,
    mode: Mode,
    table: u32,
    sid: i64,
    c1: i64,
    deadline: Instant,
) -> DriverResult<Attempt> {
    let mut retries = 0;
    loop {
        let result = match mode {
            Mode::Select => session.select(table, sid),
            Mode::Update => session.update(table, sid, c1),
        };
        match result {
            Ok(true) => return Ok(Attempt::Committed { retries }),
            Ok(false) => {
                return Err(DriverError::fatal(format!(
                    "row {sid} of {} is missing",
                    PrimitiveSpec::table_name(table)
                )))
            }
            Err(error) if error.retryable && Instant::now() < deadline => retries += 1,
            Err(error) if error.retryable => return Ok(Attempt::GaveUp { retries }),
            Err(error) => return Err(error),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_uniform_and_in_range() {
        let spec = PrimitiveSpec {
            tables: 10,
            rows_per_table: 1000,
        };
        let mut generator = KeyGenerator::new(&spec, 7, 0);
        let mut per_table = [0u32; 10];
        let mut per_decile = [0u32; 10];
        let draws = 200_000;
        for _ in 0..draws {
            let (table, sid) = generator.next();
            assert!(table < 10);
            assert!((1..=1000).contains(&sid), "sid {sid}");
            per_table[table as usize] += 1;
            per_decile[((sid - 1) / 100) as usize] += 1;
        }
        for count in per_table.iter().chain(&per_decile) {
            let expected = draws / 10;
            assert!(
                (*count as i64 - expected as i64).abs() < expected as i64 / 20,
                "not uniform: {per_table:?} {per_decile:?}"
            );
        }
        let mut other = KeyGenerator::new(&spec, 7, 1);
        let mut again = KeyGenerator::new(&spec, 7, 0);
        let first: Vec<_> = (0..8).map(|_| again.next()).collect();
        let second: Vec<_> = (0..8).map(|_| other.next()).collect();
        assert_ne!(first, second, "workers must draw different keys");
    }

    #[test]
    fn data1_is_exactly_4096_printable_bytes_per_row() {
        let one = PrimitiveSpec::data1(0, 1);
        let two = PrimitiveSpec::data1(0, 2);
        assert_eq!(one.len(), DATA1_BYTES);
        assert!(one.bytes().all(|byte| byte.is_ascii_graphic()));
        assert_ne!(one, two);
        let spec = PrimitiveSpec {
            tables: 10,
            rows_per_table: 500_000,
        };
        assert_eq!(spec.data_bytes(), 10 * 500_000 * 4112);
    }
}
