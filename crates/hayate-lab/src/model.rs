//! The latency model of the HA paper: how much of its all-in-memory throughput a transaction
//! engine keeps when part of its data lives on a device of a given read latency.
//!
//! A transaction alternates CPU work with data accesses. In memory an access costs `t_mem`; on
//! a buffer miss it is a device read. Per transaction (all times in microseconds):
//!
//! ```text
//! relative throughput = (t_cpu + t_mem) / (t_cpu + t_io)
//! ```
//!
//! - `t_cpu`: CPU time per transaction, the same work in memory and on the device. Taken from
//!   the all-in-memory (100 % buffer) run of the sweep, else from the run itself
//!   (`cpu_us_per_transaction`: user + system time of every process of the engine and of the
//!   lab's clients, divided by the transactions).
//! - `t_mem`: what a transaction of the all-in-memory run waits for besides its CPU (memory
//!   accesses, and in update mode the log). From that run's time split, when it has one:
//!   non-CPU share x worker wall time per transaction (`worker_threads / tps`). Peers cannot be
//!   instrumented; for them it is the paper's `PAPER_T_MEM_US` (0.1 us).
//! - `t_io`: the same waits in this run, plus its buffer misses:
//!   `t_mem + reads_per_transaction x read_latency_us`, with
//!   `reads_per_transaction = device reads/s / transactions/s`. So a run without misses
//!   predicts exactly 1.0.
//! - `read_latency_us` (see `read_latency_us`): the device's mean random-read latency at queue
//!   depth 1 from `hayate-lab device`; on an emulated device class every I/O takes at least the
//!   class's latency, so the larger of the two. Without a device measurement, the run's own
//!   read wait per read from its time split.
//!
//! Assumptions: every device read is a buffer miss that the transaction waits for in full, one
//! after the other (no overlap of I/O with CPU). An engine that overlaps them (Hayate's tasks,
//! or many client threads) measures above the prediction; the gap is the I/O it hid. Page
//! writes are taken as asynchronous (they are not in `t_io`).
//!
//! Example from the paper: 100 us of CPU between I/Os keeps 50 % on a 100 us device and 91 % on
//! a 10 us device; keeping ~70 % at a 5 % buffer means `t_io` is about 0.43 `t_cpu`.

use std::collections::BTreeMap;

use crate::io::latency::DeviceClass;

use super::results::{DeviceResult, ModelPoint, PrimitiveRun};

/// The paper's cost of a memory access that replaces an I/O, microseconds.
pub const PAPER_T_MEM_US: f64 = 0.1;

/// A run at or above this buffer percentage is the sweep's all-in-memory reference.
pub const IN_MEMORY_BUFFER_PERCENT: f64 = 100.0;

/// Predicted throughput relative to all-in-memory: `(t_cpu + t_mem) / (t_cpu + t_io)`.
/// A transaction that takes no time at all (both sums zero) keeps 1.0.
pub fn predict(t_cpu_us: f64, t_mem_us: f64, t_io_us: f64) -> f64 {
    let in_memory = t_cpu_us + t_mem_us;
    let on_device = t_cpu_us + t_io_us;
    if on_device <= 0.0 {
        return 1.0;
    }
    in_memory / on_device
}

/// Device reads per transaction (buffer misses), 0 when the run did no transactions.
pub fn reads_per_transaction(run: &PrimitiveRun) -> f64 {
    if run.transactions_per_second > 0.0 {
        run.io.reads_per_second / run.transactions_per_second
    } else {
        0.0
    }
}

/// Wall time of one worker thread per transaction, microseconds.
fn worker_us_per_transaction(run: &PrimitiveRun) -> Option<f64> {
    (run.transactions_per_second > 0.0)
        .then(|| run.worker_threads.max(1) as f64 * 1e6 / run.transactions_per_second)
}

/// Non-CPU wait per transaction of a run, from its time split (None without one).
fn wait_us_per_transaction(run: &PrimitiveRun) -> Option<f64> {
    let split = run.time_split?;
    let waiting = (split.read_io + split.write_io + split.log_wait + split.lock_wait).max(0.0);
    Some(waiting * worker_us_per_transaction(run)?)
}

/// The latency every I/O has at least on the run's device class (0 on the real device or an
/// unknown class).
pub fn emulated_read_latency_us(run: &PrimitiveRun) -> f64 {
    run.device_class
        .parse::<DeviceClass>()
        .map_or(0.0, |class| class.latency().read.as_secs_f64() * 1e6)
}

