//! [`RlimitSandbox`]: the parent side — the root planned once, each job's plan, spawning,
//! the wall clock, reaping.

use std::collections::HashMap;
use std::ffi::CString;
use std::os::fd::AsFd;

use nix::sys::resource::Resource;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use arl_core::config::SandboxConfig;
use arl_core::{Job, JobFile, JobOutcome, Limits, Sandbox, SandboxError, ShellSupport};

use crate::cgroup::MemoryCgroups;
use crate::child::{ChildPlan, Identity, Op, Step};
use crate::collect::collect;
use crate::python::{find_python, interpreter_binds};
use crate::root::{Entry, RootPlan};
use crate::spawn::{SpawnError, pipe, set_nonblocking, setup_done, spawn};

/// How an [`RlimitSandbox`] is set up.
#[derive(Clone, Debug)]
pub struct RlimitSettings {
    /// Ceilings: a job's own limits are lowered to these, never raised.
    pub limits: Limits,
    /// The interpreter; `None` picks the system python3 ([`find_python`]).
    pub python: Option<PathBuf>,
    /// When running as root, jobs run as fresh uids from here on ([`crate::uid`]).
    pub uid_base: u32,
    /// More host paths bound read-only at the same place in the job's root, beside the
    /// interpreter's own (e.g. `/bin/bash`, a `site-packages` directory).
    pub binds: Vec<PathBuf>,
    /// The most a job's `Limits::processes` (its `RLIMIT_NPROC`) may be; a job that asks
    /// for 0 (the default) can start no process and no thread.
    pub max_processes: u64,
    /// Give jobs that ask for processes (`Limits::processes` > 0) a root with a real shell
    /// ([`crate::shell`]): bash, the common tools, a read-only pytest when installed, and
    /// `/repo -> /job/repo`. Jobs that ask for none (graded code) get the plain root.
    pub shell: bool,
}

impl Default for RlimitSettings {
    fn default() -> Self {
        Self {
            limits: Limits::default(),
            python: None,
            uid_base: crate::uid::DEFAULT_BASE,
            binds: Vec::new(),
            max_processes: MAX_PROCESSES,
            shell: true,
        }
    }
}

impl RlimitSettings {
    pub fn from_config(config: &SandboxConfig) -> Self {
        Self { limits: config.limits(), binds: config.binds.iter().map(PathBuf::from).collect(), ..Self::default() }
    }
}

/// The default ceiling of a job's processes.
pub const MAX_PROCESSES: u64 = 16;

/// Files and directories a job may create beyond its own, in its tmpfs.
pub const JOB_INODES: u64 = 4096;

/// The job's tmpfs holds its files plus this many times the per-file size limit.
pub const JOB_ROOM_FILES: u64 = 16;

/// Where the job's directory is inside its root (also its `HOME`; `/tmp` points here).
pub const JOB_DIR: &str = "/job";

/// What every job of one interpreter and bind list shares, built (and probed) once per process.
struct Prepared {
    python: CString,
    ops: Vec<Op>,
    /// Host paths of the ops, for messages.
    op_paths: Vec<PathBuf>,
    identity: Option<Identity>,
    seccomp: Vec<libc::sock_filter>,
    shell: Option<ShellSupport>,
}

// SAFETY: every field is owned data (C strings, plain integers); nothing points elsewhere.
unsafe impl Send for Prepared {}
// SAFETY: as for Send, and nothing in it is mutated through a shared reference.
unsafe impl Sync for Prepared {}

/// The interpreter, the extra binds and the shell: what a [`Prepared`] is built from.
type PreparedKey = (PathBuf, Vec<PathBuf>, bool);

/// A job's directories and files, relative to its directory, as C strings.
type JobFiles<'a> = (Vec<CString>, Vec<(CString, &'a [u8])>);

