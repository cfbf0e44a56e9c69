//! io_uring backend with O_DIRECT (placeholder until the implementation lands).

use std::path::Path;
use std::sync::Arc;

use super::{Io, IoFile, IoKind, OpenOptions};
use crate::error::{Error, Result};

pub struct UringIo;

impl UringIo {
    pub fn new(_dir: &Path) -> Result<UringIo> {
        Err(Error::Unsupported("io_uring backend not built yet".into()))
    }
}

impl Io for UringIo {
    fn kind(&self) -> IoKind {
        IoKind::Uring
    }
    fn open(&self, _name: &str, _options: OpenOptions) -> Result<Arc<dyn IoFile>> {
        unreachable!()
    }
    fn exists(&self, _name: &str) -> Result<bool> {
        unreachable!()
    }
    fn remove(&self, _name: &str) -> Result<()> {
        unreachable!()
    }
    fn rename(&self, _source: &str, _target: &str) -> Result<()> {
        unreachable!()
    }
    fn list(&self) -> Result<Vec<String>> {
        unreachable!()
    }
    fn sync_dir(&self) -> Result<()> {
        unreachable!()
    }
}
