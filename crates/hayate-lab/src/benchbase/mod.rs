//! `hayate-lab benchbase`: BenchBase (github.com/cmu-db/benchbase), unmodified and built by
//! the user, against Hayate's server and PostgreSQL, one after the other, side by side.
//!
//! For each benchmark and engine:
//! 1. start the server (`server::engines::Server`: `hayate serve` with its defaults, or the
//!    lab's private PostgreSQL with a 128 MB buffer, its default) and create the database
//!    `benchbase`;
//! 2. write the benchmark's sample configuration (`config/postgres/sample_<b>_config.xml`)
//!    with only the server's address, the lab's user and the run's length changed
//!    (`configuration`), so isolation levels, terminals, rates and foreign keys are BenchBase's;
//! 3. run `java -jar benchbase.jar -b <b> --create --load --execute` in BenchBase's directory
//!    (a spinner shows the phase), with its results in a directory of the run;
//! 4. read requests/s (`output::summary`), per procedure latency (`output::latencies`, from
//!    the raw file) and how transactions ended (`output::outcomes`, the log's histograms);
//! 5. stop the server (its data goes with it).
//!
//! The summary compares throughput per benchmark and lists every procedure whose mean latency
//! on Hayate is over twice PostgreSQL's (issue 21's "no statement 2x slower").

mod output;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use clap::Args;
use serde::{Deserialize, Serialize};

use crate::args::CommonArgs;
use crate::peers::postgres;
use crate::progress::spinner;
use crate::results::ResultFile;
use crate::server::engines::Server;
use hayate::error::{CliError, CliResult};
pub use output::{Latency, Outcomes, Summary};

/// BenchBase's sample benchmarks with PostgreSQL configurations, in the order they run.
pub const BENCHMARKS: &[&str] = &[
    "tpcc",
    "tatp",
    "smallbank",
    "ycsb",
    "voter",
    "twitter",
    "epinions",
    "seats",
    "auctionmark",
];

/// The engines compared.
const ENGINES: &[&str] = &["hayate", "postgresql"];

/// PostgreSQL's buffer: its default shared_buffers, as Hayate runs with its default.
const POSTGRES_BUFFER_BYTES: u64 = 128 << 20;

/// A procedure slower than this many times PostgreSQL's mean is listed.
const SLOW_RATIO: f64 = 2.0;

#[derive(Debug, Clone, Args)]
pub struct BenchbaseArgs {
    /// BenchBase's directory: benchbase.jar with config/ next to it (unpack
    /// target/benchbase-postgres.tgz of `mvn -P postgres -DskipTests package`).
    #[arg(long, value_name = "DIR")]
    pub benchbase_dir: PathBuf,

    /// Benchmarks to run, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = BENCHMARKS.iter().map(|b| b.to_string()))]
    pub benchmarks: Vec<String>,

    /// Engines to run, comma-separated (hayate, postgresql).
    #[arg(long, value_delimiter = ',', default_values_t = ENGINES.iter().map(|e| e.to_string()))]
    pub engines: Vec<String>,

    /// Length of each measured run (the configuration's <time>), seconds.
    #[arg(long, default_value_t = 30)]
    pub seconds: u64,

    /// The Java runtime to run BenchBase with.
    #[arg(long, value_name = "PATH", default_value = "java")]
    pub java: PathBuf,

    #[command(flatten)]
    pub common: CommonArgs,
}

/// The results file of `hayate-lab benchbase`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct BenchbaseResults {
    pub benchbase_dir: String,
    pub seconds: u64,
    pub runs: Vec<BenchbaseRun>,
    pub notes: Vec<String>,
}

/// One benchmark on one engine.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct BenchbaseRun {
    pub benchmark: String,
    pub engine: String,
    /// Set when the run measured something.
    pub summary: Option<Summary>,
    /// Why it did not.
    pub error: Option<String>,
    pub outcomes: BTreeMap<String, Outcomes>,
    pub latencies: BTreeMap<String, Latency>,
    /// Create, load and run, seconds.
    pub wall_seconds: f64,
}

