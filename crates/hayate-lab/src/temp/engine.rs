//! `hayate-lab temp`, engine part: sorts and hash joins through the engine's own spill path
//! (`hayate_engine::temp`: O_DIRECT, io_uring batches, checksummed blocks).
//!
//! For each device class and work memory (unlimited first, the baseline):
//! 1. sort: N records (8-byte random key, payload of --record-bytes) through `ExternalSorter`,
//!    reading the sorted output back and checking its order;
//! 2. hash join: N/10 build records with distinct keys joined with N probe records (a tenth of
//!    them match) through `HashJoin`, counting matches against the known answer;
//! 3. each point records the elapsed time, the temporary bytes written and read, and the
//!    slowdown against the unlimited point on the same device class.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use hayate_engine::{HashJoin, Io, TempSpace};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use super::args::TempArgs;
use crate::io::latency::{DeviceClass, LatencyIo};
use hayate::error::{CliError, CliResult, Context};
use hayate::report::{format_bytes, table};

const MIB: usize = 1 << 20;
/// Unlimited work memory, spelled in --work-mem.
const UNLIMITED: &str = "unlimited";

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TempPoint {
    /// "sort" or "hash join".
    pub operation: String,
    pub device_class: String,
    /// None: unlimited.
    pub work_mem_bytes: Option<u64>,
    pub seconds: f64,
    pub records_per_second: f64,
    pub temp_bytes_written: u64,
    pub temp_bytes_read: u64,
    /// This point's time over the unlimited point's on the same device class.
    pub slowdown: f64,
}

fn parse_work_mem(text: &str) -> CliResult<Option<usize>> {
    if text == UNLIMITED {
        return Ok(None);
    }
    text.parse::<usize>()
        .map(|mib| Some(mib * MIB))
        .map_err(|_| CliError::new(format!("--work-mem: '{text}' is not a number of MiB")))
}

/// Measures every operation for every device class and work memory under `base` (module
/// docs, 1-3).
pub fn run(args: &TempArgs, base: &Path) -> CliResult<Vec<TempPoint>> {
    let mut work_mems = vec![None];
    for text in &args.work_mem {
        let work_mem = parse_work_mem(text)?;
        if !work_mems.contains(&work_mem) {
            work_mems.push(work_mem);
        }
    }
    let classes = args
        .device_classes
        .iter()
        .map(|name| {
            name.parse::<DeviceClass>()
                .map(|class| (name.clone(), class))
                .map_err(|error| CliError::new(error.to_string()))
        })
        .collect::<CliResult<Vec<_>>>()?;
    let dir = tempfile::Builder::new()
        .prefix("hayate-lab-temp-")
        .tempdir_in(base)
        .context(|| format!("cannot make a directory under {}", base.display()))?;
    let real =
        hayate_engine::open_default(dir.path()).context(|| "cannot open the I/O backend".into())?;

    let steps = (classes.len() * work_mems.len() * 2) as u64;
    let bar = crate::progress::progress_bar(steps, "temp space");
    let mut points = Vec::new();
    for (name, class) in &classes {
        let io: Arc<dyn Io> = match class {
            DeviceClass::Real => real.clone(),
            class => Arc::new(LatencyIo::with_class(real.clone(), *class)),
        };
        let space = TempSpace::open(io).context(|| "cannot open the temporary space".into())?;
        for operation in ["sort", "hash join"] {
            let mut baseline = None;
            for work_mem in &work_mems {
                bar.set_message(format!("{operation}, {name}, {}", describe(*work_mem)));
                let before = space.stats();
                let work_mem_bytes = work_mem.unwrap_or(usize::MAX);
                let started = Instant::now();
                match operation {
                    "sort" => sort(&space, args, work_mem_bytes)?,
                    _ => hash_join(&space, args, work_mem_bytes)?,
                }
                let seconds = started.elapsed().as_secs_f64();
                let after = space.stats();
                let baseline_seconds = *baseline.get_or_insert(seconds);
                points.push(TempPoint {
                    operation: operation.into(),
                    device_class: name.clone(),
                    work_mem_bytes: work_mem.map(|bytes| bytes as u64),
                    seconds,
                    records_per_second: args.records as f64 / seconds,
                    temp_bytes_written: after.bytes_written - before.bytes_written,
                    temp_bytes_read: after.bytes_read - before.bytes_read,
                    slowdown: seconds / baseline_seconds,
                });
                bar.inc(1);
            }
        }
    }
    bar.finish_and_clear();
    Ok(points)
}

