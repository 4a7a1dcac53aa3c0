//! The `arl` command line: one file per subcommand under `commands/`, each a clap struct
//! with `execute(self, out)`. Output goes to a writer so test binaries can run commands
//! in-process; errors come back as `anyhow` chains printed once, on one line.

pub mod commands;

use std::ffi::OsString;
use std::io::Write;
use std::process::ExitCode;

use clap::Parser;

/// Reinforcement learning of LLM agents.
#[derive(Debug, Parser)]
#[command(name = "arl", version, about, max_term_width = 100)]
pub struct Cli {
    #[command(subcommand)]
    pub command: commands::Command,
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

/// Print an error the way users should see it, and pick the exit status:
/// 2 for bad usage or configuration, 1 for anything else.
pub fn report(err: &anyhow::Error) -> ExitCode {
    if let Some(clap_err) = err.downcast_ref::<clap::Error>() {
        let _ = clap_err.print();
        return ExitCode::from(if clap_err.use_stderr() { 2 } else { 0 });
    }
    eprintln!("error: {err:#}");
    let usage = err.chain().any(|e| e.downcast_ref::<arl_core::ConfigError>().is_some());
    ExitCode::from(if usage { 2 } else { 1 })
}
