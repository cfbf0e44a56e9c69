//! Seeding a standby: a base backup of the primary (`Database::base_backup`, design 5.7)
//! received over a replication connection into a directory holding no database.
//!
//! After the challenge (`answer_challenge`) the standby sends `B` (`HELLO_MAGIC` + its name); the primary answers `I` (its identity),
//! then `F` pieces (`name length u16 | name | offset u64 | bytes`) and `Z` (the copy's log end).

use std::io;
use std::path::Path;
use std::time::{Duration, Instant};

use hayate_engine::BackupWriter;

use super::{
    answer_challenge, lsn_of, read_message, write_message, Identity, ReplicationAuth, HELLO_MAGIC,
};

/// How long a seeding standby waits for the primary's next message.
const SEED_SILENCE_MAX: Duration = Duration::from_secs(60);

/// Copies the database of the primary at `primary` into `dir` (which must hold no
/// database) and stores its identity there. Returns the identity.
pub fn seed_from(
    primary: &str,
    dir: &Path,
    name: &str,
    auth: &ReplicationAuth,
) -> io::Result<Identity> {
    let mut socket = super::connect(primary, auth.tls.as_ref(), &|| false)?;
    answer_challenge(&mut socket, auth.secret.as_ref(), &|| false)?;
    write_message(&mut socket, b'B', &[HELLO_MAGIC, name.as_bytes()])?;
    let mut writer = BackupWriter::new(dir).map_err(io::Error::other)?;
    let mut identity = None;
    let mut heard = Instant::now();
    let started = Instant::now();
    let mut bytes = 0u64;
    loop {
        let Some((tag, payload)) = read_message(&mut socket)? else {
            if heard.elapsed() > SEED_SILENCE_MAX {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "the primary sent nothing for 60 s during the base backup",
                ));
            }
            continue;
        };
        heard = Instant::now();
        match tag {
            b'I' => identity = Some(Identity::decode(&payload)?),
            b'F' => {
                let short = || io::Error::new(io::ErrorKind::InvalidData, "short backup piece");
                let name_len = u16::from_be_bytes(
                    payload
                        .get(..2)
                        .ok_or_else(short)?
                        .try_into()
                        .expect("2 bytes"),
                ) as usize;
                let file = std::str::from_utf8(payload.get(2..2 + name_len).ok_or_else(short)?)
                    .map_err(|_| short())?;
                let offset = lsn_of(payload.get(2 + name_len..).ok_or_else(short)?)?;
                let piece = &payload[2 + name_len + 8..];
                writer
                    .write(file, offset, piece)
                    .map_err(io::Error::other)?;
                bytes += piece.len() as u64;
            }
            b'Z' => {
                let log_end = lsn_of(&payload)?;
                let identity = identity.ok_or_else(|| {
                    io::Error::new(io::ErrorKind::InvalidData, "base backup without identity")
                })?;
                writer.finish().map_err(io::Error::other)?;
                identity.store(dir)?;
                log::warn!(
                    "replication: seeded {} from {primary}: {bytes} bytes in {:.1} s, log to {log_end}",
                    dir.display(),
                    started.elapsed().as_secs_f64()
                );
                return Ok(identity);
            }
            b'E' => {
                return Err(io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    format!(
                        "the primary {primary} refused the base backup: {}",
                        String::from_utf8_lossy(&payload)
                    ),
                ))
            }
            other => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("replication message {other:#x} during a base backup"),
                ))
            }
        }
    }
}
