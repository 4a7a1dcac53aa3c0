//! Subcommands, one file each.

mod config;
mod list;
mod render;
mod run;
mod run_args;

use std::io::Write;

pub use config::ConfigCommand;
pub use list::List;
pub use render::Render;
pub use run::Run;
pub use run_args::RunArgs;

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
    /// Render a conversation through a model's chat template: `{"text": …, "ids": […]}`.
    Render(Render),
}

impl Command {
    pub fn execute(self, out: &mut dyn Write) -> anyhow::Result<()> {
        match self {
            Command::List(cmd) => cmd.execute(out),
            Command::Config(cmd) => cmd.execute(out),
            Command::Run(cmd) => cmd.execute(out),
            Command::Render(cmd) => cmd.execute(out),
        }
    }
}
