//! Hayate behind the lab's driver interfaces, embedded in the lab's process: `Driver`,
//! `PrimitiveDriver`, and `TpccDriver` over the TPC-C tables and transactions of
//! `tpcc::hayate`.
//!
//! The database lives in a directory the lab made. It is loaded once, then reopened for every
//! buffer size and device class: the I/O stack is `TracingIo` over `LatencyIo` (when a device
//! class is emulated) over the real backend, so the I/O trace of a run includes the emulated
//! latency and the replay can go through the same emulation.
//!
//! A run (`run_native`) spreads the concurrent transactions as fibers over a few worker
//! threads (`crate::fibers`): a worker keeps many page reads in flight on its own ring and its
//! fibers' commits share log flushes. Each worker accounts its time by phase (`phase`).

use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::io::latency::{DeviceClass, LatencyIo};
use crate::io::trace::TracingIo;
use hayate_engine::Io;
use hayate_engine::PhaseReport;
use hayate_engine::{BufferSize, Database, DatabaseConfig, StoreConfig, TreeId, WritePolicy};
use parking_lot::Mutex;

use crate::driver::{Driver, DriverError, DriverResult};
use crate::primitive::driver::{
    KeyGenerator, Mode, PrimitiveDriver, PrimitiveSpec, RunJob, Session, WorkerOutcome,
};
use crate::tpcc::check::CheckData;
use crate::tpcc::driver::TpccDriver;
use crate::tpcc::hayate as tpcc;
use crate::tpcc::metrics::{TpccJob, TpccOutcome};
use crate::tpcc::spec::Scale;
use crate::tpcc::txn::TpccSession;

/// Rows per load transaction.
const LOAD_BATCH_ROWS: u64 = 500;

/// How Hayate is set up for the lab.
#[derive(Debug, Clone)]
pub struct HayateOptions {
    pub page_size: usize,
    pub policy: WritePolicy,
    /// OS threads the concurrent transactions are spread over.
    pub workers: u32,
}

struct Open {
    db: Database,
    tracing: Arc<TracingIo>,
    device_io: Arc<dyn Io>,
    tables: Vec<TreeId>,
    /// The TPC-C trees, when the database holds TPC-C.
    tpcc: Option<tpcc::Trees>,
}

/// What the last `run_native` measured beyond the common outcome.
#[derive(Debug, Clone, Default)]
pub struct NativeDetails {
    /// Time by phase, summed over workers.
    pub phases: PhaseReport,
    /// Per worker: spans of the first moments of the run.
    pub worker_phases: Vec<PhaseReport>,
    /// When the measured part of the run started (spans are relative to it).
    pub started: Option<Instant>,
    pub updates_committed: u64,
}

pub struct HayateDriver {
    dir: PathBuf,
    options: HayateOptions,
    device_class: Mutex<DeviceClass>,
    buffer_bytes: AtomicU64,
    open: Mutex<Option<Open>>,
    /// Spans are recorded for this long at the start of each measured run (zero: none).
    timeline_window: Mutex<Duration>,
    details: Mutex<NativeDetails>,
    /// `stored_bytes` of the database when it was last closed.
    closed_stored_bytes: AtomicU64,
}

pub fn encode_key(sid: i64) -> [u8; 8] {
    (sid as u64).to_be_bytes()
}

/// A row's value: C1 (8 bytes, little-endian) then Data1.
pub fn encode_row(c1: i64, data1: &str) -> Vec<u8> {
    let mut value = Vec::with_capacity(8 + data1.len());
    value.extend_from_slice(&c1.to_le_bytes());
    value.extend_from_slice(data1.as_bytes());
    value
}

pub fn decode_c1(value: &[u8]) -> Option<i64> {
    Some(i64::from_le_bytes(value.get(..8)?.try_into().ok()?))
}

/// Bytes of a database's live pages.
fn stored_bytes_of(db: &Database) -> u64 {
    db.stats().store.live_pages * db.config().store.page_size as u64
}

