//! The printed summary of `hayate-lab ha`: median tps per engine, buffer and setting, the
//! overhead of each standby setting against running alone, HA at the small buffer against HA
//! at the full one, and issue 20's targets beside the paper's 12%.

use std::fmt::Write as _;

use super::{HaResults, HaRun, Setting};
use ::hayate::report::format_rate;

/// The paper's overhead of a synchronous standby on updates (Case B).
const PAPER_OVERHEAD: f64 = 0.12;
/// Issue 20: setting (b)'s overhead at most this.
const TARGET_OVERHEAD_B: f64 = 0.05;
/// Issue 20: HA at 1% keeps at least this much of HA at 100%.
const TARGET_SMALL_BUFFER_KEEPS: f64 = 0.70;

/// The median tps of the runs that measured, if any did.
pub fn median_tps(runs: &[&HaRun]) -> Option<f64> {
    let mut tps: Vec<f64> = runs
        .iter()
        .filter(|run| run.error.is_none())
        .map(|run| run.tps)
        .collect();
    if tps.is_empty() {
        return None;
    }
    tps.sort_by(f64::total_cmp);
    let middle = tps.len() / 2;
    Some(if tps.len().is_multiple_of(2) {
        (tps[middle - 1] + tps[middle]) / 2.0
    } else {
        tps[middle]
    })
}

/// Median tps of `engine` at `percent` with `setting` (None: alone).
fn tps(results: &HaResults, engine: &str, percent: f64, setting: Option<Setting>) -> Option<f64> {
    let runs: Vec<&HaRun> = results
        .runs
        .iter()
        .filter(|run| {
            run.engine == engine && run.buffer_percent == percent && run.setting == setting
        })
        .collect();
    median_tps(&runs)
}

/// The overhead of `setting` against alone: 1 - with / alone.
pub fn overhead(results: &HaResults, engine: &str, percent: f64, setting: Setting) -> Option<f64> {
    let alone = tps(results, engine, percent, None)?;
    let with = tps(results, engine, percent, Some(setting))?;
    (alone > 0.0).then(|| 1.0 - with / alone)
}

/// The standby's share of the machine's CPU time in the measured runs (the paper's standby
/// is a server of its own).
fn standby_cpu_share(
    results: &HaResults,
    engine: &str,
    percent: f64,
    setting: Setting,
) -> Option<f64> {
    let (mut standby, mut available) = (0.0, 0.0);
    for run in results.runs.iter().filter(|run| {
        run.engine == engine
            && run.buffer_percent == percent
            && run.setting == Some(setting)
            && run.error.is_none()
    }) {
        standby += run.standby_cpu_seconds?;
        available += results.seconds as f64 * run.cpus as f64;
    }
    (available > 0.0).then(|| standby / available)
}

fn percent_text(value: f64) -> String {
    format!("{:.1}%", value * 100.0)
}

fn sorted_unique(mut values: Vec<f64>) -> Vec<f64> {
    values.sort_by(f64::total_cmp);
    values.dedup();
    values
}

pub fn summary(results: &HaResults) -> String {
    let mut out = String::new();
    let mut engines: Vec<&str> = Vec::new();
    for run in &results.runs {
        if !engines.contains(&run.engine.as_str()) {
            engines.push(&run.engine);
        }
    }
    let percents = sorted_unique(results.runs.iter().map(|run| run.buffer_percent).collect());
    let _ = writeln!(
        out,
        "\nDurable single-row updates, {} clients, {} tables x {} rows ({} MB), {} s runs, median \
         of {} round(s):",
        results.clients,
        results.tables,
        results.rows_per_table,
        results.data_bytes >> 20,
        results.seconds,
        results.rounds
    );
    if results.replication_tls {
        let _ = writeln!(out, "Hayate's replication connections in TLS.");
    }
    let _ = writeln!(
        out,
        "{:<11} {:>7}  {:>10}  {:<50} {:>10} {:>9} {:>12}",
        "engine",
        "buffer",
        "alone tps",
        "with a synchronous standby",
        "tps",
        "overhead",
        "standby CPU"
    );
    for engine in &engines {
        for &percent in &percents {
            let alone = tps(results, engine, percent, None);
            for setting in [Setting::A, Setting::B] {
                let Some(with) = tps(results, engine, percent, Some(setting)) else {
                    continue;
                };
                let agrees = results.runs.iter().all(|run| {
                    run.engine != *engine
                        || run.setting != Some(setting)
                        || run.standby_agrees != Some(false)
                });
                let _ = writeln!(
                    out,
                    "{:<11} {:>6}%  {:>10}  {:<50} {:>10} {:>9} {:>12}{}",
                    engine,
                    percent,
                    alone.map_or("-".into(), format_rate),
                    setting.label(),
                    format_rate(with),
                    overhead(results, engine, percent, setting).map_or("-".into(), percent_text),
                    standby_cpu_share(results, engine, percent, setting)
                        .map_or("-".into(), percent_text),
                    if agrees {
                        ""
                    } else {
                        "  STANDBY MISSED UPDATES"
                    }
                );
            }
        }
    }
    let _ = writeln!(
        out,
        "standby CPU: the standby server's share of this machine's CPU time in the measured \
         runs (the paper's standby is a server of its own)."
    );
    for run in results.runs.iter().filter(|run| run.error.is_some()) {
        let _ = writeln!(
            out,
            "failed: {} {}% {}: {}",
            run.engine,
            run.buffer_percent,
            run.setting.map_or("alone", Setting::label),
            run.error.as_deref().unwrap_or_default()
        );
    }
    out.push_str(&targets(results, &percents));
    out
}

