//! The attack suite of `rlimit` (arl-sandbox's attacks/), case by case, against `wasm`.
//! Every attack must be contained, none may hang, and after each nothing of the job may be
//! left (its directory removed, no descriptor into it: `assert_nothing_outlived`, run by
//! every `run`). Where a case cannot apply to WASI (no uids, no processes, no signals, no
//! /proc, no ctypes), the test asserts what the guest sees instead.
//! Needs `scripts/setup/python-wasm.sh` (scripts/test.sh runs it).

mod classes;
mod limits;
mod startup;

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use arl_core::{Job, JobFile, JobOutcome, Limits, Sandbox};

use crate::{WasmSandbox, WasmSettings};

fn sandbox() -> &'static WasmSandbox {
    static SANDBOX: OnceLock<WasmSandbox> = OnceLock::new();
    // Ceilings above what any test here asks (the default's are 5 s CPU and 10 s wall), so
    // each test's own limits are the ones that hold.
    let limits = Limits { cpu_seconds: 20, wall_timeout: Duration::from_secs(60), ..Limits::default() };
    SANDBOX.get_or_init(|| WasmSandbox::new(WasmSettings { limits, ..WasmSettings::default() }).unwrap_or_else(|e| panic!("{e}")))
}

/// The last job's directory on this thread and the size of each file in it at the end.
#[derive(Clone, Debug)]
struct JobTrace {
    dir: PathBuf,
    sizes: Vec<(PathBuf, u64)>,
}

impl JobTrace {
    /// The size of the file whose name is `name` (0 if there is none).
    fn size(&self, name: &str) -> u64 {
        self.sizes.iter().filter(|(p, _)| p.file_name().is_some_and(|n| n == name)).map(|(_, s)| *s).max().unwrap_or(0)
    }
}

thread_local! {
    static LAST: RefCell<Option<JobTrace>> = const { RefCell::new(None) };
}

/// Called by the sandbox just before it removes a job's directory.
pub fn note_job_dir(dir: &Path) {
    // find(1) walks relative to directory descriptors, so host paths longer than PATH_MAX
    // are measured too (std::fs::read_dir of an absolute path is not).
    let listing = std::process::Command::new("find").arg(dir).args(["-type", "f", "-printf", "%s %f\\n"]).output().expect("find");
    let found: Vec<(PathBuf, u64)> = String::from_utf8_lossy(&listing.stdout)
        .lines()
        .filter_map(|l| l.split_once(' ').and_then(|(size, name)| Some((PathBuf::from(name), size.parse().ok()?))))
        .collect();
    let trace = JobTrace { dir: dir.to_path_buf(), sizes: found };
    LAST.with(|l| *l.borrow_mut() = Some(trace));
}

fn last_job() -> JobTrace {
    LAST.with(|l| l.borrow().clone()).expect("a job ran on this thread")
}

/// After `run` returned: the job's directory is gone and no descriptor of ours points into it.
fn assert_nothing_outlived() {
    let trace = last_job();
    assert!(!trace.dir.exists(), "the job directory {} outlived the job", trace.dir.display());
    let ours: Vec<PathBuf> =
        std::fs::read_dir("/proc/self/fd").unwrap().flatten().filter_map(|e| std::fs::read_link(e.path()).ok()).collect();
    let into: Vec<&PathBuf> = ours.iter().filter(|p| p.starts_with(&trace.dir)).collect();
    assert!(into.is_empty(), "descriptors into the job directory outlived it: {into:?}");
}

fn run_with(code: &str, limits: Limits) -> JobOutcome {
    let job = Job { limits, ..Job::python("main.py", vec![JobFile { path: "main.py".into(), contents: code.into() }]) };
    let out = sandbox().run(&job).expect("the sandbox runs the job");
    assert_nothing_outlived();
    out
}

fn lines(out: &JobOutcome) -> Vec<&str> {
    out.stdout.lines().collect()
}

/// Short limits so the suite stays quick: 3 s wall, 1 s CPU.
fn run(code: &str) -> JobOutcome {
    run_with(code, Limits { wall_timeout: Duration::from_secs(3), cpu_seconds: 1, ..Limits::default() })
}