impl HayateDriver {
    /// A driver for a new database in `dir` (which must not hold one yet).
    pub fn new(dir: &Path, options: HayateOptions) -> HayateDriver {
        HayateDriver {
            dir: dir.to_path_buf(),
            options,
            device_class: Mutex::new(DeviceClass::Real),
            buffer_bytes: AtomicU64::new(64 << 20),
            closed_stored_bytes: AtomicU64::new(0),
            open: Mutex::new(None),
            timeline_window: Mutex::new(Duration::ZERO),
            details: Mutex::new(NativeDetails::default()),
        }
    }

    /// Emulates a device class from the next `set_buffer_bytes` on.
    pub fn set_device_class(&self, class: DeviceClass) {
        *self.device_class.lock() = class;
    }

    pub fn set_timeline_window(&self, window: Duration) {
        *self.timeline_window.lock() = window;
    }

    pub fn details(&self) -> NativeDetails {
        self.details.lock().clone()
    }

    pub fn database(&self) -> Option<Database> {
        self.open.lock().as_ref().map(|open| open.db.clone())
    }

    pub fn tracing(&self) -> Option<Arc<TracingIo>> {
        self.open.lock().as_ref().map(|open| open.tracing.clone())
    }

    /// The I/O stack under the tracer (emulation included), for replaying a trace.
    pub fn device_io(&self) -> Option<Arc<dyn Io>> {
        self.open.lock().as_ref().map(|open| open.device_io.clone())
    }

    fn config(&self) -> DatabaseConfig {
        DatabaseConfig {
            store: StoreConfig {
                page_size: self.options.page_size,
                policy: self.options.policy,
                ..StoreConfig::default()
            },
            buffer_size: BufferSize::Bytes(self.buffer_bytes.load(Ordering::Relaxed)),
            buffer_frames_min: 64,
            keep_inner_resident: true,
            ..DatabaseConfig::default()
        }
    }

    /// Opens the database with the current buffer size and device class.
    fn reopen(&self) -> DriverResult<()> {
        self.close()?;
        let real = hayate_engine::open_default(&self.dir)?;
        let class = *self.device_class.lock();
        let device_io: Arc<dyn Io> = match class {
            DeviceClass::Real => real,
            class => Arc::new(LatencyIo::with_class(real, class)),
        };
        let tracing = Arc::new(TracingIo::new(device_io.clone()));
        let db = Database::open_with_io(tracing.clone(), self.config())?;
        let tables = db
            .tables()
            .into_iter()
            .filter(|info| info.name.starts_with("primitive_"))
            .map(|info| (info.name.clone(), info.id))
            .collect::<BTreeMap<_, _>>();
        let tables = (0..tables.len() as u32)
            .map(|table| {
                tables
                    .get(&PrimitiveSpec::table_name(table))
                    .copied()
                    .ok_or_else(|| DriverError::fatal("the primitive tables are incomplete"))
            })
            .collect::<DriverResult<Vec<_>>>()?;
        let tpcc = tpcc::Trees::find(&db);
        *self.open.lock() = Some(Open {
            db,
            tracing,
            device_io,
            tables,
            tpcc,
        });
        Ok(())
    }

    /// Closes the database (checkpointing it) if open.
    pub fn close(&self) -> DriverResult<()> {
        if let Some(open) = self.open.lock().take() {
            self.closed_stored_bytes
                .store(stored_bytes_of(&open.db), Ordering::Relaxed);
            open.db.close()?;
        }
        Ok(())
    }

    /// Reads every tree once, so that a buffer holding everything starts warm.
    pub fn prewarm_all(&self) -> DriverResult<()> {
        let db = self
            .database()
            .ok_or_else(|| DriverError::fatal("the database is not open"))?;
        let txn = db.begin_read_only();
        for tree in db.tables() {
            let mut scan = txn.scan(tree.id, Bound::Unbounded, Bound::Unbounded)?;
            while scan.next_row()?.is_some() {}
        }
        txn.commit()?;
        Ok(())
    }

    /// Bytes of the open database's live pages (its table and index data as stored).
    /// (As of the last close when closed; None before the first open.)
    pub fn stored_bytes(&self) -> Option<u64> {
        match self.database() {
            Some(db) => Some(stored_bytes_of(&db)),
            None => {
                Some(self.closed_stored_bytes.load(Ordering::Relaxed)).filter(|&bytes| bytes > 0)
            }
        }
    }

