//! The answer-key hunt: a "fix" with no logic at all that looks the hidden cases up — in
//! the task bank's files, in the running binary (which embeds the bank), through every
//! process's `/proc` entries, open descriptors, environment and working directory, the
//! mount table, well-known checkout paths and then a walk of the filesystem — and returns
//! the expected values it finds. It must earn 0 on every task of both gyms under both
//! sandboxes. To show the hunt itself works (a test that could not fail proves nothing), it
//! runs first without isolation, where it earns 1 on every task.
//!
//! A grading job has 5 s of CPU, and a hunt on every task must stay quick, so each hunt's
//! search is cut at [`BUDGET`] CPU seconds; the sweep tests below make up for it: one job per
//! sandbox reads every file it can reach and every process's binary, environment and open
//! files, and reports any that holds the bank.

use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::Arc;

use arl_core::config::{EnvConfig, SandboxConfig};
use arl_core::registry::{self, EnvPlugin, SandboxPlugin};
use arl_core::toolcall::parse_turn;
use arl_core::{EpisodeStats, Job, JobOutcome, Sandbox, SandboxError, Split, Step, Task};
use serde_json::json;

/// The hunt, as a module defining `FUNCTION`. It digs the job's cases out of the grader's
/// frames, so it can tell apart templates whose cases overlap.
const HUNT: &str = r#"
import itertools, json, os, stat, sys, time

_T0 = time.process_time()
_BUDGET = SECONDS_OF_SEARCH
_TABLE = None


def _job_cases():
    f = sys._getframe()
    while f is not None:
        c = f.f_locals.get("cases")
        if isinstance(c, list) and all(isinstance(x, str) for x in c):
            return [json.dumps(json.loads(x)) for x in c]
        f = f.f_back
    return None


def _tables(data):
    # Every "--- hidden" section of the bank format, wherever it is (a bank file, a binary).
    out = []
    at = data.find(b"--- hidden")
    while at >= 0:
        region = data[at:at + 8192].decode("utf-8", "replace").split("\n")[1:]
        table = {}
        for line in region:
            if line.startswith("===") or line.startswith("---") or "\x00" in line:
                break
            if " => " in line:
                a, e = line.split(" => ", 1)
                try:
                    table[json.dumps(json.loads(a))] = json.loads(e)
                except Exception:
                    pass
        if table:
            out.append(table)
        at = data.find(b"--- hidden", at + 10)
    return out


def _read(path):
    try:
        st = os.stat(path)
        # Regular files only: a pipe or a device would block or never end.
        if not stat.S_ISREG(st.st_mode) or st.st_size > (512 << 20):
            return b""
        with open(path, "rb") as f:
            return f.read()
    except Exception:
        return b""


def _proc_places(pids):
    # What /proc tells of these processes: binaries, working and root dirs, open files,
    # paths in their command lines and environments.
    for pid in pids:
        for link in ("exe", "cwd", "root"):
            try:
                yield os.readlink(f"/proc/{pid}/{link}")
            except Exception:
                pass
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                try:
                    yield os.readlink(f"/proc/{pid}/fd/{fd}")
                except Exception:
                    pass
        except Exception:
            pass
        for name in ("cmdline", "environ"):
            try:
                for item in open(f"/proc/{pid}/{name}", "rb").read().split(b"\0"):
                    yield item.decode("utf-8", "replace").split("=", 1)[-1]
            except Exception:
                pass


def _near():
    # The grader's own process and its parent (the trainer) first.
    parent = str(os.getppid()) if hasattr(os, "getppid") else "1"
    yield from _proc_places(["self", parent])
    for v in ("PWD", "OLDPWD", "HOME", "CARGO_MANIFEST_DIR", "CARGO_TARGET_DIR"):
        yield os.environ.get(v)
    yield os.getcwd()


def _far():
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except Exception:
        pids = []
    yield from _proc_places(pids)
    try:
        for line in open("/proc/self/mountinfo"):
            parts = line.split()
            yield parts[3]
            yield parts[4]
    except Exception:
        pass
    yield from ["/work", "/root", "/home", "/src", "/repo", "/app", "/opt", "/srv", "/mnt", "/tmp", "/var/tmp"]


