//! The `arl` command line: one file per subcommand under `commands/`, each a clap struct
//! with `execute(self, out)`. Output goes to a writer so test binaries can run commands
//! in-process; errors come back as `anyhow` chains printed once, on one line, with the exit
//! status of their kind ([`exit_code`]): 2 for a usage or configuration error, 1 for a failure
//! at run time.

pub mod commands;
pub mod report;

use std::ffi::OsString;
use std::io::Write;
use std::process::ExitCode;

use clap::Parser;

/// The commit this binary was built from (`build.rs`), if it was built from a git checkout.
pub const GIT_COMMIT: Option<&str> = option_env!("ARL_GIT_COMMIT");

const VERSION: &str = match option_env!("ARL_VERSION_LINE") {
    Some(v) => v,
    None => env!("CARGO_PKG_VERSION"),
};

/// Reinforcement learning of LLM agents.
#[derive(Debug, Parser)]
#[command(
    name = "arl",
    version = VERSION,
    about,
    max_term_width = 100,
    after_help = "Exit status: 0 success, 1 a failure while running, 2 a usage or configuration error \
                  (nothing was loaded or written)."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: commands::Command,
}

/// A command line that cannot be run as given (exit status 2), for checks clap cannot make.
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// `bail!` for usage errors: `return Err(usage!("--jobs must be ≥ 1, got {}", n))`.
#[macro_export]
macro_rules! usage {
    ($($arg:tt)*) => { anyhow::Error::new($crate::UsageError(format!($($arg)*))) };
}

/// The `arl` binary's `main`: link the built-in plugins, run the command line, report an error
/// once with its exit status. A binary of your own that links more plugin crates is two lines
/// (`arl new env` writes one):
///
/// ```ignore
/// use my_env as _;
/// fn main() -> std::process::ExitCode { arl::main() }
/// ```
pub fn main() -> ExitCode {
    arl_plugins::link();
    let mut stdout = std::io::stdout().lock();
    match run(std::env::args_os(), &mut stdout) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => report(&err),
    }
}

/// How this program runs another of its commands as a child process (the rollout workers of
/// `--launcher procs`): by default this executable with `args`. A test binary, which cannot
/// take `arl`'s arguments on its own command line, sets its own once, before running commands.
pub fn set_self_command(command: fn(&[String]) -> std::process::Command) {
    let _ = SELF_COMMAND.set(command);
}

static SELF_COMMAND: std::sync::OnceLock<fn(&[String]) -> std::process::Command> = std::sync::OnceLock::new();

/// The child process that runs `arl ARGS` ([`set_self_command`]).
pub fn self_command(args: &[String]) -> std::process::Command {
    match SELF_COMMAND.get() {
        Some(make) => make(args),
        None => {
            let exe = std::env::current_exe().unwrap_or_else(|_| "arl".into());
            let mut command = std::process::Command::new(exe);
            command.args(args);
            command
        }
    }
}

/// Parse `args` (including the program name) and run the command, writing to `out`.
/// clap's own errors (and `--help`) are returned as `clap::Error`.
pub fn run<I, T>(args: I, out: &mut dyn Write) -> anyhow::Result<()>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = Cli::try_parse_from(args)?;
    cli.command.execute(out)
}

/// The exit status for `err`: 0 for `--help`/`--version` and for a reader that closed the pipe
/// (`arl tasks | head`); 2 for a usage or configuration error — a flag, a config key, a run
/// folder, an input file's content, a name (model, plugin, input file) that names nothing —
/// found before any work; 1 for a failure while working.
pub fn exit_code(err: &anyhow::Error) -> u8 {
    if let Some(clap_err) = err.downcast_ref::<clap::Error>() {
        return if clap_err.use_stderr() { 2 } else { 0 };
    }
    if broken_pipe(err) {
        return 0;
    }
    let usage = err.chain().any(|e| {
        e.downcast_ref::<arl_core::ConfigError>().is_some()
            || e.downcast_ref::<arl_core::RegistryError>().is_some()
            || e.downcast_ref::<UsageError>().is_some()
            || e.downcast_ref::<arl_train::sft::SftDataError>().is_some()
            || e.downcast_ref::<arl_train::TrainError>().is_some_and(|t| t.is_config())
            || e.downcast_ref::<arl_qwen3::ModelError>().is_some_and(|m| {
                use arl_qwen3::ModelError::*;
                matches!(m, NotFound { .. } | NoSuchDir { .. } | Unknown { .. } | Adapter { .. } | Lora(_))
            })
    });
    if usage { 2 } else { 1 }
}

/// Whether the error is a write into a pipe whose reader has gone.
fn broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|e| e.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe))
}

/// The one line a user sees: the context chain joined by `: `, each cause printed once (a
/// message that already contains its cause's text does not repeat it).
pub fn message(err: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in err.chain() {
        let text = cause.to_string();
        let text = text.lines().map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join(" ");
        if text.is_empty() || line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}

/// Print an error the way users should see it, and pick the exit status ([`exit_code`]).
pub fn report(err: &anyhow::Error) -> ExitCode {
    let code = exit_code(err);
    if let Some(clap_err) = err.downcast_ref::<clap::Error>() {
        let _ = clap_err.print();
    } else if !broken_pipe(err) {
        eprintln!("error: {}", message(err));
    }
    ExitCode::from(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_cause_is_printed_once() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "No such file or directory (os error 2)");
        let inner = arl_core::ConfigError::Read { path: "run.toml".into(), source: io };
        let err = anyhow::Error::new(inner).context("run configuration run.toml");
        assert_eq!(message(&err), "run configuration run.toml: cannot read config file run.toml: No such file or directory (os error 2)");
        assert_eq!(exit_code(&err), 2);
    }

    #[test]
    fn a_closed_pipe_is_a_quiet_success_and_runtime_failures_are_1() {
        let pipe = anyhow::Error::new(std::io::Error::from(std::io::ErrorKind::BrokenPipe)).context("writing the task list");
        assert_eq!(exit_code(&pipe), 0);
        assert_eq!(exit_code(&anyhow::anyhow!("the sandbox broke")), 1);
        assert_eq!(exit_code(&usage!("--jobs must be ≥ 1")), 2);
    }
}