/// The `rlimit` sandbox (see the crate docs for what a job gets).
pub struct RlimitSandbox {
    settings: RlimitSettings,
    python: PathBuf,
    /// The root of jobs that start no process (graded code, `python FILE`).
    prepared: Arc<Prepared>,
    /// The root with a shell, for jobs that ask for processes (when `settings.shell` and
    /// the host has bash).
    shell_root: Option<Arc<Prepared>>,
    /// Each job's memory cgroup, or why the host gives none ([`crate::cgroup`]).
    cgroups: &'static Result<MemoryCgroups, String>,
}

/// Memory a job's cgroup allows beyond its address-space limit and its tmpfs: the root's
/// tmpfs, page tables, pipe and socket buffers of up to [`MAX_PROCESSES`] processes.
pub const CGROUP_SLACK: u64 = 32 << 20;

/// The memory cgroups of this process's jobs, found once.
fn cgroups() -> &'static Result<MemoryCgroups, String> {
    static CGROUPS: OnceLock<Result<MemoryCgroups, String>> = OnceLock::new();
    CGROUPS.get_or_init(MemoryCgroups::discover)
}

const BASE_OPTS: &std::ffi::CStr = c"size=1m,nr_inodes=4096,mode=0755";

impl RlimitSandbox {
    /// Find the interpreter, plan the job's root and start one job in it; a kernel or
    /// host that cannot do that is a one-line error naming what is missing.
    pub fn new(settings: RlimitSettings) -> Result<Self, SandboxError> {
        let python = match &settings.python {
            Some(p) => p.clone(),
            None => find_python().map_err(SandboxError::Setup)?,
        };
        static PREPARED: OnceLock<Mutex<HashMap<PreparedKey, Arc<Prepared>>>> = OnceLock::new();
        let mut cache = PREPARED.get_or_init(Mutex::default).lock().unwrap_or_else(|p| p.into_inner());
        let mut get = |shell: bool, plain: Option<&Arc<Prepared>>| -> Result<Arc<Prepared>, SandboxError> {
            let key = (python.clone(), settings.binds.clone(), shell);
            if let Some(p) = cache.get(&key) {
                return Ok(p.clone());
            }
            let p = Arc::new(prepare(&python, &settings.binds, shell)?);
            let sandbox = match plain {
                None => {
                    Self { settings: settings.clone(), python: python.clone(), prepared: p.clone(), shell_root: None, cgroups: cgroups() }
                }
                Some(plain) => Self {
                    settings: settings.clone(),
                    python: python.clone(),
                    prepared: plain.clone(),
                    shell_root: Some(p.clone()),
                    cgroups: cgroups(),
                },
            };
            if plain.is_none() || p.shell.is_some() {
                sandbox.probe(if plain.is_some() { 2 } else { 0 })?;
            }
            cache.insert(key, p.clone());
            Ok(p)
        };
        let prepared = get(false, None)?;
        let shell_root = if settings.shell { Some(get(true, Some(&prepared))?).filter(|p| p.shell.is_some()) } else { None };
        drop(cache);
        Ok(Self { settings, python, prepared, shell_root, cgroups: cgroups() })
    }

    /// How a job's memory is bounded as a whole: its memory cgroup, or why the host gives
    /// none (each process is still bounded by `RLIMIT_AS`).
    pub fn memory_cgroup(&self) -> Result<String, String> {
        self.cgroups.as_ref().map(MemoryCgroups::describe).map_err(Clone::clone)
    }

    /// The interpreter jobs run.
    pub fn python(&self) -> &Path {
        &self.python
    }

    /// Host paths bound read-only into every job's root.
    pub fn root_binds(&self) -> Vec<PathBuf> {
        self.prepared
            .op_paths
            .iter()
            .zip(&self.prepared.ops)
            .filter(|(_, op)| matches!(op, Op::Bind { .. } | Op::Overlay { .. }))
            .map(|(p, _)| p.clone())
            .collect()
    }

    /// Whether jobs get a user namespace (the trainer is not root) rather than a uid of their own.
    pub fn user_namespace(&self) -> bool {
        self.prepared.identity.is_some()
    }

