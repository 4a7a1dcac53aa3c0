//! `python FILE.py [ARGS…]` and `python -c CODE [ARGS…]`, run in the sandbox over a copy
//! of the repository; `python -m pytest …` is [`super::pytest`].

use arl_core::{Job, JobFile, JobOutcome, Limits, Workspace};

use super::{Exec, Shell, pytest};
use crate::counters as c;
use crate::paths;

const RUN_PYTHON: &str = concat!(include_str!("../runner/job_paths.py"), include_str!("../runner/run_python.py"));
pub(crate) const RUN_ENTRY: &str = "arl_run_python.py";

pub fn python(sh: &mut Shell<'_, '_>, args: &[String]) -> Exec {
    let mut i = 0;
    // Harmless interpreter flags.
    while i < args.len() && matches!(args[i].as_str(), "-u" | "-B" | "-E" | "-s") {
        i += 1;
    }
    let (kind, target, rest) = match args.get(i).map(String::as_str) {
        None => {
            return Exec::usage("python: there is no interactive interpreter here; run a file (python FILE.py) or python -c CODE".into());
        }
        Some("-m") => match args.get(i + 1).map(String::as_str) {
            Some("pytest") => return pytest::pytest(sh, &args[i + 2..], true),
            Some(module) => return Exec::usage(format!("python -m {module}: only `python -m pytest` is available in this shell")),
            None => return Exec::usage("python: -m needs a module name".into()),
        },
        Some("-c") => match args.get(i + 1) {
            Some(code) => ("code", code.clone(), &args[i + 2..]),
            None => return Exec::usage("python: -c needs an argument".into()),
        },
        Some(flag) if flag.starts_with('-') => {
            return Exec::usage(format!("python: unsupported option `{flag}` in this shell (supported: FILE.py, -c CODE, -m pytest)"));
        }
        Some(file) => {
            let key = match paths::resolve_shell(file) {
                Ok(key) => key,
                Err(e) => return Exec::usage(format!("python: {}", e.0)),
            };
            if !sh.ctx.workspace.files.contains_key(&key) {
                return Exec::usage(format!("python: can't open file '{}': [Errno 2] No such file or directory", paths::display(&key)));
            }
            ("file", key, &args[i + 1..])
        }
    };
    sh.ctx.stats.bump(c::PYTHON_RUNS);
    let mut job_args = vec![kind.to_string(), target];
    job_args.extend(rest.iter().cloned());
    // Where the sandbox has real pytest without a shell (wasm), it is importable, as the real
    // shell's PYTHONPATH makes it.
    let runner = match sh.ctx.sandbox.python_packages() {
        Some(packages) => format!("import sys\nsys.path.append({packages:?})\n{RUN_PYTHON}"),
        None => RUN_PYTHON.to_string(),
    };
    let job = Job {
        files: job_files(sh.ctx.workspace, &[(RUN_ENTRY, &runner)]),
        entry: RUN_ENTRY.into(),
        args: job_args,
        stdin: Some(String::new()),
        limits: Limits { wall_timeout: sh.timeout, ..Limits::default() },
    };
    match sh.ctx.sandbox.run(&job) {
        Ok(outcome) => program_exec(&outcome),
        Err(e) => sandbox_failed(sh, "python", &e),
    }
}

/// A job the sandbox could not start: an observation, and the episode an infrastructure failure.
pub fn sandbox_failed(sh: &mut Shell<'_, '_>, program: &str, e: &arl_core::SandboxError) -> Exec {
    sh.ctx.stats.sandbox_error(e);
    Exec::usage(sandbox_failed_message(program, e))
}

pub fn sandbox_failed_message(program: &str, e: &arl_core::SandboxError) -> String {
    format!("{program}: the sandbox could not start the job: {e}")
}

