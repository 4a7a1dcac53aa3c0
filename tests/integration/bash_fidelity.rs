//! Fidelity of the tools gym's real shell: commands models write, run through `arl env
//! replay` (rlimit sandbox) and through a real bash + pytest on the host over the same files,
//! in order; the observations must be equal modulo timings and the absolute path of the
//! host's directory. The host side runs each command as `bash -c` with the job's
//! environment (PATH with `python` and `pytest`, the same pytest, `PYTHONDONTWRITEBYTECODE`).

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

use arl_tests::{arl, scratch_dir};
use serde_json::{Value, json};

const TASK: &str = "compare-count_positive-0";

/// Commands as models write them. Left out, because they differ by design (see the note of
/// issue 18): `ls -l`/`ls -la` (owners, dates and tmpfs sizes), `git` (not in the job),
/// `echo $HOME` (`/job`), `> /dev/stdout` or `> /dev/stderr` (Permission denied: the pipes
/// belong to the trainer; `2>&1` and `>&2` work).
const CORPUS: &[&str] = &[
    "ls",
    "pwd",
    "cat count_positive.py",
    "head -n 3 count_positive.py",
    "tail -2 test_count_positive.py",
    "wc -l *.py",
    "grep -n 'def count_positive(' count_positive.py",
    "grep -rn count . | sort | head -5",
    "sed -n '3,5p' count_positive.py",
    "find . -name '*.py' | sort",
    "echo -n hi",
    "printf '%s\\n' a b",
    "seq 3 | tr '\\n' ,",
    "awk 'NR==1' count_positive.py",
    "cat nope.py",
    "nosuchcommand --flag",
    "python --version",
    "python3 -c 'import sys; print(sys.argv)' a b",
    "python -c 'print(1 + 1)'",
    "python nope.py",
    "python -c 'import count_positive as m; print(m.count_positive([1, -2, 3]))'",
    "python -c 'raise ValueError(\"boom\")'",
    "python -m unittest 2>&1 | tail -3",
    "python -c 'import pytest; print(pytest.__version__)'",
    "pytest",
    "pytest -q",
    "pytest -x",
    "pytest -xvs",
    "pytest -xq",
    "pytest -vvv",
    "pytest --maxfail=1",
    "pytest --lf",
    "pytest --lf -q",
    "pytest -p no:cacheprovider -q",
    "pytest -W error -q",
    "pytest -k mixed -q",
    "pytest -k nothing -q",
    "pytest --collect-only -q",
    "pytest --tb=short -q",
    "pytest --tb=line -q",
    "python -m pytest -q test_count_positive.py::test_mixed",
    "pytest -q 2>/dev/null | tail -3",
    "pytest -q > out.txt; tail -1 out.txt | cut -d' ' -f1-2",
    "pytest -q || echo TESTS FAILED",
    "pytest -q && echo never",
    "cat count_positive.py | grep -c count",
    "x=$(grep -c count count_positive.py); echo \"count: $x\"",
    "diff count_positive.py count_positive.py && echo same",
    "diff <(seq 3) <(seq 4)",
    "sort test_count_positive.py | uniq | wc -l",
    "ls -a",
    "sed -i 's/v >= 0/v > 0/' count_positive.py && cat count_positive.py",
    "cat >> test_count_positive.py <<'EOF'\n\ndef test_zero():\n    assert count_positive([0]) == 0\nEOF",
    "pytest -q",
    "pytest -v test_count_positive.py",
    "echo 'print(\"from a file\")' > hello.py && python hello.py",
    "mkdir -p pkg && echo 'X = 1' > pkg/mod.py && python -c 'from pkg.mod import X; print(X)'",
    "ls -R | head -20",
    "rm hello.py && ls",
    "for f in *.py; do echo $f; done",
    "if grep -q 'v > 0' count_positive.py; then echo fixed; fi",
    "echo $((6 * 7))",
    "true; echo $?; false; echo $?",
    "exit 3",
];

