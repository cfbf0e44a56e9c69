//! `hayate-lab tpcc crash`: crash safety under TPC-C.
//!
//! Each cycle:
//! 1. Start a child process (`hayate-lab tpcc crash-child`) that opens the database and runs
//!    TPC-C; it prints `ack W D O` on stdout for every New-Order whose commit was acknowledged
//!    (the lines are written after the commit returned, so a line seen means acknowledged).
//! 2. After a random time, kill the child with SIGKILL: no shutdown, no checkpoint, pages and
//!    log tail as the kernel had them.
//! 3. Open the database (the engine recovers from its log), check conditions 1 - 4 and that
//!    every New-Order acknowledged in this or any earlier cycle exists; close it.
//!
//! The loop stops at the first failed cycle. Results are saved after every cycle.

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use clap::Args;
use parking_lot::Mutex;
use rand::{Rng, SeedableRng};

use super::check::{self, Conditions};
use super::driver::TpccDriver;
use super::metrics::TpccJob;
use super::{load_hayate, open_hayate, print_conditions, LayoutArgs};
use crate::primitive::HayateDriver;
use crate::results::{CrashCycle, ResultFile, TpccCrashResults};
use hayate::error::{CliError, CliResult, Context};
use hayate::report::format_count;

#[derive(Debug, Args)]
pub struct CrashArgs {
    #[command(flatten)]
    pub common: crate::args::CommonArgs,

    /// A loaded Hayate TPC-C database to crash (it keeps the result); default: a fresh one
    /// loaded into a temporary directory.
    #[arg(long, value_name = "DIR")]
    pub db: Option<PathBuf>,

    #[command(flatten)]
    pub layout: LayoutArgs,

    /// Kill-and-recover cycles.
    #[arg(long, value_name = "N", default_value_t = 50,
          value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub cycles: u32,

    /// Terminals of the child's TPC-C run.
    #[arg(long, value_name = "N", default_value_t = 16,
          value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub terminals: u32,

    /// Shortest time the child runs before it is killed, milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 200)]
    pub min_ms: u64,

    /// Longest time the child runs before it is killed, milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 3_000)]
    pub max_ms: u64,
}

#[derive(Debug, Args)]
pub struct ChildArgs {
    #[arg(long, value_name = "DIR")]
    pub db: PathBuf,
    #[arg(long, value_name = "N")]
    pub terminals: u32,
    #[arg(long, value_name = "N")]
    pub seed: u64,
    #[arg(long, value_name = "N")]
    pub workers: Option<u32>,
}

/// (W_ID, D_ID, O_ID) of an order.
type OrderId = (u32, u32, u32);

/// The child: runs TPC-C until killed, printing acknowledged New-Orders.
pub fn child(args: &ChildArgs) -> CliResult<()> {
    let meta = super::read_meta(&args.db)?;
    let (driver, meta) = open_hayate(&args.db, args.workers, meta.stored_bytes)?;
    let pending: Arc<Mutex<Vec<(u32, u32, u32)>>> = Arc::new(Mutex::new(Vec::new()));
    let sink = pending.clone();
    let job = TpccJob {
        scale: meta.scale,
        terminals: args.terminals,
        duration: Duration::from_secs(24 * 3600),
        seed: args.seed,
        acknowledged: Some(Arc::new(move |w_id, d_id, o_id| {
            sink.lock().push((w_id, d_id, o_id));
        })),
        deferred_delivery: true,
    };
    // Acknowledgements reach stdout within milliseconds of the commit.
    std::thread::spawn(move || {
        let stdout = std::io::stdout();
        let _ = writeln!(stdout.lock(), "ready");
        loop {
            std::thread::sleep(Duration::from_millis(5));
            let acks = std::mem::take(&mut *pending.lock());
            let mut out = stdout.lock();
            for (w_id, d_id, o_id) in acks {
                let _ = writeln!(out, "ack {w_id} {d_id} {o_id}");
            }
            let _ = out.flush();
        }
    });
    super::run::run_job(&driver, &job)
        .map_err(|error| CliError::new(format!("hayate: {error}")))?;
    Ok(())
}

