//! `hayate-lab device`: the physical limits of the device under a directory, measured through
//! the engine's own I/O path (`hayate_engine::open_default`: io_uring with O_DIRECT).
//!
//! A run:
//! 1. makes a test file (default 4 GiB, less on a small disk) and fills it with real writes of
//!    distinct, incompressible blocks, so that later reads hit the flash, not a thin-provisioned
//!    hole or a small device cache;
//! 2. random reads of the page size at queue depths 1, 2, 4, ... 256;
//! 3. random writes of the page size (not synced) at the same depths;
//! 4. sequential writes of the out-of-place segment size (256 pages, 1 MiB at 4 KiB pages) at a
//!    few depths;
//! 5. log-like appends of 4, 16 and 64 KiB, each followed by fdatasync, at queue depth 1, to a
//!    fresh file that grows like a WAL segment;
//! 6. prints a table, writes `device-<time>.json` and removes the test files (also after an
//!    error or Ctrl-C).
//!
//! Queue depth N means batches of N requests submitted together and waited for together
//! (`read_batch` / `write_batch`), which is how the engine issues I/O; the latency of a point
//! is the time of a whole batch (at depth 1, of one I/O). `--threads T` splits the depth over T
//! threads each submitting batches of N/T, which keeps the queue fuller between batches.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use hayate_engine::StoreConfig;
use hayate_engine::{
    self, AlignedBuf, Io, IoFile, IoKind, OpenOptions, ReadRequest, WriteRequest, IO_ALIGN,
};
use indicatif::{ProgressBar, ProgressStyle};
use rand::rngs::StdRng;
use rand::{Rng, RngCore, SeedableRng};

use super::results::{DevicePoint, DeviceResult, Percentiles, ResultFile};
use hayate::error::{CliError, CliResult, Context};
use hayate::report::{format_bytes, format_rate, format_us, table, Histogram};

const MIB: u64 = 1 << 20;
/// Test file size when the disk has room.
const FILE_MIB_DEFAULT: u64 = 4096;
/// Smallest test file: anything smaller measures caches, not the device.
const FILE_MIB_MIN: u64 = 16;
/// The quick variant's test file.
const FILE_MIB_QUICK: u64 = 64;
/// Below this file size, reads may be served by a cache in the device or the hypervisor.
const FILE_MIB_CACHE_WARNING: u64 = 1024;
/// Free space left on the disk besides the test files.
const FREE_MIB_RESERVE: u64 = 256;
/// Largest log file the synced appends grow before starting over at offset 0.
const LOG_BYTES_MAX: u64 = 1 << 30;
/// Requests in flight while filling the test file.
const FILL_DEPTH: usize = 8;
/// Largest queue depth and number of threads accepted.
const QUEUE_DEPTH_MAX: u32 = 256;
const THREADS_MAX: u32 = 64;
/// Names of the test files in the measured directory.
const TEST_FILE: &str = "hayate-lab-device.tmp";
const LOG_FILE: &str = "hayate-lab-device-log.tmp";

#[derive(Debug, Args)]
pub struct DeviceArgs {
    #[command(flatten)]
    pub common: crate::args::CommonArgs,

    /// Size of the test file the random I/O spreads over, in MiB. It should be much larger
    /// than any cache of the device. Default: 4096, or half the free space if that is less
    /// (64 with --quick).
    #[arg(long, value_name = "MIB")]
    pub file_mib: Option<u64>,

    /// Size of each random read and write, in bytes: the engine's page size (a multiple of
    /// 4096, at most 1 MiB). Sequential writes use 256 pages (the out-of-place segment).
    #[arg(long, value_name = "BYTES", default_value_t = 4096)]
    pub page_size: u64,

    /// Measuring time of each point (one queue depth of one pattern). Default: 2.5 (0.2 with
    /// --quick); the default run has 24 points, about a minute plus the time to fill the file.
    #[arg(long, value_name = "SECONDS")]
    pub seconds_per_point: Option<f64>,

    /// A smoke run for CI: a 64 MiB file, 0.2 s per point, depths 1, 8 and 64.
    #[arg(long)]
    pub quick: bool,

    /// Threads sharing each queue depth of the random reads and writes: depth N runs as T
    /// threads each submitting batches of N/T (at least 1). 1 is how one engine worker issues
    /// a batch.
    #[arg(long, value_name = "T", default_value_t = 1)]
    pub threads: u32,
}