/// The read latency a buffer miss costs in this run, microseconds (see the module doc for the
/// order of sources). None when nothing tells it.
pub fn read_latency_us(run: &PrimitiveRun, device: Option<&DeviceResult>) -> Option<f64> {
    let emulated = emulated_read_latency_us(run);
    let device_qd1 = device
        .and_then(|device| {
            device
                .random_read
                .iter()
                .find(|point| point.queue_depth == 1)
        })
        .map(|point| point.latency.mean_us)
        .filter(|latency| *latency > 0.0);
    if let Some(device_qd1) = device_qd1 {
        return Some(device_qd1.max(emulated));
    }
    let reads = reads_per_transaction(run);
    let own = run
        .time_split
        .zip(worker_us_per_transaction(run))
        .filter(|_| reads > 0.0)
        .map(|(split, worker_us)| split.read_io * worker_us / reads)
        .filter(|latency| *latency > 0.0);
    own.or((emulated > 0.0).then_some(emulated))
}

/// The model's inputs and prediction for one run, given its all-in-memory reference (if the
/// sweep has one) and the latency of one read.
pub fn model_point(
    run: &PrimitiveRun,
    in_memory: Option<&PrimitiveRun>,
    read_latency_us: f64,
) -> ModelPoint {
    let reference = in_memory.unwrap_or(run);
    let t_cpu_us = reference.cpu_us_per_transaction.max(0.0);
    let t_mem_us = match in_memory {
        Some(in_memory) => wait_us_per_transaction(in_memory).unwrap_or(PAPER_T_MEM_US),
        None => PAPER_T_MEM_US,
    };
    let reads = reads_per_transaction(run);
    let t_io_us = t_mem_us + reads * read_latency_us.max(0.0);
    let measured_relative = in_memory
        .filter(|in_memory| in_memory.transactions_per_second > 0.0)
        .map(|in_memory| run.transactions_per_second / in_memory.transactions_per_second);
    ModelPoint {
        t_cpu_us,
        t_mem_us,
        t_io_us,
        reads_per_transaction: reads,
        predicted_relative: predict(t_cpu_us, t_mem_us, t_io_us),
        measured_relative,
    }
}

/// What makes runs one sweep: same engine, device class, mode and write policy.
fn sweep_key(run: &PrimitiveRun) -> (String, String, String, String) {
    (
        run.engine.clone(),
        run.device_class.clone(),
        run.mode.clone(),
        run.write_policy.clone(),
    )
}