pub fn run(args: &BenchbaseArgs) -> CliResult<()> {
    let benchbase_dir = check_args(args)?;
    let base_dir = args.common.base_dir();
    let results = BenchbaseResults {
        benchbase_dir: benchbase_dir.display().to_string(),
        seconds: args.seconds,
        runs: Vec::new(),
        notes: vec![
            "BenchBase's sample configurations, unmodified but for the server's address, the \
             user and <time>; the engines run one after the other on this machine, each on a \
             fresh database (create, load, execute)."
                .to_string(),
            "twitter: when BenchBase's trace files are missing (they are not in its packaged \
             build), 10,000 uniformly drawn tweet and user ids within the loaded data stand \
             for them, the same for both engines."
                .to_string(),
            format!(
                "Hayate: `hayate serve` with its defaults; PostgreSQL: the lab's private \
                 server, shared_buffers {} MB, durable commits.",
                POSTGRES_BUFFER_BYTES >> 20
            ),
        ],
    };
    let mut file = ResultFile::new("benchbase", &base_dir, results);
    let path = file.write(&args.common.results)?;
    for benchmark in &args.benchmarks {
        for engine in &args.engines {
            let log = args.common.results.join(format!(
                "benchbase-{}-{benchmark}-{engine}.log",
                file.started_unix
            ));
            let run = run_one(args, &benchbase_dir, &base_dir, benchmark, engine, &log);
            eprintln!("{}", run_line(&run));
            file.results.runs.push(run);
            file.rewrite(&path)?;
        }
    }
    print!("{}", summary(&file.results));
    println!("results: {}", path.display());
    Ok(())
}

fn check_args(args: &BenchbaseArgs) -> CliResult<PathBuf> {
    let dir = args.benchbase_dir.canonicalize().map_err(|error| {
        CliError::new(format!(
            "--benchbase-dir {}: {error}",
            args.benchbase_dir.display()
        ))
    })?;
    if !dir.join("benchbase.jar").is_file() {
        return Err(CliError::new(format!(
            "{} has no benchbase.jar: give the directory unpacked from BenchBase's \
             target/benchbase-postgres.tgz (built with `mvn -P postgres -DskipTests package`)",
            dir.display()
        )));
    }
    for benchmark in &args.benchmarks {
        if !sample_config(&dir, benchmark).is_file() {
            return Err(CliError::new(format!(
                "unknown benchmark {benchmark:?}: {} does not exist",
                sample_config(&dir, benchmark).display()
            )));
        }
    }
    for engine in &args.engines {
        if !ENGINES.contains(&engine.as_str()) {
            return Err(CliError::new(format!(
                "unknown engine {engine:?}: the engines are {}",
                ENGINES.join(", ")
            )));
        }
    }
    if args.seconds == 0 {
        return Err(CliError::new("--seconds must be at least 1"));
    }
    Ok(dir)
}

fn sample_config(benchbase_dir: &Path, benchmark: &str) -> PathBuf {
    benchbase_dir
        .join("config/postgres")
        .join(format!("sample_{benchmark}_config.xml"))
}

/// The sample configuration with the server at 127.0.0.1:`port`, the lab's user and runs
/// of `seconds`.
fn configuration(sample: &str, port: u16, user: &str, seconds: u64) -> Result<String, String> {
    if !sample.contains("localhost:5432") {
        return Err("the sample configuration names no localhost:5432 URL".into());
    }
    let mut text = sample.replace("localhost:5432", &format!("127.0.0.1:{port}"));
    text = replace_elements(&text, "username", user);
    text = replace_elements(&text, "time", &seconds.to_string());
    Ok(text)
}

