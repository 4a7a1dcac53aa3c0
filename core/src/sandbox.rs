//! Sandboxes run model-influenced Python in isolation. A job that crashes, hangs or
//! misbehaves is an [`JobOutcome`], never an error of the caller: only a sandbox that
//! cannot start a job at all returns [`SandboxError`].

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::SandboxError;

/// A file copied into the job's fresh directory (`path` is relative to it).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobFile {
    /// Where the file goes, relative to the job's directory; sandboxes refuse an absolute
    /// path or one with `..`.
    pub path: String,
    /// The file's text.
    pub contents: String,
}

/// Resource limits of one job.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Limits {
    /// Wall clock; the job (under `rlimit`, its whole PID namespace) is killed after it.
    pub wall_timeout: Duration,
    /// CPU time, seconds (`RLIMIT_CPU` under `rlimit`, at least 1; checked every 10 ms
    /// under `wasm`).
    pub cpu_seconds: u64,
    /// Memory, bytes: address space under `rlimit`, linear memory under `wasm`.
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
    /// The files the job's directory starts with.
    pub files: Vec<JobFile>,
    /// The script Python runs, relative to the job's directory (one of `files`).
    pub entry: String,
    /// Arguments after `entry` (the script's `sys.argv[1:]`).
    pub args: Vec<String>,
    /// Text fed to the job's stdin; `None`: an empty stdin.
    pub stdin: Option<String>,
    /// What the job may use; a sandbox may cap these further by its own settings.
    pub limits: Limits,
}

impl Job {
    /// `python <entry>` over `files`, with no arguments, no stdin and the default [`Limits`].
    pub fn python(entry: impl Into<String>, files: Vec<JobFile>) -> Self {
        Self { files, entry: entry.into(), args: Vec::new(), stdin: None, limits: Limits::default() }
    }
}

/// How a job ended, with its (capped) output and the resources it used.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct JobOutcome {
    /// The exit status when the job exited by itself; `None` when a signal ended it.
    pub exit_code: Option<i32>,
    /// The signal that ended the job (`SIGKILL` at the wall-clock limit; `wasm` reports
    /// an interpreter trap as `SIGSEGV`); `None` when it exited.
    pub signal: Option<i32>,
    /// The job hit [`Limits::wall_timeout`] and was killed.
    pub timed_out: bool,
    /// What the job printed, at most [`Limits::output_bytes`] of it (lossy UTF-8).
    pub stdout: String,
    /// What the job wrote to stderr, capped as `stdout`; a sandbox may append a line of
    /// its own saying why it stopped the job.
    pub stderr: String,
    /// `stdout` was cut at [`Limits::output_bytes`].
    pub stdout_truncated: bool,
    /// `stderr` was cut at [`Limits::output_bytes`].
    pub stderr_truncated: bool,
    /// Wall-clock time the job ran, milliseconds.
    pub wall_ms: u64,
    /// CPU time the job used (user + system), milliseconds, where the sandbox measures it.
    pub cpu_ms: Option<u64>,
    /// Peak memory, KiB (the maximum resident set size under `rlimit`, peak linear memory
    /// under `wasm`), where the sandbox measures it.
    pub max_rss_kb: Option<u64>,
}

impl JobOutcome {
    /// Exit status 0 within the wall-clock limit.
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

/// Runs model-influenced Python jobs in isolation, one fresh directory per job; a plugin
/// chosen by `[sandbox]` (`rlimit`, `wasm`).
pub trait Sandbox: Send + Sync {
    /// The sandbox's name, for messages and reports (e.g. `rlimit`).
    fn name(&self) -> &str;
    /// Run one job to its end. Whatever the job does is in the [`JobOutcome`]; an error
    /// means the job could not be run at all ([`SandboxError::Exhausted`] when the host
    /// ran short).
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
    /// Run `job` able to reach one host unix socket, `endpoint` (a server the caller runs,
    /// e.g. arl-endpoint's), seen at [`ENDPOINT_AT`] in the job's root, with the job's own
    /// loopback interface up so that a relay in the job can listen on `127.0.0.1`; the job
    /// reaches nothing else (no host loopback, no network). The default refuses: a sandbox
    /// that cannot connect a job this narrowly must not run it.
    fn run_with_endpoint(&self, job: &Job, endpoint: &std::path::Path) -> Result<JobOutcome, SandboxError> {
        let _ = (job, endpoint);
        Err(SandboxError::Setup(format!(
            "sandbox `{}` cannot connect a job to an endpoint (only `rlimit` can); use --sandbox rlimit",
            self.name()
        )))
    }
}

/// Where [`Sandbox::run_with_endpoint`] shows a job the endpoint's unix socket.
pub const ENDPOINT_AT: &str = "/endpoint.sock";