/// What to measure, from the arguments and the free space.
#[derive(Debug, Clone)]
struct Plan {
    file_bytes: u64,
    page_size: u64,
    segment_bytes: u64,
    seconds_per_point: f64,
    threads: u32,
    random_depths: Vec<u32>,
    sequential_depths: Vec<u32>,
    synced_sizes: Vec<u64>,
}

impl Plan {
    fn new(args: &DeviceArgs, free_bytes: u64) -> CliResult<Plan> {
        let page_size = args.page_size;
        if page_size == 0 || !page_size.is_multiple_of(IO_ALIGN as u64) || page_size > MIB {
            return Err(CliError::new(format!(
                "--page-size {page_size}: must be a multiple of {IO_ALIGN} and at most 1 MiB"
            )));
        }
        let seconds_per_point =
            args.seconds_per_point
                .unwrap_or(if args.quick { 0.2 } else { 2.5 });
        if !(seconds_per_point.is_finite() && seconds_per_point > 0.0) {
            return Err(CliError::new(
                "--seconds-per-point must be a positive number",
            ));
        }
        if !(1..=THREADS_MAX).contains(&args.threads) {
            return Err(CliError::new(format!(
                "--threads must be 1..={THREADS_MAX}"
            )));
        }
        let file_bytes = file_size(args, free_bytes)?;
        let segment_bytes = StoreConfig::default().segment_pages * page_size;
        let (random_depths, sequential_depths, synced_sizes) = if args.quick {
            (vec![1, 8, 64], vec![1, 4], vec![4 << 10, 64 << 10])
        } else {
            let depths = (0..=8).map(|power| 1u32 << power).collect();
            (depths, vec![1, 4, 16], vec![4 << 10, 16 << 10, 64 << 10])
        };
        debug_assert!(random_depths.iter().all(|&depth| depth <= QUEUE_DEPTH_MAX));
        if file_bytes < segment_bytes * 16 {
            return Err(CliError::new(format!(
                "a test file of {} is too small for sequential writes of {}",
                format_bytes(file_bytes),
                format_bytes(segment_bytes)
            )));
        }
        Ok(Plan {
            file_bytes,
            page_size,
            segment_bytes,
            seconds_per_point,
            threads: args.threads,
            random_depths,
            sequential_depths,
            synced_sizes,
        })
    }

    fn point_count(&self) -> u64 {
        (self.random_depths.len() * 2 + self.sequential_depths.len() + self.synced_sizes.len())
            as u64
    }
}

/// The test file size: asked for, or the default capped by free space.
fn file_size(args: &DeviceArgs, free_bytes: u64) -> CliResult<u64> {
    let free_mib = free_bytes / MIB;
    let usable_mib = free_mib.saturating_sub(FREE_MIB_RESERVE);
    let file_mib = match args.file_mib {
        Some(asked) => asked,
        None if args.quick => FILE_MIB_QUICK,
        None => FILE_MIB_DEFAULT.min(usable_mib / 2),
    };
    if file_mib < FILE_MIB_MIN {
        return Err(CliError::new(format!(
            "test file of {file_mib} MiB is too small (at least {FILE_MIB_MIN} MiB; \
             {free_mib} MiB free)"
        )));
    }
    // Room for the file and the synced-write log (at most the file's size).
    if file_mib + file_mib.min(LOG_BYTES_MAX / MIB) > usable_mib {
        return Err(CliError::new(format!(
            "not enough free space for a {file_mib} MiB test file: {free_mib} MiB free"
        )));
    }
    Ok(file_mib * MIB)
}

/// Free bytes for an unprivileged user on the file system of `path` (statvfs).
fn free_bytes(path: &std::path::Path) -> CliResult<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes())
        .context(|| format!("bad path {}", path.display()))?;
    // SAFETY: `statvfs` is plain old data (all-zero is valid); the kernel fills it in and
    // reads only the NUL-terminated path.
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: valid C string and pointer to a statvfs.
    if unsafe { libc::statvfs(c_path.as_ptr(), &mut stat) } != 0 {
        let error = std::io::Error::last_os_error();
        return Err(CliError::new(format!(
            "statvfs {}: {error}",
            path.display()
        )));
    }
    Ok(stat.f_bavail as u64 * stat.f_frsize as u64)
}

