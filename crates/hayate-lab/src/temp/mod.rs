//! `hayate-lab temp`: the temporary space on flash (the SIGMOD 2008 finding that sorts and hash
//! joins larger than memory gain much from flash).
//!
//! A run:
//! 1. `engine`: sort and hash join through the engine's spill path, per device class and work
//!    memory, against the same operation with unlimited work memory;
//! 2. `sql` (unless --sql-rows is 0): ORDER BY, joins, GROUP BY and DISTINCT through SQL with a
//!    small work_mem against one that holds everything, on the real device;
//! 3. the tables are printed and the results go to `temp-<time>.json` (`TempResults`).
//!
//! `args` holds the flags both parts read.

mod args;
mod engine;
mod sql;

pub use args::TempArgs;

use serde::{Deserialize, Serialize};

use crate::results::ResultFile;
use engine::TempPoint;
use hayate::error::CliResult;
use sql::SqlPoint;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TempResults {
    pub records: u64,
    pub record_bytes: usize,
    pub points: Vec<TempPoint>,
    /// The SQL part (empty when skipped).
    #[serde(default)]
    pub sql_rows: u64,
    #[serde(default)]
    pub sql_points: Vec<SqlPoint>,
}

pub fn run(args: &TempArgs) -> CliResult<()> {
    let base = args.common.base_dir();
    let points = engine::run(args, &base)?;
    engine::print_table(&points);
    let mut sql_points = Vec::new();
    if args.sql_rows > 0 {
        sql_points = sql::run(args, &base)?;
        sql::print_table(&sql_points);
    }
    let results = TempResults {
        records: args.records,
        record_bytes: args.record_bytes,
        points,
        sql_rows: args.sql_rows,
        sql_points,
    };
    let file = ResultFile::new("temp", &base, results);
    let path = file.write(&args.common.results)?;
    println!("results: {}", path.display());
    Ok(())
}
