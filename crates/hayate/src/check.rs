//! `hayate check` and `hayate stats`: open an existing database directory and report on it.

use std::path::Path;

use hayate::error::{CliError, CliResult, Context};
use hayate::report;
use hayate_engine::{ControlFile, Database, DatabaseConfig, WritePolicy, CONTROL_FILE};

use crate::cli::DirArgs;

/// Opens the database in `dir`, refusing to create one where there is none.
pub fn open_existing(dir: &Path) -> CliResult<Database> {
    let metadata =
        std::fs::metadata(dir).context(|| format!("cannot open directory {}", dir.display()))?;
    if !metadata.is_dir() {
        return Err(CliError::new(format!(
            "{} is not a directory",
            dir.display()
        )));
    }
    if !dir.join(CONTROL_FILE).exists() {
        return Err(CliError::new(format!(
            "no Hayate database in {} ({CONTROL_FILE} not found)",
            dir.display()
        )));
    }
    Database::open(dir, DatabaseConfig::default())
        .context(|| format!("cannot open database in {}", dir.display()))
}

pub fn run_check(args: &DirArgs) -> CliResult<()> {
    let database = open_existing(&args.dir)?;
    println!("database: {}", args.dir.display());
    println!("recovery: {}", database.recovery_report());
    println!("consistency check:");
    let check = database.check().context(|| "check failed".to_string())?;
    print!("{}", report::format_check(&check));
    database
        .close()
        .context(|| "closing the database".to_string())
}

pub fn run_stats(args: &DirArgs) -> CliResult<()> {
    let database = open_existing(&args.dir)?;
    println!("database: {}", args.dir.display());
    println!("recovery: {}", database.recovery_report());
    let mut tables = database.tables();
    tables.sort_by_key(|tree| tree.id);
    let rows: Vec<Vec<String>> = tables
        .iter()
        .map(|tree| {
            vec![
                tree.name.clone(),
                tree.id.to_string(),
                format!("{:?}", tree.kind).to_lowercase(),
                tree.unique.to_string(),
                tree.root.to_string(),
            ]
        })
        .collect();
    print!(
        "{}",
        report::table(&["tree", "id", "kind", "unique", "root page"], &rows)
    );
    println!("{}", describe_format(&database)?);
    println!("counters since open (recovery and its checkpoint):");
    print!("{}", report::format_stats(&database.stats()));
    database
        .close()
        .context(|| "closing the database".to_string())
}

/// The on-disk format the database was created with, from its control file.
pub fn describe_format(database: &Database) -> CliResult<String> {
    let control = ControlFile::open(database.io().as_ref())?
        .ok_or_else(|| CliError::new(format!("{CONTROL_FILE} disappeared")))?;
    let record = control.current();
    Ok(format!(
        "format: {} byte pages, {} write policy{}, checkpoint {}",
        record.page_size,
        policy_name(record.policy),
        match record.policy {
            WritePolicy::OutOfPlace => format!(", {} pages per segment", record.segment_pages),
            WritePolicy::InPlace => String::new(),
        },
        record.checkpoint_id
    ))
}

pub fn policy_name(policy: WritePolicy) -> &'static str {
    match policy {
        WritePolicy::OutOfPlace => "out-of-place",
        WritePolicy::InPlace => "in-place",
    }
}