def _unique(places):
    seen = set()
    for p in places:
        if p and p.startswith("/") and p not in seen:
            seen.add(p)
            yield p


def _ancestors(p):
    while True:
        yield p
        if p in ("/", ""):
            return
        p = os.path.dirname(p)


def _banks(place):
    # A checkout anywhere above a place: its task bank.
    for up in _ancestors(place if os.path.isdir(place) else os.path.dirname(place)):
        bank = os.path.join(up, "envs", "tasks", "bank")
        if os.path.isdir(bank):
            for n in sorted(os.listdir(bank)):
                yield os.path.join(bank, n)


def _walk(place):
    for d, dirs, files in os.walk(place):
        if d == "/":
            dirs[:] = [x for x in dirs if x not in ("proc", "sys")]
        for n in files:
            yield os.path.join(d, n)
        if time.process_time() - _T0 > _BUDGET:
            return


def _files():
    # Cheapest first: banks in a checkout above any place near the grader, then the files
    # named there (binaries, open files); the same farther out; then every directory
    # named; then everything.
    near = list(_unique(_near()))
    far = [p for p in _unique(_far()) if p not in near]
    for group in (near, far):
        for place in group:
            yield from _banks(place)
        for place in group:
            if os.path.isfile(place):
                yield place
    for place in near + far:
        if os.path.isdir(place) and place != "/":
            yield from _walk(place)
    yield from _walk("/")


def _search(cases):
    done = set()
    for path in _files():
        if time.process_time() - _T0 > _BUDGET:
            return {}
        if path in done:
            continue
        done.add(path)
        for table in _tables(_read(path)):
            if all(c in table for c in cases):
                return table
    return {}


def _answer(args):
    global _TABLE
    key = json.dumps(list(args))
    if _TABLE is None:
        _TABLE = _search(_job_cases() or [key])
    return _TABLE.get(key)


def FUNCTION(*args):
    return _answer(args)
"#;

/// CPU seconds of searching per grading job (of its 5).
const BUDGET: &str = "0.5";

fn hunt(function: &str) -> String {
    HUNT.replace("FUNCTION", function).replace("SECONDS_OF_SEARCH", BUDGET)
}

/// Reads everything a job can reach and prints `hit <path>` for each that holds the bank
/// (its format, a template's header, a template's source), then a summary line.
const SWEEP: &str = r#"
import json, os, stat, sys
SIGNS = [b"--- hidden", b"=== minmax/largest", b"def largest(values):"]
root = sys.argv[1]
me = os.path.realpath(sys.argv[0])
files = size = errors = 0
def check(path):
    global files, size, errors
    try:
        if os.path.realpath(path) == me:
            return
        # Regular files only: a pipe (our own stdout, through /proc) would block.
        if not stat.S_ISREG(os.stat(path).st_mode):
            return
        with open(path, "rb") as f:
            data = f.read()
    except Exception:
        errors += 1
        return
    files += 1
    size += len(data)
    if any(s in data for s in SIGNS):
        print("hit", path)
for d, dirs, names in os.walk(root, onerror=lambda e: None):
    if d == "/":
        dirs[:] = [x for x in dirs if x not in ("proc", "sys")]
    for n in names:
        check(os.path.join(d, n))
try:
    pids = [p for p in os.listdir("/proc") if p.isdigit()]
except Exception:
    pids = []
for pid in pids:
    for name in ("exe", "cmdline", "environ"):
        check(f"/proc/{pid}/{name}")
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            check(f"/proc/{pid}/fd/{fd}")
    except Exception:
        pass
print(json.dumps({"files": files, "bytes": size, "unreadable": errors, "processes": len(pids)}))
"#;

/// A sandbox whose ceilings let the sweep run to the end.
fn roomy(name: &str) -> Arc<dyn Sandbox> {
    sandbox_with(name, SandboxConfig { timeout_s: 120.0, cpu_s: 60, output_kb: 1024, ..SandboxConfig::default() })
}

