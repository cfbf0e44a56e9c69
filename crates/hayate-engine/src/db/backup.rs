//! Base backup (docs/design.md 5.7): a copy of a running database's files, taken while it
//! serves writes, that opens (recovers) as the database at a moment after the copy began.
//!
//! `Database::base_backup` holds off checkpoints for the copy, so the last durable checkpoint
//! stays the recovery start of both the original and the copy, and its page images stay
//! intact (I1) while other pages change around them:
//! 1. `control.hyt` and the checkpoint files: the checkpoint the copy recovers from.
//! 2. `data.hyt`: out-of-place, slots written since the checkpoint are not mapped by it and
//!    recovery ignores them; in-place, a page overwritten since the checkpoint has its
//!    checkpoint image in the journal, synced before the overwrite.
//! 3. `journal.hyt` (in-place), after the data file, so it holds the before-image of every
//!    page the data file copy may have caught overwritten (or torn).
//! 4. The log segments up to the log's locally durable end, read as the log stream; a partial
//!    last block is padded with zeros (the end of the log). Checkpoints being held, no segment
//!    from the checkpoint's redo position on has been deleted.
//!
//! Undo spill and temporary files are not copied (an open deletes them). The receiving side,
//! `BackupWriter`, writes the files into an empty directory and syncs them; opening that
//! directory recovers from the checkpoint and replays the copied log.

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::Database;
use crate::error::{Error, Result};
use crate::io::{OpenOptions, IO_ALIGN};
use crate::store::control::CONTROL_FILE;
use crate::wal::segment::{list_segments, parse_segment_name, segment_name};
use crate::wal::Lsn;

/// Bytes read and handed to the sink at a time.
const CHUNK_BYTES: u64 = 1 << 20;
/// The data file and the in-place journal (both store policies name them so).
const DATA_FILE: &str = "data.hyt";
const JOURNAL_FILE: &str = "journal.hyt";
const CHECKPOINT_PREFIX: &str = "checkpoint.";

/// Where a base backup's pieces go: `(file name, offset, bytes)`.
pub type BackupSink<'a> = dyn FnMut(&str, u64, &[u8]) -> Result<()> + 'a;

/// What a base backup copied.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BackupReport {
    /// Files copied.
    pub files: usize,
    /// Bytes handed to the sink.
    pub bytes: u64,
    /// The copy's log begins here (its first segment): the original must keep its log from
    /// here until the seeded standby connects.
    pub log_start: Lsn,
    /// The copy's log ends here: a standby seeded from it follows the original from this
    /// position (or from where its recovery cut a commit whose last part was not copied).
    pub log_end: Lsn,
}

/// Whether `name` is a file a base backup carries (what `BackupWriter` accepts).
pub fn is_backup_file(name: &str) -> bool {
    name == CONTROL_FILE
        || name == DATA_FILE
        || name == JOURNAL_FILE
        || parse_segment_name(name).is_some()
        || name.strip_prefix(CHECKPOINT_PREFIX).is_some_and(|digits| {
            digits.len() == 16 && digits.bytes().all(|byte| byte.is_ascii_hexdigit())
        })
}

impl Database {
    /// Copies this database's files while it runs (see the module documentation): `sink`
    /// gets `(file name, offset, bytes)` pieces, every file at least once (an empty one with
    /// no bytes at offset 0), each file's pieces in order. Checkpoints wait until it returns.
    pub fn base_backup(&self, sink: &mut BackupSink<'_>) -> Result<BackupReport> {
        let manager = &self.inner.manager;
        let _no_checkpoints = manager.hold_checkpoints();
        let io = self.io().clone();
        let names = io.list()?;
        let mut store_files: Vec<&String> = names
            .iter()
            .filter(|name| name.starts_with(CHECKPOINT_PREFIX) && is_backup_file(name))
            .collect();
        store_files.insert(
            0,
            names.iter().find(|n| *n == CONTROL_FILE).ok_or_else(|| {
                Error::InvalidArgument("no control file: not a database directory".into())
            })?,
        );
        store_files.extend(names.iter().filter(|name| *name == DATA_FILE));
        store_files.extend(names.iter().filter(|name| *name == JOURNAL_FILE));
        let mut report = BackupReport::default();
        let options = OpenOptions {
            create: false,
            direct: false,
            dsync: false,
        };
        for name in store_files {
            let file = io.open(name, options)?;
            let length = file.len()?;
            sink(name, 0, &[])?;
            let mut buf = vec![0u8; CHUNK_BYTES as usize];
            let mut offset = 0;
            while offset < length {
                let piece = (length - offset).min(CHUNK_BYTES) as usize;
                file.read_at(&mut buf[..piece], offset)?;
                sink(name, offset, &buf[..piece])?;
                offset += piece as u64;
                report.bytes += piece as u64;
            }
            report.files += 1;
        }
        let wal = manager.wal();
        let durable = wal.local_durable_lsn();
        let segments = list_segments(&*io)?;
        report.log_start = segments.first().copied().unwrap_or(durable);
        for (index, &first) in segments.iter().enumerate() {
            if first >= durable {
                break;
            }
            let end = segments
                .get(index + 1)
                .map_or(durable, |next| (*next).min(durable));
            let name = segment_name(first);
            sink(&name, 0, &[])?;
            let mut from = first;
            while from < end {
                let to = end.min(from + CHUNK_BYTES);
                let mut bytes = wal.read_stream(from, to)?;
                if to == end {
                    bytes.resize(bytes.len().next_multiple_of(IO_ALIGN), 0);
                }
                sink(&name, from - first, &bytes)?;
                report.bytes += bytes.len() as u64;
                from = to;
            }
            report.files += 1;
        }
        report.log_end = durable;
        Ok(report)
    }
}

