//! `pytest` / `python -m pytest` where the shell is emulated (`wasm`). With real pytest in the
//! sandbox ([`arl_core::Sandbox::python_packages`]) it is that pytest (`real_pytest`,
//! `runner/pytest_main.py`). Without, the repository's test files run by arl's runner
//! (`runner/pytest_runner.py`) in the sandbox and printed the way pytest prints: progress
//! dots (or `-v` lines), failures with the compared values, a summary line, pytest's exit
//! codes (0 passed, 1 failed, 2 collection error, 5 nothing collected).
//!
//! Options: `-q`, `-v`, `-x`, `-k EXPR`, and without effect `-s`, `--tb=STYLE`,
//! `-rA`/`-ra`/`-rf`, `--no-header`, `--disable-warnings`. `-k EXPR` takes words matched
//! case-insensitively as substrings of the test id, combined with `and`, `or`, `not` and
//! parentheses. Paths: files or directories, a file optionally with `::TEST`.

use arl_core::{Job, Limits};
use serde_json::{Value, json};

use super::python::{job_files, program_exec};
use super::{Exec, Shell};
use crate::counters as c;
use crate::paths;

const RUNNER: &str = concat!(include_str!("../runner/job_paths.py"), include_str!("../runner/pytest_runner.py"));
const ENTRY: &str = "arl_pytest_runner.py";

#[derive(Debug, Default, PartialEq)]
struct Options {
    quiet: bool,
    verbose: bool,
    exitfirst: bool,
    select: Option<Value>,
    paths: Vec<String>,
}

fn parse(args: &[String]) -> Result<Options, String> {
    let mut o = Options::default();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "-q" | "--quiet" => o.quiet = true,
            "-v" | "--verbose" => o.verbose = true,
            "-x" | "--exitfirst" => o.exitfirst = true,
            "-s" | "--no-header" | "--disable-warnings" | "-rA" | "-ra" | "-rf" => {}
            "-k" => {
                let expr = it.next().ok_or("pytest: argument -k: expected one argument")?;
                o.select = Some(keyword_expression(expr)?);
            }
            a if a.starts_with("-k") && a.len() > 2 => o.select = Some(keyword_expression(&a[2..])?),
            a if a.starts_with("--tb=") => {}
            a if a.starts_with("-qq") || a == "-vv" => {
                o.quiet |= a.starts_with("-q");
                o.verbose |= a.starts_with("-v");
            }
            a if a.starts_with('-') => {
                return Err(format!(
                    "pytest: unsupported option `{a}` in this shell (supported: -q, -v, -x, -s, --tb=STYLE, -k EXPR, paths)"
                ));
            }
            path => o.paths.push(path.to_string()),
        }
    }
    Ok(o)
}

/// Parse pytest's `-k` grammar into the runner's tree: `["or", a, b]`, `["and", a, b]`,
/// `["not", a]`, `["kw", word]`.
fn keyword_expression(expr: &str) -> Result<Value, String> {
    let spaced = expr.replace('(', " ( ").replace(')', " ) ");
    let tokens: Vec<&str> = spaced.split_whitespace().collect();
    let mut pos = 0;
    let tree = or_expr(&tokens, &mut pos).map_err(|e| format!("ERROR: Wrong expression passed to '-k': {expr}: {e}"))?;
    if pos != tokens.len() {
        return Err(format!("ERROR: Wrong expression passed to '-k': {expr}: unexpected `{}`", tokens[pos]));
    }
    Ok(tree)
}

fn or_expr(t: &[&str], pos: &mut usize) -> Result<Value, String> {
    let mut left = and_expr(t, pos)?;
    while t.get(*pos) == Some(&"or") {
        *pos += 1;
        left = json!(["or", left, and_expr(t, pos)?]);
    }
    Ok(left)
}