    fn probe(&self, processes: u64) -> Result<(), SandboxError> {
        let probe = Job {
            limits: Limits { wall_timeout: Duration::from_secs(20), processes, ..Limits::default() },
            ..Job::python("probe.py", vec![JobFile { path: "probe.py".into(), contents: "print('ok')\n".into() }])
        };
        let how = if self.user_namespace() {
            "this user cannot create the namespaces jobs need: allow unprivileged user namespaces (sysctl user.max_user_namespaces > 0; \
             kernel.unprivileged_userns_clone=1 on Debian kernels; kernel.apparmor_restrict_unprivileged_userns=0 on Ubuntu), run as root"
        } else {
            "jobs need mount, PID, IPC, UTS, network and cgroup namespaces (root with CAP_SYS_ADMIN)"
        };
        let fail = |what: String| SandboxError::Setup(format!("cannot start jobs: {what}; {how}, or use `--sandbox wasm`"));
        match self.run(&probe) {
            Ok(out) if out.success() && out.stdout == "ok\n" => Ok(()),
            Ok(out) => {
                let last = out.stderr.lines().last().unwrap_or("").to_string();
                Err(fail(format!(
                    "{} cannot run in the job's root (exit {:?}, signal {:?}: {last})",
                    self.python.display(),
                    out.exit_code,
                    out.signal
                )))
            }
            Err(SandboxError::Setup(e) | SandboxError::Exhausted(e)) => Err(fail(e)),
            Err(e) => Err(fail(e.to_string())),
        }
    }

    fn describe(&self, p: &Prepared, (step, index, errno): crate::child::Failure) -> String {
        let err = std::io::Error::from_raw_os_error(errno);
        match (step, p.op_paths.get(index as usize)) {
            (Step::RootEntry | Step::ReadOnly, Some(path)) => format!("{} ({}): {err}", step.what(), path.display()),
            (Step::Exec, _) => format!("{} {}: {err}", step.what(), self.python.display()),
            _ => format!("{}: {err}", step.what()),
        }
    }
}

fn prepare(python: &Path, extra: &[PathBuf], with_shell: bool) -> Result<Prepared, SandboxError> {
    let setup = SandboxError::Setup;
    let mut plan = RootPlan::default();
    for path in interpreter_binds(python).map_err(setup)?.iter().chain(extra) {
        plan.bind(path).map_err(setup)?;
    }
    let mut shell = None;
    if with_shell && let Some((bash, binds)) = crate::shell::shell_binds() {
        let pytest = crate::shell::pytest_dir();
        for path in &binds {
            plan.bind(path).map_err(setup)?;
        }
        if let Some(dir) = &pytest {
            plan.bind_at(dir, Path::new(crate::shell::PYTEST_AT)).map_err(setup)?;
        }
        plan.symlink(Path::new(crate::shell::REPO), &Path::new(JOB_DIR).join("repo")).map_err(setup)?;
        shell = Some(ShellSupport {
            bash: bash.to_string_lossy().into_owned(),
            repo: crate::shell::REPO.into(),
            python_path: pytest.iter().map(|_| crate::shell::PYTEST_AT.to_string()).collect(),
        });
    }
    exposes_nothing_of_ours(&plan).map_err(setup)?;
    let c = |p: &Path| CString::new(p.as_os_str().as_bytes()).map_err(|_| setup(format!("path `{}` holds a NUL byte", p.display())));
    let (mut ops, mut op_paths) = (Vec::new(), Vec::new());
    for (path, entry) in plan.entries() {
        ops.push(match entry {
            Entry::Dir => Op::Dir { path: c(path)? },
            Entry::Symlink(target) => Op::Symlink { target: c(target)?, path: c(path)? },
            // A directory shown elsewhere than on the host: an overlay (mountinfo shows a
            // bind's host path); one at its own place: a bind.
            Entry::Bind { dir: true, .. } if plan.source(path) != path => {
                Op::Overlay { src: c(&Path::new("/oldroot").join(plan.source(path).strip_prefix("/").unwrap_or(path)))?, path: c(path)? }
            }
            Entry::Bind { dir, noexec } => Op::Bind {
                src: c(&Path::new("/oldroot").join(plan.source(path).strip_prefix("/").unwrap_or(path)))?,
                path: c(path)?,
                dir: *dir,
                noexec: *noexec,
            },
        });
        op_paths.push(path.to_path_buf());
    }
    let (euid, uid, gid) = (nix::unistd::geteuid().as_raw(), nix::unistd::getuid().as_raw(), nix::unistd::getgid().as_raw());
    let identity = (euid != 0).then(|| Identity::UserNs {
        uid_map: CString::new(format!("1000 {uid} 1\n")).expect("digits"),
        gid_map: CString::new(format!("1000 {gid} 1\n")).expect("digits"),
    });
    Ok(Prepared { python: c(python)?, ops, op_paths, identity, seccomp: crate::seccomp::filter(), shell })
}

