//! `hayate lab replay` (being built).

use clap::Args;

use crate::error::{CliError, CliResult};

#[derive(Debug, Args)]
pub struct ReplayArgs {
    #[command(flatten)]
    pub common: super::CommonArgs,
}

pub fn run(_args: &ReplayArgs) -> CliResult<()> {
    Err(CliError::new("hayate lab replay is not built yet"))
}

// TEMPORARY until the replay module lands (replaced at merge).
pub struct ReplayReport {
    pub iops: f64,
    pub records: u64,
    pub concurrency: u32,
}

pub fn replay(
    _io: &std::sync::Arc<dyn hayate_engine::io::Io>,
    records: &[hayate_engine::io::trace::TraceRecord],
    concurrency: u32,
    _progress: bool,
) -> CliResult<ReplayReport> {
    Ok(ReplayReport {
        iops: 0.0,
        records: records.len() as u64,
        concurrency,
    })
}

pub fn alpha(run_iops: f64, report: &ReplayReport) -> super::results::Alpha {
    super::results::Alpha {
        run_iops,
        replay_iops: report.iops,
        alpha: if report.iops > 0.0 {
            run_iops / report.iops
        } else {
            0.0
        },
        trace_records: report.records,
        replay_concurrency: report.concurrency,
    }
}
