//! What the results were measured on: CPUs, memory and kernel.

use hayate::report::format_bytes;

/// What the results were measured on.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Machine {
    pub cpu_count: usize,
    pub cpu_model: String,
    pub kernel: String,
    pub memory_bytes: u64,
}

impl Machine {
    pub fn describe() -> Machine {
        let cpu_count = std::thread::available_parallelism().map_or(1, |count| count.get());
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu_model = cpuinfo
            .lines()
            .find(|line| line.starts_with("model name"))
            .and_then(|line| line.split_once(':'))
            .map_or_else(
                || "unknown".to_string(),
                |(_, model)| model.trim().to_string(),
            );
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let memory_bytes = meminfo
            .lines()
            .find(|line| line.starts_with("MemTotal:"))
            .and_then(|line| line.split_whitespace().nth(1))
            .and_then(|kib| kib.parse::<u64>().ok())
            .map_or(0, |kib| kib * 1024);
        Machine {
            cpu_count,
            cpu_model,
            kernel: kernel(),
            memory_bytes,
        }
    }
}

impl std::fmt::Display for Machine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} CPUs ({}), {} memory, kernel {}",
            self.cpu_count,
            self.cpu_model,
            format_bytes(self.memory_bytes),
            self.kernel
        )
    }
}

/// `uname -srm`.
fn kernel() -> String {
    // SAFETY: `utsname` is plain old data, so all-zero is a valid value, and `uname` only
    // writes NUL-terminated strings into the fields of the struct we pass.
    let mut name: libc::utsname = unsafe { std::mem::zeroed() };
    if unsafe { libc::uname(&mut name) } != 0 {
        return "unknown".into();
    }
    let field = |chars: &[libc::c_char]| {
        let bytes: Vec<u8> = chars
            .iter()
            .take_while(|&&char| char != 0)
            .map(|&char| char as u8)
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    format!(
        "{} {} {}",
        field(&name.sysname),
        field(&name.release),
        field(&name.machine)
    )
}
