//! Plain pread/pwrite/fdatasync backend: the fallback when io_uring is unavailable, and the
//! simplest reference implementation of `IoFile`.

use std::fs::{File, OpenOptions as FsOpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{Io, IoFile, IoKind, OpenOptions};
use crate::error::{Error, Result};

/// A directory whose files are read and written with pread/pwrite and synced with fdatasync.
pub struct SyncIo {
    dir: PathBuf,
}

impl SyncIo {
    /// Opens (and creates if missing) a data directory.
    pub fn new(dir: &Path) -> Result<SyncIo> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir.display().to_string(), e))?;
        Ok(SyncIo {
            dir: dir.to_path_buf(),
        })
    }

    /// The data directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

/// Opens a file, with O_DIRECT when asked and supported by the file system (tmpfs is not),
/// and with O_DSYNC when asked.
pub(crate) fn open_file(dir: &Path, name: &str, options: OpenOptions) -> Result<(File, bool)> {
    let path = dir.join(name);
    let dsync_flag = if options.dsync { libc::O_DSYNC } else { 0 };
    let open = |direct: bool| {
        let mut fs_options = FsOpenOptions::new();
        fs_options.read(true).write(true).create(options.create);
        let direct_flag = if direct { libc::O_DIRECT } else { 0 };
        fs_options.custom_flags(direct_flag | dsync_flag);
        fs_options.open(&path)
    };
    if options.direct {
        match open(true) {
            Ok(file) => return Ok((file, true)),
            Err(error) if error.raw_os_error() == Some(libc::EINVAL) => {
                log::warn!(
                    "O_DIRECT not supported for {}; using buffered I/O",
                    path.display()
                );
            }
            Err(error) => return Err(Error::io(name, error)),
        }
    }
    open(false)
        .map(|file| (file, false))
        .map_err(|e| Error::io(name, e))
}

pub(crate) fn list_dir(dir: &Path) -> Result<Vec<String>> {
    let mut names = Vec::new();
    let entries = std::fs::read_dir(dir).map_err(|e| Error::io(dir.display().to_string(), e))?;
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(dir.display().to_string(), e))?;
        if entry.file_type().map(|t| t.is_file()).unwrap_or(false) {
            names.push(entry.file_name().to_string_lossy().into_owned());
        }
    }
    names.sort();
    Ok(names)
}

pub(crate) fn file_exists(dir: &Path, name: &str) -> Result<bool> {
    Ok(dir.join(name).exists())
}

pub(crate) fn remove_file(dir: &Path, name: &str) -> Result<()> {
    std::fs::remove_file(dir.join(name)).map_err(|e| Error::io(name, e))
}

pub(crate) fn rename_file(dir: &Path, source: &str, target: &str) -> Result<()> {
    std::fs::rename(dir.join(source), dir.join(target)).map_err(|e| Error::io(source, e))
}

pub(crate) fn sync_directory(dir: &Path) -> Result<()> {
    let handle = File::open(dir).map_err(|e| Error::io(dir.display().to_string(), e))?;
    handle
        .sync_all()
        .map_err(|e| Error::io(dir.display().to_string(), e))
}

impl Io for SyncIo {
    fn kind(&self) -> IoKind {
        IoKind::Sync
    }

    fn open(&self, name: &str, options: OpenOptions) -> Result<Arc<dyn IoFile>> {
        let (file, _direct) = open_file(&self.dir, name, options)?;
        Ok(Arc::new(SyncFile {
            name: name.to_string(),
            file,
        }))
    }

    fn exists(&self, name: &str) -> Result<bool> {
        file_exists(&self.dir, name)
    }

    fn remove(&self, name: &str) -> Result<()> {
        remove_file(&self.dir, name)
    }

    fn rename(&self, source: &str, target: &str) -> Result<()> {
        rename_file(&self.dir, source, target)
    }

    fn list(&self) -> Result<Vec<String>> {
        list_dir(&self.dir)
    }

    fn sync_dir(&self) -> Result<()> {
        sync_directory(&self.dir)
    }
}

pub struct SyncFile {
    name: String,
    file: File,
}

impl IoFile for SyncFile {
    fn name(&self) -> &str {
        &self.name
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.file
            .read_exact_at(buf, offset)
            .map_err(|e| Error::io(&self.name, e))
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.file
            .write_all_at(buf, offset)
            .map_err(|e| Error::io(&self.name, e))
    }

    fn sync_data(&self) -> Result<()> {
        self.file.sync_data().map_err(|e| Error::io(&self.name, e))
    }

    fn len(&self) -> Result<u64> {
        Ok(self
            .file
            .metadata()
            .map_err(|e| Error::io(&self.name, e))?
            .len())
    }

    fn set_len(&self, len: u64) -> Result<()> {
        self.file.set_len(len).map_err(|e| Error::io(&self.name, e))
    }
}