/// Twitter replays two trace files (tweet ids and user ids, one per line) that BenchBase's
/// repository keeps outside the packaged build: when they are missing, the same number of
/// lines (10,000) of uniformly drawn ids within the loaded data (NUM_TWEETS 20,000 and
/// NUM_USERS 500 per scale factor) are written to `dir`, the same for every engine (fixed
/// seed), and the configuration names them.
fn twitter_traces(config: &str, benchbase_dir: &Path, dir: &Path) -> Result<String, String> {
    use rand::{Rng, SeedableRng};
    let element = |tag: &str| {
        let open = format!("<{tag}>");
        let start = config.find(&open)? + open.len();
        let end = config[start..].find(&format!("</{tag}>"))? + start;
        Some(config[start..end].trim().to_string())
    };
    let (Some(tweets), Some(users)) = (element("tracefile"), element("tracefile2")) else {
        return Ok(config.to_string());
    };
    if benchbase_dir.join(&tweets).is_file() && benchbase_dir.join(&users).is_file() {
        return Ok(config.to_string());
    }
    let scale: f64 = element("scalefactor")
        .and_then(|scale| scale.parse().ok())
        .unwrap_or(1.0);
    let tweet_count = ((20_000.0 * scale) as u64).max(1);
    let user_count = ((500.0 * scale) as u64).max(1);
    let mut rng = rand::rngs::SmallRng::seed_from_u64(21);
    let (mut tweet_lines, mut user_lines) = (String::new(), String::new());
    for _ in 0..10_000 {
        tweet_lines.push_str(&format!("{}\n", rng.gen_range(1..=tweet_count)));
        user_lines.push_str(&format!("{}\n", rng.gen_range(1..=user_count)));
    }
    let (tweet_path, user_path) = (dir.join("tweet_ids.txt"), dir.join("user_ids.txt"));
    for (path, lines) in [(&tweet_path, tweet_lines), (&user_path, user_lines)] {
        std::fs::write(path, lines)
            .map_err(|error| format!("writing {}: {error}", path.display()))?;
    }
    let config = replace_elements(config, "tracefile", &tweet_path.display().to_string());
    Ok(replace_elements(
        &config,
        "tracefile2",
        &user_path.display().to_string(),
    ))
}

/// `<tag>anything</tag>` -> `<tag>value</tag>`, every occurrence.
fn replace_elements(text: &str, tag: &str, value: &str) -> String {
    let (open, close) = (format!("<{tag}>"), format!("</{tag}>"));
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find(&open) {
        let Some(end) = rest[start..].find(&close) else {
            break;
        };
        out.push_str(&rest[..start]);
        out.push_str(&open);
        out.push_str(value);
        out.push_str(&close);
        rest = &rest[start + end + close.len()..];
    }
    out.push_str(rest);
    out
}

fn run_one(
    args: &BenchbaseArgs,
    benchbase_dir: &Path,
    base_dir: &Path,
    benchmark: &str,
    engine: &str,
    log: &Path,
) -> BenchbaseRun {
    let started = Instant::now();
    let mut run = BenchbaseRun {
        benchmark: benchmark.to_string(),
        engine: engine.to_string(),
        ..Default::default()
    };
    let spinner = spinner(&format!("{benchmark} on {engine}: starting the server"));
    let measured = Server::start(engine, base_dir, POSTGRES_BUFFER_BYTES)
        .map_err(|error| format!("starting {engine}: {error}"))
        .and_then(|server| {
            let measured = measure(
                args,
                benchbase_dir,
                benchmark,
                engine,
                &server,
                &spinner,
                log,
            );
            let stopped = server.stop().map_err(|error| format!("stopping: {error}"));
            let measured = measured?;
            stopped.map(|_| measured)
        });
    spinner.finish_and_clear();
    match measured {
        Ok((summary, outcomes, latencies)) => {
            run.summary = Some(summary);
            run.outcomes = outcomes;
            run.latencies = latencies;
        }
        Err(error) => run.error = Some(error),
    }
    run.wall_seconds = started.elapsed().as_secs_f64();
    run
}

type Measured = (
    Summary,
    BTreeMap<String, Outcomes>,
    BTreeMap<String, Latency>,
);