    fn opened_tpcc(&self) -> DriverResult<(Database, tpcc::Trees)> {
        let open = self.open.lock();
        let open = open
            .as_ref()
            .ok_or_else(|| DriverError::fatal("the database is not open"))?;
        let trees = open
            .tpcc
            .ok_or_else(|| DriverError::fatal("the database holds no TPC-C tables"))?;
        Ok((open.db.clone(), trees))
    }

    fn run_tpcc(&self, job: &TpccJob) -> DriverResult<TpccOutcome> {
        let (db, trees) = self.opened_tpcc()?;
        let started = Instant::now();
        let window = *self.timeline_window.lock();
        let record_until = (!window.is_zero()).then(|| started + window);
        let runs = tpcc::run_native(&db, &trees, job, self.options.workers, record_until)?;
        let mut outcome = TpccOutcome::default();
        let mut details = NativeDetails {
            started: Some(started),
            ..NativeDetails::default()
        };
        for run in runs {
            outcome.merge(&run.outcome);
            details.phases.merge(&run.phases);
            details.worker_phases.push(run.phases);
            details.updates_committed += run.writes_committed;
        }
        *self.details.lock() = details;
        Ok(outcome)
    }

    fn opened(&self) -> DriverResult<(Database, Vec<TreeId>)> {
        let open = self.open.lock();
        let open = open
            .as_ref()
            .ok_or_else(|| DriverError::fatal("the database is not open"))?;
        Ok((open.db.clone(), open.tables.clone()))
    }
}

impl Driver for HayateDriver {
    fn engine(&self) -> &str {
        "hayate"
    }

    fn version(&self) -> String {
        env!("CARGO_PKG_VERSION").to_string()
    }

    fn settings(&self) -> BTreeMap<String, String> {
        let config = self.config();
        let mut settings = BTreeMap::new();
        settings.insert(
            "commit".into(),
            "durable: log fdatasync before commit returns (group commit)".into(),
        );
        settings.insert("page_size".into(), config.store.page_size.to_string());
        settings.insert("write_policy".into(), self.write_policy());
        settings.insert(
            "buffer_bytes".into(),
            self.buffer_bytes.load(Ordering::Relaxed).to_string(),
        );
        settings.insert("inner_pages_resident".into(), "true".into());
        settings.insert(
            "io".into(),
            "io_uring + O_DIRECT (else pread/pwrite)".into(),
        );
        settings.insert(
            "concurrency".into(),
            format!("fibers on {} worker threads", self.options.workers),
        );
        settings.insert("isolation".into(), "snapshot".into());
        settings
    }

    fn page_size(&self) -> u64 {
        self.options.page_size as u64
    }

    fn write_policy(&self) -> String {
        match self.options.policy {
            WritePolicy::OutOfPlace => "out-of-place".into(),
            WritePolicy::InPlace => "in-place".into(),
        }
    }

    fn set_buffer_bytes(&self, bytes: u64) -> DriverResult<()> {
        self.buffer_bytes.store(bytes, Ordering::Relaxed);
        self.reopen()
    }

    fn shutdown(&self) -> DriverResult<()> {
        self.close()
    }
}

impl PrimitiveDriver for HayateDriver {
    fn load_primitive(
        &self,
        spec: &PrimitiveSpec,
        progress: &(dyn Fn(u64) + Sync),
    ) -> DriverResult<()> {
        std::fs::create_dir_all(&self.dir)
            .map_err(|error| DriverError::fatal(format!("{}: {error}", self.dir.display())))?;
        self.close()?;
        let db = Database::open(&self.dir, self.config())?;
        if !db.tables().is_empty() {
            return Err(DriverError::fatal(format!(
                "{} already holds a database",
                self.dir.display()
            )));
        }
        let tables = (0..spec.tables)
            .map(|table| db.create_table(&PrimitiveSpec::table_name(table)))
            .collect::<hayate_engine::Result<Vec<_>>>()?;
        let loaded = AtomicU64::new(0);
        let workers = self.options.workers.clamp(1, spec.tables.max(1));
        let results: Vec<DriverResult<()>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..workers)
                .map(|worker| {
                    let (db, tables, loaded) = (&db, &tables, &loaded);
                    scope.spawn(move || -> DriverResult<()> {
                        for table in (worker..spec.tables).step_by(workers as usize) {
                            load_table(db, tables[table as usize], table, spec, loaded, progress)?;
                        }
                        Ok(())
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|handle| handle.join().expect("load worker panicked"))
                .collect()
        });
        results.into_iter().collect::<DriverResult<()>>()?;
        db.close()?;
        Ok(())
    }

