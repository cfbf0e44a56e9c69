//! Local database servers the lab starts and stops itself (PostgreSQL, MariaDB).
//!
//! Lifecycle of a server:
//! 1. `find_program` locates the binaries of the installed Debian package.
//! 2. `server_user` picks the system user the server runs as: servers refuse to run as root, so
//!    when the lab is root they run as `postgres`/`mysql` (created if missing).
//! 3. `LabDirectory::create` makes a private temporary directory under the lab's `--dir`
//!    (on the device being measured), owned by that user, for the data, the socket and the log.
//! 4. `run_setup` runs the setup program (initdb, mariadb-install-db), its output in
//!    `setup.log`; `ServerProcess::spawn` starts the server, its output in `server.log`, and
//!    `wait_ready` polls it until it answers. Errors carry the tail of the log.
//! 5. `ServerProcess::stop` (also run on drop) sends the server's clean-shutdown signal, waits,
//!    and kills it if it does not stop. Servers also get that signal from the kernel when the
//!    lab itself dies (`PR_SET_PDEATHSIG`), so no server outlives the lab.
//! 6. Dropping the `LabDirectory` removes everything the server wrote. A driver keeps both in
//!    a `LabServer`, which stops the server before it removes the directory.

use std::ffi::CString;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{mpsc, Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use crate::driver::{DriverError, DriverResult};

/// How long a server may take to answer after it was started.
pub const STARTUP_TIMEOUT: Duration = Duration::from_secs(120);
/// How long a clean shutdown may take before the server is killed.
pub const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(120);
/// Lines of the server log quoted in errors.
const LOG_TAIL_LINES: usize = 20;
/// Longest socket path that fits `sockaddr_un.sun_path` (108 bytes with the NUL) with margin.
const SOCKET_PATH_BYTES_MAX: usize = 100;

/// The first of `names` found in `directories` or on PATH.
pub fn find_program(names: &[&str], directories: &[&Path]) -> Option<PathBuf> {
    let path_directories: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|path| std::env::split_paths(&path).collect())
        .unwrap_or_default();
    for name in names {
        let candidates = directories
            .iter()
            .map(|directory| directory.to_path_buf())
            .chain(path_directories.iter().cloned());
        for directory in candidates {
            let program = directory.join(name);
            if is_executable(&program) {
                return Some(program);
            }
        }
    }
    None
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    fs::metadata(path)
        .map(|metadata| metadata.is_file() && metadata.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// The system user a server runs as when the lab is root.
#[derive(Debug, Clone)]
pub struct ServerUser {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
}

/// `None` when the lab is not root (the server runs as the lab's own user); otherwise the
/// system user `name`, created with `useradd --system` if it does not exist.
pub fn server_user(name: &str) -> DriverResult<Option<ServerUser>> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Ok(None);
    }
    if let Some(user) = lookup_user(name)? {
        return Ok(Some(user));
    }
    let output = Command::new("useradd")
        .args(["--system", "--user-group", "--no-create-home"])
        .args(["--shell", "/usr/sbin/nologin", name])
        .output()
        .map_err(|error| DriverError::fatal(format!("cannot run useradd: {error}")))?;
    if !output.status.success() {
        return Err(DriverError::fatal(format!(
            "cannot create the system user {name} (servers refuse to run as root): {}",
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    lookup_user(name)?
        .map(Some)
        .ok_or_else(|| DriverError::fatal(format!("user {name} was created but is not found")))
}

fn lookup_user(name: &str) -> DriverResult<Option<ServerUser>> {
    let c_name =
        CString::new(name).map_err(|_| DriverError::fatal(format!("bad user name {name:?}")))?;
    // getpwnam_r: the record is copied into our buffer, so no static storage is shared.
    let mut record: libc::passwd = unsafe { std::mem::zeroed() };
    let mut buffer = vec![0 as libc::c_char; 16 * 1024];
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer is valid for the call and `buffer.len()` is its true size.
    let status = unsafe {
        libc::getpwnam_r(
            c_name.as_ptr(),
            &mut record,
            buffer.as_mut_ptr(),
            buffer.len(),
            &mut found,
        )
    };
    if status != 0 {
        let error = io::Error::from_raw_os_error(status);
        return Err(DriverError::fatal(format!(
            "cannot look up user {name}: {error}"
        )));
    }
    if found.is_null() {
        return Ok(None);
    }
    Ok(Some(ServerUser {
        name: name.to_string(),
        uid: record.pw_uid,
        gid: record.pw_gid,
    }))
}

/// A private temporary directory for one server (or one SQLite file), removed on drop.
#[derive(Debug)]
pub struct LabDirectory {
    root: tempfile::TempDir,
    /// A short directory for the socket when `root`'s path is too long for one.
    socket: Option<tempfile::TempDir>,
}

impl LabDirectory {
    /// Makes `hayate-lab-ENGINE-XXXX` under `base_dir`, owned by `user`, and checks that the
    /// user can write there (every parent must be searchable by it).
    pub fn create(
        base_dir: &Path,
        engine: &str,
        user: Option<&ServerUser>,
    ) -> DriverResult<LabDirectory> {
        fs::create_dir_all(base_dir).map_err(|error| {
            DriverError::fatal(format!("cannot create {}: {error}", base_dir.display()))
        })?;
        // Absolute, because servers run from `/` (see `command_as`).
        let base_dir = fs::canonicalize(base_dir).map_err(|error| {
            DriverError::fatal(format!("cannot resolve {}: {error}", base_dir.display()))
        })?;
        let root = tempfile::Builder::new()
            .prefix(&format!("hayate-lab-{engine}-"))
            .tempdir_in(&base_dir)
            .map_err(|error| {
                DriverError::fatal(format!(
                    "cannot make a temporary directory in {}: {error}",
                    base_dir.display()
                ))
            })?;
        give_to(root.path(), user)?;
        check_writable_by(root.path(), user)?;
        Ok(LabDirectory { root, socket: None })
    }

    pub fn path(&self) -> &Path {
        self.root.path()
    }

    /// The directory for a socket named `socket_name`: the lab directory, or a private one
    /// under the system temporary directory when the path would not fit a unix socket address.
    pub fn socket_directory(
        &mut self,
        socket_name: &str,
        user: Option<&ServerUser>,
    ) -> DriverResult<PathBuf> {
        if self.root.path().join(socket_name).as_os_str().len() <= SOCKET_PATH_BYTES_MAX {
            return Ok(self.root.path().to_path_buf());
        }
        if self.socket.is_none() {
            let socket = tempfile::Builder::new()
                .prefix("hayate-lab-socket-")
                .tempdir()
                .map_err(|error| {
                    DriverError::fatal(format!("cannot make a socket directory: {error}"))
                })?;
            give_to(socket.path(), user)?;
            self.socket = Some(socket);
        }
        Ok(self
            .socket
            .as_ref()
            .map(|socket| socket.path().to_path_buf())
            .unwrap_or_default())
    }

    /// Removes the directories, reporting what could not be removed.
    pub fn remove(self) -> DriverResult<()> {
        let root = self.root.path().display().to_string();
        self.root
            .close()
            .map_err(|error| DriverError::fatal(format!("cannot remove {root}: {error}")))?;
        if let Some(socket) = self.socket {
            socket.close().map_err(|error| {
                DriverError::fatal(format!("cannot remove the socket directory: {error}"))
            })?;
        }
        Ok(())
    }
}

/// What a server peer's driver owns: its lab directory and the server running in it (none
/// while it restarts). Stopping comes before removing, so the server never loses its files
/// while it runs.
#[derive(Debug)]
pub struct LabServer {
    process: Option<ServerProcess>,
    /// Removed once the server has stopped (`stop_and_remove`).
    directory: Option<LabDirectory>,
}

impl LabServer {
    pub fn new(directory: LabDirectory) -> LabServer {
        LabServer {
            process: None,
            directory: Some(directory),
        }
    }

    /// The server now running in the directory.
    pub fn set_process(&mut self, process: ServerProcess) {
        self.process = Some(process);
    }

    /// The directory, until it is removed.
    pub fn directory(&self) -> Option<&LabDirectory> {
        self.directory.as_ref()
    }

    /// Stops the server cleanly (killing it after `SHUTDOWN_TIMEOUT`), if one runs.
    pub fn stop(&mut self) -> DriverResult<()> {
        match self.process.take() {
            Some(mut process) => process.stop(SHUTDOWN_TIMEOUT),
            None => Ok(()),
        }
    }

    /// Stops the server, then removes the directory; the first error is reported.
    pub fn stop_and_remove(&mut self) -> DriverResult<()> {
        let stopped = self.stop();
        let removed = self
            .directory
            .take()
            .map(LabDirectory::remove)
            .unwrap_or(Ok(()));
        stopped.and(removed)
    }

    /// The server's processes (`ServerProcess::pids`), none when it is stopped.
    pub fn pids(&self) -> Vec<u32> {
        self.process
            .as_ref()
            .map(ServerProcess::pids)
            .unwrap_or_default()
    }
}

fn give_to(path: &Path, user: Option<&ServerUser>) -> DriverResult<()> {
    let Some(user) = user else { return Ok(()) };
    std::os::unix::fs::chown(path, Some(user.uid), Some(user.gid)).map_err(|error| {
        DriverError::fatal(format!(
            "cannot give {} to {}: {error}",
            path.display(),
            user.name
        ))
    })
}

fn check_writable_by(path: &Path, user: Option<&ServerUser>) -> DriverResult<()> {
    let Some(user) = user else { return Ok(()) };
    let status = command_as(Path::new("test"), Some(user))
        .arg("-w")
        .arg(path)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map_err(|error| {
            DriverError::fatal(format!("cannot run test as {}: {error}", user.name))
        })?;
    if status.success() {
        return Ok(());
    }
    Err(DriverError::fatal(format!(
        "user {} cannot write {} (the server runs as {} because it refuses to run as root): \
         choose a --dir whose parent directories are searchable by other users",
        user.name,
        path.display(),
        user.name
    )))
}

/// A command for `program` that runs as `user` (when given), from `/`, with no stdin.
pub fn command_as(program: &Path, user: Option<&ServerUser>) -> Command {
    let mut command = Command::new(program);
    command.current_dir("/").stdin(Stdio::null());
    if let Some(user) = user {
        command.uid(user.uid).gid(user.gid);
    }
    command
}

/// A server started by the lab; stopped cleanly when dropped.
#[derive(Debug)]
pub struct ServerProcess {
    /// "PostgreSQL" or "MariaDB", for messages.
    name: &'static str,
    child: Child,
    log_path: PathBuf,
    /// The signal asking the server for a clean shutdown.
    stop_signal: libc::c_int,
    stopped: bool,
}

impl ServerProcess {
    /// Starts `command`, appending its output to `log_path`; the server receives `stop_signal`
    /// when it should shut down, including when the lab dies.
    pub fn spawn(
        name: &'static str,
        command: Command,
        log_path: &Path,
        stop_signal: libc::c_int,
    ) -> DriverResult<ServerProcess> {
        let child = spawn_logged(command, log_path, stop_signal)
            .map_err(|error| DriverError::fatal(format!("cannot start {name}: {error}")))?;
        Ok(ServerProcess {
            name,
            child,
            log_path: log_path.to_path_buf(),
            stop_signal,
            stopped: false,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The server process and all its descendants (PostgreSQL's backends and workers).
    pub fn pids(&self) -> Vec<u32> {
        if self.stopped {
            return Vec::new();
        }
        let mut pids = vec![self.pid()];
        let parents = process_parents();
        let mut index = 0;
        while index < pids.len() {
            let parent = pids[index];
            pids.extend(
                parents
                    .iter()
                    .filter(|(_, of)| *of == parent)
                    .map(|(pid, _)| *pid),
            );
            index += 1;
        }
        pids
    }

    /// Polls `probe` until it succeeds; fails when the server exits or `timeout` passes.
    pub fn wait_ready(
        &mut self,
        timeout: Duration,
        mut probe: impl FnMut() -> Result<(), String>,
    ) -> DriverResult<()> {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().ok().flatten() {
                self.stopped = true;
                return Err(self.error(&format!("exited during startup ({status})")));
            }
            let last_error = match probe() {
                Ok(()) => return Ok(()),
                Err(error) => error,
            };
            if start.elapsed() > timeout {
                return Err(self.error(&format!(
                    "did not accept connections within {} s (last error: {last_error})",
                    timeout.as_secs()
                )));
            }
            thread::sleep(Duration::from_millis(100));
        }
    }

    /// A startup error with the tail of the server's log.
    pub fn error(&self, what: &str) -> DriverError {
        DriverError::fatal(format!(
            "{} {what}; last lines of {}:\n{}",
            self.name,
            self.log_path.display(),
            log_tail(&self.log_path, LOG_TAIL_LINES)
        ))
    }

    /// Asks for a clean shutdown and waits; kills the server when it does not stop in time.
    pub fn stop(&mut self, timeout: Duration) -> DriverResult<()> {
        if self.stopped {
            return Ok(());
        }
        self.stopped = true;
        if self.child.try_wait().ok().flatten().is_some() {
            return Ok(());
        }
        // SAFETY: kill has no memory preconditions; the pid is our own unreaped child.
        unsafe { libc::kill(self.pid() as libc::pid_t, self.stop_signal) };
        let start = Instant::now();
        while start.elapsed() < timeout {
            match self.child.try_wait() {
                Ok(Some(status)) => return self.check_exit(status),
                Ok(None) => thread::sleep(Duration::from_millis(50)),
                Err(error) => {
                    return Err(DriverError::fatal(format!(
                        "cannot wait for {}: {error}",
                        self.name
                    )))
                }
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        Err(self.error(&format!(
            "did not shut down within {} s and was killed",
            timeout.as_secs()
        )))
    }

    fn check_exit(&self, status: ExitStatus) -> DriverResult<()> {
        if status.success() {
            return Ok(());
        }
        Err(self.error(&format!("shut down with {status}")))
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        if let Err(error) = self.stop(SHUTDOWN_TIMEOUT) {
            log::warn!("{error}");
        }
    }
}

/// Runs a setup program (initdb, mariadb-install-db) to completion, output appended to the
/// log; fails with the log's tail.
pub fn run_setup(
    name: &str,
    command: Command,
    log_path: &Path,
    timeout: Duration,
) -> DriverResult<()> {
    let mut child = spawn_logged(command, log_path, libc::SIGTERM)
        .map_err(|error| DriverError::fatal(format!("cannot run {name}: {error}")))?;
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if start.elapsed() < timeout => thread::sleep(Duration::from_millis(50)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(DriverError::fatal(format!(
                    "{name} did not finish within {} s; last lines of {}:\n{}",
                    timeout.as_secs(),
                    log_path.display(),
                    log_tail(log_path, LOG_TAIL_LINES)
                )));
            }
            Err(error) => {
                return Err(DriverError::fatal(format!(
                    "cannot wait for {name}: {error}"
                )))
            }
        }
    };
    if status.success() {
        return Ok(());
    }
    Err(DriverError::fatal(format!(
        "{name} failed ({status}); last lines of {}:\n{}",
        log_path.display(),
        log_tail(log_path, LOG_TAIL_LINES)
    )))
}

/// Spawns `command` with stdout and stderr appended to `log_path`. The spawn happens on one
/// long-lived thread because the kernel sends the parent-death signal when the *thread* that
/// forked exits, not the process: a server started from a short-lived worker thread would
/// otherwise be stopped with it.
fn spawn_logged(
    mut command: Command,
    log_path: &Path,
    death_signal: libc::c_int,
) -> io::Result<Child> {
    let log = OpenOptions::new()
        .create(true)
        .append(true)
        .open(log_path)?;
    command.stdout(log.try_clone()?).stderr(log);
    let lab_pid = std::process::id();
    // SAFETY: the closure runs in the forked child before exec and calls only prctl and
    // getppid, which are async-signal-safe; it allocates nothing.
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, death_signal as libc::c_ulong) == -1 {
                return Err(io::Error::last_os_error());
            }
            // The lab died between fork and prctl: do not start an orphan.
            if libc::getppid() as u32 != lab_pid {
                return Err(io::Error::other("the lab exited"));
            }
            Ok(())
        });
    }
    type Request = (Command, mpsc::Sender<io::Result<Child>>);
    static SPAWNER: OnceLock<Option<Mutex<mpsc::Sender<Request>>>> = OnceLock::new();
    let spawner = SPAWNER.get_or_init(|| {
        let (sender, receiver) = mpsc::channel::<Request>();
        thread::Builder::new()
            .name("lab-server-spawner".to_string())
            .spawn(move || {
                for (mut command, reply) in receiver {
                    let _ = reply.send(command.spawn());
                }
            })
            .ok()
            .map(|_| Mutex::new(sender))
    });
    let Some(spawner) = spawner else {
        return Err(io::Error::other("cannot start the server spawner thread"));
    };
    let (reply, answer) = mpsc::channel();
    spawner
        .lock()
        .map_err(|_| io::Error::other("the server spawner is poisoned"))?
        .send((command, reply))
        .map_err(|_| io::Error::other("the server spawner is gone"))?;
    answer
        .recv()
        .map_err(|_| io::Error::other("the server spawner is gone"))?
}

/// (pid, parent pid) of every process, from /proc.
fn process_parents() -> Vec<(u32, u32)> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut parents = Vec::new();
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|name| name.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // "pid (comm) state ppid ...": comm may hold spaces and parentheses.
        let Some(after_comm) = stat.rfind(')').map(|end| &stat[end + 1..]) else {
            continue;
        };
        if let Some(parent) = after_comm
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
        {
            parents.push((pid, parent));
        }
    }
    parents
}

/// The last `lines` lines of a log file (at most its last 64 KiB).
pub fn log_tail(path: &Path, lines: usize) -> String {
    let read = || -> io::Result<String> {
        let mut file = File::open(path)?;
        let length = file.metadata()?.len();
        file.seek(SeekFrom::Start(length.saturating_sub(64 * 1024)))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    };
    match read() {
        Ok(text) => {
            let all: Vec<&str> = text.lines().collect();
            all[all.len().saturating_sub(lines)..].join("\n")
        }
        Err(error) => format!("(cannot read the log: {error})"),
    }
}
