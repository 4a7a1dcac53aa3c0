//! `Bash` as a real shell, where the sandbox offers one ([`arl_core::Sandbox::shell`], the
//! `rlimit` sandbox): the call is `bash -c COMMAND` in a job whose `/repo` holds a copy of
//! the repository, with the working directory kept from the previous call (variables are
//! not: each call is a fresh shell, SPEC §3). stdout and stderr arrive merged, as on a
//! terminal. Files the command creates, changes or deletes under `/repo` come back into the
//! episode's repository — at most [`MAX_FILES`] files and [`MAX_BYTES`] bytes per call,
//! each at most [`crate::files::MAX_FILE_BYTES`] and UTF-8, and the repository at most
//! [`crate::files::MAX_FILES`] files, as Write allows; the rest is named in the
//! observation — and count as read, as the model's own writes do. `__pycache__` stays in
//! the job (`PYTHONDONTWRITEBYTECODE` is set); `.pytest_cache` comes back, so `--lf` works
//! across calls. A command that runs past its `timeout` is killed by the
//! job's runner, which still reports its changes; one that outlives the sandbox's own
//! wall-clock ceiling loses them (the observation says so).

use std::time::Duration;

use arl_core::{Job, JobFile, Limits, ShellSupport, ToolContext, ToolOutcome};

use super::{python::sandbox_failed_message, truncate};
use crate::counters as c;
use crate::paths;

const RUNNER: &str = include_str!("../runner/bash_runner.py");
const RUNNER_ENTRY: &str = "arl_bash.py";

/// Files and bytes that may come back from one call.
pub const MAX_FILES: usize = 32;
pub const MAX_BYTES: usize = 48 * 1024;

/// Files named in one observation's `[not copied back …]`.
const MAX_NOTES: usize = 24;

/// Processes a call may have at once (bash, a pipeline, pytest): `RLIMIT_NPROC` in the
/// job's PID namespace.
pub const MAX_PROCESSES: u64 = 16;

/// Address space of each of them.
pub const MEMORY_BYTES: u64 = 512 << 20;

/// What the runner reports after the command.
#[derive(Debug, Default, PartialEq)]
struct Report {
    cwd: String,
    reset: bool,
    timed_out: bool,
    files: Vec<(String, String)>,
    deleted: Vec<String>,
    over: Vec<(String, String)>,
}

pub fn run(ctx: &mut ToolContext<'_>, shell: &ShellSupport, command: &str, timeout: Duration) -> ToolOutcome {
    let words = command.split(|ch: char| !(ch.is_alphanumeric() || ch == '_')).collect::<Vec<_>>();
    if words.iter().any(|w| w.starts_with("python")) {
        ctx.stats.bump(c::PYTHON_RUNS);
    }
    if words.contains(&"pytest") {
        ctx.stats.bump(c::TEST_RUNS);
    }
    let cwd = ctx.workspace.cwd.clone().unwrap_or_else(|| paths::ROOT.to_string());
    let mut files: Vec<JobFile> =
        ctx.workspace.files.iter().map(|(path, text)| JobFile { path: format!("repo/{path}"), contents: text.clone() }).collect();
    files.push(JobFile { path: RUNNER_ENTRY.into(), contents: RUNNER.into() });
    let job = Job {
        files,
        entry: RUNNER_ENTRY.into(),
        args: vec![
            cwd,
            command.to_string(),
            shell.bash.clone(),
            shell.python_path.join(":"),
            MAX_FILES.to_string(),
            MAX_BYTES.to_string(),
            timeout.as_millis().to_string(),
        ],
        stdin: Some(String::new()),
        limits: Limits {
            wall_timeout: timeout + Duration::from_secs(2),
            memory_bytes: MEMORY_BYTES,
            processes: MAX_PROCESSES,
            ..Limits::default()
        },
    };
    let outcome = match ctx.sandbox.run(&job) {
        Ok(outcome) => outcome,
        Err(e) => {
            ctx.stats.sandbox_error(&e);
            return ToolOutcome::Failed(sandbox_failed_message("bash", &e));
        }
    };
    let mut output = shown(&outcome.stdout, &shell.repo);
    if outcome.stdout_truncated {
        output.push_str(&format!("{}[output truncated: the job keeps {} bytes]\n", sep(&output), job.limits.output_bytes));
    }
    let report = parse(&outcome.stderr);
    let mut output = truncate(output);
    let status = outcome.exit_code.unwrap_or(1);
    let timed_out = outcome.timed_out || report.as_ref().is_some_and(|r| r.timed_out);
    if timed_out {
        output.push_str(&format!("{}Command timed out after {} ms\n", sep(&output), timeout.as_millis()));
    } else if let Some(signal) = outcome.signal {
        output.push_str(&format!("{}Killed by signal {signal} (a resource limit: CPU time, memory or file size)\n", sep(&output)));
    } else if status != 0 {
        output.push_str(&format!("{}Exit code {status}", sep(&output)));
    }
    match report {
        Some(report) => apply(ctx, report, &mut output),
        None => output.push_str(&format!(
            "{}[the job ended before reporting its changes: nothing it wrote came back to {}]\n",
            sep(&output),
            paths::ROOT
        )),
    }
    if output.trim().is_empty() {
        output = "(no output)".into();
    }
    ToolOutcome::Ok(output)
}