// The attacks every sandbox must contain (arl_sandbox::conformance).
arl_sandbox::conformance_tests!(run, run_with);

#[test]
fn a_job_prints_what_it_computes() {
    let out = run("print(sum(range(10)))\n");
    assert_eq!((out.exit_code, out.stdout.as_str()), (Some(0), "45\n"), "{out:?}");
}

#[test]
fn an_uncaught_exception_exits_one_with_its_traceback() {
    let out = run("raise ValueError('boom')\n");
    assert_eq!(out.exit_code, Some(1), "{out:?}");
    assert!(out.stderr.contains("ValueError: boom"), "{out:?}");
}

#[test]
fn stdin_reaches_the_job_and_files_sit_beside_it() {
    let job = Job {
        stdin: Some("41".into()),
        ..Job::python(
            "main.py",
            vec![
                JobFile { path: "main.py".into(), contents: "import os, sys\nsys.path.insert(0, os.getcwd())  # -I keeps the script's directory off sys.path\nimport helper\nprint(helper.inc(int(input())))\n".into() },
                JobFile { path: "helper.py".into(), contents: "def inc(x):\n    return x + 1\n".into() },
            ],
        )
    };
    let out = sandbox().run(&job).unwrap();
    assert_eq!(out.stdout, "42\n", "{out:?}");
}

#[test]
fn the_job_sees_only_its_own_directory_as_root() {
    // No uids to drop in WASI (`os.getuid` does not exist); the job directory is the guest's
    // `/`, and the host's temp directory (the parent of the job directory) is out of reach.
    let out = run(
        "import os\nprint(hasattr(os, 'getuid'), os.getcwd(), os.getcwd() == os.environ['HOME'])\nprint(sorted(os.listdir('/')))\nopen('made.txt', 'w').write('x')\nprint(sorted(os.listdir('/')))\ntry:\n    print(sorted(os.listdir('/..')))\nexcept OSError as e:\n    print('refused', e.errno)\n",
    );
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.first().copied(), Some("False / True"), "{out:?}");
    assert_eq!(lines.get(1..3), Some(&["['main.py']", "['made.txt', 'main.py']"][..]), "{out:?}");
    let up = lines.get(3).copied().unwrap_or_default();
    assert!(up == "['made.txt', 'main.py']" || up.starts_with("refused"), "`/..` is `/` or nothing: {out:?}");
}