fn describe(work_mem: Option<usize>) -> String {
    work_mem.map_or_else(
        || "unlimited".into(),
        |bytes| format!("{} work_mem", format_bytes(bytes as u64)),
    )
}

/// Payloads are slices of one random pool at random offsets: cheap to make, so the time
/// measured is the operation's.
struct Payloads {
    pool: Vec<u8>,
    bytes: usize,
}

impl Payloads {
    fn new(rng: &mut StdRng, bytes: usize) -> Payloads {
        let pool = (0..(64 << 10) + bytes)
            .map(|_| rng.gen_range(b'a'..=b'z'))
            .collect();
        Payloads { pool, bytes }
    }

    fn next(&self, rng: &mut StdRng) -> Vec<u8> {
        let start = rng.gen_range(0..self.pool.len() - self.bytes);
        self.pool[start..start + self.bytes].to_vec()
    }
}

fn sort(space: &TempSpace, args: &TempArgs, work_mem_bytes: usize) -> CliResult<()> {
    let mut rng = StdRng::seed_from_u64(1);
    let payloads = Payloads::new(&mut rng, args.record_bytes);
    let mut sorter = space.sorter(work_mem_bytes);
    for _ in 0..args.records {
        let key = rng.gen::<u64>().to_be_bytes().to_vec();
        sorter
            .push(key, payloads.next(&mut rng))
            .context(|| "sort: cannot spill".into())?;
    }
    let mut previous: Option<Vec<u8>> = None;
    let mut count = 0u64;
    for record in sorter.finish().context(|| "sort: cannot merge".into())? {
        let (key, _) = record.context(|| "sort: cannot read a run".into())?;
        if previous.as_ref().is_some_and(|previous| *previous > key) {
            return Err(CliError::new("sort: output out of order"));
        }
        previous = Some(key);
        count += 1;
    }
    if count != args.records {
        return Err(CliError::new(format!(
            "sort: {count} records out of {}",
            args.records
        )));
    }
    Ok(())
}

fn hash_join(space: &TempSpace, args: &TempArgs, work_mem_bytes: usize) -> CliResult<()> {
    let mut rng = StdRng::seed_from_u64(2);
    let payloads = Payloads::new(&mut rng, args.record_bytes);
    let build_records = (args.records / 10).max(1);
    let mut join = HashJoin::new(space, work_mem_bytes);
    for key in 0..build_records {
        join.build(key.to_be_bytes().to_vec(), payloads.next(&mut rng))
            .context(|| "hash join: cannot spill the build side".into())?;
    }
    // Probe keys: a tenth fall in the build side's key range, once each.
    let mut matches = 0u64;
    let mut emit = |_: &[u8], _: &[u8], build: Option<&[u8]>| {
        matches += build.is_some() as u64;
        Ok(())
    };
    for index in 0..args.records {
        let key = if index % 10 == 0 {
            index / 10
        } else {
            build_records + index
        };
        join.probe(&key.to_be_bytes(), &payloads.next(&mut rng), &mut emit)
            .context(|| "hash join: cannot probe".into())?;
    }
    join.finish(&mut emit)
        .context(|| "hash join: cannot join the partitions".into())?;
    let expected = args.records.div_ceil(10).min(build_records);
    if matches != expected {
        return Err(CliError::new(format!(
            "hash join: {matches} matches, expected {expected}"
        )));
    }
    Ok(())
}

pub fn print_table(points: &[TempPoint]) {
    let rows: Vec<Vec<String>> = points
        .iter()
        .map(|point| {
            vec![
                point.operation.clone(),
                point.device_class.clone(),
                describe(point.work_mem_bytes.map(|bytes| bytes as usize)),
                format!("{:.2}", point.seconds),
                format!("{:.0}", point.records_per_second),
                format_bytes(point.temp_bytes_written),
                format_bytes(point.temp_bytes_read),
                format!("{:.2}x", point.slowdown),
            ]
        })
        .collect();
    println!(
        "{}",
        table(
            &[
                "operation",
                "device",
                "memory",
                "seconds",
                "records/s",
                "temp written",
                "temp read",
                "vs in memory",
            ],
            &rows,
        )
    );
}