pub fn run(args: &DeviceArgs) -> CliResult<()> {
    let dir = args.common.base_dir();
    std::fs::create_dir_all(&dir).context(|| format!("cannot create {}", dir.display()))?;
    let plan = Plan::new(args, free_bytes(&dir)?)?;
    let test = TestFile::create(&dir)?;
    let (io, file, backend) = (&test.io, &test.file, test.backend.clone());
    let device = super::sysstat::describe_device(&dir);
    println!(
        "device {} ({}), {backend}, test file {} in {}",
        device.block_device,
        device.file_system,
        format_bytes(plan.file_bytes),
        device.directory
    );
    if !backend.contains("O_DIRECT") {
        eprintln!("warning: no O_DIRECT here: the page cache is measured, not the device");
    }
    if plan.file_bytes < FILE_MIB_CACHE_WARNING * MIB && !args.quick {
        eprintln!("warning: a small test file may be served from a cache of the device");
    }
    fill(file.as_ref(), &plan)?;
    let result = measure_all(io.as_ref(), file, &plan, backend)?;
    drop(test);
    print!("{}", format_table(&result));
    println!("{}", summary(&result));
    let path = ResultFile::new("device", &dir, result).write(&args.common.results)?;
    println!("results: {}", path.display());
    Ok(())
}

/// One point of random reads measured for another experiment (`hayate-lab server`'s
/// reference for the device reads/s of its runs).
#[cfg_attr(not(feature = "peers"), allow(dead_code))] // for `lab server`
#[derive(Debug, Clone)]
pub struct RandomReads {
    pub point: DevicePoint,
    /// As `hayate-lab device` names it, e.g. "io_uring + O_DIRECT".
    pub backend: String,
    pub file_bytes: u64,
    pub threads: u32,
    pub seconds: f64,
}

/// Random reads of `page_size` at `queue_depth` (split over `threads`, each submitting
/// batches) for `seconds`, as `hayate-lab device` measures them: a test file of `file_bytes`
/// (less when the disk has less room) is made and filled in `dir`, then removed, also after
/// an error or Ctrl-C.
#[cfg_attr(not(feature = "peers"), allow(dead_code))] // for `lab server`
pub fn measure_random_reads(
    dir: &std::path::Path,
    file_bytes: u64,
    queue_depth: u32,
    threads: u32,
    seconds: f64,
) -> CliResult<RandomReads> {
    let page_size = IO_ALIGN as u64;
    let segment_bytes = StoreConfig::default().segment_pages * page_size;
    // Whole segments (the fill's writes), at least the smallest file that measures the device.
    let file_bytes_min = (FILE_MIB_MIN * MIB).max(segment_bytes);
    let usable_bytes = free_bytes(dir)?.saturating_sub(FREE_MIB_RESERVE * MIB);
    let file_bytes = file_bytes.max(file_bytes_min).min(usable_bytes / 2);
    let file_bytes = file_bytes / segment_bytes * segment_bytes;
    let plan = Plan {
        file_bytes,
        page_size,
        segment_bytes,
        seconds_per_point: seconds,
        threads: threads.clamp(1, queue_depth.clamp(1, QUEUE_DEPTH_MAX)),
        random_depths: vec![queue_depth.clamp(1, QUEUE_DEPTH_MAX)],
        sequential_depths: Vec::new(),
        synced_sizes: Vec::new(),
    };
    if file_bytes < file_bytes_min {
        return Err(CliError::new(format!(
            "no room for a test file of {} in {} ({} free)",
            format_bytes(file_bytes_min),
            dir.display(),
            format_bytes(usable_bytes)
        )));
    }
    let test = TestFile::create(dir)?;
    fill(test.file.as_ref(), &plan)?;
    let mut progress = Progress::new(&plan, 1);
    let point = measure_point(
        &test.file,
        &plan,
        Pattern::RandomRead,
        plan.random_depths[0],
        &mut progress,
    );
    progress.bar.finish_and_clear();
    let backend = test.backend.clone();
    drop(test);
    Ok(RandomReads {
        point: point?,
        backend,
        file_bytes,
        threads: plan.threads,
        seconds,
    })
}

