//! `hayate demo`: the engine's main job with embedded defaults.
//!
//! 1. Create a database in a fresh temporary directory (or `--dir`).
//! 2. Load a table of `--rows` rows in batches of `LOAD_BATCH_ROWS` per transaction.
//! 3. Run the mixed read/update workload (`workload`) from `--threads` threads.
//! 4. Print throughput, latency and engine counters, run the consistency check, close.
//! 5. Reopen: print the recovery report and verify every row and the last update of each
//!    updated key.
//! 6. Remove the temporary directory unless `--dir` or `--keep`.

mod workload;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use hayate::args::PolicyArg;
use hayate::error::{CliError, CliResult, Context};
use hayate::report::{self, format_count, format_rate, format_us, io_backend_name};
use hayate_engine::{BufferSize, Database, DatabaseConfig, TreeId, WritePolicy, CONTROL_FILE};
use indicatif::{ProgressBar, ProgressStyle};

use crate::check::describe_format;
use crate::cli::DemoArgs;

const TABLE: &str = "demo";
const VALUE_LENGTH_BYTES: usize = 100;
const LOAD_BATCH_ROWS: u64 = 1000;
const BUFFER_SIZE_BYTES_DEFAULT: u64 = 128 << 20;

/// Where the database lives; a temporary directory is removed when this is dropped.
enum DemoDir {
    Temporary(tempfile::TempDir),
    Kept(PathBuf),
}

impl DemoDir {
    fn prepare(args: &DemoArgs) -> CliResult<DemoDir> {
        let Some(dir) = &args.dir else {
            let temporary = tempfile::Builder::new()
                .prefix("hayate-demo-")
                .tempdir()
                .context(|| "cannot create a temporary directory".to_string())?;
            return Ok(if args.keep {
                DemoDir::Kept(temporary.keep())
            } else {
                DemoDir::Temporary(temporary)
            });
        };
        if dir.join(CONTROL_FILE).exists() {
            return Err(CliError::new(format!(
                "{} already holds a database; the demo needs a new directory \
                 (inspect this one with `hayate stats --dir {0}`)",
                dir.display()
            )));
        }
        std::fs::create_dir_all(dir)
            .context(|| format!("cannot create directory {}", dir.display()))?;
        Ok(DemoDir::Kept(dir.clone()))
    }

    fn path(&self) -> &Path {
        match self {
            DemoDir::Temporary(temporary) => temporary.path(),
            DemoDir::Kept(path) => path,
        }
    }
}

pub fn run(args: &DemoArgs) -> CliResult<()> {
    hayate_engine::validate_page_size(args.page_size)
        .context(|| "invalid --page-size".to_string())?;
    let dir = DemoDir::prepare(args)?;
    let path = dir.path();
    println!(
        "database: {} ({})",
        path.display(),
        match dir {
            DemoDir::Temporary(_) => "temporary, removed at the end; --keep keeps it",
            DemoDir::Kept(_) => "kept at the end",
        }
    );
    let mut database = open(path, args, load_buffer_size(args))?;
    println!(
        "{}, I/O backend {}",
        describe_format(&database)?,
        io_backend_name(database.io().kind())
    );
    let table = database.create_table(TABLE)?;
    load(&database, table, args.rows)?;
    if args.buffer_percent.is_some() {
        // The percentage is of the data present at open, so size the pool now that it is loaded.
        database.close()?;
        database = open(path, args, workload_buffer_size(args))?;
    }
    let config = workload::WorkloadConfig {
        rows: args.rows,
        threads: args.threads,
        update_percent: args.update_percent,
        duration: Duration::from_secs(args.seconds),
        seed: 42,
    };
    println!(
        "workload: {} threads for {} s, {}% point reads and {}% single-row updates, each a \
         durable transaction",
        args.threads,
        args.seconds,
        100 - args.update_percent,
        args.update_percent
    );
    let result = workload::run(&database, table, config)?;
    print_summary(&database, &result);
    println!("consistency check:");
    let check = database.check().context(|| "check failed".to_string())?;
    print!("{}", report::format_check(&check));
    shut_down(database, args.crash)?;
    reopen_and_verify(path, args, &result)?;
    if let DemoDir::Temporary(temporary) = dir {
        let shown = temporary.path().display().to_string();
        temporary
            .close()
            .context(|| format!("cannot remove {shown}"))?;
        println!("removed {shown}");
    }
    Ok(())
}

fn open(path: &Path, args: &DemoArgs, buffer_size: BufferSize) -> CliResult<Database> {
    let mut config = DatabaseConfig {
        buffer_size,
        ..DatabaseConfig::default()
    };
    config.store.page_size = args.page_size;
    config.store.policy = match args.policy {
        PolicyArg::OutOfPlace => WritePolicy::OutOfPlace,
        PolicyArg::InPlace => WritePolicy::InPlace,
    };
    Database::open(path, config).context(|| format!("cannot open database in {}", path.display()))
}

