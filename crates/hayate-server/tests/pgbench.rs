//! pgbench, unmodified: `pgbench -i` with the default init steps (client-side generation
//! through COPY) and with `-I dtGp` (server-side generation with INSERT ... SELECT
//! generate_series), then the built-in scripts tpcb-like, simple-update and select-only under
//! each query mode with 8 clients; afterwards the balances agree as pgbench's scripts keep
//! them: sum(abalance) = sum(tbalance) = sum(bbalance) = sum(delta).

use crate::common;

use std::process::{Command, Output};

use common::clients::{require, runs};
use common::TestServer;

const CLIENTS: u64 = 8;
const TRANSACTIONS_PER_CLIENT: u64 = 40;

fn pgbench(server: &TestServer, args: &[&str]) -> Output {
    let output = Command::new("pgbench")
        .args(["-h", &server.addr.ip().to_string()])
        .args(["-p", &server.addr.port().to_string(), "-U", "tester"])
        .args(args)
        .arg("test")
        .env("PGCONNECT_TIMEOUT", "10")
        .output()
        .expect("run pgbench");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "pgbench {args:?} failed ({}):\nstdout:\n{stdout}\nstderr:\n{stderr}",
        output.status
    );
    output
}

/// The number after `label` in pgbench's report.
fn reported(output: &Output, label: &str) -> u64 {
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout
        .lines()
        .find(|line| line.starts_with(label))
        .unwrap_or_else(|| panic!("no '{label}' in pgbench's report:\n{stdout}"));
    let number: String = line[label.len()..]
        .trim_start_matches([':', ' '])
        .chars()
        .take_while(|c| c.is_ascii_digit())
        .collect();
    number.parse().expect("a number")
}

fn count(client: &mut postgres::Client, table: &str) -> i64 {
    client
        .query_one(&format!("SELECT count(*) FROM {table}"), &[])
        .unwrap()
        .get(0)
}

/// sum(abalance), sum(tbalance), sum(bbalance), sum(delta), as int8.
fn sums(client: &mut postgres::Client) -> [i64; 4] {
    let mut sums = [0; 4];
    for (sum, (table, column)) in sums.iter_mut().zip([
        ("pgbench_accounts", "abalance"),
        ("pgbench_tellers", "tbalance"),
        ("pgbench_branches", "bbalance"),
        ("pgbench_history", "delta"),
    ]) {
        *sum = client
            .query_one(
                &format!("SELECT coalesce(sum({column}), 0)::int8 FROM {table}"),
                &[],
            )
            .unwrap()
            .get(0);
    }
    sums
}

/// Runs a built-in script with 8 clients; returns the transactions it committed (all of them:
/// a failed one fails the test). `vacuum`: pgbench's default start (VACUUM of the small
/// tables and TRUNCATE of the history), else `-n` so the history accumulates across runs.
fn run(server: &TestServer, script: &str, mode: &str, vacuum: bool) -> u64 {
    let (clients, transactions) = (CLIENTS.to_string(), TRANSACTIONS_PER_CLIENT.to_string());
    let mut args = vec![
        "-c",
        &clients,
        "-j",
        "2",
        "-t",
        &transactions,
        "-M",
        mode,
        "-b",
        script,
    ];
    if !vacuum {
        args.push("-n");
    }
    let output = pgbench(server, &args);
    let expected = TRANSACTIONS_PER_CLIENT * CLIENTS;
    let processed = reported(&output, "number of transactions actually processed");
    assert_eq!(processed, expected, "{script} -M {mode}");
    assert_eq!(
        reported(&output, "number of failed transactions"),
        0,
        "{script} -M {mode}"
    );
    processed
}

fn assert_loaded(client: &mut postgres::Client) {
    assert_eq!(count(client, "pgbench_branches"), 1);
    assert_eq!(count(client, "pgbench_tellers"), 10);
    assert_eq!(count(client, "pgbench_accounts"), 100_000);
    assert_eq!(count(client, "pgbench_history"), 0);
    assert_eq!(sums(client), [0; 4]);
}

#[test]
fn pgbench_initializes_and_runs_the_builtin_scripts() {
    if !require(runs("pgbench", &["--version"]), "pgbench", "postgresql-15") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut client = server.connect();

    pgbench(&server, &["-i", "-s", "1", "-q"]);
    assert_loaded(&mut client);
    pgbench(&server, &["-i", "-I", "dtGp", "-s", "1"]);
    assert_loaded(&mut client);
    // The primary keys exist: a duplicate is refused.
    let duplicate = client.execute("INSERT INTO pgbench_branches VALUES (1, 0, '')", &[]);
    assert_eq!(
        common::sqlstate(&duplicate.unwrap_err()),
        "23505",
        "pgbench -I ...p added the primary key"
    );

    // tpcb-like changes an account, its teller and its branch by the same delta and records
    // it in the history: all four sums agree after each run (later runs use -n: pgbench's
    // default start truncates the history, as it does on PostgreSQL). simple-update (-N) changes only
    // the account and the history; select-only (-S) changes nothing.
    let mut history_rows = 0;
    let mut branch_sum = 0;
    for script in ["tpcb-like", "simple-update", "select-only"] {
        for mode in ["simple", "extended", "prepared"] {
            // The first run starts as pgbench does by default (the history is empty then).
            let vacuum = history_rows == 0;
            let output = run(&server, script, mode, vacuum);
            if script != "select-only" {
                history_rows += output;
            }
            assert_eq!(
                count(&mut client, "pgbench_history") as u64,
                history_rows,
                "one history row per committed update transaction ({script} -M {mode})"
            );
            let [accounts, tellers, branches, delta] = sums(&mut client);
            assert_eq!(
                accounts, delta,
                "accounts vs history after {script} -M {mode}"
            );
            assert_eq!(
                tellers, branches,
                "tellers vs branches after {script} -M {mode}"
            );
            if script == "tpcb-like" {
                assert_eq!(
                    branches, delta,
                    "branches vs history after {script} -M {mode}"
                );
                branch_sum = branches;
            } else {
                assert_eq!(branches, branch_sum, "{script} changed no branch");
            }
        }
    }
    assert_ne!(sums(&mut client)[3], 0, "the runs changed balances");
    drop(client);
    server.stop();
}
