//! What a running job is held to from the host side: linear memory (a resource limiter),
//! CPU time and file sizes (checked at every epoch tick).

use std::path::{Path, PathBuf};

use arl_core::Limits;
use wasmtime::ResourceLimiter;

/// Why the host stopped a job; carried inside the trap and read back by the sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    Cpu { seconds: u64 },
    FileSize { bytes: u64, limit: u64 },
}

impl std::fmt::Display for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Stop::Cpu { seconds } => write!(f, "CPU time limit of {seconds} s exceeded"),
            Stop::FileSize { bytes, limit } => write!(f, "file size limit exceeded: {bytes} bytes written, the limit is {limit}"),
        }
    }
}

impl std::error::Error for Stop {}

impl Stop {
    /// The signal `rlimit` would have reported.
    pub fn signal(self) -> i32 {
        match self {
            Stop::Cpu { .. } => libc::SIGXCPU,
            Stop::FileSize { .. } => libc::SIGXFSZ,
        }
    }
}

/// Per-job accounting, kept in the store.
pub struct Watch {
    memory_bytes: u64,
    cpu_limit_ns: u64,
    file_size_bytes: u64,
    dir: PathBuf,
    cpu_start_ns: u64,
    /// Peak linear memory, bytes.
    pub peak_memory: u64,
}

/// Files beyond this many in the job directory are not looked at (the walk must stay cheap).
const MAX_WALK: usize = 4096;

impl Watch {
    /// Starts the job's CPU clock: call on the thread that will run the job.
    pub fn new(limits: &Limits, dir: &Path) -> Self {
        Self {
            memory_bytes: limits.memory_bytes,
            cpu_limit_ns: limits.cpu_seconds.saturating_mul(1_000_000_000),
            file_size_bytes: limits.file_size_bytes,
            dir: dir.to_path_buf(),
            cpu_start_ns: thread_cpu_ns(),
            peak_memory: 0,
        }
    }

    /// CPU time of this thread since the job started, ms.
    pub fn cpu_ms(&self) -> u64 {
        thread_cpu_ns().saturating_sub(self.cpu_start_ns) / 1_000_000
    }

    /// The epoch-tick check: CPU time, then every file's size (and their sum, at 16 times the
    /// per-file limit, so many files cannot fill the disk either).
    pub fn check(&self) -> Result<(), Stop> {
        let seconds = self.cpu_limit_ns / 1_000_000_000;
        if thread_cpu_ns().saturating_sub(self.cpu_start_ns) > self.cpu_limit_ns {
            return Err(Stop::Cpu { seconds });
        }
        let (largest, total) = sizes(&self.dir);
        if largest > self.file_size_bytes {
            return Err(Stop::FileSize { bytes: largest, limit: self.file_size_bytes });
        }
        if total > self.file_size_bytes.saturating_mul(16) {
            return Err(Stop::FileSize { bytes: total, limit: self.file_size_bytes.saturating_mul(16) });
        }
        Ok(())
    }
}

impl ResourceLimiter for Watch {
    fn memory_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        if desired as u64 > self.memory_bytes {
            return Ok(false);
        }
        self.peak_memory = self.peak_memory.max(desired as u64);
        Ok(true)
    }

    fn table_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        Ok(desired <= 1_000_000)
    }
}

/// The largest file under `dir` and the sum of all, bytes (at most [`MAX_WALK`] entries).
fn sizes(dir: &Path) -> (u64, u64) {
    let (mut largest, mut total, mut seen) = (0u64, 0u64, 0usize);
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for entry in entries.flatten() {
            seen += 1;
            if seen > MAX_WALK {
                return (largest, total);
            }
            let Ok(meta) = entry.metadata() else { continue };
            if meta.is_dir() {
                stack.push(entry.path());
            } else {
                largest = largest.max(meta.len());
                total += meta.len();
            }
        }
    }
    (largest, total)
}

/// This thread's CPU clock, ns.
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid pointer to a local timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec.max(0) as u64 * 1_000_000_000 + ts.tv_nsec.max(0) as u64
}
