//! What a BenchBase run leaves: its log on stdout (the transaction histograms) and its result
//! files (`<benchmark>_<time>.summary.json` and `.raw.csv`, one line per transaction).

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// Per procedure, how its transactions ended, from the log's histograms.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Outcomes {
    pub completed: u64,
    /// Aborted by the procedure itself (expected: e.g. a user-abort in the workload).
    pub aborted: u64,
    /// Retried after a serialization failure or deadlock.
    pub retried: u64,
    /// Errors BenchBase did not expect.
    pub unexpected_errors: u64,
}

/// The histograms of a BenchBase log, per procedure name.
pub fn outcomes(log: &str) -> BTreeMap<String, Outcomes> {
    let mut outcomes: BTreeMap<String, Outcomes> = BTreeMap::new();
    let mut section: Option<fn(&mut Outcomes) -> &mut u64> = None;
    for line in log.lines() {
        let plain = strip_ansi(line);
        let heading = plain.trim();
        let next: Option<fn(&mut Outcomes) -> &mut u64> = match heading {
            "Completed Transactions:" => Some(|o| &mut o.completed),
            "Aborted Transactions:" => Some(|o| &mut o.aborted),
            "Rejected Transactions (Server Retry):"
            | "Rejected Transactions (Retry Different):" => Some(|o| &mut o.retried),
            "Unexpected SQL Errors:" | "Unknown Status Transactions:" => {
                Some(|o| &mut o.unexpected_errors)
            }
            _ => None,
        };
        if next.is_some() {
            section = next;
            continue;
        }
        if heading.is_empty() || heading.starts_with('[') {
            section = None;
            continue;
        }
        let Some(field) = section else {
            continue;
        };
        // "com.oltpbenchmark.benchmarks.seats.procedures.FindFlights/02   [ 862] ****"
        let Some((name, rest)) = heading.split_once('/') else {
            continue;
        };
        let procedure = name.rsplit('.').next().unwrap_or(name);
        let count = rest
            .split_once('[')
            .and_then(|(_, count)| count.split_once(']'))
            .and_then(|(count, _)| count.trim().parse::<u64>().ok());
        if let Some(count) = count {
            *field(outcomes.entry(procedure.to_string()).or_default()) += count;
        }
    }
    outcomes.retain(|_, o| *o != Outcomes::default());
    outcomes
}

fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // ESC [ ... letter
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// One procedure's latency over the run, from the raw file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    pub transactions: u64,
    pub mean_ms: f64,
    pub p95_ms: f64,
}

/// Per procedure latency from `<run>.raw.csv` ("Transaction Type Index,Transaction Name,
/// Start Time (microseconds),Latency (microseconds),...").
pub fn latencies(raw_csv: &str) -> BTreeMap<String, Latency> {
    let mut samples: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for line in raw_csv.lines().skip(1) {
        let mut fields = line.split(',');
        let (Some(_), Some(name), Some(_), Some(latency)) =
            (fields.next(), fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        if let Ok(latency) = latency.trim().parse::<u64>() {
            samples.entry(name.to_string()).or_default().push(latency);
        }
    }
    samples
        .into_iter()
        .map(|(name, mut us)| {
            us.sort_unstable();
            let n = us.len();
            let mean = us.iter().sum::<u64>() as f64 / n as f64;
            let p95 = us[((n * 95).div_ceil(100)).clamp(1, n) - 1];
            let latency = Latency {
                transactions: n as u64,
                mean_ms: mean / 1000.0,
                p95_ms: p95 as f64 / 1000.0,
            };
            (name, latency)
        })
        .collect()
}

/// The figures of `<run>.summary.json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub throughput: f64,
    pub goodput: f64,
    pub isolation: String,
    pub terminals: String,
    pub dbms_version: String,
}

pub fn summary(json: &str) -> Result<Summary, String> {
    let value: serde_json::Value =
        serde_json::from_str(json).map_err(|error| format!("summary is not JSON: {error}"))?;
    let number = |key: &str| {
        value
            .get(key)
            .and_then(|v| v.as_f64())
            .ok_or_else(|| format!("summary has no {key:?}"))
    };
    let text = |key: &str| {
        value
            .get(key)
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_string()
    };
    Ok(Summary {
        throughput: number("Throughput (requests/second)")?,
        goodput: number("Goodput (requests/second)")?,
        isolation: text("isolation"),
        terminals: text("terminals"),
        dbms_version: text("DBMS Version"),
    })
}