fn and_expr(t: &[&str], pos: &mut usize) -> Result<Value, String> {
    let mut left = not_expr(t, pos)?;
    while t.get(*pos) == Some(&"and") {
        *pos += 1;
        left = json!(["and", left, not_expr(t, pos)?]);
    }
    Ok(left)
}

fn not_expr(t: &[&str], pos: &mut usize) -> Result<Value, String> {
    match t.get(*pos).copied() {
        None => Err("expected an identifier, got the end".into()),
        Some("not") => {
            *pos += 1;
            Ok(json!(["not", not_expr(t, pos)?]))
        }
        Some("(") => {
            *pos += 1;
            let inner = or_expr(t, pos)?;
            if t.get(*pos) != Some(&")") {
                return Err("missing `)`".into());
            }
            *pos += 1;
            Ok(inner)
        }
        Some(word @ (")" | "and" | "or")) => Err(format!("unexpected `{word}`")),
        Some(word) => {
            *pos += 1;
            Ok(json!(["kw", word]))
        }
    }
}

/// pytest's default collection: `test_*.py` and `*_test.py` files.
fn is_test_file(key: &str) -> bool {
    let name = key.rsplit('/').next().unwrap_or(key);
    name.ends_with(".py") && (name.starts_with("test_") || name.ends_with("_test.py"))
}

/// The runner's `files` list for the given paths (every test file when none).
fn collect(sh: &Shell<'_, '_>, paths_given: &[String]) -> Result<Vec<Value>, String> {
    let files = &sh.ctx.workspace.files;
    let mut out: Vec<(String, Option<Vec<String>>)> = Vec::new();
    let mut add = |key: String, test: Option<String>| match out.iter_mut().find(|(k, _)| *k == key) {
        Some((_, tests)) => match (tests.as_mut(), test) {
            (Some(list), Some(t)) => list.push(t),
            _ => *tests = None,
        },
        None => out.push((key, test.map(|t| vec![t]))),
    };
    let given: Vec<String> = if paths_given.is_empty() { vec![".".into()] } else { paths_given.to_vec() };
    for arg in &given {
        let (path, test) = match arg.split_once("::") {
            Some((p, t)) => (p, Some(t.to_string())),
            None => (arg.as_str(), None),
        };
        let key = paths::resolve_shell(path).map_err(|e| format!("ERROR: {}", e.0))?;
        if files.contains_key(&key) {
            add(key, test);
        } else if paths::is_dir(files.keys(), &key) && test.is_none() {
            let prefix = if key.is_empty() { String::new() } else { format!("{key}/") };
            for f in files.keys().filter(|f| f.starts_with(&prefix) && is_test_file(f)) {
                add(f.clone(), None);
            }
        } else {
            return Err(format!("ERROR: file or directory not found: {arg}"));
        }
    }
    Ok(out.into_iter().map(|(path, tests)| json!({"path": path, "tests": tests})).collect())
}

/// `pytest ARGS` (`module`: `python -m pytest ARGS`).
pub fn pytest(sh: &mut Shell<'_, '_>, args: &[String], module: bool) -> Exec {
    if let Some(packages) = sh.ctx.sandbox.python_packages() {
        let packages = packages.to_string();
        // The program name pytest's usage messages show, as in a real shell.
        let prog = if module { "__main__.py" } else { "pytest" };
        return real_pytest(sh, args, &packages, prog);
    }
    let options = match parse(args) {
        Ok(o) => o,
        Err(message) => return Exec::usage(message),
    };
    let files = match collect(sh, &options.paths) {
        Ok(files) => files,
        Err(message) => return Exec::usage(message),
    };
    sh.ctx.stats.bump(c::TEST_RUNS);
    let marker = arl_tasks::grade::fresh_marker();
    let request = json!({"marker": marker, "files": files, "select": options.select, "exitfirst": options.exitfirst});
    let job = Job {
        files: job_files(sh.ctx.workspace, &[(ENTRY, RUNNER)]),
        entry: ENTRY.into(),
        args: Vec::new(),
        stdin: Some(request.to_string()),
        limits: Limits { wall_timeout: sh.timeout, ..Limits::default() },
    };
    match sh.ctx.sandbox.run(&job) {
        Ok(outcome) => {
            let mut exec = report(&options, &read_events(&outcome.stdout, &marker));
            if outcome.timed_out || outcome.signal.is_some() || (outcome.exit_code != Some(0) && !outcome.stderr.is_empty()) {
                // The run itself died (a test that loops forever, a crash): say how.
                let died = program_exec(&arl_core::JobOutcome { stdout: String::new(), ..outcome });
                exec.output.push_str(&died.output);
                exec.status = exec.status.max(2);
            }
            exec
        }
        Err(e) => super::python::sandbox_failed(sh, "pytest", &e),
    }
}