    fn prewarm(&self, _spec: &PrimitiveSpec) -> DriverResult<()> {
        let (db, tables) = self.opened()?;
        let txn = db.begin_read_only();
        for tree in tables {
            let mut scan = txn.scan(tree, Bound::Unbounded, Bound::Unbounded)?;
            while scan.next_row()?.is_some() {}
        }
        txn.commit()?;
        Ok(())
    }

    fn connect(&self) -> DriverResult<Box<dyn Session>> {
        let (db, tables) = self.opened()?;
        Ok(Box::new(HayateSession { db, tables }))
    }

    fn run_native(&self, job: &RunJob) -> Option<DriverResult<WorkerOutcome>> {
        Some(self.run_fibers(job))
    }
}

impl TpccDriver for HayateDriver {
    fn load_tpcc(
        &self,
        scale: &Scale,
        seed: u64,
        progress: &(dyn Fn(u64) + Sync),
    ) -> DriverResult<()> {
        std::fs::create_dir_all(&self.dir)
            .map_err(|error| DriverError::fatal(format!("{}: {error}", self.dir.display())))?;
        self.close()?;
        let db = Database::open(&self.dir, self.config())?;
        tpcc::load(&db, scale, seed, self.options.workers.max(2), progress)?;
        db.close()?;
        Ok(())
    }

    fn connect_tpcc(&self) -> DriverResult<Box<dyn TpccSession>> {
        let (db, trees) = self.opened_tpcc()?;
        Ok(Box::new(tpcc::HayateTpccSession { db, trees }))
    }

    fn tpcc_check_data(&self) -> DriverResult<CheckData> {
        let (db, trees) = self.opened_tpcc()?;
        tpcc::check_data(&db, &trees)
    }

    fn run_tpcc_native(&self, job: &TpccJob) -> Option<DriverResult<TpccOutcome>> {
        Some(self.run_tpcc(job))
    }
}

fn load_table(
    db: &Database,
    tree: TreeId,
    table: u32,
    spec: &PrimitiveSpec,
    loaded: &AtomicU64,
    progress: &(dyn Fn(u64) + Sync),
) -> DriverResult<()> {
    let mut sid = 1;
    while sid <= spec.rows_per_table as i64 {
        let last = (sid + LOAD_BATCH_ROWS as i64 - 1).min(spec.rows_per_table as i64);
        let mut txn = db.begin();
        for sid in sid..=last {
            txn.insert(
                tree,
                &encode_key(sid),
                &encode_row(0, &PrimitiveSpec::data1(table, sid)),
            )?;
        }
        txn.commit()?;
        let rows = (last - sid + 1) as u64;
        progress(loaded.fetch_add(rows, Ordering::Relaxed) + rows);
        sid = last + 1;
    }
    Ok(())
}

