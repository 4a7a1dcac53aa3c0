//! `arl config show` and `arl config schema`.

use std::io::Write;

use arl_core::RunConfig;

use super::RunArgs;

#[derive(Debug, clap::Subcommand)]
pub enum ConfigCommand {
    /// Print the resolved run configuration as TOML (defaults ← --config ← flags ← --set).
    Show(Show),
    /// Print the JSON Schema of the run configuration.
    Schema,
}

#[derive(Debug, clap::Args)]
pub struct Show {
    #[command(flatten)]
    pub args: RunArgs,
}

impl ConfigCommand {
    pub fn execute(self, out: &mut dyn Write) -> anyhow::Result<()> {
        match self {
            ConfigCommand::Show(show) => {
                let config = show.args.resolve_with_context()?;
                write!(out, "{}", config.to_toml())?;
            }
            ConfigCommand::Schema => {
                writeln!(out, "{}", serde_json::to_string_pretty(&RunConfig::json_schema())?)?;
            }
        }
        Ok(())
    }
}
