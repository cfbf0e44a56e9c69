//! `hayate serve`: the PostgreSQL wire protocol server on a database directory.
//!
//! 1. Create the data directory if needed and open the database (recovering from the log
//!    after a crash), then load the SQL catalog.
//! 2. Listen and serve connections until SIGTERM or SIGINT.
//! 3. Stop accepting, end the connections (open transactions abort), and close the
//!    database, which takes a checkpoint.

use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;
use hayate_engine::{Database, DatabaseConfig};
use hayate_sql::Catalog;

use crate::error::{CliError, CliResult, Context};

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    pub listen: IpAddr,
    /// TCP port.
    #[arg(long, default_value_t = 5432)]
    pub port: u16,
    /// Database directory (created on first start; after a crash the log is replayed on
    /// open, `RUST_LOG=info` shows the recovery report).
    #[arg(long, value_name = "DIR", default_value = "./hayate-data")]
    pub data_dir: PathBuf,
}

pub fn run(args: &ServeArgs) -> CliResult<()> {
    std::fs::create_dir_all(&args.data_dir)
        .context(|| format!("creating data directory {}", args.data_dir.display()))?;
    let db = Database::open(&args.data_dir, DatabaseConfig::default())
        .context(|| format!("opening database in {}", args.data_dir.display()))?;
    let catalog = Arc::new(
        Catalog::open(db.clone()).map_err(|error| CliError::new(format!("catalog: {error}")))?,
    );
    let runtime = hayate_server::runtime().context(|| "starting the async runtime".into())?;
    let address = (args.listen, args.port);
    let result = runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(address)
            .await
            .context(|| format!("listening on {}:{}", args.listen, args.port))?;
        eprintln!(
            "hayate: serving PostgreSQL protocol on {}:{} (data in {})",
            args.listen,
            args.port,
            args.data_dir.display()
        );
        hayate_server::serve(listener, catalog, shutdown_signal())
            .await
            .context(|| "serving".into())
    });
    runtime.shutdown_timeout(std::time::Duration::from_secs(5));
    let closed = db.close().context(|| "closing the database".into());
    eprintln!("hayate: stopped");
    result.and(closed)
}

/// Completes on SIGTERM or SIGINT.
async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let terminate = signal(SignalKind::terminate());
    let interrupt = signal(SignalKind::interrupt());
    match (terminate, interrupt) {
        (Ok(mut terminate), Ok(mut interrupt)) => {
            tokio::select! {
                _ = terminate.recv() => {}
                _ = interrupt.recv() => {}
            }
        }
        _ => {
            log::error!("cannot install signal handlers; stop the server with SIGKILL");
            std::future::pending::<()>().await
        }
    }
}
