//! The shell behind `Bash`. Where the sandbox has a real shell ([`arl_core::Sandbox::shell`],
//! `rlimit`), the call is real bash ([`real`]). Otherwise (`wasm`) it is emulated, as
//! follows. The working directory is always `/repo`; paths are relative to it. Commands:
//!
//! - `python FILE.py [ARGS…]`, `python -c CODE` (also `python3`): run in the [`Sandbox`]
//!   (`arl_core::Sandbox`) with a copy of the repository;
//! - `pytest …` and `python -m pytest …`: real pytest where the sandbox offers it
//!   ([`arl_core::Sandbox::python_packages`]: `wasm` with `scripts/setup/pytest.sh` run), with
//!   the repository at `/repo` and any arguments (pytest is importable by `python` too);
//!   otherwise `pytest [-q] [-v] [-x] [-s] [--tb=STYLE] [-k EXPR] [PATH[::TEST]…]` runs the
//!   repository's `test_*.py` / `*_test.py` files with arl's test runner, printed the way
//!   pytest prints ([`pytest`]);
//! - read-only `ls`, `cat`, `head`, `tail`, `grep`, `wc`, and `pwd`, `cd /repo`, `echo`
//!   ([`text`]).
//!
//! Commands may be chained with `&&` and `;`; `2>&1` is accepted (output is already merged);
//! unquoted `*`/`?` in a path's last component expand against the repository. `Bash`'s
//! `timeout` (ms, default 120000, at most 600000) bounds each Python job, under the sandbox's
//! own wall-clock ceiling (a job's limits are only ever lowered). Output is cut at 30000
//! characters, as Claude Code does.
//! Anything else — another program, a pipe, a redirection — is a failed call whose message
//! says what is supported, and so is a command that cannot run as asked (unknown option,
//! missing file). A program that runs and exits non-zero is a normal observation.

pub mod pytest;
pub mod python;
pub mod real;
pub mod text;
pub mod words;

use std::time::Duration;

use arl_core::{ToolContext, ToolOutcome};

use crate::counters as c;
use crate::tools::BashArgs;
use words::{Simple, Word, glob_match};

/// Claude Code's Bash limits: default and largest timeout (ms), output kept (chars).
pub const DEFAULT_TIMEOUT_MS: u64 = 120_000;
pub const MAX_TIMEOUT_MS: u64 = 600_000;
pub const MAX_OUTPUT_CHARS: usize = 30_000;

/// The programs the shell offers, for messages.
pub const SUPPORTED: &str = "python FILE.py, python -c CODE, pytest / python -m pytest, ls, cat, head, tail, grep, wc, pwd, cd /repo, echo";

/// What one command came to.
#[derive(Debug, Default)]
pub struct Exec {
    /// stdout then stderr, as the model sees them.
    pub output: String,
    pub status: i32,
    /// The command could not run as asked (bad option, missing file): the call failed.
    pub usage_error: bool,
}

impl Exec {
    pub fn ok(output: String) -> Self {
        Self { output, status: 0, usage_error: false }
    }
    pub fn status(output: String, status: i32) -> Self {
        Self { output, status, usage_error: false }
    }
    pub fn usage(message: String) -> Self {
        Self { output: message + "\n", status: 2, usage_error: true }
    }
}

/// What a command may use: the repository (read-only here), the sandbox, the timeout.
pub struct Shell<'a, 'b> {
    pub ctx: &'a mut ToolContext<'b>,
    pub timeout: Duration,
}