/// With pytest preopened (`WasmSettings::site_packages`, as `from_config` sets it where
/// `scripts/setup/pytest.sh` ran): the packages jobs see — their copy compiled for this
/// interpreter (`crate::bytecode`) — are importable, sources and bytecode read-only, and lead
/// nowhere; the original is untouched too.
#[test]
fn attack_the_preopened_site_packages_and_their_bytecode_are_read_only() {
    let packages = arl_core::pytest_dir().expect("no pytest in ~/.cache/arl/assets/pytest; run scripts/setup/pytest.sh");
    let limits = Limits { cpu_seconds: 20, wall_timeout: Duration::from_secs(60), ..Limits::default() };
    let settings = WasmSettings { site_packages: Some(packages.clone()), limits: limits.clone(), ..WasmSettings::default() };
    let sandbox = WasmSandbox::new(settings).unwrap();
    assert_eq!(sandbox.python_packages(), Some(arl_core::PYTEST_AT));
    let seen = sandbox.packages().expect("packages").to_path_buf();
    assert_ne!(seen, packages, "jobs see the compiled copy");
    let pyc = seen.join("pytest/__pycache__/__init__.cpython-312.pyc");
    let code = r#"
import os, sys
sp = "/opt/arl/site-packages"
sys.path.insert(0, sp)
import pytest
print("import", pytest.__version__)
print(sorted(os.listdir("/")))
for where, file in [("packages", sp + "/pytest/__init__.py"), ("bytecode", pytest.__spec__.cached)]:
    top = os.path.dirname(file)
    for what, act in [
        ("create", lambda: open(top + "/evil.py", "w").write("x")),
        ("overwrite", lambda: open(file, "w").write("x")),
        ("append", lambda: open(file, "a").write("x")),
        ("mkdir", lambda: os.mkdir(top + "/d")),
        ("remove", lambda: os.remove(file)),
        ("rename", lambda: os.rename(file, "/stolen.py")),
    ]:
        try:
            act()
            print(where, what, "done")
        except OSError as e:
            print(where, what, "refused")
for top in [sp, os.path.dirname(pytest.__spec__.cached)]:
    try:
        print("escape", sorted(os.listdir(top + "/../../../..")))
    except OSError:
        print("escape refused")
"#;
    let job = Job { files: vec![JobFile { path: "main.py".into(), contents: code.into() }], ..Job::python("main.py", Vec::new()) };
    let sources = |d: &Path| std::fs::read(d.join("pytest/__init__.py")).unwrap();
    let before = (sources(&packages), sources(&seen), std::fs::read(&pyc).unwrap());
    let out = sandbox.run(&Job { limits, ..job }).unwrap();
    assert_nothing_outlived();
    let got: Vec<&str> = out.stdout.lines().collect();
    assert!(got.first().is_some_and(|l| l.starts_with("import 9.")), "{out:?}");
    assert_eq!(got.get(1).copied(), Some("['main.py']"), "{out:?}");
    for where_ in ["packages", "bytecode"] {
        for what in ["create", "overwrite", "append", "mkdir", "remove", "rename"] {
            assert!(got.contains(&format!("{where_} {what} refused").as_str()), "{where_} {what}: {out:?}");
        }
    }
    // `..` above the packages or the bytecode is the job's own root at most.
    let escapes: Vec<&str> = got.iter().filter(|l| l.starts_with("escape")).copied().collect();
    assert_eq!(escapes.len(), 2, "{out:?}");
    assert!(escapes.iter().all(|e| *e == "escape refused" || *e == "escape ['main.py']"), "{out:?}");
    assert_eq!((sources(&packages), sources(&seen), std::fs::read(&pyc).unwrap()), before);
    for top in [packages.join("pytest"), seen.join("pytest"), pyc.parent().unwrap().to_path_buf()] {
        assert!(!top.join("evil.py").exists() && !top.join("d").exists(), "{}", top.display());
    }
}

/// Pytest's modules load from the compiled copy's bytecode: none is compiled from source in a
/// job, where a sandbox on the original packages compiles them all. A job's own module in `/`
/// imports as before.
#[test]
fn pytest_loads_from_the_compiled_copy_without_compiling_its_sources() {
    let packages = arl_core::pytest_dir().expect("no pytest in ~/.cache/arl/assets/pytest; run scripts/setup/pytest.sh");
    let limits = Limits { cpu_seconds: 20, wall_timeout: Duration::from_secs(60), ..Limits::default() };
    let code = r#"
import os, sys
import importlib._bootstrap_external as external
compiled = []
source_to_code = external.SourceLoader.source_to_code
def spy(self, data, path, *args, **kwargs):
    compiled.append(path)
    return source_to_code(self, data, path, *args, **kwargs)
external.SourceLoader.source_to_code = spy
sys.path.insert(0, "/opt/arl/site-packages")
import pytest
sys.path.insert(0, os.getcwd())  # as the grading runner does
import helper
assert helper.VALUE == 7
loaded = {f for m in list(sys.modules.values()) if (f := getattr(m, "__file__", None) or "").startswith("/opt/arl/site-packages/")}
print(len(loaded), len(loaded & set(compiled)))
"#;
    let files = vec![
        JobFile { path: "main.py".into(), contents: code.into() },
        JobFile { path: "helper.py".into(), contents: "VALUE = 7\n".into() },
    ];
    let job = Job { files, limits: limits.clone(), ..Job::python("main.py", Vec::new()) };
    let counts = |sandbox: &WasmSandbox| {
        let out = sandbox.run(&job).unwrap();
        let got: Vec<usize> = out.stdout.split_whitespace().filter_map(|w| w.parse().ok()).collect();
        assert_eq!(got.len(), 2, "{out:?}");
        (got[0], got[1])
    };
    let cached =
        WasmSandbox::new(WasmSettings { site_packages: Some(packages.clone()), limits: limits.clone(), ..WasmSettings::default() })
            .unwrap();
    assert!(cached.compiled_packages.is_some());
    let (loaded, compiled) = counts(&cached);
    assert!(loaded > 20, "pytest and its dependencies are imported from the packages: {loaded} files");
    assert_eq!(compiled, 0, "{compiled} of {loaded} files compiled from source");
    let mut uncached = WasmSandbox::new(WasmSettings { site_packages: Some(packages), limits, ..WasmSettings::default() }).unwrap();
    uncached.compiled_packages = None;
    assert_eq!(counts(&uncached), (loaded, loaded), "on the original packages every file is compiled");
}