/// The root must not hold the running binary (it embeds the task bank) or the working
/// directory (usually the checkout).
fn exposes_nothing_of_ours(plan: &RootPlan) -> Result<(), String> {
    let ours = [("the running program", std::env::current_exe().ok()), ("the working directory", std::env::current_dir().ok())];
    for bound in plan.bound() {
        for (what, path) in &ours {
            if let Some(path) = path.as_ref().and_then(|p| std::fs::canonicalize(p).ok())
                && path.starts_with(bound)
            {
                return Err(format!(
                    "the job's root would contain {what} ({}) through the bind of `{}`; bind less",
                    path.display(),
                    bound.display()
                ));
            }
        }
    }
    Ok(())
}

impl Sandbox for RlimitSandbox {
    fn name(&self) -> &str {
        "rlimit"
    }

    fn shell(&self) -> Option<&ShellSupport> {
        self.shell_root.as_ref().and_then(|p| p.shell.as_ref())
    }

    fn run(&self, job: &Job) -> Result<JobOutcome, SandboxError> {
        self.run_job(job, None)
    }

    fn run_with_endpoint(&self, job: &Job, endpoint: &Path) -> Result<JobOutcome, SandboxError> {
        use std::os::unix::fs::FileTypeExt;
        let setup = |why: String| SandboxError::Setup(format!("endpoint `{}`: {why}", endpoint.display()));
        if !endpoint.is_absolute() {
            return Err(setup("not an absolute path".into()));
        }
        match std::fs::metadata(endpoint) {
            Ok(m) if m.file_type().is_socket() => {}
            Ok(_) => return Err(setup("not a unix socket".into())),
            Err(e) => return Err(setup(e.to_string())),
        }
        let under_old_root = Path::new("/oldroot").join(endpoint.strip_prefix("/").unwrap_or(endpoint));
        let socket = CString::new(under_old_root.as_os_str().as_bytes()).map_err(|_| setup("the path holds a NUL byte".into()))?;
        self.run_job(job, Some(&socket))
    }
}