fn measure(
    args: &BenchbaseArgs,
    benchbase_dir: &Path,
    benchmark: &str,
    engine: &str,
    server: &Server,
    spinner: &indicatif::ProgressBar,
    kept_log: &Path,
) -> Result<Measured, String> {
    let target = server.target(crate::server::Transport::Tcp);
    let crate::server::sysbench::Endpoint::Tcp { port } = target.endpoint else {
        return Err("the server has no TCP port".into());
    };
    let mut client = ::postgres::Client::connect(
        &format!(
            "host=127.0.0.1 port={port} user={} dbname=postgres",
            postgres::LAB_USER
        ),
        ::postgres::NoTls,
    )
    .map_err(|error| format!("connecting: {error}"))?;
    client
        .batch_execute("CREATE DATABASE benchbase")
        .map_err(|error| format!("CREATE DATABASE benchbase: {error}"))?;
    drop(client);
    let base_dir = args.common.base_dir();
    let work = tempfile::Builder::new()
        .prefix("benchbase-")
        .tempdir_in(&base_dir)
        .map_err(|error| {
            format!(
                "cannot create a directory under {}: {error}",
                base_dir.display()
            )
        })?;
    let sample = std::fs::read_to_string(sample_config(benchbase_dir, benchmark))
        .map_err(|error| format!("reading the sample configuration: {error}"))?;
    let mut config = configuration(&sample, port, postgres::LAB_USER, args.seconds)?;
    if benchmark == "twitter" {
        config = twitter_traces(&config, benchbase_dir, work.path())?;
    }
    let config_path = work.path().join("config.xml");
    std::fs::write(&config_path, config)
        .map_err(|error| format!("writing the configuration: {error}"))?;
    let results_dir = work.path().join("results");
    let log_path = work.path().join("benchbase.log");
    let log =
        std::fs::File::create(&log_path).map_err(|error| format!("creating the log: {error}"))?;
    let mut child = Command::new(&args.java)
        .current_dir(benchbase_dir)
        .arg("-jar")
        .arg("benchbase.jar")
        .args(["-b", benchmark, "-c"])
        .arg(&config_path)
        .args(["--create=true", "--load=true", "--execute=true", "-d"])
        .arg(&results_dir)
        .stdin(Stdio::null())
        .stdout(log.try_clone().map_err(|error| error.to_string())?)
        .stderr(log)
        .spawn()
        .map_err(|error| format!("running {}: {error}", args.java.display()))?;
    // Loading takes its time (minutes for tpcc); the run then takes `seconds`.
    let deadline = Instant::now() + Duration::from_secs(args.seconds + 1800);
    let status = loop {
        if let Some(status) = child.try_wait().map_err(|error| error.to_string())? {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err("BenchBase ran past its deadline (killed)".into());
        }
        let text = std::fs::read_to_string(&log_path).unwrap_or_default();
        let phase = if text.contains("Launching the") || text.contains("Starting Workers") {
            "running"
        } else if text.contains("Loading data") || text.contains("Finished creating") {
            "loading"
        } else {
            "creating"
        };
        spinner.set_message(format!("{benchmark} on {engine}: {phase}"));
        std::thread::sleep(Duration::from_millis(250));
    };
    let log = std::fs::read_to_string(&log_path).unwrap_or_default();
    // BenchBase's log stays beside the results.
    let _ = std::fs::write(kept_log, &log);
    if !status.success() {
        // The exception's own line says why; the stack frames after it do not.
        let lines: Vec<&str> = log.lines().collect();
        let cause = lines
            .iter()
            .rev()
            .find(|line| line.contains("Exception") && !line.trim_start().starts_with("at "))
            .or(lines.last())
            .map(|line| line.trim())
            .unwrap_or("no output");
        return Err(format!(
            "BenchBase failed ({status}): {cause} (log: {})",
            kept_log.display()
        ));
    }
    let summary_path = output::find_file(&results_dir, ".summary.json")?;
    let summary =
        output::summary(&std::fs::read_to_string(&summary_path).map_err(|e| e.to_string())?)?;
    let raw = std::fs::read_to_string(output::find_file(&results_dir, ".raw.csv")?)
        .map_err(|error| error.to_string())?;
    Ok((summary, output::outcomes(&log), output::latencies(&raw)))
}

