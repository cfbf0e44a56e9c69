//! The Unix-domain socket a PostgreSQL server listens on beside TCP: `<dir>/.s.PGSQL.<port>`,
//! the path psql and libpq connect to when the host is a directory (`psql -h /tmp`) or not
//! given at all. A local client skips the TCP/IP stack, which on loopback costs more CPU than
//! the query itself.
//!
//! A server killed with SIGKILL leaves its socket file behind. Binding checks the file: one
//! that no server answers on is stale and replaced; one a server answers on is an error, as
//! is a path that is not a socket.

use std::io;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};

use tokio::net::{UnixListener, UnixStream};

/// The longest socket path `sockaddr_un` holds (108 bytes with the terminating NUL).
const PATH_BYTES_MAX: usize = 107;

/// A listening Unix-domain socket; the socket file is removed when this is dropped.
#[derive(Debug)]
pub struct UnixSocket {
    listener: UnixListener,
    path: PathBuf,
}

impl UnixSocket {
    /// The socket path of a server on `port` with its sockets in `dir`, as PostgreSQL
    /// names it.
    pub fn path_for(dir: &Path, port: u16) -> PathBuf {
        dir.join(format!(".s.PGSQL.{port}"))
    }

    /// Listens on `<dir>/.s.PGSQL.<port>`, replacing a stale socket file. Must run inside a
    /// tokio runtime.
    pub fn bind(dir: &Path, port: u16) -> io::Result<UnixSocket> {
        let path = UnixSocket::path_for(dir, port);
        if path.as_os_str().len() > PATH_BYTES_MAX {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "socket path {} is longer than {PATH_BYTES_MAX} bytes",
                    path.display()
                ),
            ));
        }
        remove_stale(&path)?;
        let listener = UnixListener::bind(&path)
            .map_err(|error| annotate(error, format!("binding {}", path.display())))?;
        let socket = UnixSocket { listener, path };
        // Every local user may connect, as with PostgreSQL's default
        // unix_socket_permissions: authentication decides who gets in.
        std::fs::set_permissions(&socket.path, std::fs::Permissions::from_mode(0o777))
            .map_err(|error| annotate(error, format!("chmod {}", socket.path.display())))?;
        Ok(socket)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub async fn accept(&self) -> io::Result<UnixStream> {
        self.listener.accept().await.map(|(stream, _)| stream)
    }
}

impl Drop for UnixSocket {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Removes a socket file left by a server that is gone; errors if a server still answers
/// on it or the path is something else.
fn remove_stale(path: &Path) -> io::Result<()> {
    let metadata = match std::fs::symlink_metadata(path) {
        Ok(metadata) => metadata,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(error) => return Err(annotate(error, format!("checking {}", path.display()))),
    };
    if !metadata.file_type().is_socket() {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!("{} exists and is not a socket", path.display()),
        ));
    }
    match std::os::unix::net::UnixStream::connect(path) {
        Ok(_) => Err(io::Error::new(
            io::ErrorKind::AddrInUse,
            format!(
                "another server is listening on {} (stop it or choose another port)",
                path.display()
            ),
        )),
        Err(_) => std::fs::remove_file(path)
            .map_err(|error| annotate(error, format!("removing stale {}", path.display()))),
    }
}

fn annotate(error: io::Error, what: String) -> io::Error {
    io::Error::new(error.kind(), format!("{what}: {error}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    #[test]
    fn a_stale_socket_is_replaced_and_a_live_one_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = UnixSocket::path_for(dir.path(), 6543);
        // A server that died without cleaning up leaves its socket file.
        drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
        assert!(path.exists());
        runtime().block_on(async {
            let socket = UnixSocket::bind(dir.path(), 6543).unwrap();
            assert_eq!(socket.path(), path);
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o777);

            let second = UnixSocket::bind(dir.path(), 6543).unwrap_err();
            assert_eq!(second.kind(), io::ErrorKind::AddrInUse, "{second}");
            assert!(second.to_string().contains("another server"), "{second}");

            let client = tokio::spawn(UnixStream::connect(path.clone()));
            socket.accept().await.unwrap();
            client.await.unwrap().unwrap();
            drop(socket);
        });
        assert!(!path.exists(), "the socket file is removed on drop");
    }

    #[test]
    fn a_path_that_is_not_a_socket_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = UnixSocket::path_for(dir.path(), 6544);
        std::fs::write(&path, "keep me").unwrap();
        let error = runtime()
            .block_on(async { UnixSocket::bind(dir.path(), 6544) })
            .unwrap_err();
        assert!(error.to_string().contains("not a socket"), "{error}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "keep me");

        let long = dir.path().join("d".repeat(120));
        let error = runtime()
            .block_on(async { UnixSocket::bind(&long, 6544) })
            .unwrap_err();
        assert!(error.to_string().contains("longer than"), "{error}");
    }
}