impl RlimitSandbox {
    /// Run `job`, connected to the endpoint socket at `endpoint` (under `/oldroot`) if any.
    fn run_job(&self, job: &Job, endpoint: Option<&std::ffi::CStr>) -> Result<JobOutcome, SandboxError> {
        let limits = clamp(&job.limits, &self.settings.limits);
        let nproc = job.limits.processes.min(self.settings.max_processes);
        let p = match &self.shell_root {
            Some(shell) if nproc > 0 => shell,
            _ => &self.prepared,
        };
        let (dirs, files) = job_files(&job.files)?;
        let uid = crate::uid::next(self.settings.uid_base);
        let root_identity = Identity::Root { uid, gid: uid };
        let identity = p.identity.as_ref().unwrap_or(&root_identity);
        let page = |n: usize| (n as u64).div_ceil(4096) * 4096;
        let stored: u64 = job.files.iter().map(|f| page(f.contents.len())).sum::<u64>() + job.stdin.as_ref().map_or(0, |s| page(s.len()));
        let size = stored + JOB_ROOM_FILES * limits.file_size_bytes.max(4096) + (64 << 10);
        let inodes = JOB_INODES + (files.len() + dirs.len()) as u64 + 2;
        let owner = match identity {
            Identity::Root { uid, gid } => format!(",uid={uid},gid={gid}"),
            Identity::UserNs { .. } => String::new(),
        };
        let job_opts = CString::new(format!("size={size},nr_inodes={inodes},mode=0700{owner}")).expect("digits");

        let nul = |what: &str| SandboxError::Setup(format!("the job's {what} holds a NUL byte"));
        let mut argv_c = vec![p.python.clone()];
        for a in ["-I", "-S", "-B", job.entry.as_str()].into_iter().chain(job.args.iter().map(String::as_str)) {
            argv_c.push(CString::new(a).map_err(|_| nul("command line"))?);
        }
        let envp_c: Vec<CString> = [c"PATH=/usr/bin:/bin", c"HOME=/job", c"LANG=C.UTF-8"].iter().map(|s| CString::from(*s)).collect();
        let ptrs = |v: &[CString]| v.iter().map(|s| s.as_ptr()).chain(std::iter::once(std::ptr::null())).collect::<Vec<_>>();

        // The memory cgroup of a job of several processes: its address space, its tmpfs, and
        // room for the rest. A job of one process (graded code) is bounded by its rlimits,
        // its tmpfs and the filter (no SysV memory, 64 descriptors) and goes without: moving
        // a process into a cgroup waits for an RCU grace period (~10 ms a job here).
        let cgroup = match self.cgroups {
            Ok(cgroups) if nproc > 0 => {
                let limit = limits.memory_bytes.saturating_add(size).saturating_add(CGROUP_SLACK);
                Some(cgroups.create(limit).map_err(|e| {
                    let msg = format!("creating the job's memory cgroup: {e}");
                    if e.raw_os_error().is_some_and(exhausted) { SandboxError::Exhausted(msg) } else { SandboxError::Setup(msg) }
                })?)
            }
            _ => None,
        };
        let cgroup_fd = cgroup.as_ref().and_then(|c| c.procs.as_ref()).map(|fd| fd.as_fd());

        let (out_r, out_w) = pipe()?;
        let (err_r, err_w) = pipe()?;
        let (report_r, report_w) = pipe()?;
        set_nonblocking(&out_r)?;
        set_nonblocking(&err_r)?;
        let plan = ChildPlan {
            identity,
            ops: &p.ops,
            base_opts: BASE_OPTS,
            job_opts,
            dirs,
            files,
            stdin: job.stdin.as_deref().map(str::as_bytes),
            python: &p.python,
            argv: ptrs(&argv_c),
            envp: ptrs(&envp_c),
            stdout: out_w.as_fd(),
            stderr: err_w.as_fd(),
            report: report_w.as_fd(),
            rlimits: [
                (Resource::RLIMIT_CPU, limits.cpu_seconds.max(1)),
                (Resource::RLIMIT_AS, limits.memory_bytes),
                (Resource::RLIMIT_FSIZE, limits.file_size_bytes),
                (Resource::RLIMIT_CORE, 0),
                (Resource::RLIMIT_NOFILE, 64),
            ],
            nproc,
            seccomp: &p.seccomp,
            cgroup: cgroup_fd,
            endpoint,
        };
        let mut flags = libc::CLONE_NEWNS | libc::CLONE_NEWPID | libc::CLONE_NEWIPC | libc::CLONE_NEWUTS | libc::CLONE_NEWNET;
        // With a memory cgroup the child makes its cgroup namespace itself, once inside it.
        if cgroup.is_none() {
            flags |= libc::CLONE_NEWCGROUP;
        }
        if p.identity.is_some() {
            flags |= libc::CLONE_NEWUSER;
        }

        let start = Instant::now();
        // The child's ends of the pipes close here once it runs, so that the report pipe
        // reads EOF when it execs and the output pipes when the job ends.
        let started = spawn(&plan, flags);
        drop((out_w, err_w, report_w));
        let child = match started.and_then(|child| setup_done(child, report_r)) {
            Ok(child) => child,
            Err(SpawnError::Clone(errno)) => {
                let why = match errno {
                    libc::ENOSPC | libc::EUSERS => " (a namespace limit is reached, e.g. user.max_user_namespaces)",
                    libc::EPERM | libc::EINVAL => " (the kernel or a security policy refuses new namespaces here)",
                    _ => "",
                };
                let msg = format!("clone into new namespaces: {}{why}", std::io::Error::from_raw_os_error(errno));
                return Err(if exhausted(errno) { SandboxError::Exhausted(msg) } else { SandboxError::Setup(msg) });
            }
            Err(SpawnError::Child(failure)) => {
                let msg = self.describe(p, failure);
                return Err(if exhausted(failure.2) { SandboxError::Exhausted(msg) } else { SandboxError::Setup(msg) });
            }
            Err(SpawnError::Io(e)) => return Err(e.into()),
        };
        #[cfg(test)]
        crate::attacks::support::note_job(&child);
        let ended = collect(&child, out_r, err_r, start + limits.wall_timeout, limits.output_bytes);
        let wall_ms = start.elapsed().as_millis() as u64;
        drop(cgroup);

        let (exit_code, signal) = decode(ended.status);
        Ok(JobOutcome {
            exit_code,
            signal,
            timed_out: ended.timed_out,
            stdout: ended.stdout.text(),
            stderr: ended.stderr.text(),
            stdout_truncated: ended.stdout.truncated,
            stderr_truncated: ended.stderr.truncated,
            wall_ms,
            cpu_ms: Some(ms(ended.usage.ru_utime) + ms(ended.usage.ru_stime)),
            max_rss_kb: Some(ended.usage.ru_maxrss.max(0) as u64),
        })
    }
}