fn host_pytest_dir() -> String {
    let home = std::env::var("HOME").unwrap();
    let dir = format!("{home}/.cache/arl/assets/pytest/site-packages");
    assert!(Path::new(&dir).join("pytest").is_dir(), "no pytest in {dir}; run scripts/setup/pytest.sh");
    dir
}

/// Run the corpus on the host, in `repo`, as the job does.
fn host_observations(repo: &Path, bin: &Path) -> Vec<String> {
    std::fs::create_dir_all(bin).unwrap();
    let python = "/usr/bin/python3";
    let _ = std::fs::remove_file(bin.join("python"));
    std::os::unix::fs::symlink(python, bin.join("python")).unwrap();
    let shim = format!("#!{python}\nimport sys\nfrom pytest import console_main\nsys.argv[0] = 'pytest'\nsys.exit(console_main())\n");
    std::fs::write(bin.join("pytest"), shim).unwrap();
    Command::new("chmod").arg("755").arg(bin.join("pytest")).status().unwrap();
    let pytest = host_pytest_dir();
    let repo_text = repo.to_str().unwrap();
    CORPUS
        .iter()
        .map(|command| {
            let out = Command::new("/bin/bash")
                .arg0("bash")
                .arg("-c")
                .arg(format!("exec 2>&1; {command}"))
                .current_dir(repo)
                .env_clear()
                .env("PATH", format!("{}:/usr/local/bin:/usr/bin:/bin", bin.display()))
                .env("HOME", repo.parent().unwrap())
                .env("LANG", "C.UTF-8")
                .env("PWD", repo)
                .env("TERM", "dumb")
                .env("PYTHONDONTWRITEBYTECODE", "1")
                .env("PYTHONPATH", &pytest)
                .output()
                .unwrap();
            let mut text = String::from_utf8_lossy(&out.stdout).replace(repo_text, "/repo");
            let status = out.status.code().unwrap_or(1);
            if status != 0 {
                text.push_str(&format!("{}Exit code {status}", if text.is_empty() || text.ends_with('\n') { "" } else { "\n" }));
            }
            if text.trim().is_empty() {
                text = "(no output)".into();
            }
            normalize(&text)
        })
        .collect()
}

/// Timings out: `in 0.03s`, `in 0.001s` (unittest's `Ran 0 tests in 0.000s`) read `in <T>s`.
fn normalize(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(" in ") {
        out.push_str(&rest[..at + 4]);
        rest = &rest[at + 4..];
        let digits = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        if digits > 0 && rest[..digits].contains('.') && rest[digits..].starts_with('s') {
            out.push_str("<T>");
            rest = &rest[digits..];
        }
    }
    out.push_str(rest);
    out
}

/// `arl env replay` of `calls` on [`TASK`] under `sandbox`: each call's status and text (timings
/// normalized), and the replay's JSON.
fn replay_calls(dir: &Path, sandbox: &str, calls: &[Value]) -> (Vec<(String, String)>, Value) {
    let file = dir.join(format!("calls-{sandbox}.json"));
    std::fs::write(&file, Value::Array(calls.to_vec()).to_string()).unwrap();
    let max_turns = (calls.len() + 1).to_string();
    let out = arl(&[
        "env",
        "replay",
        "--task",
        TASK,
        "--plain-names",
        "--sandbox",
        sandbox,
        "--max-turns",
        &max_turns,
        "--calls",
        file.to_str().unwrap(),
    ])
    .unwrap_or_else(|e| panic!("{e}"));
    let doc: Value = serde_json::from_str(&out).unwrap();
    let outcomes = doc["turns"].as_array().unwrap()[..calls.len()]
        .iter()
        .map(|t| {
            let o = &t["observations"][0]["outcome"];
            (o["status"].as_str().unwrap().to_string(), normalize(o["text"].as_str().unwrap()))
        })
        .collect();
    (outcomes, doc)
}