pub fn bash(ctx: &mut ToolContext<'_>, args: BashArgs) -> ToolOutcome {
    ctx.stats.bump(c::BASH_CALLS);
    let timeout_ms = args.timeout.unwrap_or(DEFAULT_TIMEOUT_MS);
    if timeout_ms == 0 || timeout_ms > MAX_TIMEOUT_MS {
        return ToolOutcome::Failed(format!("timeout must be between 1 and {MAX_TIMEOUT_MS} ms, got {timeout_ms}"));
    }
    if args.command.trim().is_empty() {
        return ToolOutcome::Failed("empty command".into());
    }
    if let Some(support) = ctx.sandbox.shell() {
        let support = support.clone();
        return real::run(ctx, &support, &args.command, Duration::from_millis(timeout_ms));
    }
    let chain = match words::split(&args.command) {
        Ok(chain) if !chain.is_empty() => chain,
        Ok(_) => return ToolOutcome::Failed("empty command".into()),
        Err(message) => {
            ctx.stats.bump(c::BASH_UNSUPPORTED);
            return ToolOutcome::Failed(message);
        }
    };
    // Refuse the whole line before running any of it when a program is not offered.
    for simple in &chain {
        let program = simple.words[0].text.as_str();
        if !is_supported(program) {
            ctx.stats.bump(c::BASH_UNSUPPORTED);
            return ToolOutcome::Failed(format!("{program}: command not available in this shell. Supported: {SUPPORTED}."));
        }
    }
    let mut shell = Shell { ctx, timeout: Duration::from_millis(timeout_ms) };
    let mut output = String::new();
    let mut failed = false;
    let mut status = 0;
    for Simple { words, then } in &chain {
        let argv = match shell.expand(words) {
            Ok(argv) => argv,
            Err(message) => {
                output.push_str(&message);
                output.push('\n');
                failed = true;
                break;
            }
        };
        let exec = shell.run(&argv);
        if exec.usage_error {
            // The command could not run as asked (bad option, missing file): a failed call.
            failed = true;
        }
        output.push_str(&exec.output);
        status = exec.status;
        if exec.status != 0 && *then == Some(true) {
            break;
        }
    }
    let mut output = truncate(output);
    if status != 0 && !failed {
        output.push_str(&format!("{}Exit code {status}", if output.is_empty() || output.ends_with('\n') { "" } else { "\n" }));
    }
    if output.trim().is_empty() {
        output = "(no output)".into();
    }
    if failed { ToolOutcome::Failed(output) } else { ToolOutcome::Ok(output) }
}

fn is_supported(program: &str) -> bool {
    matches!(program, "python" | "python3" | "pytest" | "ls" | "cat" | "head" | "tail" | "grep" | "wc" | "pwd" | "cd" | "echo")
}

impl Shell<'_, '_> {
    fn run(&mut self, argv: &[String]) -> Exec {
        let args = &argv[1..];
        match argv[0].as_str() {
            "python" | "python3" => python::python(self, args),
            "pytest" => pytest::pytest(self, args, false),
            "ls" => text::ls(self, args),
            "cat" => text::cat(self, args),
            "head" => text::head_tail(self, args, true),
            "tail" => text::head_tail(self, args, false),
            "grep" => text::grep(self, args),
            "wc" => text::wc(self, args),
            "pwd" => Exec::ok(format!("{}\n", crate::paths::ROOT)),
            "cd" => text::cd(self, args),
            "echo" => Exec::ok(format!("{}\n", args.join(" "))),
            other => Exec::usage(format!("{other}: command not available")),
        }
    }

    /// Expand globs against the repository's files (a pattern that matches nothing stays
    /// as it is, as in bash).
    fn expand(&self, words: &[Word]) -> Result<Vec<String>, String> {
        let mut argv = Vec::new();
        for word in words {
            if !word.glob {
                argv.push(word.text.clone());
                continue;
            }
            let (dir, pattern) = match word.text.rsplit_once('/') {
                Some((d, p)) => (Some(d), p),
                None => (None, word.text.as_str()),
            };
            if dir.is_some_and(|d| d.contains(['*', '?'])) {
                return Err(format!("{}: globs are supported in the last path component only", word.text));
            }
            let base = match dir {
                Some(d) => crate::paths::resolve_shell(if d.is_empty() { "/" } else { d }).map_err(|e| e.0)?,
                None => String::new(),
            };
            let mut matches: Vec<String> = self
                .entries(&base)
                .into_iter()
                .filter(|(name, _)| glob_match(pattern, name) && !name.starts_with('.'))
                .map(|(name, _)| match dir {
                    Some(d) => format!("{d}/{name}"),
                    None => name,
                })
                .collect();
            matches.sort();
            if matches.is_empty() {
                argv.push(word.text.clone());
            } else {
                argv.extend(matches);
            }
        }
        Ok(argv)
    }