const MAIN: &str = include_str!("../runner/pytest_main.py");
const MAIN_ENTRY: &str = "arl_pytest_main.py";

/// Real pytest, importable from `packages` in a sandbox without a shell (`wasm`): the
/// repository at `/repo`, the model's arguments as given, pytest's own output and exit code.
fn real_pytest(sh: &mut Shell<'_, '_>, args: &[String], packages: &str, prog: &str) -> Exec {
    sh.ctx.stats.bump(c::TEST_RUNS);
    let mut files: Vec<arl_core::JobFile> = sh
        .ctx
        .workspace
        .files
        .iter()
        .map(|(path, contents)| arl_core::JobFile { path: format!("repo/{path}"), contents: contents.clone() })
        .collect();
    files.push(arl_core::JobFile { path: MAIN_ENTRY.into(), contents: MAIN.into() });
    // pytest's logging plugin opens /dev/null; WASI has no devices, so it is an empty file.
    files.push(arl_core::JobFile { path: "dev/null".into(), contents: String::new() });
    let mut job_args = vec![packages.to_string(), prog.to_string()];
    job_args.extend(args.iter().cloned());
    let job = Job {
        files,
        entry: MAIN_ENTRY.into(),
        args: job_args,
        stdin: None,
        limits: Limits { wall_timeout: sh.timeout, ..Limits::default() },
    };
    match sh.ctx.sandbox.run(&job) {
        Ok(outcome) => program_exec(&outcome),
        Err(e) => super::python::sandbox_failed(sh, "pytest", &e),
    }
}

/// The runner's marked lines, as (kind, payload); other output is ignored.
fn read_events(stdout: &str, marker: &str) -> Vec<(String, Value)> {
    stdout
        .lines()
        .filter_map(|line| line.strip_prefix(marker)?.strip_prefix(' '))
        .filter_map(|rest| {
            let (kind, payload) = rest.split_once(' ')?;
            Some((kind.to_string(), serde_json::from_str(payload).ok()?))
        })
        .collect()
}

