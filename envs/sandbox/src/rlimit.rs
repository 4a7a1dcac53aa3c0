//! [`RlimitSandbox`]: the parent side — directories, spawning, the wall clock, reaping.

use std::io::Write;
use std::os::unix::fs::{PermissionsExt, chown};
use std::os::unix::process::CommandExt;
use std::path::{Component, Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use arl_core::config::SandboxConfig;
use arl_core::{Job, JobOutcome, Limits, Sandbox, SandboxError};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::{Pid, geteuid};

use crate::capture::{spawn_capped, text};
use crate::child::{Fence, NetIsolation};
use crate::python::find_python;

/// How an [`RlimitSandbox`] is set up.
#[derive(Clone, Debug)]
pub struct RlimitSettings {
    /// Ceilings: a job's own limits are lowered to these, never raised.
    pub limits: Limits,
    /// The interpreter; `None` picks the system python3 ([`find_python`]).
    pub python: Option<PathBuf>,
    /// When running as root, job `k` runs as uid/gid `uid_base + (k mod 100) + 100·(pid mod 10000)`:
    /// a uid of its own, shared with no other live process (so `kill(-1)` and NPROC are per job).
    pub uid_base: u32,
}

impl Default for RlimitSettings {
    fn default() -> Self {
        Self { limits: Limits::default(), python: None, uid_base: 1_000_000 }
    }
}

impl RlimitSettings {
    pub fn from_config(config: &SandboxConfig) -> Self {
        Self { limits: config.limits(), ..Self::default() }
    }
}

/// The `rlimit` sandbox (see the crate docs for what a job gets).
pub struct RlimitSandbox {
    settings: RlimitSettings,
    python: PathBuf,
    net: NetIsolation,
    root: bool,
    next_job: AtomicU32,
}

/// Network isolation the kernel allows, probed once per process.
static NET: OnceLock<NetIsolation> = OnceLock::new();

impl RlimitSandbox {
    /// Find the interpreter and probe which network isolation the kernel grants (a kernel
    /// that refuses every kind is reported once, on stderr).
    pub fn new(settings: RlimitSettings) -> Result<Self, SandboxError> {
        let python = match &settings.python {
            Some(p) => p.clone(),
            None => find_python().map_err(SandboxError::Setup)?,
        };
        let root = geteuid().is_root();
        let mut sandbox = Self { settings, python, net: NetIsolation::None, root, next_job: AtomicU32::new(0) };
        sandbox.net = *NET.get_or_init(|| sandbox.probe_net());
        Ok(sandbox)
    }

    /// The network isolation jobs get.
    pub fn net_isolation(&self) -> &'static str {
        match self.net {
            NetIsolation::Namespace => "network namespace",
            NetIsolation::UserNamespace => "user + network namespace",
            NetIsolation::None => "none (the kernel refused a network namespace)",
        }
    }

    fn probe_net(&self) -> NetIsolation {
        let order: &[NetIsolation] = if self.root {
            &[NetIsolation::Namespace, NetIsolation::UserNamespace]
        } else {
            &[NetIsolation::UserNamespace, NetIsolation::Namespace]
        };
        for &net in order {
            let probe = Job {
                limits: Limits { wall_timeout: Duration::from_secs(20), ..Limits::default() },
                ..Job::python("probe.py", vec![arl_core::JobFile { path: "probe.py".into(), contents: "pass\n".into() }])
            };
            if let Ok(outcome) = self.run_with(&probe, net)
                && outcome.success()
            {
                return net;
            }
        }
        eprintln!("warning: sandbox `rlimit`: the kernel refused a new network namespace; jobs run WITH network access");
        NetIsolation::None
    }

    fn fence(&self, limits: &Limits, net: NetIsolation) -> Fence {
        let drop_to = self.root.then(|| {
            let k = self.next_job.fetch_add(1, Ordering::Relaxed) % 100;
            let uid = self.settings.uid_base + k + 100 * (std::process::id() % 10_000);
            (uid, uid)
        });
        Fence { net, drop_to, cpu_seconds: limits.cpu_seconds, memory_bytes: limits.memory_bytes, file_size_bytes: limits.file_size_bytes }
    }

    fn run_with(&self, job: &Job, net: NetIsolation) -> Result<JobOutcome, SandboxError> {
        let limits = clamp(&job.limits, &self.settings.limits);
        let fence = self.fence(&limits, net);
        let dir = JobDir::create(job, fence.drop_to)?;

        let mut command = Command::new(&self.python);
        command
            .args(["-I", "-S", "-B", job.entry.as_str()])
            .args(&job.args)
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", &dir.0)
            .env("LANG", "C.UTF-8")
            .current_dir(&dir.0)
            .stdin(if job.stdin.is_some() { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // SAFETY: `Fence::apply` only makes system calls on values copied into the closure.
        unsafe { command.pre_exec(move || fence.apply()) };

        let start = Instant::now();
        let mut child = command.spawn().map_err(|e| SandboxError::Setup(format!("cannot start {}: {e}", self.python.display())))?;
        let pid = child.id() as i32;
        let stdout = spawn_capped(child.stdout.take().expect("piped"), limits.output_bytes);
        let stderr = spawn_capped(child.stderr.take().expect("piped"), limits.output_bytes);
        if let (Some(mut pipe), Some(input)) = (child.stdin.take(), job.stdin.clone()) {
            // A job that never reads its stdin must not block us: write on a thread.
            std::thread::spawn(move || {
                let _ = pipe.write_all(input.as_bytes());
            });
        }

        let ended = reap(pid, start + limits.wall_timeout);
        // Whatever is left of the group (nothing, with NPROC 0) dies with the job.
        let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
        let wall_ms = start.elapsed().as_millis() as u64;
        let out = stdout.join().unwrap_or(crate::capture::Captured { bytes: Vec::new(), truncated: true });
        let err = stderr.join().unwrap_or(crate::capture::Captured { bytes: Vec::new(), truncated: true });
        drop(dir);

        let (exit_code, signal) = decode(ended.status);
        Ok(JobOutcome {
            exit_code,
            signal,
            timed_out: ended.timed_out,
            stdout: text(&out.bytes),
            stderr: text(&err.bytes),
            stdout_truncated: out.truncated,
            stderr_truncated: err.truncated,
            wall_ms,
            cpu_ms: Some(ms(ended.usage.ru_utime) + ms(ended.usage.ru_stime)),
            max_rss_kb: Some(ended.usage.ru_maxrss.max(0) as u64),
        })
    }
}

impl Sandbox for RlimitSandbox {
    fn name(&self) -> &str {
        "rlimit"
    }

    fn run(&self, job: &Job) -> Result<JobOutcome, SandboxError> {
        self.run_with(job, self.net)
    }
}

/// A job's limits, each lowered to the sandbox's ceiling.
fn clamp(job: &Limits, ceiling: &Limits) -> Limits {
    Limits {
        wall_timeout: job.wall_timeout.min(ceiling.wall_timeout),
        cpu_seconds: job.cpu_seconds.min(ceiling.cpu_seconds),
        memory_bytes: job.memory_bytes.min(ceiling.memory_bytes),
        file_size_bytes: job.file_size_bytes.min(ceiling.file_size_bytes),
        output_bytes: job.output_bytes.min(ceiling.output_bytes),
    }
}

struct Ended {
    status: i32,
    timed_out: bool,
    usage: libc::rusage,
}

/// Wait for `pid` until `deadline`, then kill its process group and wait for it.
fn reap(pid: i32, deadline: Instant) -> Ended {
    let mut status = 0;
    // SAFETY: rusage is plain old data.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let mut pause = Duration::from_micros(500);
    loop {
        // SAFETY: valid pointers to locals.
        let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        if r == pid {
            return Ended { status, timed_out: false, usage };
        }
        if r < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return Ended { status: -1, timed_out: false, usage };
        }
        let now = Instant::now();
        if now >= deadline {
            let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
            loop {
                // SAFETY: as above.
                let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
                if r == pid || (r < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR)) {
                    break;
                }
            }
            return Ended { status, timed_out: true, usage };
        }
        std::thread::sleep(pause.min(deadline - now));
        pause = (pause * 2).min(Duration::from_millis(10));
    }
}

