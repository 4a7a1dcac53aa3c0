//! Subcommands, one file each.

mod bench;
mod config;
mod generate;
mod list;
mod model_args;
mod run;
mod run_args;
mod score;

use std::io::Write;

pub use bench::Bench;
pub use config::ConfigCommand;
pub use generate::Generate;
pub use list::List;
pub use model_args::ModelArgs;
pub use run::Run;
pub use run_args::RunArgs;
pub use score::Score;

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// List every registered plugin (envs, tool sets, sandboxes, advantage estimators,
    /// losses) and the backends compiled into this binary.
    List(List),
    /// Show the resolved run configuration, or its JSON Schema.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Train a policy on an environment.
    Run(Run),
    /// Teacher-forced log-probabilities of token sequences (JSON in, JSON out).
    Score(Score),
    /// Sample continuations of token-id prompts with the KV cache.
    Generate(Generate),
    /// Throughput benchmarks (one JSON line each).
    #[command(subcommand)]
    Bench(Bench),
}

impl Command {
    pub fn execute(self, out: &mut dyn Write) -> anyhow::Result<()> {
        match self {
            Command::List(cmd) => cmd.execute(out),
            Command::Config(cmd) => cmd.execute(out),
            Command::Run(cmd) => cmd.execute(out),
            Command::Score(cmd) => cmd.execute(out),
            Command::Generate(cmd) => cmd.execute(out),
            Command::Bench(cmd) => cmd.execute(out),
        }
    }
}