impl HayateDriver {
    fn run_fibers(&self, job: &RunJob) -> DriverResult<WorkerOutcome> {
        let (db, tables) = self.opened()?;
        let workers = self.options.workers.clamp(1, job.concurrency.max(1));
        let started = Instant::now();
        let deadline = started + job.duration;
        let window = *self.timeline_window.lock();
        let record_until = (!window.is_zero()).then(|| started + window);
        let results: Vec<DriverResult<(WorkerOutcome, PhaseReport, u64)>> =
            std::thread::scope(|scope| {
                let handles: Vec<_> = (0..workers)
                    .map(|worker| {
                        // Spread the fibers: the first workers take one more when uneven.
                        let fibers = job.concurrency / workers
                            + u32::from(worker < job.concurrency % workers);
                        let (db, tables) = (&db, &tables);
                        scope.spawn(move || {
                            hayate_engine::start_accounting(record_until);
                            let result =
                                run_worker(db, tables, job, worker, fibers, started, deadline);
                            let phases = hayate_engine::finish_accounting();
                            result.map(|(outcome, updates)| (outcome, phases, updates))
                        })
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|handle| handle.join().expect("worker panicked"))
                    .collect()
            });
        let mut outcome = WorkerOutcome::default();
        let mut details = NativeDetails {
            started: Some(started),
            ..NativeDetails::default()
        };
        for result in results {
            let (worker_outcome, phases, updates) = result?;
            outcome.merge(&worker_outcome);
            details.phases.merge(&phases);
            details.worker_phases.push(phases);
            details.updates_committed += updates;
        }
        *self.details.lock() = details;
        Ok(outcome)
    }
}

/// One worker thread: `fibers` transactions in flight until the deadline.
fn run_worker(
    db: &Database,
    tables: &[TreeId],
    job: &RunJob,
    worker: u32,
    fibers: u32,
    started: Instant,
    deadline: Instant,
) -> DriverResult<(WorkerOutcome, u64)> {
    type Work<'a> = Box<dyn FnOnce() -> DriverResult<(WorkerOutcome, u64)> + 'a>;
    let works: Vec<Work<'_>> = (0..fibers)
        .map(|fiber| {
            let keys = KeyGenerator::new(&job.spec, job.seed, (worker as u64) << 20 | fiber as u64);
            Box::new(move || run_fiber(db, tables, job, keys, started, deadline)) as Work<'_>
        })
        .collect();
    let mut outcome = WorkerOutcome {
        worker_threads: 1,
        ..WorkerOutcome::default()
    };
    let mut updates = 0;
    for output in crate::fibers::run(works) {
        let (fiber_outcome, fiber_updates) = output.inspect_err(|error| {
            log::error!("worker {worker}: {error}");
        })?;
        outcome.merge(&fiber_outcome);
        updates += fiber_updates;
    }
    outcome.worker_threads = 1;
    Ok((outcome, updates))
}

/// One transaction in flight: selects or updates random rows until the deadline, retrying
/// after retryable failures.
fn run_fiber(
    db: &Database,
    tables: &[TreeId],
    job: &RunJob,
    mut keys: KeyGenerator,
    started: Instant,
    deadline: Instant,
) -> DriverResult<(WorkerOutcome, u64)> {
    let mut outcome = WorkerOutcome::default();
    let mut updates = 0;
    let mut now = started;
    while now < deadline {
        let (table, sid) = keys.next();
        let tree = tables[table as usize];
        let key = encode_key(sid);
        loop {
            let result = match job.mode {
                Mode::Select => select_once(db, tree, &key),
                Mode::Update => update_once(db, tree, &key),
            };
            match result {
                Ok(true) => break,
                Ok(false) => {
                    return Err(DriverError::fatal(format!(
                        "row {sid} of {} is missing",
                        PrimitiveSpec::table_name(table)
                    )))
                }
                Err(error) if error.is_retryable() => {
                    outcome.retries += 1;
                    crate::fibers::pause();
                }
                Err(error) => return Err(error.into()),
            }
        }
        let finished = Instant::now();
        outcome.record(finished.duration_since(now));
        updates += u64::from(job.mode == Mode::Update);
        now = finished;
    }
    Ok((outcome, updates))
}

fn select_once(db: &Database, tree: TreeId, key: &[u8]) -> hayate_engine::Result<bool> {
    let txn = db.begin_read_only();
    let found = txn.get(tree, key)?.is_some();
    crate::fibers::commit(db, txn)?;
    Ok(found)
}

fn update_once(db: &Database, tree: TreeId, key: &[u8]) -> hayate_engine::Result<bool> {
    let mut txn = db.begin();
    let Some(mut value) = txn.get(tree, key)? else {
        return Ok(false);
    };
    let c1 = decode_c1(&value).unwrap_or(0).wrapping_add(1);
    value[..8].copy_from_slice(&c1.to_le_bytes());
    txn.put(tree, key, &value)?;
    crate::fibers::commit(db, txn)?;
    Ok(true)
}

/// A blocking session (one OS thread per session), for tools and tests.
struct HayateSession {
    db: Database,
    tables: Vec<TreeId>,
}

impl HayateSession {
    fn tree(&self, table: u32) -> DriverResult<TreeId> {
        self.tables
            .get(table as usize)
            .copied()
            .ok_or_else(|| DriverError::fatal(format!("no table {}", table + 1)))
    }
}

impl Session for HayateSession {
    fn select(&mut self, table: u32, sid: i64) -> DriverResult<bool> {
        let tree = self.tree(table)?;
        let txn = self.db.begin_read_only();
        let found = txn.get(tree, &encode_key(sid))?.is_some();
        txn.commit()?;
        Ok(found)
    }