fn bash(command: &str) -> Value {
    json!({"name": "Bash", "arguments": {"command": command}})
}

/// [`replay_calls`] of one `Bash` call per command, each of which must be an ordinary
/// observation (not a failed call).
fn replay_commands(dir: &Path, sandbox: &str, commands: &[&str]) -> (Vec<String>, Value) {
    let calls: Vec<Value> = commands.iter().map(|c| bash(c)).collect();
    let (outcomes, doc) = replay_calls(dir, sandbox, &calls);
    for ((status, text), command) in outcomes.iter().zip(commands) {
        assert_eq!(status, "ok", "`{command}` under {sandbox}: {text}");
    }
    (outcomes.into_iter().map(|(_, text)| text).collect(), doc)
}

#[test]
fn the_real_shell_reads_like_bash_and_pytest_on_the_host() {
    let dir = scratch_dir("bash-fidelity");
    arl(&["tasks", "--env", "tools", "--plain-names", "--dump", dir.join("tasks").to_str().unwrap()]).unwrap();
    let task = dir.join("tasks").join(TASK);
    let repo = dir.join("host").join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    for name in ["count_positive.py", "test_count_positive.py"] {
        std::fs::copy(task.join(name), repo.join(name)).unwrap();
    }
    let (replayed, doc) = replay_commands(&dir, "rlimit", CORPUS);
    let host = host_observations(&repo, &dir.join("host").join("bin"));
    assert_eq!(replayed.len(), CORPUS.len());
    let mut differ = Vec::new();
    for (i, command) in CORPUS.iter().enumerate() {
        if replayed[i] != host[i] {
            differ.push(format!("`{command}`:\n--- replay\n{}\n--- host bash\n{}", replayed[i], host[i]));
        }
    }
    assert!(differ.is_empty(), "{} of {} commands differ:\n{}", differ.len(), CORPUS.len(), differ.join("\n"));
    // Malformed vs failed accounting (SPEC §3): every call ran; none failed or was malformed.
    assert_eq!(doc["stats"]["failed_calls"], 0);
    assert_eq!(doc["stats"]["malformed_calls"], 0);
    // The shell's edit came back: the fixed source is graded.
    assert_eq!(doc["reward"], 1.0, "{:#}", doc["stats"]);
}

/// The pytest commands of [`CORPUS`] that need no shell syntax: under `wasm` they run real
/// pytest in the WASI CPython (no shell), and must read as under `rlimit`'s real shell but for
/// the differences docs/sandbox.md's table lists and [`wasm_pytest_differences_are_the_documented_ones`]
/// shows: the header's `platform` line (and nothing that needs the cache of an earlier call).
const PYTEST_CORPUS: &[&str] = &[
    "pytest",
    "pytest -q",
    "pytest -x",
    "pytest -xvs",
    "pytest -xq",
    "pytest -vvv",
    "pytest --maxfail=1",
    "pytest -W error -q",
    "pytest -k mixed -q",
    "pytest -k nothing -q",
    "pytest --collect-only -q",
    "pytest --tb=short -q",
    "pytest --tb=line -q",
    "pytest -rA -q",
    "python -m pytest -q test_count_positive.py::test_mixed",
    "pytest -q test_count_positive.py && echo never",
    "python -c 'import pytest; print(pytest.__version__)'",
    "pytest --no-such-flag",
    "python -m pytest --no-such-flag",
];

/// The header's interpreter line (`platform linux -- Python 3.11.2, …` against `platform wasi
/// -- Python 3.12.0, …`) out.
fn without_platform(text: &str) -> String {
    text.lines().map(|l| if l.starts_with("platform ") { "platform <P>" } else { l }).collect::<Vec<_>>().join("\n")
}

/// A second test file, one of whose tests fails against the task's (buggy) function.
const FAILING_TEST: &str = "from count_positive import count_positive\n\n\ndef test_zero():\n    assert count_positive([0]) == 0\n\n\ndef test_one():\n    assert count_positive([1]) == 1\n";