fn sep(output: &str) -> &'static str {
    if output.is_empty() || output.ends_with('\n') { "" } else { "\n" }
}

/// The job's paths as the model sees them: `/job/repo` (what `os.getcwd()` says) is `/repo`.
fn shown(text: &str, repo: &str) -> String {
    text.replace("/job/repo", repo)
}

/// Bring the report's files into the repository (checked again here: the job is the model's).
fn apply(ctx: &mut ToolContext<'_>, report: Report, output: &mut String) {
    let mut notes = Vec::new();
    let (mut count, mut bytes) = (0, 0);
    // Deletions first: a call that removes one file and creates another keeps the count.
    for rel in report.deleted {
        if let Ok(key) = paths::resolve_shell(&rel) {
            ctx.workspace.files.remove(&key);
            ctx.workspace.read.remove(&key);
        }
    }
    for (rel, text) in report.files {
        let key = match paths::resolve_shell(&rel) {
            Ok(key) if !key.is_empty() && !rel.starts_with('/') => key,
            _ => {
                notes.push(format!("{rel}: not a path in the repository"));
                continue;
            }
        };
        if text.len() > crate::files::MAX_FILE_BYTES {
            notes.push(format!("{}: {} bytes; files are limited to {}", paths::display(&key), text.len(), crate::files::MAX_FILE_BYTES));
            continue;
        }
        if count + 1 > MAX_FILES || bytes + text.len() > MAX_BYTES {
            notes.push(format!("{}: at most {MAX_FILES} files and {MAX_BYTES} bytes come back per call", paths::display(&key)));
            continue;
        }
        // The repository's own cap, as Write enforces it.
        if !ctx.workspace.files.contains_key(&key) && ctx.workspace.files.len() >= crate::files::MAX_FILES {
            notes.push(format!("{}: the repository already holds {} files", paths::display(&key), crate::files::MAX_FILES));
            continue;
        }
        // A file where a directory of the repository is, or under a file: keep the tree sound.
        if paths::is_dir(ctx.workspace.files.keys(), &key) || ancestors(&key).any(|a| ctx.workspace.files.contains_key(a)) {
            notes.push(format!("{}: clashes with a file or directory of the repository", paths::display(&key)));
            continue;
        }
        count += 1;
        bytes += text.len();
        ctx.workspace.files.insert(key.clone(), text);
        ctx.workspace.read.insert(key);
    }
    for (rel, why) in report.over {
        notes.push(format!("{}: {why}", paths::display(&rel)));
    }
    if !notes.is_empty() {
        ctx.stats.bump(c::BASH_NOT_COPIED);
        if notes.len() > MAX_NOTES {
            let more = notes.len() - MAX_NOTES;
            notes.truncate(MAX_NOTES);
            notes.push(format!("and {more} more"));
        }
        output.push_str(&format!("{}[not copied back to {}: {}]\n", sep(output), paths::ROOT, notes.join("; ")));
    }
    if report.reset {
        output.push_str(&format!("{}Shell cwd was reset to {}\n", sep(output), paths::ROOT));
    }
    ctx.workspace.cwd = (report.cwd != paths::ROOT && report.cwd.starts_with('/')).then_some(report.cwd);
}

fn ancestors(key: &str) -> impl Iterator<Item = &str> {
    key.match_indices('/').map(move |(i, _)| &key[..i])
}

/// The runner's report (the last thing on its stderr); `None` when it is missing or garbled.
fn parse(stderr: &str) -> Option<Report> {
    let start = stderr.rfind("ARL-BASH-REPORT 1\n")?;
    let mut rest = &stderr[start + "ARL-BASH-REPORT 1\n".len()..];
    let mut report = Report::default();
    loop {
        let (line, tail) = rest.split_once('\n')?;
        rest = tail;
        let mut parts = line.splitn(3, '\t');
        match (parts.next()?, parts.next(), parts.next()) {
            ("end", None, None) => return Some(report),
            ("cwd", Some(cwd), None) if !cwd.contains('\n') => report.cwd = cwd.to_string(),
            ("reset", Some(r), None) => report.reset = !r.is_empty(),
            ("timeout", None, None) => report.timed_out = true,
            ("deleted", Some(rel), None) => report.deleted.push(rel.to_string()),
            ("over", Some(rel), Some(why)) => report.over.push((rel.to_string(), why.to_string())),
            ("file", Some(rel), Some(chars)) => {
                let chars: usize = chars.parse().ok()?;
                let end = rest.char_indices().nth(chars).map_or(rest.len(), |(i, _)| i);
                if rest[..end].chars().count() != chars {
                    return None;
                }
                report.files.push((rel.to_string(), rest[..end].to_string()));
                rest = rest[end..].strip_prefix('\n')?;
            }
            _ => return None,
        }
    }
}

#[cfg(test)]
mod tests;