/// The one file of `dir` whose name ends with `suffix` (a run writes one of each).
pub fn find_file(dir: &Path, suffix: &str) -> Result<std::path::PathBuf, String> {
    let entries = std::fs::read_dir(dir)
        .map_err(|error| format!("cannot read {}: {error}", dir.display()))?;
    entries
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .find(|path| {
            path.file_name()
                .and_then(|name| name.to_str())
                .is_some_and(|name| name.ends_with(suffix))
        })
        .ok_or_else(|| format!("BenchBase wrote no *{suffix} in {}", dir.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str =
        "[INFO ] 2026-11-26 13:14:47,407 [main]  writeHistograms - Workload Histograms:

\u{1b}[0;1mCompleted Transactions:\u{1b}[0;0m
com.oltpbenchmark.benchmarks.seats.procedures.DeleteReservation/01               [ 844] *****
com.oltpbenchmark.benchmarks.seats.procedures.FindFlights/02                     [ 862] ******
com.oltpbenchmark.benchmarks.seats.procedures.LoadConfig/2038522556              [   0] 

\u{1b}[0;1mAborted Transactions:\u{1b}[0;0m
com.oltpbenchmark.benchmarks.seats.procedures.UpdateReservation/06               [   4] *****

\u{1b}[0;1mRejected Transactions (Server Retry):\u{1b}[0;0m
<EMPTY>

\u{1b}[0;1mRejected Transactions (Retry Different):\u{1b}[0;0m
com.oltpbenchmark.benchmarks.seats.procedures.DeleteReservation/01               [   9] *****
com.oltpbenchmark.benchmarks.seats.procedures.UpdateReservation/06               [   6] ***

\u{1b}[0;1mUnexpected SQL Errors:\u{1b}[0;0m
com.oltpbenchmark.benchmarks.seats.procedures.FindFlights/02                     [   2] *****

[INFO ] 2026-11-26 13:14:47,407 [main]  writeHistograms - ====
";

    #[test]
    fn histograms_are_read_per_procedure() {
        let outcomes = outcomes(LOG);
        assert_eq!(
            outcomes["DeleteReservation"],
            Outcomes {
                completed: 844,
                retried: 9,
                ..Default::default()
            }
        );
        assert_eq!(
            outcomes["FindFlights"],
            Outcomes {
                completed: 862,
                unexpected_errors: 2,
                ..Default::default()
            }
        );
        assert_eq!(outcomes["UpdateReservation"].aborted, 4);
        assert_eq!(outcomes["UpdateReservation"].retried, 6);
        assert!(!outcomes.contains_key("LoadConfig"), "all zero: dropped");
    }

    #[test]
    fn raw_latencies_give_mean_and_p95() {
        let mut raw = String::from("Transaction Type Index,Transaction Name,Start Time (microseconds),Latency (microseconds),Worker Id (start number),Phase Id (index in config file)\n");
        for latency in 1..=100 {
            raw.push_str(&format!(
                "3,FindOpenSeats,1795698908.1,{},0,1\n",
                latency * 10
            ));
        }
        raw.push_str("1,DeleteReservation,1795698908.2,2000,0,1\n");
        let latencies = latencies(&raw);
        let seats = &latencies["FindOpenSeats"];
        assert_eq!(seats.transactions, 100);
        assert!((seats.mean_ms - 0.505).abs() < 1e-9, "{seats:?}");
        assert!((seats.p95_ms - 0.95).abs() < 1e-9, "{seats:?}");
        assert_eq!(latencies["DeleteReservation"].p95_ms, 2.0);
    }

    #[test]
    fn summary_needs_its_throughput() {
        let summary = summary(
            r#"{"Throughput (requests/second)": 881.5, "Goodput (requests/second)": 880.0,
                "isolation": "TRANSACTION_SERIALIZABLE", "terminals": "1", "DBMS Version": "x"}"#,
        )
        .unwrap();
        assert_eq!(summary.throughput, 881.5);
        assert_eq!(summary.isolation, "TRANSACTION_SERIALIZABLE");
        assert!(super::summary(r#"{"Goodput (requests/second)": 1}"#).is_err());
    }
}