/// Print the events as pytest would.
fn report(o: &Options, events: &[(String, Value)]) -> Exec {
    let s = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let collected: u64 = events.iter().filter(|(k, _)| k == "COLLECT").filter_map(|(_, v)| v["count"].as_u64()).sum();
    let deselected: u64 = events.iter().filter(|(k, _)| k == "DESELECT").filter_map(|(_, v)| v["count"].as_u64()).sum();
    let errors: Vec<&Value> = events.iter().filter(|(k, _)| k == "ERROR").map(|(_, v)| v).collect();
    let results: Vec<(bool, &Value)> = events.iter().filter(|(k, _)| k == "PASS" || k == "FAIL").map(|(k, v)| (k == "PASS", v)).collect();
    let mut out = String::new();
    if !o.quiet {
        let mut line = format!("collected {} item{}", collected + deselected, if collected + deselected == 1 { "" } else { "s" });
        if deselected > 0 {
            line.push_str(&format!(" / {deselected} deselected / {collected} selected"));
        }
        if !errors.is_empty() {
            line.push_str(&format!(" / {} error{}", errors.len(), if errors.len() == 1 { "" } else { "s" }));
        }
        out.push_str(&line);
        out.push_str("\n\n");
    }
    if o.verbose {
        for (passed, v) in &results {
            out.push_str(&format!("{} {}\n", s(v, "id"), if *passed { "PASSED" } else { "FAILED" }));
        }
    } else {
        // Progress: one line per file, `.` per pass and `F` per failure.
        let mut current = String::new();
        for (passed, v) in &results {
            let id = s(v, "id");
            let file = id.split("::").next().unwrap_or("").to_string();
            if file != current {
                if !current.is_empty() || o.quiet {
                    out.push('\n');
                }
                if !o.quiet {
                    out.push_str(&file);
                    out.push(' ');
                }
                current = file;
            }
            out.push(if *passed { '.' } else { 'F' });
        }
        if !results.is_empty() {
            out.push('\n');
        }
        if o.quiet && out.starts_with('\n') {
            out.remove(0);
        }
    }
    let failures: Vec<&Value> = results.iter().filter(|(p, _)| !p).map(|(_, v)| *v).collect();
    if !failures.is_empty() || !errors.is_empty() {
        out.push('\n');
    }
    for e in &errors {
        out.push_str(&format!("ERROR collecting {} - {}\n", s(e, "path"), s(e, "error")));
    }
    for f in &failures {
        out.push_str(&format!("FAILED {} - {}\n", s(f, "id"), s(f, "error")));
        if let Some(line) = f["line"].as_u64() {
            out.push_str(&format!("    {}:{line}: {}\n", s(f, "file"), s(f, "code")));
        }
    }
    let passed = results.iter().filter(|(p, _)| *p).count();
    let mut parts = Vec::new();
    if !failures.is_empty() {
        parts.push(format!("{} failed", failures.len()));
    }
    if passed > 0 {
        parts.push(format!("{passed} passed"));
    }
    if deselected > 0 {
        parts.push(format!("{deselected} deselected"));
    }
    if !errors.is_empty() {
        parts.push(format!("{} error{}", errors.len(), if errors.len() == 1 { "" } else { "s" }));
    }
    if results.is_empty() && errors.is_empty() && deselected == 0 {
        parts.insert(0, "no tests ran".into());
    }
    let summary = parts.join(", ");
    if o.quiet {
        out.push_str(&format!("{summary}\n"));
    } else {
        out.push_str(&format!("========== {summary} ==========\n"));
    }
    let status = if !errors.is_empty() {
        2
    } else if !failures.is_empty() {
        1
    } else if results.is_empty() {
        5
    } else {
        0
    };
    Exec::status(out, status)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_and_keyword_expressions() {
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let o = parse(&args(&["-q", "-k", "mixed and not (empty or zero)", "test_f.py::test_a"])).unwrap();
        assert!(o.quiet && !o.verbose);
        assert_eq!(o.paths, vec!["test_f.py::test_a"]);
        assert_eq!(o.select, Some(json!(["and", ["kw", "mixed"], ["not", ["or", ["kw", "empty"], ["kw", "zero"]]]])));
        assert_eq!(parse(&args(&["-kfoo"])).unwrap().select, Some(json!(["kw", "foo"])));
        assert!(parse(&args(&["--cov"])).unwrap_err().contains("unsupported option `--cov`"));
        assert!(parse(&args(&["-k", "a and"])).unwrap_err().contains("Wrong expression"));
        assert!(parse(&args(&["-k"])).is_err());
        assert!(parse(&args(&["--tb=short", "-x", "-s", "-rA", "--disable-warnings"])).unwrap().exitfirst);
    }
}

#[cfg(test)]
mod runs {
    use serde_json::json;

    use crate::counters as c;
    use crate::testing::{Repo, failed, ok};

    const TESTS: &str = "from count_positive import count_positive\n\n\n\
def test_mixed():\n    assert count_positive([3, -1, 4]) == 2\n\n\n\
def test_zero():\n    assert count_positive([0, 1]) == 1\n\n\n\
class TestEmpty:\n    def test_empty(self):\n        assert count_positive([]) == 0\n";