/// Errors that mean the host ran short (memory, disk, descriptors, processes, namespaces),
/// not that the sandbox is broken.
fn exhausted(errno: i32) -> bool {
    matches!(errno, libc::ENOMEM | libc::ENOSPC | libc::EAGAIN | libc::EMFILE | libc::ENFILE | libc::EDQUOT | libc::EUSERS)
}

/// The job's files as the child creates them: directories (parents first), then files,
/// relative to the job directory.
fn job_files(files: &[JobFile]) -> Result<JobFiles<'_>, SandboxError> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    let mut out = Vec::new();
    for file in files {
        let rel = Path::new(&file.path);
        if rel.as_os_str().is_empty() || !rel.components().all(|c| matches!(c, Component::Normal(_))) {
            return Err(SandboxError::Setup(format!("job file path `{}` must be relative, without `..`", file.path)));
        }
        for parent in rel.ancestors().skip(1).filter(|a| !a.as_os_str().is_empty()).collect::<Vec<_>>().into_iter().rev() {
            if !dirs.iter().any(|d| d == parent) {
                dirs.push(parent.to_path_buf());
            }
        }
        let path = CString::new(rel.as_os_str().as_bytes())
            .map_err(|_| SandboxError::Setup(format!("job file path `{}` holds a NUL byte", file.path)))?;
        out.push((path, file.contents.as_bytes()));
    }
    let dirs = dirs.iter().map(|d| CString::new(d.as_os_str().as_bytes()).expect("checked above")).collect();
    Ok((dirs, out))
}

/// A job's limits, each lowered to the sandbox's ceiling.
fn clamp(job: &Limits, ceiling: &Limits) -> Limits {
    Limits {
        wall_timeout: job.wall_timeout.min(ceiling.wall_timeout),
        cpu_seconds: job.cpu_seconds.min(ceiling.cpu_seconds),
        memory_bytes: job.memory_bytes.min(ceiling.memory_bytes),
        file_size_bytes: job.file_size_bytes.min(ceiling.file_size_bytes),
        output_bytes: job.output_bytes.min(ceiling.output_bytes),
        processes: job.processes,
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
