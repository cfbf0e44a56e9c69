//! A node's identity (docs/design.md 8.6): the database system its data belongs to (a random
//! id drawn when the first primary creates it) and the history of primary terms, epochs, each
//! with the log position where it began. A standby's data is a prefix of its primary's log only
//! if they share the system id and the standby's log ends at or before the point where the
//! primary's history left the standby's last epoch (the fork point).
//!
//! File `identity` in the data directory: `system {id:016x}` then `epoch {number} {start}`
//! per term, oldest first; replaced atomically (written aside, synced, renamed, directory
//! synced).

use std::io;
use std::path::Path;

use hayate_engine::Lsn;

const IDENTITY_FILE: &str = "identity";

/// One primary term: its number and the log position of its first record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Epoch {
    pub number: u64,
    pub start: Lsn,
}

/// The system id and the epoch history of a node's data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub system_id: u64,
    /// Oldest first; never empty.
    pub epochs: Vec<Epoch>,
}

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message)
}

impl Identity {
    /// A new database system: a random id, epoch 1 from the start of the log.
    pub fn new_system() -> Identity {
        Identity {
            system_id: rand::random::<u64>().max(1),
            epochs: vec![Epoch {
                number: 1,
                start: 0,
            }],
        }
    }

    /// The current (last) epoch.
    pub fn current(&self) -> Epoch {
        *self.epochs.last().expect("an identity has an epoch")
    }

    /// Starts epoch `number` (above every earlier one) at log position `start`.
    pub fn begin_epoch(&mut self, number: u64, start: Lsn) {
        debug_assert!(number > self.current().number);
        self.epochs.push(Epoch { number, start });
    }

    /// Where this (primary's) history left epoch `epoch` of a standby: `Ok(None)` if that is
    /// the current epoch (no fork), `Ok(Some(position))` the start of the next epoch, or an
    /// error if this history never had that epoch.
    pub fn fork_point(&self, epoch: u64) -> Result<Option<Lsn>, String> {
        let Some(index) = self.epochs.iter().position(|e| e.number == epoch) else {
            return Err(format!(
                "the standby's epoch {epoch} is not in this primary's history (epochs {})",
                self.epochs
                    .iter()
                    .map(|e| e.number.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        };
        Ok(self.epochs.get(index + 1).map(|next| next.start))
    }

    /// Reads the identity of the data in `dir` (None if it has none yet).
    pub fn load(dir: &Path) -> io::Result<Option<Identity>> {
        let text = match std::fs::read_to_string(dir.join(IDENTITY_FILE)) {
            Ok(text) => text,
            Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(error) => return Err(error),
        };
        Self::parse(&text).map(Some)
    }

    /// The identity of the data in `dir`, or a new system's (not stored yet).
    pub fn load_or_new(dir: &Path) -> io::Result<Identity> {
        Ok(Self::load(dir)?.unwrap_or_else(Identity::new_system))
    }

    fn parse(text: &str) -> io::Result<Identity> {
        let mut lines = text.lines();
        let system_id = lines
            .next()
            .and_then(|line| line.strip_prefix("system "))
            .and_then(|hex| u64::from_str_radix(hex, 16).ok())
            .ok_or_else(|| invalid("identity file: no system line".into()))?;
        let mut epochs = Vec::new();
        for line in lines {
            let fields: Vec<&str> = line.split(' ').collect();
            match fields[..] {
                ["epoch", number, start] => epochs.push(Epoch {
                    number: number
                        .parse()
                        .map_err(|_| invalid(format!("identity: {line}")))?,
                    start: start
                        .parse()
                        .map_err(|_| invalid(format!("identity: {line}")))?,
                }),
                _ => return Err(invalid(format!("identity file: bad line \"{line}\""))),
            }
        }
        if epochs.is_empty() || epochs.windows(2).any(|w| w[0].number >= w[1].number) {
            return Err(invalid(
                "identity file: epochs missing or out of order".into(),
            ));
        }
        Ok(Identity { system_id, epochs })
    }

    fn to_text(&self) -> String {
        let mut text = format!("system {:016x}\n", self.system_id);
        for epoch in &self.epochs {
            text.push_str(&format!("epoch {} {}\n", epoch.number, epoch.start));
        }
        text
    }

    /// Writes the identity into `dir`, durably and atomically.
    pub fn store(&self, dir: &Path) -> io::Result<()> {
        use std::io::Write;
        let staged = dir.join(format!("{IDENTITY_FILE}.new"));
        let mut file = std::fs::File::create(&staged)?;
        file.write_all(self.to_text().as_bytes())?;
        file.sync_all()?;
        std::fs::rename(&staged, dir.join(IDENTITY_FILE))?;
        std::fs::File::open(dir)?.sync_all()
    }

    /// The wire form (message `I`): the text form.
    pub fn encode(&self) -> Vec<u8> {
        self.to_text().into_bytes()
    }

    pub fn decode(bytes: &[u8]) -> io::Result<Identity> {
        Self::parse(std::str::from_utf8(bytes).map_err(|_| invalid("identity: not UTF-8".into()))?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_finds_fork_points() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(Identity::load(dir.path()).unwrap(), None);
        let mut identity = Identity::new_system();
        identity.begin_epoch(2, 4096);
        identity.begin_epoch(5, 9000);
        identity.store(dir.path()).unwrap();
        let loaded = Identity::load(dir.path()).unwrap().unwrap();
        assert_eq!(loaded, identity);
        assert_eq!(Identity::decode(&identity.encode()).unwrap(), identity);
        assert_eq!(loaded.fork_point(1), Ok(Some(4096)));
        assert_eq!(loaded.fork_point(2), Ok(Some(9000)));
        assert_eq!(loaded.fork_point(5), Ok(None));
        assert!(loaded.fork_point(3).is_err());
        assert_eq!(loaded.current().number, 5);
        std::fs::write(
            dir.path().join(IDENTITY_FILE),
            "system 1\nepoch 2 0\nepoch 1 5\n",
        )
        .unwrap();
        assert!(Identity::load(dir.path()).is_err());
    }
}