    fn repo() -> Repo {
        let mut repo = Repo::new();
        ok(repo.call("Read", json!({"file_path": "/repo/test_count_positive.py"})));
        ok(repo.call("Write", json!({"file_path": "/repo/test_count_positive.py", "content": TESTS})));
        repo
    }

    #[test]
    fn pytest_reports_like_pytest_with_the_compared_values() {
        let mut repo = repo();
        let text = ok(repo.bash("pytest"));
        assert_eq!(
            text,
            "collected 3 items\n\ntest_count_positive.py .F.\n\n\
             FAILED test_count_positive.py::test_zero - AssertionError: assert 2 == 1\n    \
             test_count_positive.py:9: assert count_positive([0, 1]) == 1\n\
             ========== 1 failed, 2 passed ==========\nExit code 1"
        );
        let verbose = ok(repo.bash("python -m pytest -v test_count_positive.py"));
        assert!(verbose.contains("test_count_positive.py::test_mixed PASSED\ntest_count_positive.py::test_zero FAILED\ntest_count_positive.py::TestEmpty::test_empty PASSED\n"), "{verbose}");
        assert_eq!(repo.counter(c::TEST_RUNS), 2);
    }

    #[test]
    fn selection_by_k_node_id_and_quiet_output() {
        let mut repo = repo();
        assert_eq!(ok(repo.bash("pytest -q -k mixed")), ".\n1 passed, 2 deselected\n");
        assert_eq!(ok(repo.bash("pytest -q -k 'not zero and not Empty'")), ".\n1 passed, 2 deselected\n");
        assert_eq!(ok(repo.bash("pytest -q /repo/test_count_positive.py::test_mixed")), ".\n1 passed\n");
        assert_eq!(ok(repo.bash("pytest -q test_count_positive.py::TestEmpty")), ".\n1 passed\n");
        assert_eq!(ok(repo.bash("pytest -q -k nothing")), "3 deselected\nExit code 5");
    }

    #[test]
    fn the_fix_makes_the_run_pass() {
        let mut repo = repo();
        ok(repo.call("Read", json!({"file_path": "/repo/count_positive.py"})));
        ok(repo.call("Edit", json!({"file_path": "/repo/count_positive.py", "old_string": "v >= 0", "new_string": "v > 0"})));
        assert_eq!(ok(repo.bash("cd /repo && python -m pytest -q 2>&1")), "...\n3 passed\n");
        assert_eq!(ok(repo.bash("pytest -x")), "collected 3 items\n\ntest_count_positive.py ...\n========== 3 passed ==========\n");
    }

    #[test]
    fn collection_errors_and_hanging_tests_are_reported() {
        let mut repo = repo();
        ok(repo.call("Write", json!({"file_path": "/repo/test_broken.py", "content": "import nowhere\n"})));
        let text = ok(repo.bash("pytest -q test_broken.py"));
        assert!(text.contains("ERROR collecting test_broken.py - ModuleNotFoundError: No module named 'nowhere'"), "{text}");
        assert!(text.ends_with("1 error\nExit code 2"), "{text}");
        ok(repo.call("Write", json!({"file_path": "/repo/test_loop.py", "content": "def test_loop():\n    while True:\n        pass\n"})));
        let text = ok(repo.call("Bash", json!({"command": "pytest -q test_loop.py", "timeout": 1000})));
        assert!(text.contains("timed out"), "{text}");
    }

    #[test]
    fn pytest_usage_errors_fail() {
        let mut repo = repo();
        assert!(failed(repo.bash("pytest nope.py")).contains("file or directory not found: nope.py"));
        assert!(failed(repo.bash("pytest --cov")).contains("unsupported option"));
        assert!(failed(repo.bash("pytest -k 'a and'")).contains("Wrong expression"));
        assert_eq!(repo.counter(c::TEST_RUNS), 0);
    }
}
