//! What the attack tests share: the sandbox, job runners, and the check that nothing of a
//! job outlived it (no process left in its PID or mount namespace).

use std::cell::RefCell;
use std::sync::OnceLock;
use std::time::Duration;

use arl_core::{Job, JobFile, JobOutcome, Limits, Sandbox};

use crate::spawn::Child;
use crate::{RlimitSandbox, RlimitSettings};

/// Held by tests that must not overlap (see `attack_uids_never_repeat_within_a_run`).
pub static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

pub fn sandbox() -> &'static RlimitSandbox {
    static SANDBOX: OnceLock<RlimitSandbox> = OnceLock::new();
    SANDBOX.get_or_init(|| RlimitSandbox::new(RlimitSettings::default()).unwrap_or_else(|e| panic!("{e}")))
}

pub fn run_with(code: &str, limits: Limits) -> JobOutcome {
    let job = Job { limits, ..Job::python("main.py", vec![JobFile { path: "main.py".into(), contents: code.into() }]) };
    let out = sandbox().run(&job).expect("the sandbox runs the job");
    assert_nothing_outlived();
    out
}

/// Short limits so the suite stays quick: 3 s wall, 1 s CPU.
pub fn run(code: &str) -> JobOutcome {
    run_with(code, Limits { wall_timeout: Duration::from_secs(3), cpu_seconds: 1, ..Limits::default() })
}

pub fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// The namespaces of the last job this thread started, held open: a namespace's inode
/// number is reused once it is freed, so holding it is what makes the scan below exact.
#[derive(Debug)]
pub struct JobTrace {
    pub pid_ns: String,
    pub mnt_ns: String,
    _held: Vec<std::fs::File>,
}

thread_local! {
    static LAST: RefCell<Option<JobTrace>> = const { RefCell::new(None) };
}

/// Called by the sandbox right after a job's first process started.
pub fn note_job(child: &Child) {
    let mut held = Vec::new();
    let mut ns = |kind: &str| {
        let path = format!("/proc/{}/ns/{kind}", child.pid);
        if let Ok(f) = std::fs::File::open(&path) {
            held.push(f);
        }
        std::fs::read_link(&path).map(|p| p.display().to_string()).unwrap_or_default()
    };
    let (pid_ns, mnt_ns) = (ns("pid"), ns("mnt"));
    LAST.with(|l| *l.borrow_mut() = Some(JobTrace { pid_ns, mnt_ns, _held: held }));
}

/// Every host process in one of the job's namespaces.
pub fn survivors(trace: &JobTrace) -> Vec<i32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else { continue };
        for (kind, want) in [("pid", &trace.pid_ns), ("mnt", &trace.mnt_ns)].into_iter().filter(|(_, w)| !w.is_empty()) {
            if std::fs::read_link(format!("/proc/{pid}/ns/{kind}")).is_ok_and(|l| l.display().to_string() == *want) {
                found.push(pid);
            }
        }
    }
    found
}

/// After `run` returned: no process is left in the last job's PID or mount namespace (so its
/// tmpfs, its IPC objects and its sockets are gone with it).
pub fn assert_nothing_outlived() {
    let trace = LAST.with(|l| l.borrow_mut().take()).expect("a job ran on this thread");
    let ours = std::fs::read_link("/proc/self/ns/pid").unwrap().display().to_string();
    // A job that exits before the trace reads a namespace leaves that entry empty (a quick job
    // on a loaded machine); at least one namespace must have been caught, and never ours.
    assert!(!(trace.pid_ns.is_empty() && trace.mnt_ns.is_empty()) && trace.pid_ns != ours, "{trace:?}");
    let left = survivors(&trace);
    assert!(left.is_empty(), "processes outlived the job {trace:?}: {left:?}");
}

/// Lines of a job's stdout.
pub fn lines(out: &JobOutcome) -> Vec<&str> {
    out.stdout.lines().collect()
}