pub fn run(args: &CrashArgs) -> CliResult<()> {
    if args.min_ms > args.max_ms {
        return Err(CliError::new("--min-ms must not exceed --max-ms"));
    }
    let base = args.common.base_dir();
    let temporary = tempfile::Builder::new()
        .prefix(".hayate-tpcc-crash-")
        .tempdir_in(&base)
        .context(|| format!("cannot create a directory in {}", base.display()))?;
    let dir = match &args.db {
        Some(dir) => dir.clone(),
        None => {
            let dir = temporary.path().join("hayate");
            let driver = HayateDriver::new(&dir, args.layout.options()?);
            load_hayate(&driver, &dir, &args.layout)?;
            driver
                .close()
                .map_err(|error| CliError::new(format!("hayate: {error}")))?;
            dir
        }
    };
    let meta = super::read_meta(&dir)?;
    let mut file = ResultFile::new(
        "tpcc-crash",
        &base,
        TpccCrashResults {
            warehouses: meta.scale.warehouses,
            terminals: args.terminals,
            cycles: Vec::new(),
        },
    );
    let path = file.write(&args.common.results)?;
    let bar = crate::progress::progress_bar(args.cycles as u64, "crash cycles");
    let mut random = rand::rngs::SmallRng::seed_from_u64(args.layout.seed);
    let mut acknowledged: HashSet<(u32, u32, u32)> = HashSet::new();
    let mut failure = None;
    for cycle in 1..=args.cycles {
        let kill_after = Duration::from_millis(random.gen_range(args.min_ms..=args.max_ms));
        let seed = args.layout.seed.wrapping_add(cycle as u64 * 7_919);
        let (ran, acks) = run_child(&dir, args, seed, kill_after)?;
        let new_acks = acks.len() as u64;
        acknowledged.extend(acks);
        let result = recover_and_check(&dir, &meta, args.layout.workers, &acknowledged, cycle)?;
        let mut record = result;
        record.ran_ms = ran.as_millis() as u64;
        record.acknowledged_new_orders = new_acks;
        bar.suspend(|| {
            println!(
                "cycle {cycle:>3}: ran {:>5} ms, {:>6} New-Orders acknowledged, recovery {:>5} ms \
                 ({} log records), conditions 1-4 {}, acknowledged orders {}",
                record.ran_ms,
                format_count(new_acks),
                record.recovery_ms,
                format_count(record.redo_records),
                if record.conditions.iter().all(|result| result.passed()) {
                    "pass"
                } else {
                    "FAIL"
                },
                if record.missing_new_orders == 0 {
                    "all present".to_string()
                } else {
                    format!("{} MISSING", record.missing_new_orders)
                }
            );
        });
        let passed = record.passed;
        if !passed {
            print_conditions(&record.conditions, false);
            failure = Some(cycle);
        }
        file.results.cycles.push(record);
        file.rewrite(&path)?;
        bar.inc(1);
        if !passed {
            break;
        }
    }
    bar.finish_and_clear();
    println!(
        "\n{} cycles, {} acknowledged New-Orders checked, results: {}",
        file.results.cycles.len(),
        format_count(acknowledged.len() as u64),
        path.display()
    );
    temporary
        .close()
        .context(|| "cannot remove the lab's temporary directory".to_string())?;
    match failure {
        Some(cycle) => Err(CliError::new(format!(
            "cycle {cycle} failed its checks after recovery"
        ))),
        None => Ok(()),
    }
}

/// Runs the child for `kill_after` (from when it is ready), kills it with SIGKILL; returns how
/// long it ran and the New-Orders it acknowledged.
fn run_child(
    dir: &std::path::Path,
    args: &CrashArgs,
    seed: u64,
    kill_after: Duration,
) -> CliResult<(Duration, Vec<OrderId>)> {
    let exe = std::env::current_exe().context(|| "cannot find the hayate-lab executable".into())?;
    let mut command = Command::new(exe);
    command
        .args(["tpcc", "crash-child", "--db"])
        .arg(dir)
        .args(["--terminals", &args.terminals.to_string()])
        .args(["--seed", &seed.to_string()]);
    if let Some(workers) = args.layout.workers {
        command.args(["--workers", &workers.to_string()]);
    }
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .context(|| "cannot start the crash child".into())?;
    let stdout = child.stdout.take().expect("piped stdout");
    let (ready_sender, ready) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut acks = Vec::new();
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let mut words = line.split_whitespace();
            match words.next() {
                Some("ready") => {
                    let _ = ready_sender.send(());
                }
                Some("ack") => {
                    let ids: Vec<u32> = words.filter_map(|word| word.parse().ok()).collect();
                    if let [w_id, d_id, o_id] = ids[..] {
                        acks.push((w_id, d_id, o_id));
                    }
                }
                _ => {}
            }
        }
        acks
    });
    if ready.recv_timeout(Duration::from_secs(300)).is_err() {
        let _ = child.kill();
        let _ = child.wait();
        return Err(CliError::new(
            "the crash child did not start (see its messages above)",
        ));
    }
    let started = Instant::now();
    // Ends early if the child dies by itself (an error it printed).
    loop {
        if let Some(status) = child
            .try_wait()
            .context(|| "cannot watch the crash child".into())?
        {
            return Err(CliError::new(format!(
                "the crash child exited by itself ({status}) before it was killed"
            )));
        }
        if started.elapsed() >= kill_after {
            break;
        }
        std::thread::sleep(Duration::from_millis(5).min(kill_after - started.elapsed()));
    }
    child
        .kill()
        .context(|| "cannot kill the crash child".into())?; // SIGKILL
    child
        .wait()
        .context(|| "cannot reap the crash child".into())?;
    let ran = started.elapsed();
    let acks = reader
        .join()
        .map_err(|_| CliError::new("the crash child's reader panicked"))?;
    Ok((ran, acks))
}

/// Opens the database (recovering it), checks it and closes it.
fn recover_and_check(
    dir: &std::path::Path,
    meta: &super::LoadMeta,
    workers: Option<u32>,
    acknowledged: &HashSet<(u32, u32, u32)>,
    cycle: u32,
) -> CliResult<CrashCycle> {
    let started = Instant::now();
    let (driver, _) = open_hayate(dir, workers, meta.stored_bytes.max(64 << 20))?;
    let recovery_ms = started.elapsed().as_millis() as u64;
    let redo_records = driver
        .database()
        .map_or(0, |db| db.recovery_report().records_replayed);
    let data = driver
        .tpcc_check_data()
        .map_err(|error| CliError::new(format!("hayate: check after cycle {cycle}: {error}")))?;
    let conditions = check::check(&data, &meta.scale, Conditions::FirstFour);
    let present = data.order_ids();
    let missing = acknowledged
        .iter()
        .filter(|order| !present.contains(order))
        .count() as u64;
    driver
        .close()
        .map_err(|error| CliError::new(format!("hayate: {error}")))?;
    let passed = missing == 0 && conditions.iter().all(|result| result.passed());
    Ok(CrashCycle {
        cycle,
        recovery_ms,
        redo_records,
        missing_new_orders: missing,
        conditions,
        passed,
        ..CrashCycle::default()
    })
}