/// Which backend the engine's path picked, and whether O_DIRECT was granted for the test file.
fn describe_backend(io: &dyn Io, dir: &std::path::Path) -> CliResult<String> {
    Ok(match io.kind() {
        IoKind::Uring => {
            let uring = hayate_engine::UringIo::new(dir)?;
            if uring
                .open_file(TEST_FILE, OpenOptions::EXISTING_DIRECT)?
                .is_direct()
            {
                "io_uring + O_DIRECT".to_string()
            } else {
                "io_uring (buffered: O_DIRECT refused by the file system)".to_string()
            }
        }
        IoKind::Sync => "pread/pwrite + O_DIRECT (io_uring unavailable)".to_string(),
        IoKind::Simulated => "simulated".to_string(),
    })
}

/// Removes the test files when dropped, so an error or Ctrl-C leaves nothing behind.
struct TestFiles {
    io: Arc<dyn Io>,
}

/// The empty test file in a directory, through the engine's I/O path, with Ctrl-C caught;
/// the test files are removed when it is dropped (the file is closed first).
struct TestFile {
    file: Arc<dyn IoFile>,
    io: Arc<dyn Io>,
    /// As `describe_backend` names it.
    backend: String,
    _files: TestFiles,
    _interrupt: InterruptGuard,
}

impl TestFile {
    fn create(dir: &std::path::Path) -> CliResult<TestFile> {
        let io = hayate_engine::open_default(dir)
            .context(|| format!("cannot open {}", dir.display()))?;
        let interrupt = InterruptGuard::install();
        let files = TestFiles { io: io.clone() };
        let file = io
            .open(TEST_FILE, OpenOptions::CREATE_DIRECT)
            .context(|| format!("cannot create the test file in {}", dir.display()))?;
        file.set_len(0)?;
        let backend = describe_backend(io.as_ref(), dir)?;
        Ok(TestFile {
            file,
            io,
            backend,
            _files: files,
            _interrupt: interrupt,
        })
    }
}