/// The repository's files plus arl's own runner files (which win a name clash).
pub fn job_files(workspace: &Workspace, extra: &[(&str, &str)]) -> Vec<JobFile> {
    let mut files: Vec<JobFile> = workspace
        .files
        .iter()
        .filter(|(path, _)| !extra.iter().any(|(name, _)| name == path))
        .map(|(path, contents)| JobFile { path: path.clone(), contents: contents.clone() })
        .collect();
    files.extend(extra.iter().map(|(name, contents)| JobFile { path: name.to_string(), contents: contents.to_string() }));
    files
}

/// A program's outcome as a shell shows it: stdout, stderr, and how it ended.
pub fn program_exec(outcome: &JobOutcome) -> Exec {
    let mut output = outcome.stdout.clone();
    if outcome.stdout_truncated {
        output.push_str("\n[stdout truncated]\n");
    }
    if !outcome.stderr.is_empty() && !output.is_empty() && !output.ends_with('\n') {
        output.push('\n');
    }
    output.push_str(&outcome.stderr);
    if outcome.stderr_truncated {
        output.push_str("\n[stderr truncated]\n");
    }
    let status = if outcome.timed_out {
        output.push_str(&format!("{}Command timed out after {} ms\n", sep(&output), outcome.wall_ms));
        124
    } else if let Some(signal) = outcome.signal {
        output.push_str(&format!("{}Killed by signal {signal} (a resource limit: CPU time, memory or file size)\n", sep(&output)));
        128 + signal
    } else {
        outcome.exit_code.unwrap_or(1)
    };
    Exec::status(output, status)
}

fn sep(output: &str) -> &'static str {
    if output.is_empty() || output.ends_with('\n') { "" } else { "\n" }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::counters as c;
    use crate::testing::{Repo, failed, ok};

    #[test]
    fn python_runs_files_and_code_in_the_sandbox() {
        let mut repo = Repo::new();
        let script = "import sys\nfrom count_positive import count_positive\nprint(count_positive([0, 1, 2]), sys.argv[1:], __name__)\n";
        ok(repo.call("Write", json!({"file_path": "/repo/check.py", "content": script})));
        assert_eq!(ok(repo.bash("python check.py a b")), "3 ['a', 'b'] __main__\n");
        assert_eq!(ok(repo.bash("python3 /repo/check.py")), "3 [] __main__\n");
        assert_eq!(ok(repo.bash("python -c 'from count_positive import count_positive as f; print(f([-1]))'")), "0\n");
        assert_eq!(repo.counter(c::PYTHON_RUNS), 3);
    }

    #[test]
    fn a_crashing_program_is_an_observation_with_a_repo_traceback() {
        let mut repo = Repo::new();
        ok(repo.call("Write", json!({"file_path": "/repo/boom.py", "content": "print('before')\nraise ValueError('bad')\n"})));
        let text = ok(repo.bash("python boom.py"));
        assert!(text.starts_with("before\nTraceback (most recent call last):\n  File \"/repo/boom.py\", line 2"), "{text}");
        assert!(text.contains("ValueError: bad") && text.ends_with("Exit code 1"), "{text}");
        assert!(!text.contains("arl_run_python"), "{text}");
        let text = ok(repo.bash("python -c 'import sys; sys.exit(3)'"));
        assert_eq!(text, "Exit code 3");
    }

    #[test]
    fn runaway_programs_are_stopped_by_the_sandbox() {
        let mut repo = Repo::new();
        let text = ok(repo.call("Bash", json!({"command": "python -c 'while True: pass'", "timeout": 500})));
        assert!(text.contains("Command timed out after"), "{text}");
    }

    #[test]
    fn python_usage_errors_fail() {
        let mut repo = Repo::new();
        assert!(failed(repo.bash("python nope.py")).contains("can't open file '/repo/nope.py'"));
        assert!(failed(repo.bash("python")).contains("no interactive interpreter"));
        assert!(failed(repo.bash("python -m pip install x")).contains("only `python -m pytest`"));
        assert!(failed(repo.bash("python -W error x.py")).contains("unsupported option `-W`"));
        assert_eq!(repo.counter(c::PYTHON_RUNS), 0);
    }
}