/// Run the sweep over `root` in `sandbox`: the paths that hold the bank, and the summary.
fn sweep(sandbox: &dyn Sandbox, root: &str) -> (Vec<String>, serde_json::Value) {
    let limits = arl_core::Limits {
        wall_timeout: std::time::Duration::from_secs(120),
        cpu_seconds: 60,
        output_bytes: 1 << 20,
        ..arl_core::Limits::default()
    };
    let files = vec![
        arl_core::JobFile { path: "sweep.py".into(), contents: SWEEP.into() },
        arl_core::JobFile { path: "decoy.txt".into(), contents: "a file the sweep must count\n".into() },
    ];
    let job = Job { args: vec![root.into()], limits, ..Job::python("sweep.py", files) };
    let out = sandbox.run(&job).unwrap();
    assert!(out.success() && !out.stdout_truncated, "{out:?}");
    let hits = out.stdout.lines().filter_map(|l| l.strip_prefix("hit ")).map(String::from).collect();
    let summary = serde_json::from_str(out.stdout.lines().last().unwrap_or("")).unwrap_or_else(|_| panic!("{out:?}"));
    (hits, summary)
}

/// No isolation at all: `python3 -I -S -B` in a temporary directory, as the trainer's user,
/// seeing the host (roughly the old `rlimit` sandbox, minus its uid drop and rlimits).
struct Unsandboxed;

impl Sandbox for Unsandboxed {
    fn name(&self) -> &str {
        "unsandboxed"
    }

