//! `hayate lab primitive` (being built).

use clap::Args;

use crate::error::{CliError, CliResult};

#[derive(Debug, Args)]
pub struct PrimitiveArgs {
    #[command(flatten)]
    pub common: super::CommonArgs,
}

pub fn run(_args: &PrimitiveArgs) -> CliResult<()> {
    Err(CliError::new("hayate lab primitive is not built yet"))
}