#[test]
fn attack_fork_does_not_exist() {
    // WASI has no processes: `os.fork` is absent and subprocess cannot start anything.
    let out = run(
        "import os\nprint(hasattr(os, 'fork'))\ntry:\n    import subprocess\n    subprocess.run(['ls'])\n    print('ran')\nexcept Exception as e:\n    print('refused', type(e).__name__)\n",
    );
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.first().copied(), Some("False"), "{out:?}");
    assert!(lines.get(1).is_some_and(|l| l.starts_with("refused")), "{out:?}");
}

#[test]
fn attack_a_ten_billion_element_list_hits_the_memory_limit() {
    // The guest is 32-bit: ten billion elements cannot even be asked for (OverflowError)…
    let out = run("x = [0] * 10**10\nprint('allocated')\n");
    assert!(!out.stdout.contains("allocated"), "{out:?}");
    assert!(out.stderr.contains("OverflowError") || out.stderr.contains("MemoryError"), "{out:?}");
    // …so ask for 2 GiB of pointers, over the 1 GiB limit and within the 4 GiB address space.
    let out = run("x = [0] * (1 << 29)\nprint('allocated')\n");
    assert!(!out.stdout.contains("allocated"), "{out:?}");
    assert!(out.stderr.contains("MemoryError"), "{out:?}");
}

#[test]
fn attack_growing_memory_piecewise_stops_at_the_limit() {
    let limits = Limits { memory_bytes: 256 << 20, wall_timeout: Duration::from_secs(5), cpu_seconds: 3, ..Limits::default() };
    let out = run_with("chunks = []\nwhile True:\n    chunks.append(bytearray(16 << 20))\n", limits);
    assert!(out.stderr.contains("MemoryError"), "{out:?}");
    assert!(out.max_rss_kb.unwrap() <= 256 << 10, "{out:?}");
}

#[test]
fn attack_an_infinite_loop_hits_the_cpu_limit() {
    // A wall clock far above the CPU limit (10 s): on a loaded machine (load 5 on
    // 2 cores) 1 s of the job thread's CPU took over 3 s of wall clock, and the wall clock won.
    let out = run_with("while True:\n    pass\n", Limits { wall_timeout: Duration::from_secs(10), cpu_seconds: 1, ..Limits::default() });
    assert!(!out.success(), "{out:?}");
    assert_eq!(out.signal, Some(libc::SIGXCPU), "{out:?}");
    assert!(!out.timed_out, "the CPU limit (1 s) fires before the wall clock (10 s): {out:?}");
    assert!(out.stderr.contains("CPU time limit"), "{out:?}");
}

#[test]
fn attack_a_busy_loop_is_stopped_by_a_shorter_wall_clock() {
    // CPU-bound guest code yields at every epoch tick, so the wall clock preempts it too.
    let limits = Limits { wall_timeout: Duration::from_millis(500), cpu_seconds: 5, ..Limits::default() };
    let out = run_with("while True:\n    pass\n", limits);
    assert!(out.timed_out && out.signal == Some(libc::SIGKILL), "{out:?}");
    assert!(out.wall_ms < 3_000, "stopped promptly, took {} ms", out.wall_ms);
}

