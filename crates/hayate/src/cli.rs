//! Command-line syntax: every subcommand and option, with the help text `--help` prints.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use hayate::args::{parse_percent, PolicyArg};

/// Hayate: a transactional database engine for flash SSDs.
///
/// Logging goes to stderr and is set with RUST_LOG (default: warn), e.g. RUST_LOG=info.
#[derive(Debug, Parser)]
#[command(name = "hayate", version, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create a database, load a table, run a mixed read/update workload, print a summary,
    /// check the database and reopen it to show recovery.
    Demo(DemoArgs),
    /// Open an existing database, print its recovery report and run a full consistency check
    /// (exit code 1 on any error).
    Check(DirArgs),
    /// Open an existing database and print its statistics.
    Stats(DirArgs),
    /// Serve SQL over the PostgreSQL wire protocol (psql and drivers connect unmodified).
    Serve(Box<crate::serve::ServeArgs>),
    /// Promote the standby serving --dir: it applies the log it holds and takes writes.
    Promote(DirArgs),
    /// Show an etcd-coordinated cluster: its primary, synchronous set, members, positions and
    /// lag.
    Status(StatusArgs),
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// etcd endpoints (comma-separated URLs).
    #[arg(long, value_name = "URLS", default_value = "http://127.0.0.1:2379")]
    pub ha_etcd: String,
    /// The cluster's name in etcd.
    #[arg(long, value_name = "NAME", default_value = "hayate")]
    pub ha_cluster: String,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Directory of the database (created if missing; must not hold a database yet).
    /// Default: a fresh temporary directory, deleted at the end unless --keep.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,

    /// Keep the temporary directory at the end (a --dir is always kept).
    #[arg(long)]
    pub keep: bool,

    /// Duration of the mixed workload in seconds.
    #[arg(long, value_name = "N", default_value_t = 10,
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub seconds: u64,

    /// Client threads running the workload, each transaction on its own.
    #[arg(long, value_name = "N", default_value_t = 4,
          value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub threads: u64,

    /// Rows loaded into the table (8-byte keys, 100-byte values).
    #[arg(long, value_name = "N", default_value_t = 100_000,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000_000))]
    pub rows: u64,

    /// Percentage of transactions that update one row; the rest read one row.
    #[arg(long, value_name = "P", default_value_t = 20,
          value_parser = clap::value_parser!(u64).range(0..=100))]
    pub update_percent: u64,

    /// Page store write policy of the new database.
    #[arg(long, value_enum, value_name = "POLICY", default_value_t = PolicyArg::OutOfPlace)]
    pub policy: PolicyArg,

    /// Page size in bytes of the new database: a multiple of 4096 from 4096 to 65536.
    #[arg(long, value_name = "BYTES", default_value_t = 4096)]
    pub page_size: usize,

    /// Buffer pool size in MiB [default: 128].
    #[arg(long, value_name = "N", conflicts_with = "buffer_percent",
          value_parser = clap::value_parser!(u64).range(1..=1_048_576))]
    pub buffer_mb: Option<u64>,

    /// Buffer pool size as a percentage of the data's size when the database is opened
    /// (after the load, the demo reopens the database with this size).
    #[arg(long, value_name = "P", value_parser = parse_percent)]
    pub buffer_percent: Option<f64>,

    /// Skip the final checkpoint, as after a crash, so that reopening replays the log.
    #[arg(long)]
    pub crash: bool,
}

#[derive(Debug, Args)]
pub struct DirArgs {
    /// Directory of an existing database.
    #[arg(long, value_name = "DIR")]
    pub dir: PathBuf,
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn syntax_is_consistent() {
        super::Cli::command().debug_assert();
    }
}