/// Writes a base backup's pieces into a directory that holds no database (the receiving side
/// of `Database::base_backup`); `finish` makes them durable.
pub struct BackupWriter {
    dir: PathBuf,
    files: HashMap<String, File>,
}

impl BackupWriter {
    /// Prepares to write into `dir` (created if missing). Refuses a directory that holds a
    /// database already (a control file); removes what an earlier copy that stopped half way
    /// left (database files without a control file).
    pub fn new(dir: &Path) -> Result<BackupWriter> {
        let dir_name = dir.display().to_string();
        std::fs::create_dir_all(dir).map_err(|e| Error::io(&dir_name, e))?;
        if dir.join(CONTROL_FILE).exists() {
            return Err(Error::InvalidArgument(format!(
                "{dir_name} holds a database already: a base backup goes into an empty directory"
            )));
        }
        for entry in std::fs::read_dir(dir).map_err(|e| Error::io(&dir_name, e))? {
            let name = entry.map_err(|e| Error::io(&dir_name, e))?.file_name();
            let name = name.to_string_lossy();
            if is_backup_file(&name) || name == CONTROL_STAGED {
                std::fs::remove_file(dir.join(&*name))
                    .map_err(|e| Error::io(name.to_string(), e))?;
            }
        }
        Ok(BackupWriter {
            dir: dir.to_path_buf(),
            files: HashMap::new(),
        })
    }

    /// Writes one piece (`name` must be a file a backup carries).
    pub fn write(&mut self, name: &str, offset: u64, bytes: &[u8]) -> Result<()> {
        if !is_backup_file(name) {
            return Err(Error::InvalidArgument(format!(
                "\"{name}\" is not a file of a base backup"
            )));
        }
        if !self.files.contains_key(name) {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .truncate(true)
                .write(true)
                .open(self.dir.join(if name == CONTROL_FILE {
                    CONTROL_STAGED
                } else {
                    name
                }))
                .map_err(|e| Error::io(name, e))?;
            self.files.insert(name.to_string(), file);
        }
        self.files[name]
            .write_all_at(bytes, offset)
            .map_err(|e| Error::io(name, e))
    }

    /// Syncs every file written and the directory; the directory then opens as the database.
    /// The control file is written last, so a directory whose copy stopped half way holds no
    /// control file and is not taken for a database.
    pub fn finish(mut self) -> Result<()> {
        let control = self.files.remove(CONTROL_FILE);
        for (name, file) in &self.files {
            file.sync_all().map_err(|e| Error::io(name, e))?;
        }
        sync_dir(&self.dir)?;
        let Some(control) = control else {
            return Err(Error::InvalidArgument(
                "the base backup carried no control file".into(),
            ));
        };
        control.sync_all().map_err(|e| Error::io(CONTROL_FILE, e))?;
        let staged = self.dir.join(CONTROL_STAGED);
        std::fs::rename(&staged, self.dir.join(CONTROL_FILE))
            .map_err(|e| Error::io(CONTROL_FILE, e))?;
        sync_dir(&self.dir)
    }
}

/// The control file is received under this name and renamed when everything else is durable.
const CONTROL_STAGED: &str = "control.hyt.incoming";

fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|handle| handle.sync_all())
        .map_err(|e| Error::io(dir.display().to_string(), e))
}