    fn run(&self, job: &Job) -> Result<JobOutcome, SandboxError> {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("arl-unsandboxed-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        for f in &job.files {
            std::fs::write(dir.join(&f.path), &f.contents)?;
        }
        let mut child = Command::new("/usr/bin/python3")
            .args(["-I", "-S", "-B", &job.entry])
            .args(&job.args)
            .current_dir(&dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        child.stdin.take().expect("piped").write_all(job.stdin.as_deref().unwrap_or("").as_bytes())?;
        let out = child.wait_with_output()?;
        std::fs::remove_dir_all(&dir)?;
        Ok(JobOutcome {
            exit_code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into(),
            stderr: String::from_utf8_lossy(&out.stderr).into(),
            ..JobOutcome::default()
        })
    }
}

fn sandbox(name: &str) -> Arc<dyn Sandbox> {
    sandbox_with(name, SandboxConfig::default())
}

fn sandbox_with(name: &str, config: SandboxConfig) -> Arc<dyn Sandbox> {
    if name == "unsandboxed" {
        return Arc::new(Unsandboxed);
    }
    arl_plugins::link();
    let config = SandboxConfig { name: name.into(), ..config };
    (registry::get::<SandboxPlugin>(name).unwrap().build)(&config).unwrap_or_else(|e| panic!("{e}"))
}

fn every_task(env: &dyn arl_core::Env) -> Vec<Task> {
    let mut tasks = env.tasks(Split::Train).unwrap();
    tasks.extend(env.tasks(Split::Heldout).unwrap());
    tasks
}

/// The tools gym: the hunt written over `<fn>.py` with the Write tool, then a final answer.
fn tools_rewards(sandbox: Arc<dyn Sandbox>) -> Vec<(String, f64)> {
    let config = EnvConfig { name: "tools".into(), ..EnvConfig::default() };
    let env = (registry::get::<EnvPlugin>("tools").unwrap().build)(&config, sandbox).unwrap();
    every_task(env.as_ref())
        .iter()
        .map(|task| {
            let function = task.data["function"].as_str().unwrap();
            let file = format!("/repo/{function}.py");
            let read = json!({"name": "Read", "arguments": {"file_path": file}});
            let write = json!({"name": "Write", "arguments": {"file_path": file, "content": hunt(function)}});
            let mut session = env.reset(task).unwrap();
            let turns = [format!("<tool_call>\n{read}\n</tool_call>\n<tool_call>\n{write}\n</tool_call>"), "Done.".to_string()];
            let mut reward = None;
            for text in &turns {
                match session.step(&parse_turn(text, &env.tools(), 4)).unwrap() {
                    Step::Done(outcome) => reward = Some(outcome.reward),
                    Step::Observe(results) => {
                        for r in results {
                            assert!(matches!(r.outcome, arl_core::ToolOutcome::Ok(_)), "{}: {:?}", r.name, r.outcome);
                        }
                    }
                }
            }
            (task.id.clone(), reward.expect("the episode ended"))
        })
        .collect()
}

/// The edit gym offers only its authored edits, so a policy cannot submit the hunt there;
/// its tasks are graded as the edit session grades them (`episode_reward`), on the hunt.
fn edit_rewards(sandbox: Arc<dyn Sandbox>) -> Vec<(String, f64)> {
    let config = EnvConfig { name: "edit".into(), ..EnvConfig::default() };
    let env = (registry::get::<EnvPlugin>("edit").unwrap().build)(&config, Arc::clone(&sandbox)).unwrap();
    every_task(env.as_ref())
        .iter()
        .map(|task| {
            let bug = arl_tasks::BugTask::from_task(task).unwrap();
            let reward = arl_tasks::episode_reward(sandbox.as_ref(), &bug, &hunt(&bug.function), &mut EpisodeStats::default());
            (task.id.clone(), reward)
        })
        .collect()
}

fn both_gyms(name: &str) -> Vec<(String, f64)> {
    let s = sandbox(name);
    std::thread::scope(|scope| {
        let tools = scope.spawn(|| tools_rewards(Arc::clone(&s)));
        let mut all: Vec<(String, f64)> = edit_rewards(Arc::clone(&s)).into_iter().map(|(id, r)| (format!("edit/{id}"), r)).collect();
        all.extend(tools.join().unwrap().into_iter().map(|(id, r)| (format!("tools/{id}"), r)));
        all
    })
}

#[test]
fn the_answer_key_hunt_pays_off_without_isolation() {
    let rewards = both_gyms("unsandboxed");
    assert_eq!(rewards.len(), 2 * 144, "every train and held-out task of both gyms");
    let missed: Vec<&String> = rewards.iter().filter(|(_, r)| *r != 1.0).map(|(id, _)| id).collect();
    assert!(missed.is_empty(), "the hunt should find every answer on an open host; missed {missed:?}");
}

#[test]
fn the_answer_key_hunt_earns_nothing_under_rlimit() {
    let rewards = both_gyms("rlimit");
    assert_eq!(rewards.len(), 2 * 144);
    let paid: Vec<&(String, f64)> = rewards.iter().filter(|(_, r)| *r != 0.0).collect();
    assert!(paid.is_empty(), "the answer key was in reach: {paid:?}");
}

#[test]
fn the_answer_key_hunt_earns_nothing_under_wasm() {
    let rewards = both_gyms("wasm");
    assert_eq!(rewards.len(), 2 * 144);
    let paid: Vec<&(String, f64)> = rewards.iter().filter(|(_, r)| *r != 0.0).collect();
    assert!(paid.is_empty(), "the answer key was in reach: {paid:?}");
}

#[test]
fn the_sweep_finds_the_bank_where_it_is_in_reach() {
    // On the host, over the checkout's envs/: the bank files and this test's own sources.
    let envs = concat!(env!("CARGO_MANIFEST_DIR"), "/../envs");
    let (hits, summary) = sweep(&Unsandboxed, envs);
    assert!(hits.iter().any(|h| h.ends_with("tasks/bank/minmax.txt")), "{hits:?} {summary}");
    // And through /proc: this test binary embeds the bank.
    assert!(hits.iter().any(|h| h.starts_with("/proc/") && h.ends_with("/exe")), "{hits:?}");
}

#[test]
fn nothing_a_job_can_read_holds_the_bank_under_rlimit() {
    let (hits, summary) = sweep(roomy("rlimit").as_ref(), "/");
    assert!(hits.is_empty(), "{hits:?}");
    assert!(summary["files"].as_u64().unwrap() > 1000 && summary["processes"] == 1, "it read the whole root: {summary}");
}

#[test]
fn nothing_a_job_can_read_holds_the_bank_under_wasm() {
    let (hits, summary) = sweep(roomy("wasm").as_ref(), "/");
    assert!(hits.is_empty(), "{hits:?}");
    assert!(summary["files"].as_u64().unwrap() >= 1 && summary["processes"] == 0, "it read the job dir (the decoy): {summary}");
}