/// The pool for loading: the workload's, or by bytes while the percentage has no data to
/// refer to.
fn load_buffer_size(args: &DemoArgs) -> BufferSize {
    let mib = args
        .buffer_mb
        .map_or(BUFFER_SIZE_BYTES_DEFAULT, |mib| mib << 20);
    BufferSize::Bytes(mib)
}

fn workload_buffer_size(args: &DemoArgs) -> BufferSize {
    match args.buffer_percent {
        Some(percent) => BufferSize::PercentOfData(percent),
        None => load_buffer_size(args),
    }
}

/// Row keys are big-endian so that key order is numeric order.
pub(crate) fn row_key(key: u64) -> [u8; 8] {
    key.to_be_bytes()
}

/// A 100-byte value naming its key and the update that wrote it (thread 0, sequence 0 for the
/// loaded value).
pub(crate) fn row_value(key: u64, thread: u64, sequence: u64) -> Vec<u8> {
    let mut value = format!("row {key} thread {thread} update {sequence} ").into_bytes();
    value.resize(VALUE_LENGTH_BYTES, b'.');
    value
}

fn load(database: &Database, table: TreeId, rows: u64) -> CliResult<()> {
    let bar = ProgressBar::new(rows);
    bar.set_style(
        ProgressStyle::with_template("load     [{bar:30}] {pos}/{len} rows, {per_sec}, eta {eta}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    let started = Instant::now();
    let mut next = 0;
    while next < rows {
        let end = (next + LOAD_BATCH_ROWS).min(rows);
        let mut transaction = database.begin();
        for key in next..end {
            transaction.insert(table, &row_key(key), &row_value(key, 0, 0))?;
        }
        transaction.commit()?;
        bar.set_position(end);
        next = end;
    }
    bar.finish_and_clear();
    let seconds = started.elapsed().as_secs_f64();
    println!(
        "loaded {} rows of {VALUE_LENGTH_BYTES} bytes in {seconds:.2} s ({} rows/s, {} rows \
         per transaction)",
        format_count(rows),
        format_rate(rows as f64 / seconds),
        LOAD_BATCH_ROWS
    );
    Ok(())
}

fn print_summary(database: &Database, result: &workload::WorkloadResult) {
    let seconds = result.elapsed.as_secs_f64();
    let row = |kind: &str, histogram: &report::Histogram| {
        vec![
            kind.to_string(),
            format_count(histogram.count()),
            format_rate(histogram.count() as f64 / seconds),
            format_us(histogram.quantile_ns(0.50)),
            format_us(histogram.quantile_ns(0.99)),
        ]
    };
    let mut all = result.reads.clone();
    all.merge(&result.updates);
    let rows = vec![
        row("point read", &result.reads),
        row("update", &result.updates),
        row("all", &all),
    ];
    println!();
    println!("results after {seconds:.1} s:");
    print!(
        "{}",
        report::table(&["transaction", "count", "per second", "p50", "p99"], &rows)
    );
    println!(
        "  ({} retries after conflicts)",
        format_count(result.retries)
    );
    println!("engine:");
    print!("{}", report::format_stats(&database.stats()));
}

/// Closes the database, or with `crash` drops it without the final checkpoint.
fn shut_down(database: Database, crash: bool) -> CliResult<()> {
    if crash {
        drop(database);
        println!("dropped the database without a final checkpoint (--crash)");
        Ok(())
    } else {
        database
            .close()
            .context(|| "closing the database".to_string())?;
        println!("closed the database (final checkpoint)");
        Ok(())
    }
}

/// Reopens the database and checks that every row and every last update is there.
fn reopen_and_verify(
    path: &Path,
    args: &DemoArgs,
    result: &workload::WorkloadResult,
) -> CliResult<()> {
    let database = open(path, args, workload_buffer_size(args))?;
    println!("reopened: {}", database.recovery_report());
    let table = database.table(TABLE)?;
    let transaction = database.begin_read_only();
    let mut rows = 0u64;
    for row in transaction.scan(
        table,
        std::ops::Bound::Unbounded,
        std::ops::Bound::Unbounded,
    )? {
        let (key, _) = row?;
        let expected = row_key(rows);
        if key != expected {
            return Err(CliError::new(format!(
                "after reopening, row {rows} has key {key:?} (expected {expected:?})"
            )));
        }
        rows += 1;
    }
    if rows != args.rows {
        return Err(CliError::new(format!(
            "after reopening, {rows} rows found instead of {}",
            args.rows
        )));
    }
    for (&key, &sequence) in &result.last_updates {
        let thread = key % args.threads;
        let found = transaction.get(table, &row_key(key))?;
        if found.as_deref() != Some(row_value(key, thread, sequence).as_slice()) {
            return Err(CliError::new(format!(
                "after reopening, row {key} does not hold its last committed update \
                 (thread {thread}, update {sequence})"
            )));
        }
    }
    transaction.commit()?;
    println!(
        "verified after reopening: {} rows, last update of {} updated rows",
        format_count(rows),
        format_count(result.last_updates.len() as u64)
    );
    database
        .close()
        .context(|| "closing the database".to_string())
}
