//! The `hayate` command: the server, a demo of the engine, and tools to check and inspect a
//! database directory. The experiments and benchmarks are the lab's (`hayate-lab`).
//!
//! Lifecycle of a run:
//! 1. Parse the command line and set up logging (RUST_LOG, else the server's log level,
//!    default warn).
//! 2. Run the subcommand; user errors come back as `CliError` values.
//! 3. Print an error as `error: ...` on stderr and exit with code 1.

mod check;
mod cli;
mod demo;
mod serve;

use std::process::ExitCode;

use hayate::args::parse_command_line;
use hayate::error::exit_code;

use cli::{Cli, Command};

/// mimalloc rather than glibc's malloc: a served query allocates a few dozen small blocks
/// (protocol messages, rows, values), and glibc's free alone cost about 8% of the server's
/// instructions per point select.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli: Cli = match parse_command_line() {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    let level = match &cli.command {
        Command::Serve(args) => serve::log_level(args),
        _ => "warn".into(),
    };
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or(level)).init();
    let result = match cli.command {
        Command::Demo(args) => demo::run(&args),
        Command::Check(args) => check::run_check(&args),
        Command::Stats(args) => check::run_stats(&args),
        Command::Serve(args) => serve::run(&args),
        Command::Promote(args) => serve::request_promotion(&args.dir),
        Command::Status(args) => serve::status(&args.ha_etcd, &args.ha_cluster, args.json),
    };
    exit_code(result)
}
