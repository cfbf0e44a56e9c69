//! The flags of `hayate-lab temp`, read by its engine part and its SQL part.

use clap::Args;

use crate::args::CommonArgs;

#[derive(Debug, Args)]
pub struct TempArgs {
    #[command(flatten)]
    pub common: CommonArgs,

    /// Records to sort (the probe side of the join; its build side is a tenth of this).
    #[arg(long, default_value_t = 1_000_000)]
    pub records: u64,

    /// Payload bytes per record (plus an 8-byte key).
    #[arg(long, default_value_t = 100)]
    pub record_bytes: usize,

    /// Work memories in MiB, or "unlimited" (the in-memory baseline, always measured first).
    #[arg(long, value_delimiter = ',', default_value = "unlimited,64,16,4")]
    pub work_mem: Vec<String>,

    /// Device classes: real, low-latency, nand, external (emulated latency on the real device).
    #[arg(long, value_delimiter = ',', default_value = "real,nand")]
    pub device_classes: Vec<String>,

    /// Rows of the SQL part's table (0: skip the SQL part). It runs on the real device.
    #[arg(long, default_value_t = 500_000)]
    pub sql_rows: u64,

    /// work_mem values of the SQL part, as SET work_mem takes them (the baseline, 2GB, is
    /// always measured first).
    #[arg(long, value_delimiter = ',', default_value = "64kB,4MB")]
    pub sql_work_mem: Vec<String>,
}