/// Issue 20's targets, each with what this run measured.
fn targets(results: &HaResults, percents: &[f64]) -> String {
    let mut out = String::new();
    let full = percents.iter().copied().find(|percent| *percent >= 100.0);
    let small = percents.first().copied().filter(|percent| *percent < 100.0);
    let _ = writeln!(
        out,
        "\nTargets (issue 20; the paper's overhead: {}):",
        percent_text(PAPER_OVERHEAD)
    );
    let verdict = |met: bool| if met { "met" } else { "MISSED" };
    if let Some(full) = full {
        if let Some(b) = overhead(results, "hayate", full, Setting::B) {
            let _ = writeln!(
                out,
                "- overhead at {full}% in setting (b) <= {}: {} ({})",
                percent_text(TARGET_OVERHEAD_B),
                percent_text(b),
                verdict(b <= TARGET_OVERHEAD_B)
            );
        }
        if let (Some(hayate), Some(postgres)) = (
            overhead(results, "hayate", full, Setting::A),
            overhead(results, "postgresql", full, Setting::A),
        ) {
            let _ = writeln!(
                out,
                "- overhead at {full}% in setting (a) <= half of PostgreSQL's ({}): {} ({})",
                percent_text(postgres / 2.0),
                percent_text(hayate),
                verdict(hayate <= postgres.max(0.0) / 2.0)
            );
        }
        if let Some(small) = small {
            for setting in [Setting::A, Setting::B] {
                let (Some(at_small), Some(at_full)) = (
                    tps(results, "hayate", small, Some(setting)),
                    tps(results, "hayate", full, Some(setting)),
                ) else {
                    continue;
                };
                let keeps = at_small / at_full;
                let _ = writeln!(
                    out,
                    "- HA at {small}% keeps >= {} of HA at {full}%, {}: {} ({})",
                    percent_text(TARGET_SMALL_BUFFER_KEEPS),
                    setting.label(),
                    percent_text(keeps),
                    verdict(keeps >= TARGET_SMALL_BUFFER_KEEPS)
                );
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(engine: &str, percent: f64, setting: Option<Setting>, tps: f64) -> HaRun {
        HaRun {
            engine: engine.into(),
            setting,
            buffer_percent: percent,
            tps,
            standby_agrees: setting.map(|_| true),
            ..HaRun::default()
        }
    }

    #[test]
    fn medians_ignore_failed_runs() {
        let mut failed = run("hayate", 100.0, None, 0.0);
        failed.error = Some("server died".into());
        let runs = [
            run("hayate", 100.0, None, 10.0),
            run("hayate", 100.0, None, 30.0),
            run("hayate", 100.0, None, 20.0),
            failed,
        ];
        let refs: Vec<&HaRun> = runs.iter().collect();
        assert_eq!(median_tps(&refs), Some(20.0));
        assert_eq!(median_tps(&refs[..2]), Some(20.0));
        assert_eq!(median_tps(&refs[3..]), None);
    }

    #[test]
    fn overheads_and_targets_come_from_the_medians() {
        let results = HaResults {
            runs: vec![
                run("hayate", 100.0, None, 1000.0),
                run("hayate", 100.0, Some(Setting::A), 900.0),
                run("hayate", 100.0, Some(Setting::B), 960.0),
                run("hayate", 1.0, Some(Setting::B), 480.0),
                run("postgresql", 100.0, None, 500.0),
                run("postgresql", 100.0, Some(Setting::A), 400.0),
            ],
            ..HaResults::default()
        };
        let a = overhead(&results, "hayate", 100.0, Setting::A).unwrap();
        assert!((a - 0.10).abs() < 1e-9);
        let pg = overhead(&results, "postgresql", 100.0, Setting::A).unwrap();
        assert!((pg - 0.20).abs() < 1e-9);
        assert_eq!(
            overhead(&results, "hayate", 1.0, Setting::B),
            None,
            "no alone run at 1%"
        );
        let text = summary(&results);
        assert!(text.contains("setting (b) <= 5.0%: 4.0% (met)"), "{text}");
        assert!(
            text.contains("half of PostgreSQL's (10.0%): 10.0% (met)"),
            "{text}"
        );
        assert!(text.contains("keeps >= 70.0% of HA at 100%, (b)"), "{text}");
        assert!(text.contains("50.0% (MISSED)"), "{text}");
        assert!(!text.contains("STANDBY MISSED UPDATES"));
    }

    #[test]
    fn a_standby_that_missed_updates_is_flagged() {
        let mut lagging = run("hayate", 100.0, Some(Setting::A), 900.0);
        lagging.standby_agrees = Some(false);
        let results = HaResults {
            runs: vec![run("hayate", 100.0, None, 1000.0), lagging],
            ..HaResults::default()
        };
        assert!(summary(&results).contains("STANDBY MISSED UPDATES"));
    }
}