fn run_line(run: &BenchbaseRun) -> String {
    match (&run.summary, &run.error) {
        (Some(summary), _) => format!(
            "{} on {}: {:.0} requests/s ({:.0} s)",
            run.benchmark, run.engine, summary.throughput, run.wall_seconds
        ),
        (None, Some(error)) => format!("{} on {}: failed: {error}", run.benchmark, run.engine),
        (None, None) => format!("{} on {}: nothing measured", run.benchmark, run.engine),
    }
}

/// The side-by-side table and the procedures over twice PostgreSQL's latency.
pub fn summary(results: &BenchbaseResults) -> String {
    let find = |benchmark: &str, engine: &str| {
        results
            .runs
            .iter()
            .find(|run| run.benchmark == benchmark && run.engine == engine)
    };
    let mut benchmarks: Vec<&str> = Vec::new();
    for run in &results.runs {
        if !benchmarks.contains(&run.benchmark.as_str()) {
            benchmarks.push(&run.benchmark);
        }
    }
    let mut out = format!(
        "BenchBase, {} s per run, requests/s\n{:<12} {:>10} {:>10} {:>7}  {}\n",
        results.seconds, "benchmark", "hayate", "postgresql", "ratio", "errors (hayate/postgresql)"
    );
    let mut slow = Vec::new();
    for benchmark in benchmarks {
        let (hayate, postgres) = (find(benchmark, "hayate"), find(benchmark, "postgresql"));
        let throughput = |run: Option<&BenchbaseRun>| {
            run.and_then(|run| run.summary.as_ref().map(|s| s.throughput))
        };
        let shown = |run: Option<&BenchbaseRun>| match (run, throughput(run)) {
            (_, Some(tps)) => format!("{tps:.0}"),
            (Some(_), None) => "failed".to_string(),
            (None, None) => "-".to_string(),
        };
        let ratio = match (throughput(hayate), throughput(postgres)) {
            (Some(h), Some(p)) if p > 0.0 => format!("{:.2}x", h / p),
            _ => "-".to_string(),
        };
        let errors = |run: Option<&BenchbaseRun>| {
            run.map_or(0, |run| {
                run.outcomes
                    .values()
                    .map(|o| o.unexpected_errors)
                    .sum::<u64>()
            })
        };
        out.push_str(&format!(
            "{:<12} {:>10} {:>10} {:>7}  {}/{}\n",
            benchmark,
            shown(hayate),
            shown(postgres),
            ratio,
            errors(hayate),
            errors(postgres)
        ));
        if let (Some(hayate), Some(postgres)) = (hayate, postgres) {
            for (procedure, latency) in &hayate.latencies {
                let Some(theirs) = postgres.latencies.get(procedure) else {
                    continue;
                };
                if theirs.mean_ms > 0.0 && latency.mean_ms > SLOW_RATIO * theirs.mean_ms {
                    slow.push(format!(
                        "  {benchmark}/{procedure}: {:.2} ms vs {:.2} ms ({:.1}x)\n",
                        latency.mean_ms,
                        theirs.mean_ms,
                        latency.mean_ms / theirs.mean_ms
                    ));
                }
            }
        }
        for run in [hayate, postgres].into_iter().flatten() {
            if let Some(error) = &run.error {
                out.push_str(&format!("  {} failed: {error}\n", run.engine));
            }
        }
    }
    match slow.is_empty() {
        true => out.push_str(&format!(
            "no procedure's mean latency is over {SLOW_RATIO}x PostgreSQL's\n"
        )),
        false => {
            out.push_str(&format!(
                "procedures whose mean latency is over {SLOW_RATIO}x PostgreSQL's:\n"
            ));
            out.extend(slow);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configuration_changes_only_address_user_and_time() {
        let sample = "<parameters>\n<type>POSTGRES</type>\n\
            <url>jdbc:postgresql://localhost:5432/benchbase?sslmode=disable&amp;ApplicationName=tpcc</url>\n\
            <username>admin</username>\n<password>password</password>\n\
            <isolation>TRANSACTION_SERIALIZABLE</isolation>\n\
            <works><work><time>60</time><rate>10000</rate></work>\
            <work><time>30</time></work></works>\n</parameters>\n";
        let config = configuration(sample, 6543, "lab", 12).unwrap();
        assert_eq!(
            config,
            "<parameters>\n<type>POSTGRES</type>\n\
            <url>jdbc:postgresql://127.0.0.1:6543/benchbase?sslmode=disable&amp;ApplicationName=tpcc</url>\n\
            <username>lab</username>\n<password>password</password>\n\
            <isolation>TRANSACTION_SERIALIZABLE</isolation>\n\
            <works><work><time>12</time><rate>10000</rate></work>\
            <work><time>12</time></work></works>\n</parameters>\n"
        );
        assert!(configuration("<url>jdbc:postgresql://db:5432/x</url>", 1, "lab", 1).is_err());
    }

    #[test]
    fn twitter_gets_traces_when_they_are_missing() {
        let dir = tempfile::tempdir().unwrap();
        let config = "<scalefactor>2</scalefactor>\n\
            <tracefile>data/twitter/twitter_tweetids.txt</tracefile>\n\
            <tracefile2>data/twitter/twitter_user_ids.txt</tracefile2>\n";
        let written = twitter_traces(config, dir.path(), dir.path()).unwrap();
        let tweets = dir.path().join("tweet_ids.txt");
        assert!(written.contains(&format!("<tracefile>{}</tracefile>", tweets.display())));
        let ids: Vec<u64> = std::fs::read_to_string(&tweets)
            .unwrap()
            .lines()
            .map(|line| line.parse().unwrap())
            .collect();
        assert_eq!(ids.len(), 10_000);
        assert!(ids.iter().all(|id| (1..=40_000).contains(id)));
        let users = std::fs::read_to_string(dir.path().join("user_ids.txt")).unwrap();
        assert!(users
            .lines()
            .all(|id| (1..=1000).contains(&id.parse::<u64>().unwrap())));
        // Present files are used as they are.
        std::fs::create_dir_all(dir.path().join("data/twitter")).unwrap();
        std::fs::write(dir.path().join("data/twitter/twitter_tweetids.txt"), "1\n").unwrap();
        std::fs::write(dir.path().join("data/twitter/twitter_user_ids.txt"), "1\n").unwrap();
        assert_eq!(
            twitter_traces(config, dir.path(), dir.path()).unwrap(),
            config
        );
    }

    fn run(benchmark: &str, engine: &str, throughput: f64, mean_ms: f64) -> BenchbaseRun {
        BenchbaseRun {
            benchmark: benchmark.into(),
            engine: engine.into(),
            summary: Some(Summary {
                throughput,
                ..Default::default()
            }),
            latencies: [(
                "FindFlights".to_string(),
                Latency {
                    transactions: 10,
                    mean_ms,
                    p95_ms: mean_ms,
                },
            )]
            .into(),
            ..Default::default()
        }
    }

    #[test]
    fn summary_compares_throughput_and_lists_slow_procedures() {
        let results = BenchbaseResults {
            seconds: 10,
            runs: vec![
                run("seats", "hayate", 880.0, 4.8),
                run("seats", "postgresql", 1390.0, 1.5),
                run("ycsb", "hayate", 8600.0, 0.1),
                BenchbaseRun {
                    benchmark: "ycsb".into(),
                    engine: "postgresql".into(),
                    error: Some("BenchBase failed".into()),
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        let text = summary(&results);
        assert!(
            text.contains("seats               880       1390   0.63x"),
            "{text}"
        );
        assert!(
            text.contains("ycsb               8600     failed       -"),
            "{text}"
        );
        assert!(
            text.contains("seats/FindFlights: 4.80 ms vs 1.50 ms (3.2x)"),
            "{text}"
        );
        assert!(
            text.contains("postgresql failed: BenchBase failed"),
            "{text}"
        );
    }
}