    fn update(&mut self, table: u32, sid: i64, c1: i64) -> DriverResult<bool> {
        let tree = self.tree(table)?;
        let key = encode_key(sid);
        let mut txn = self.db.begin();
        let Some(mut value) = txn.get_for_update(tree, &key)? else {
            return Ok(false);
        };
        value[..8].copy_from_slice(&c1.to_le_bytes());
        txn.put(tree, &key, &value)?;
        txn.commit()?;
        Ok(true)
    }
}

impl Drop for HayateDriver {
    fn drop(&mut self) {
        if let Err(error) = self.close() {
            log::warn!("closing the lab database: {error}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn driver(dir: &Path) -> HayateDriver {
        HayateDriver::new(
            dir,
            HayateOptions {
                page_size: 4096,
                policy: WritePolicy::OutOfPlace,
                workers: 2,
            },
        )
    }

    fn sum_c1(driver: &HayateDriver, spec: &PrimitiveSpec) -> (i64, u64) {
        let (db, tables) = driver.opened().expect("open");
        let txn = db.begin_read_only();
        let (mut sum, mut rows) = (0, 0);
        for (table, tree) in tables.iter().enumerate() {
            let mut scan = txn
                .scan(*tree, Bound::Unbounded, Bound::Unbounded)
                .expect("scan");
            while let Some((key, value)) = scan.next_row().expect("row") {
                let sid = i64::from_be_bytes(key.try_into().expect("8-byte key"));
                assert_eq!(
                    &value[8..],
                    PrimitiveSpec::data1(table as u32, sid).as_bytes(),
                    "Data1 of row {sid} changed"
                );
                sum += decode_c1(&value).expect("C1");
                rows += 1;
            }
        }
        assert_eq!(rows, spec.tables as u64 * spec.rows_per_table);
        (sum, rows)
    }

    /// Every committed update adds one to C1 of one row, so after the run the sum of C1 over
    /// all rows is the number of updates the run counted, even across a reopen.
    #[test]
    fn updates_on_fibers_lose_nothing_and_selects_find_every_row() {
        let temporary = tempfile::tempdir().expect("tempdir");
        let driver = driver(&temporary.path().join("db"));
        let spec = PrimitiveSpec {
            tables: 3,
            rows_per_table: 200,
        };
        let progress = AtomicU64::new(0);
        driver
            .load_primitive(&spec, &|rows| progress.store(rows, Ordering::Relaxed))
            .expect("load");
        assert_eq!(progress.load(Ordering::Relaxed), 600);
        // A small buffer (pages are read and written while the fibers run).
        driver.set_buffer_bytes(64 * 4096).expect("open");
        assert_eq!(sum_c1(&driver, &spec), (0, 600));
        let job = RunJob {
            spec,
            mode: Mode::Update,
            concurrency: 16,
            duration: Duration::from_millis(400),
            seed: 3,
        };
        let outcome = driver.run_native(&job).expect("native").expect("run");
        assert!(outcome.transactions > 0);
        assert_eq!(outcome.worker_threads, 2);
        assert_eq!(outcome.latency.count(), outcome.transactions);
        assert_eq!(driver.details().updates_committed, outcome.transactions);
        assert_eq!(sum_c1(&driver, &spec).0, outcome.transactions as i64);

        let select = RunJob {
            mode: Mode::Select,
            ..job
        };
        let selected = driver.run_native(&select).expect("native").expect("run");
        assert!(selected.transactions > 0);
        let phases = driver.details().phases;
        assert!(phases.wall() > Duration::ZERO);

        // Sessions (one OS thread each) see the same rows, and a reopen keeps every update.
        let mut session = driver.connect().expect("session");
        assert!(session.select(0, 1).expect("select"));
        assert!(!session.select(0, 201).expect("select past the end"));
        driver.set_buffer_bytes(1 << 20).expect("reopen");
        assert_eq!(sum_c1(&driver, &spec).0, outcome.transactions as i64);
        driver.shutdown().expect("shutdown");
    }
}