impl Drop for TestFiles {
    fn drop(&mut self) {
        for name in [TEST_FILE, LOG_FILE] {
            if self.io.exists(name).unwrap_or(false) {
                if let Err(error) = self.io.remove(name) {
                    eprintln!("warning: cannot remove test file {name}: {error}");
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Ctrl-C

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_interrupt(_signal: libc::c_int) {
    INTERRUPTED.store(true, Ordering::Relaxed);
    // A second Ctrl-C kills the process as usual. signal(2) is async-signal-safe.
    // SAFETY: restoring the default disposition of SIGINT.
    unsafe { libc::signal(libc::SIGINT, libc::SIG_DFL) };
}

/// Turns Ctrl-C into a flag the measuring loops check, so that the test files get removed.
struct InterruptGuard;

impl InterruptGuard {
    fn install() -> InterruptGuard {
        INTERRUPTED.store(false, Ordering::Relaxed);
        let handler = on_interrupt as extern "C" fn(libc::c_int) as libc::sighandler_t;
        // SAFETY: the handler only stores to an atomic and calls signal(2).
        unsafe { libc::signal(libc::SIGINT, handler) };
        InterruptGuard
    }
}

impl Drop for InterruptGuard {
    fn drop(&mut self) {
        // SAFETY: restoring the default disposition of SIGINT.
        unsafe { libc::signal(libc::SIGINT, libc::SIG_DFL) };
    }
}

fn check_interrupted() -> CliResult<()> {
    if INTERRUPTED.load(Ordering::Relaxed) {
        return Err(CliError::new("interrupted; test files removed"));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Filling the test file

/// Stamps each 4 KiB block of `buffer` with its file offset, so no two blocks are equal.
fn stamp_blocks(buffer: &mut [u8], first_offset: u64) {
    for (index, block) in buffer.chunks_mut(IO_ALIGN).enumerate() {
        let offset = first_offset + (index * IO_ALIGN) as u64;
        block[..8].copy_from_slice(&offset.to_le_bytes());
    }
}

fn random_buffer(len: usize, rng: &mut StdRng) -> AlignedBuf {
    let mut buffer = AlignedBuf::new(len);
    rng.fill_bytes(&mut buffer);
    buffer
}

fn fill(file: &dyn IoFile, plan: &Plan) -> CliResult<()> {
    let chunk_bytes = plan.segment_bytes as usize;
    let mut rng = StdRng::seed_from_u64(0x4841_5941_5445);
    let mut buffers: Vec<AlignedBuf> = (0..FILL_DEPTH)
        .map(|_| random_buffer(chunk_bytes, &mut rng))
        .collect();
    let bar = ProgressBar::new(plan.file_bytes);
    bar.set_style(
        ProgressStyle::with_template(
            "fill     [{bar:30}] {bytes}/{total_bytes}, {bytes_per_sec}, eta {eta}",
        )
        .expect("valid template")
        .progress_chars("=> "),
    );
    let mut offset = 0;
    while offset < plan.file_bytes {
        check_interrupted()?;
        let count = ((plan.file_bytes - offset) / chunk_bytes as u64).min(FILL_DEPTH as u64);
        let count = count.max(1) as usize;
        for (index, buffer) in buffers.iter_mut().take(count).enumerate() {
            stamp_blocks(buffer, offset + (index * chunk_bytes) as u64);
        }
        let requests: Vec<WriteRequest<'_>> = buffers[..count]
            .iter()
            .enumerate()
            .map(|(index, buffer)| WriteRequest {
                offset: offset + (index * chunk_bytes) as u64,
                buf: &buffer[..],
            })
            .collect();
        file.write_batch(&requests)?;
        offset += (count * chunk_bytes) as u64;
        bar.set_position(offset.min(plan.file_bytes));
    }
    file.set_len(plan.file_bytes)?;
    file.sync_data()?;
    bar.finish_and_clear();
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Measuring

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pattern {
    RandomRead,
    RandomWrite,
    SequentialWrite,
    SyncedAppend,
}

/// Latencies and count of one thread's batches.
#[derive(Default)]
struct Tally {
    operations: u64,
    histogram: Histogram,
    sum_ns: u128,
    max_ns: u64,
}

impl Tally {
    fn record(&mut self, operations: u64, latency: Duration) {
        let latency_ns = latency.as_nanos() as u64;
        self.operations += operations;
        self.histogram.record(latency_ns);
        self.sum_ns += latency_ns as u128;
        self.max_ns = self.max_ns.max(latency_ns);
    }

    fn merge(&mut self, other: &Tally) {
        self.operations += other.operations;
        self.histogram.merge(&other.histogram);
        self.sum_ns += other.sum_ns;
        self.max_ns = self.max_ns.max(other.max_ns);
    }
}

/// Percentiles of a histogram of nanoseconds, with the exact mean and maximum kept beside it.
pub(crate) fn latency_percentiles(histogram: &Histogram, sum_ns: u128, max_ns: u64) -> Percentiles {
    let us = |ns: u64| ns as f64 / 1000.0;
    let count = histogram.count();
    Percentiles {
        mean_us: if count == 0 {
            0.0
        } else {
            sum_ns as f64 / count as f64 / 1000.0
        },
        p50_us: us(histogram.quantile_ns(0.50)),
        p90_us: us(histogram.quantile_ns(0.90)),
        p99_us: us(histogram.quantile_ns(0.99)),
        p999_us: us(histogram.quantile_ns(0.999)),
        max_us: us(max_ns),
    }
}

/// Progress across all points: one unit per millisecond of measuring time.
struct Progress {
    bar: ProgressBar,
    point_ms: u64,
    point_index: u64,
}

impl Progress {
    fn new(plan: &Plan, point_count: u64) -> Progress {
        let point_ms = (plan.seconds_per_point * 1000.0).ceil() as u64;
        let bar = ProgressBar::new(point_ms * point_count);
        bar.set_style(
            ProgressStyle::with_template("measure  [{bar:30}] {elapsed:>4}/{duration} {msg}")
                .expect("valid template")
                .progress_chars("=> "),
        );
        Progress {
            bar,
            point_ms,
            point_index: 0,
        }
    }

    fn start_point(&mut self, message: String) -> u64 {
        self.bar.set_message(message);
        let base = self.point_index * self.point_ms;
        self.point_index += 1;
        self.bar.set_position(base);
        base
    }
}

fn measure_all(
    io: &dyn Io,
    file: &Arc<dyn IoFile>,
    plan: &Plan,
    backend: String,
) -> CliResult<DeviceResult> {
    let mut progress = Progress::new(plan, plan.point_count());
    let mut result = DeviceResult {
        backend,
        page_size: plan.page_size,
        file_bytes: plan.file_bytes,
        seconds_per_point: plan.seconds_per_point,
        ..DeviceResult::default()
    };
    for &depth in &plan.random_depths {
        let point = measure_point(file, plan, Pattern::RandomRead, depth, &mut progress)?;
        result.random_read.push(point);
    }
    for &depth in &plan.random_depths {
        let point = measure_point(file, plan, Pattern::RandomWrite, depth, &mut progress)?;
        result.random_write.push(point);
    }
    for &depth in &plan.sequential_depths {
        let point = measure_point(file, plan, Pattern::SequentialWrite, depth, &mut progress)?;
        result.sequential_write.push(point);
    }
    for &size in &plan.synced_sizes {
        // A fresh log file per size, growing as the WAL's segments do.
        if io.exists(LOG_FILE)? {
            io.remove(LOG_FILE)?;
        }
        let log = io.open(LOG_FILE, OpenOptions::CREATE_DIRECT)?;
        let log_plan = Plan {
            page_size: size,
            ..plan.clone()
        };
        let point = measure_point(&log, &log_plan, Pattern::SyncedAppend, 1, &mut progress)?;
        result.synced_write.push(point);
    }
    progress.bar.finish_and_clear();
    Ok(result)
}

/// Runs one pattern at one queue depth for `seconds_per_point`.
fn measure_point(
    file: &Arc<dyn IoFile>,
    plan: &Plan,
    pattern: Pattern,
    queue_depth: u32,
    progress: &mut Progress,
) -> CliResult<DevicePoint> {
    let block_bytes = match pattern {
        Pattern::SequentialWrite => plan.segment_bytes,
        _ => plan.page_size,
    };
    let threads = match pattern {
        Pattern::RandomRead | Pattern::RandomWrite => plan.threads.min(queue_depth),
        Pattern::SequentialWrite | Pattern::SyncedAppend => 1,
    };
    let base_ms = progress.start_point(format!(
        "{} QD {queue_depth}, {}",
        pattern_name(pattern),
        block_name(block_bytes)
    ));
    let started = Instant::now();
    let deadline = started + Duration::from_secs_f64(plan.seconds_per_point);
    let bar = progress.bar.clone();
    let tallies: Vec<CliResult<Tally>> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|thread| {
                // Depth split as evenly as possible: the first threads take the remainder.
                let depth = queue_depth / threads + u32::from(thread < queue_depth % threads);
                let worker = Worker {
                    file: file.as_ref(),
                    pattern,
                    depth: depth as usize,
                    block_bytes,
                    file_bytes: plan.file_bytes,
                    seed: u64::from(thread) * 7919 + u64::from(queue_depth),
                };
                let bar = (thread == 0).then(|| bar.clone());
                scope.spawn(move || worker.run(deadline, bar.map(|bar| (bar, base_ms))))
            })
            .collect();
        workers
            .into_iter()
            .map(|worker| worker.join().expect("device worker panicked"))
            .collect()
    });
    let seconds = started.elapsed().as_secs_f64();
    let mut total = Tally::default();
    for tally in tallies {
        total.merge(&tally?);
    }
    check_interrupted()?;
    Ok(DevicePoint {
        queue_depth,
        block_bytes,
        operations: total.operations,
        ops_per_second: total.operations as f64 / seconds,
        mib_per_second: (total.operations * block_bytes) as f64 / MIB as f64 / seconds,
        latency: latency_percentiles(&total.histogram, total.sum_ns, total.max_ns),
    })
}

/// One thread of one point.
struct Worker<'a> {
    file: &'a dyn IoFile,
    pattern: Pattern,
    depth: usize,
    block_bytes: u64,
    file_bytes: u64,
    seed: u64,
}

impl Worker<'_> {
    /// Issues batches until the deadline (at least one), updating the bar if given one.
    fn run(&self, deadline: Instant, bar: Option<(ProgressBar, u64)>) -> CliResult<Tally> {
        let mut rng = StdRng::seed_from_u64(self.seed);
        let mut buffers: Vec<AlignedBuf> = (0..self.depth)
            .map(|_| random_buffer(self.block_bytes as usize, &mut rng))
            .collect();
        let blocks = self.file_bytes / self.block_bytes;
        let started = Instant::now();
        let mut tally = Tally::default();
        // Next offset of the sequential writes and of the log appends.
        let mut cursor = 0u64;
        loop {
            let batch_started = Instant::now();
            match self.pattern {
                Pattern::RandomRead => {
                    let mut requests: Vec<ReadRequest<'_>> = buffers
                        .iter_mut()
                        .map(|buffer| ReadRequest {
                            offset: rng.gen_range(0..blocks) * self.block_bytes,
                            buf: &mut buffer[..],
                        })
                        .collect();
                    self.file.read_batch(&mut requests)?;
                }
                Pattern::RandomWrite => {
                    let offsets = (0..self.depth).map(|_| rng.gen_range(0..blocks));
                    self.write(&buffers, offsets.map(|block| block * self.block_bytes))?;
                }
                Pattern::SequentialWrite => {
                    if cursor + self.depth as u64 * self.block_bytes > self.file_bytes {
                        cursor = 0;
                    }
                    let first = cursor;
                    let offsets = (0..self.depth as u64).map(|i| first + i * self.block_bytes);
                    self.write(&buffers, offsets)?;
                    cursor += self.depth as u64 * self.block_bytes;
                }
                Pattern::SyncedAppend => {
                    if cursor + self.block_bytes > LOG_BYTES_MAX.min(self.file_bytes) {
                        cursor = 0;
                    }
                    stamp_blocks(&mut buffers[0], cursor);
                    self.file.write_at(&buffers[0], cursor)?;
                    self.file.sync_data()?;
                    cursor += self.block_bytes;
                }
            }
            tally.record(self.depth as u64, batch_started.elapsed());
            if let Some((bar, base_ms)) = &bar {
                bar.set_position(base_ms + started.elapsed().as_millis() as u64);
            }
            if Instant::now() >= deadline || INTERRUPTED.load(Ordering::Relaxed) {
                return Ok(tally);
            }
        }
    }

    fn write(&self, buffers: &[AlignedBuf], offsets: impl Iterator<Item = u64>) -> CliResult<()> {
        let requests: Vec<WriteRequest<'_>> = buffers
            .iter()
            .zip(offsets)
            .map(|(buffer, offset)| WriteRequest {
                offset,
                buf: &buffer[..],
            })
            .collect();
        Ok(self.file.write_batch(&requests)?)
    }
}

// ---------------------------------------------------------------------------------------------
// Printing

fn pattern_name(pattern: Pattern) -> &'static str {
    match pattern {
        Pattern::RandomRead => "random read",
        Pattern::RandomWrite => "random write",
        Pattern::SequentialWrite => "sequential write",
        Pattern::SyncedAppend => "append + fdatasync",
    }
}

fn block_name(bytes: u64) -> String {
    if bytes >= MIB && bytes.is_multiple_of(MIB) {
        format!("{} MiB", bytes / MIB)
    } else {
        format!("{} KiB", bytes / 1024)
    }
}

fn format_table(result: &DeviceResult) -> String {
    let sections = [
        (Pattern::RandomRead, &result.random_read),
        (Pattern::RandomWrite, &result.random_write),
        (Pattern::SequentialWrite, &result.sequential_write),
        (Pattern::SyncedAppend, &result.synced_write),
    ];
    let ns = |us: f64| (us * 1000.0) as u64;
    let mut rows = Vec::new();
    for (pattern, points) in sections {
        for point in points {
            rows.push(vec![
                pattern_name(pattern).to_string(),
                point.queue_depth.to_string(),
                block_name(point.block_bytes),
                format_rate(point.ops_per_second),
                format!("{:.1}", point.mib_per_second),
                format_us(ns(point.latency.mean_us)),
                format_us(ns(point.latency.p50_us)),
                format_us(ns(point.latency.p99_us)),
                format_us(ns(point.latency.p999_us)),
                format_us(ns(point.latency.max_us)),
            ]);
        }
    }
    let header = [
        "pattern", "QD", "block", "ops/s", "MiB/s", "mean", "p50", "p99", "p99.9", "max",
    ];
    table(&header, &rows)
}

fn summary(result: &DeviceResult) -> String {
    let reads = |depth: u32| {
        let point = result
            .random_read
            .iter()
            .filter(|point| point.queue_depth <= depth)
            .max_by_key(|point| point.queue_depth);
        point.map_or_else(
            || "-".to_string(),
            |point| {
                let rate = format_rate(point.ops_per_second);
                format!("{rate} at QD {}", point.queue_depth)
            },
        )
    };
    let synced = result.synced_write.first().map_or_else(
        || "-".to_string(),
        |point| {
            format!(
                "{}/s ({})",
                format_rate(point.ops_per_second),
                block_name(point.block_bytes)
            )
        },
    );
    format!(
        "random {} reads/s: {}, {}; synced appends: {synced}\n\
         (latency: of a whole batch of QD requests; at QD 1, of one I/O)",
        block_name(result.page_size),
        reads(1),
        reads(32),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(file_mib: Option<u64>, quick: bool) -> DeviceArgs {
        DeviceArgs {
            common: crate::args::CommonArgs {
                results: "unused".into(),
                dir: None,
            },
            file_mib,
            page_size: 4096,
            seconds_per_point: None,
            quick,
            threads: 1,
        }
    }

    #[test]
    fn default_file_size_shrinks_to_the_free_space() {
        let plenty = 100 << 30;
        let plan = Plan::new(&args(None, false), plenty).expect("plan");
        assert_eq!(plan.file_bytes, FILE_MIB_DEFAULT * MIB);
        assert_eq!(plan.random_depths.first(), Some(&1));
        assert_eq!(plan.random_depths.last(), Some(&256));
        assert_eq!(plan.segment_bytes, MIB);
        assert_eq!(plan.seconds_per_point, 2.5);
        let small = 2 << 30;
        let plan = Plan::new(&args(None, false), small).expect("plan");
        assert_eq!(plan.file_bytes, (2048 - FREE_MIB_RESERVE) / 2 * MIB);
        assert!(Plan::new(&args(Some(4096), false), small).is_err());
        assert!(Plan::new(&args(None, false), 100 * MIB).is_err());
        let quick = Plan::new(&args(None, true), plenty).expect("plan");
        assert_eq!(quick.file_bytes, FILE_MIB_QUICK * MIB);
        assert_eq!(quick.seconds_per_point, 0.2);
    }

    #[test]
    fn bad_options_are_errors() {
        let mut bad_page = args(None, true);
        bad_page.page_size = 1000;
        assert!(Plan::new(&bad_page, 100 << 30).is_err());
        let mut bad_seconds = args(None, true);
        bad_seconds.seconds_per_point = Some(0.0);
        assert!(Plan::new(&bad_seconds, 100 << 30).is_err());
        let mut bad_threads = args(None, true);
        bad_threads.threads = 0;
        assert!(Plan::new(&bad_threads, 100 << 30).is_err());
    }

    #[test]
    fn random_reads_are_measured_on_a_file_removed_afterwards() {
        let temporary = tempfile::tempdir().expect("tempdir");
        let reads = measure_random_reads(temporary.path(), 16 * MIB, 8, 2, 0.1).expect("reads");
        assert_eq!(reads.point.queue_depth, 8);
        assert_eq!(reads.point.block_bytes, 4096);
        assert!(reads.point.operations >= 8, "{:?}", reads.point);
        assert!(reads.point.ops_per_second > 0.0);
        assert_eq!((reads.file_bytes, reads.threads), (16 * MIB, 2));
        assert!(!reads.backend.is_empty());
        let left = std::fs::read_dir(temporary.path())
            .expect("read dir")
            .count();
        assert_eq!(left, 0, "the test file is removed");
        let smallest = measure_random_reads(temporary.path(), MIB, 1, 4, 0.05).expect("reads");
        assert_eq!(
            smallest.file_bytes,
            FILE_MIB_MIN * MIB,
            "at least the smallest file"
        );
        assert_eq!(smallest.threads, 1, "no more threads than the queue depth");
    }

    #[test]
    fn stamped_blocks_differ() {
        let mut buffer = AlignedBuf::new(3 * IO_ALIGN);
        stamp_blocks(&mut buffer, 8192);
        assert_eq!(buffer[..8], 8192u64.to_le_bytes());
        assert_eq!(
            buffer[2 * IO_ALIGN..2 * IO_ALIGN + 8],
            16384u64.to_le_bytes()
        );
    }
}