    /// The entries of directory `key`: (name, is_dir), sorted, unique.
    pub fn entries(&self, key: &str) -> Vec<(String, bool)> {
        let prefix = if key.is_empty() { String::new() } else { format!("{key}/") };
        let mut out: Vec<(String, bool)> = Vec::new();
        for file in self.ctx.workspace.files.keys() {
            if let Some(rest) = file.strip_prefix(&prefix) {
                let entry = match rest.split_once('/') {
                    Some((dir, _)) => (dir.to_string(), true),
                    None => (rest.to_string(), false),
                };
                if !out.contains(&entry) {
                    out.push(entry);
                }
            }
        }
        out.sort();
        out
    }

    /// A file's text by shell path, or the message a shell would print.
    pub fn file(&self, program: &str, path: &str) -> Result<(String, &str), String> {
        let key = crate::paths::resolve_shell(path).map_err(|e| format!("{program}: {}", e.0))?;
        if crate::paths::is_dir(self.ctx.workspace.files.keys(), &key) {
            return Err(format!("{program}: {path}: Is a directory"));
        }
        match self.ctx.workspace.files.get(&key) {
            Some(text) => Ok((key, text.as_str())),
            None => Err(format!("{program}: {path}: No such file or directory")),
        }
    }
}

/// Keep at most [`MAX_OUTPUT_CHARS`] characters, saying how much was cut.
pub fn truncate(output: String) -> String {
    let total = output.chars().count();
    if total <= MAX_OUTPUT_CHARS {
        return output;
    }
    let kept: String = output.chars().take(MAX_OUTPUT_CHARS).collect();
    format!("{kept}\n... [output truncated: {} more characters]\n", total - MAX_OUTPUT_CHARS)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::counters as c;
    use crate::testing::{Repo, failed, ok};

    #[test]
    fn unsupported_programs_and_syntax_fail_with_what_is_supported() {
        let mut repo = Repo::new();
        for command in ["rm -rf /repo", "sed -i s/a/b/ count_positive.py", "git diff", "pip install pytest", "ls && curl x"] {
            let text = failed(repo.bash(command));
            assert!(text.contains("command not available") && text.contains("Supported: python"), "{command}: {text}");
        }
        assert!(failed(repo.bash("cat count_positive.py | head")).contains("pipes"));
        assert!(failed(repo.bash("echo x > count_positive.py")).contains("redirections"));
        assert!(failed(repo.bash("echo $PATH")).contains("variables"));
        assert!(failed(repo.bash("")).contains("empty command"));
        assert_eq!(repo.counter(c::BASH_UNSUPPORTED), 8);
        assert_eq!(repo.counter(c::BASH_CALLS), 9);
        assert_eq!(repo.workspace.files["count_positive.py"], repo.bug.source, "nothing ran");
    }

    #[test]
    fn chains_stop_at_the_first_failure_of_an_and_list() {
        let mut repo = Repo::new();
        assert_eq!(ok(repo.bash("echo a; echo b && echo c")), "a\nb\nc\n");
        assert_eq!(ok(repo.bash("grep zebra count_positive.py && echo found")), "Exit code 1");
        assert_eq!(ok(repo.bash("grep zebra count_positive.py; echo after")), "after\n");
    }

    #[test]
    fn timeouts_are_checked() {
        let mut repo = Repo::new();
        for t in [0, 600_001] {
            assert!(failed(repo.call("Bash", json!({"command": "ls", "timeout": t}))).contains("timeout must be between"));
        }
        assert!(
            ok(repo.call("Bash", json!({"command": "ls", "timeout": 5000, "description": "List files"}))).contains("count_positive.py")
        );
    }

    #[test]
    fn output_is_truncated_at_the_claude_code_limit() {
        let long = "x".repeat(super::MAX_OUTPUT_CHARS + 10);
        let text = super::truncate(long);
        assert!(text.ends_with("[output truncated: 10 more characters]\n"));
    }
}