#[test]
fn wasm_runs_real_pytest_that_reads_like_the_real_shells() {
    let dir = scratch_dir("bash-fidelity-wasm");
    let mut calls = vec![json!({"name": "Write", "arguments": {"file_path": "/repo/test_zero.py", "content": FAILING_TEST}})];
    calls.extend(PYTEST_CORPUS.iter().map(|c| bash(c)));
    let (rlimit, _) = replay_calls(&dir, "rlimit", &calls);
    let (wasm, doc) = replay_calls(&dir, "wasm", &calls);
    assert!(wasm[1].1.contains("test session starts") && wasm[1].1.contains("platform wasi -- Python 3.12"), "{}", wasm[1].1);
    assert!(wasm[1].1.contains("FAILURES") && wasm[1].1.contains("1 failed, 2 passed"), "{}", wasm[1].1);
    let mut differ = Vec::new();
    for (i, command) in PYTEST_CORPUS.iter().enumerate() {
        let (r, w) = (&rlimit[i + 1], &wasm[i + 1]);
        if r.0 != w.0 || without_platform(&r.1) != without_platform(&w.1) {
            differ.push(format!("`{command}`:\n--- rlimit ({})\n{}\n--- wasm ({})\n{}", r.0, r.1, w.0, w.1));
        }
    }
    assert!(differ.is_empty(), "{} of {} commands differ:\n{}", differ.len(), PYTEST_CORPUS.len(), differ.join("\n"));
    assert_eq!((&doc["stats"]["failed_calls"], &doc["stats"]["malformed_calls"]), (&json!(0), &json!(0)));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Rows of docs/sandbox.md's table of the `wasm` shell's differences from `rlimit`'s real one.
#[test]
fn wasm_pytest_differences_are_the_documented_ones() {
    let dir = scratch_dir("bash-differences-wasm");
    let calls = [
        json!({"name": "Write", "arguments": {"file_path": "/repo/test_zero.py", "content": FAILING_TEST}}),
        // 1: the header names the interpreter.
        bash("pytest"),
        // 2: no cache between calls under wasm, so `--lf` has nothing to rerun.
        bash("pytest --lf"),
        // 3: files a program writes come back under rlimit only.
        bash("python -c \"open('made.txt', 'w').write('x')\" && ls"),
        // 4: shell syntax beyond `&&`, `;` and `2>&1` is a failed call under wasm.
        bash("pytest -q | tail -1"),
    ];
    let (rlimit, _) = replay_calls(&dir, "rlimit", &calls);
    let (wasm, _) = replay_calls(&dir, "wasm", &calls);
    assert!(rlimit.iter().all(|(status, _)| status == "ok"), "{rlimit:#?}");
    let (r, w) = (|i: usize| rlimit[i].1.as_str(), |i: usize| wasm[i].1.as_str());
    assert!(r(1).contains("platform linux -- Python 3.") && r(1).contains("1 failed, 2 passed"), "{}", r(1));
    assert!(w(1).contains("platform wasi -- Python 3.12.0") && w(1).contains("1 failed, 2 passed"), "{}", w(1));
    assert!(r(2).contains("run-last-failure: rerun previous 1 failure") && r(2).contains("1 failed in"), "{}", r(2));
    assert!(w(2).contains("run-last-failure: no previously failed tests") && w(2).contains("1 failed, 2 passed"), "{}", w(2));
    assert!(r(3).contains("made.txt"), "{}", r(3));
    assert_eq!(wasm[3].0, "ok");
    assert!(!w(3).contains("made.txt"), "{}", w(3));
    assert!(r(4).contains("1 failed, 2 passed") && !r(4).contains("FAILURES"), "{}", r(4));
    assert_eq!(wasm[4].0, "failed", "{}", w(4));
    let _ = std::fs::remove_dir_all(&dir);
}