fn decode(status: i32) -> (Option<i32>, Option<i32>) {
    if status < 0 {
        (None, None)
    } else if libc::WIFEXITED(status) {
        (Some(libc::WEXITSTATUS(status)), None)
    } else if libc::WIFSIGNALED(status) {
        (None, Some(libc::WTERMSIG(status)))
    } else {
        (None, None)
    }
}

fn ms(t: libc::timeval) -> u64 {
    (t.tv_sec.max(0) as u64) * 1000 + (t.tv_usec.max(0) as u64) / 1000
}

/// A job's fresh directory, owned by the job's uid; removed on drop.
struct JobDir(PathBuf);

impl JobDir {
    fn create(job: &Job, owner: Option<(u32, u32)>) -> Result<Self, SandboxError> {
        let template = std::env::temp_dir().join("arl-job-XXXXXX");
        let path = nix::unistd::mkdtemp(&template).map_err(|e| SandboxError::Setup(format!("mkdtemp {}: {e}", template.display())))?;
        let dir = JobDir(path);
        let own = |p: &Path| -> Result<(), SandboxError> {
            if let Some((uid, gid)) = owner {
                chown(p, Some(uid), Some(gid))?;
            }
            Ok(())
        };
        own(&dir.0)?;
        std::fs::set_permissions(&dir.0, std::fs::Permissions::from_mode(0o700))?;
        for file in &job.files {
            let rel = Path::new(&file.path);
            if rel.as_os_str().is_empty() || !rel.components().all(|c| matches!(c, Component::Normal(_))) {
                return Err(SandboxError::Setup(format!("job file path `{}` must be relative, without `..`", file.path)));
            }
            let target = dir.0.join(rel);
            let mut parent = dir.0.clone();
            for part in rel.parent().into_iter().flat_map(|p| p.components()) {
                parent.push(part);
                if !parent.exists() {
                    std::fs::create_dir(&parent)?;
                    own(&parent)?;
                }
            }
            std::fs::write(&target, &file.contents)?;
            own(&target)?;
        }
        Ok(dir)
    }
}

impl Drop for JobDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
