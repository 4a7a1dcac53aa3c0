//! Sandboxes run model-influenced Python in isolation. A job that crashes, hangs or
//! misbehaves is an [`JobOutcome`], never an error of the caller: only a sandbox that
//! cannot start a job at all returns [`SandboxError`](crate::SandboxError).

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::SandboxError;

/// A file copied into the job's fresh directory (`path` is relative to it).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobFile {
    pub path: String,
    pub contents: String,
}

/// Resource limits of one job.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Limits {
    /// Wall clock; the job (under `rlimit`, its whole PID namespace) is killed after it.
    pub wall_timeout: Duration,
    pub cpu_seconds: u64,
    pub memory_bytes: u64,
    /// Largest file the job may write.
    pub file_size_bytes: u64,
    /// Bytes kept of stdout and of stderr each; the rest is dropped and flagged.
    pub output_bytes: usize,
    /// Processes (and threads) the job may have at once, its first included; 0 (the
    /// default): the interpreter alone, no thread, no fork. Under `rlimit` this is
    /// `RLIMIT_NPROC` inside the job's own PID namespace, capped by the sandbox's settings;
    /// `wasm` runs no processes and ignores it.
    #[serde(default)]
    pub processes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            wall_timeout: Duration::from_secs(10),
            cpu_seconds: 5,
            memory_bytes: 1 << 30,
            file_size_bytes: 1 << 20,
            output_bytes: 64 * 1024,
            processes: 0,
        }
    }
}

/// Run `python <entry> <args…>` in a directory holding `files`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Job {
    pub files: Vec<JobFile>,
    pub entry: String,
    pub args: Vec<String>,
    pub stdin: Option<String>,
    pub limits: Limits,
}

impl Job {
    pub fn python(entry: impl Into<String>, files: Vec<JobFile>) -> Self {
        Self { files, entry: entry.into(), args: Vec::new(), stdin: None, limits: Limits::default() }
    }
}

/// How a job ended, with its (capped) output and the resources it used.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct JobOutcome {
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub timed_out: bool,
    pub stdout: String,
    pub stderr: String,
    pub stdout_truncated: bool,
    pub stderr_truncated: bool,
    pub wall_ms: u64,
    pub cpu_ms: Option<u64>,
    pub max_rss_kb: Option<u64>,
}

impl JobOutcome {
    pub fn success(&self) -> bool {
        self.exit_code == Some(0) && !self.timed_out
    }
}

/// A real shell in the sandbox's jobs: `bash` and ordinary command-line tools in the job's
/// root, a `/repo` that names the job's `repo/` directory, and directories to put on a
/// Python's `sys.path` (e.g. a read-only pytest).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ShellSupport {
    /// The shell's path inside the job's root.
    pub bash: String,
    /// Where the job's `repo/` directory is also seen (`/repo`).
    pub repo: String,
    /// Directories for `PYTHONPATH` (read-only in the job's root).
    pub python_path: Vec<String>,
}

/// Where a sandbox shows its jobs the installed pytest (read-only).
pub const PYTEST_AT: &str = "/opt/arl/site-packages";

/// The pytest (with its pure-Python dependencies) `scripts/setup/pytest.sh` installs, when it
/// is there: `$ARL_PYTEST_DIR`, else `~/.cache/arl/assets/pytest/site-packages`.
pub fn pytest_dir() -> Option<PathBuf> {
    let dir = match std::env::var_os("ARL_PYTEST_DIR") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(std::env::var_os("HOME")?).join(".cache/arl/assets/pytest/site-packages"),
    };
    dir.join("pytest").join("__init__.py").is_file().then_some(dir)
}

pub trait Sandbox: Send + Sync {
    fn name(&self) -> &str;
    fn run(&self, job: &Job) -> Result<JobOutcome, SandboxError>;
    /// What a job may use of a real shell; `None` (the default): no shell, Python only.
    fn shell(&self) -> Option<&ShellSupport> {
        None
    }
    /// Where a sandbox without a shell (`wasm`) lets every job import real pytest and its
    /// dependencies from (a read-only directory of the job's filesystem); `None` (the default):
    /// nowhere, and a gym runs its tests with its own runner.
    fn python_packages(&self) -> Option<&str> {
        None
    }
}
