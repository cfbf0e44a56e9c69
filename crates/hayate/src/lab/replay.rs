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