/// Sets `model` on every run of `runs`, sweep by sweep. A sweep's all-in-memory reference is
/// its run at 100 % buffer (the newest if several); runs whose read latency is unknown keep
/// `model: None`.
pub fn fill_sweep(runs: &mut [PrimitiveRun], device: Option<&DeviceResult>) {
    let mut in_memory: BTreeMap<_, PrimitiveRun> = BTreeMap::new();
    for run in runs.iter() {
        if run.buffer_percent >= IN_MEMORY_BUFFER_PERCENT {
            in_memory.insert(sweep_key(run), run.clone());
        }
    }
    for run in runs.iter_mut() {
        let reference = in_memory.get(&sweep_key(run));
        run.model =
            read_latency_us(run, device).map(|latency_us| model_point(run, reference, latency_us));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::{DevicePoint, IoRates, Percentiles, TimeSplit};

    fn close(actual: f64, expected: f64) -> bool {
        (actual - expected).abs() < 1e-9
    }

    fn run(buffer_percent: f64, tps: f64, reads_per_second: f64, cpu_us: f64) -> PrimitiveRun {
        PrimitiveRun {
            engine: "hayate".into(),
            device_class: "real".into(),
            mode: "select".into(),
            write_policy: "out-of-place".into(),
            buffer_percent,
            worker_threads: 2,
            concurrency: 2,
            transactions_per_second: tps,
            cpu_us_per_transaction: cpu_us,
            io: IoRates {
                reads_per_second,
                ..IoRates::default()
            },
            ..PrimitiveRun::default()
        }
    }

    fn device_with_qd1_latency(mean_us: f64) -> DeviceResult {
        DeviceResult {
            random_read: vec![DevicePoint {
                queue_depth: 1,
                latency: Percentiles {
                    mean_us,
                    ..Percentiles::default()
                },
                ..DevicePoint::default()
            }],
            ..DeviceResult::default()
        }
    }

    #[test]
    fn predict_follows_the_formula() {
        assert!(close(predict(10.0, 0.0, 90.0), 0.1));
        assert!(
            close(predict(10.0, 5.0, 5.0), 1.0),
            "no extra wait keeps everything"
        );
        assert!(close(predict(0.0, 0.0, 0.0), 1.0));
        // The paper: 100 us of CPU keeps 50 % on a 100 us device, 91 % on a 10 us device.
        assert!(close(predict(100.0, 0.0, 100.0), 0.5));
        assert!((predict(100.0, 0.1, 10.0) - 0.91).abs() < 0.005);
        // "A 5 % buffer keeps ~70 %": t_io = 3/7 t_cpu, about 0.43.
        assert!(close(predict(100.0, 0.0, 300.0 / 7.0), 0.7));
        assert!((predict(100.0, 0.0, 43.0) - 0.70).abs() < 0.001);
    }

    #[test]
    fn model_point_estimates_inputs_from_a_run() {
        // In memory: 100,000 tx/s, 20 us CPU each, no reads, 25 % of worker time waiting.
        let mut in_memory = run(100.0, 100_000.0, 0.0, 20.0);
        in_memory.time_split = Some(TimeSplit {
            cpu: 0.75,
            read_io: 0.0,
            write_io: 0.0,
            log_wait: 0.25,
            lock_wait: 0.0,
        });
        // Worker time per transaction: 2 threads / 100,000 tx/s = 20 us; a quarter waits: 5 us.
        let at_one_percent = run(1.0, 20_000.0, 30_000.0, 25.0);
        let point = model_point(&at_one_percent, Some(&in_memory), 50.0);
        assert!(
            close(point.t_cpu_us, 20.0),
            "t_cpu comes from the in-memory run"
        );
        assert!(close(point.t_mem_us, 5.0));
        assert!(close(point.reads_per_transaction, 1.5));
        assert!(close(point.t_io_us, 5.0 + 1.5 * 50.0));
        assert!(close(point.predicted_relative, 25.0 / 100.0));
        assert!(close(point.measured_relative.expect("measured"), 0.2));

        // The in-memory run predicts and measures exactly 1.0 against itself.
        let itself = model_point(&in_memory, Some(&in_memory), 50.0);
        assert!(close(itself.predicted_relative, 1.0));
        assert!(close(itself.measured_relative.expect("measured"), 1.0));

        // Without a reference: own CPU, the paper's t_mem, nothing measured.
        let alone = model_point(&at_one_percent, None, 50.0);
        assert!(close(alone.t_cpu_us, 25.0));
        assert!(close(alone.t_mem_us, PAPER_T_MEM_US));
        assert!(alone.measured_relative.is_none());
    }

    #[test]
    fn read_latency_prefers_the_device_and_respects_emulation() {
        let device = device_with_qd1_latency(80.0);
        let mut measured = run(1.0, 10_000.0, 10_000.0, 30.0);
        measured.time_split = Some(TimeSplit {
            cpu: 0.5,
            read_io: 0.5,
            ..TimeSplit::default()
        });
        assert_eq!(read_latency_us(&measured, Some(&device)), Some(80.0));
        // Own: half of 2 threads / 10,000 tx/s = 100 us per transaction, one read each.
        assert!(close(read_latency_us(&measured, None).expect("own"), 100.0));
        let mut external = run(1.0, 1_000.0, 1_000.0, 30.0);
        external.device_class = "external".into();
        external.emulated = true;
        assert_eq!(read_latency_us(&external, Some(&device)), Some(1000.0));
        assert_eq!(read_latency_us(&external, None), Some(1000.0));
        assert_eq!(read_latency_us(&run(1.0, 1.0, 1.0, 1.0), None), None);
    }

    #[test]
    fn fill_sweep_uses_the_full_buffer_run_of_the_same_sweep() {
        let device = device_with_qd1_latency(90.0);
        let mut runs = vec![
            run(1.0, 10_000.0, 10_000.0, 12.0),
            run(100.0, 100_000.0, 0.0, 10.0),
            run(1.0, 5_000.0, 5_000.0, 30.0),
        ];
        runs[2].engine = "sqlite".into();
        fill_sweep(&mut runs, Some(&device));
        let first = runs[0].model.expect("model");
        assert!(close(first.t_cpu_us, 10.0));
        assert!(close(first.t_io_us, PAPER_T_MEM_US + 90.0));
        assert!(close(
            first.predicted_relative,
            (10.0 + PAPER_T_MEM_US) / (10.0 + PAPER_T_MEM_US + 90.0)
        ));
        assert!(close(first.measured_relative.expect("measured"), 0.1));
        let full = runs[1].model.expect("model");
        assert!(close(full.predicted_relative, 1.0));
        assert!(close(full.measured_relative.expect("measured"), 1.0));
        // SQLite has no 100 % run in this sweep.
        let sqlite = runs[2].model.expect("model");
        assert!(close(sqlite.t_cpu_us, 30.0));
        assert!(sqlite.measured_relative.is_none());

        fill_sweep(&mut runs, None);
        assert!(
            runs.iter().all(|run| run.model.is_none()),
            "no latency, no model"
        );
    }
}