#[test]
fn attack_sleeping_past_the_timeout_is_killed() {
    let limits = Limits { wall_timeout: Duration::from_millis(700), ..Limits::default() };
    let out = run_with("import time\ntime.sleep(60)\nprint('woke')\n", limits);
    assert!(out.timed_out && out.signal == Some(libc::SIGKILL), "{out:?}");
    assert!(out.stdout.is_empty());
    assert!(out.wall_ms < 5_000, "killed promptly, took {} ms", out.wall_ms);
}

#[test]
fn attack_a_large_file_is_stopped_at_the_file_size_limit() {
    // No RLIMIT_FSIZE in WASI: the host checks file sizes every 10 ms and stops the job
    // (SIGXFSZ, as rlimit's kernel would send) once one is over the limit.
    let code =
        "import os\nwith open('big', 'wb') as f:\n    for _ in range(10_000):\n        f.write(b'x' * (1 << 20))\nprint('wrote 10 GB')\n";
    let limits = Limits { wall_timeout: Duration::from_secs(20), cpu_seconds: 10, ..Limits::default() };
    let out = run_with(code, limits);
    assert!(!out.stdout.contains("wrote"), "{out:?}");
    assert_eq!(out.signal, Some(libc::SIGXFSZ), "{out:?}");
    assert!(out.stderr.contains("file size limit"), "{out:?}");
    let out = run(
        "import os\nfor i in range(40):\n    open(f'f{i}', 'wb').write(b'x' * (900 << 10))\nprint('wrote 36 MB')\nimport time\ntime.sleep(0.1)\n",
    );
    assert_eq!(out.signal, Some(libc::SIGXFSZ), "many files under the limit still add up: {out:?}");
}

#[test]
fn attack_the_parents_environment_and_files_are_out_of_reach() {
    let code = "import os\nprint(sorted(os.environ))\nfor path in ['/proc/self/environ', '/proc/1/environ', '/etc/passwd', '../../etc/passwd', '/tmp']:\n    try:\n        print(open(path, 'rb').read()[:40])\n    except OSError as e:\n        print('refused', e.errno)\n";
    let out = run(code);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.first().copied(), Some("['HOME', 'LANG', 'PATH']"), "{out:?}");
    assert_eq!(lines.iter().filter(|l| l.starts_with("refused")).count(), 5, "{out:?}");
}

#[test]
fn attack_a_symlink_out_of_the_directory_is_not_followed() {
    let out = run(
        "import os\ntry:\n    os.symlink('/etc/passwd', 'p')\n    print(open('p').read()[:20])\nexcept OSError as e:\n    print('refused', e.errno)\ntry:\n    os.symlink('../../../../etc/passwd', 'q')\n    print(open('q').read()[:20])\nexcept OSError as e:\n    print('refused', e.errno)\n",
    );
    assert_eq!(out.stdout.lines().filter(|l| l.starts_with("refused")).count(), 2, "{out:?}");
}

#[test]
fn attack_signals_do_not_exist() {
    // WASI has no signals or pids: `os.kill` is absent, so neither the parent nor a
    // neighbouring job can be reached (rlimit's kill(-1) case has nothing to aim at).
    let out = run("import os\nprint(hasattr(os, 'kill'), hasattr(os, 'getppid'))\n");
    assert_eq!(out.stdout, "False False\n", "{out:?}");
}

#[test]
fn jobs_run_in_parallel_without_sharing_anything() {
    std::thread::scope(|scope| {
        let a = scope.spawn(|| run("open('mine', 'w').write('a')\nimport time\ntime.sleep(0.3)\nprint(open('mine').read())\n"));
        let b = scope.spawn(|| run("open('mine', 'w').write('b')\nimport time\ntime.sleep(0.3)\nprint(open('mine').read())\n"));
        assert_eq!(a.join().unwrap().stdout, "a\n");
        assert_eq!(b.join().unwrap().stdout, "b\n");
    });
}

#[test]
fn a_missing_interpreter_is_a_one_line_error_naming_the_setup_script() {
    let settings = WasmSettings { python_wasm: Some("/nonexistent/python.wasm".into()), ..WasmSettings::default() };
    let err = WasmSandbox::new(settings).err().expect("no interpreter there").to_string();
    assert!(err.contains("scripts/setup/python-wasm.sh") && !err.contains('\n'), "{err}");
}
