//! `arl config show` and `arl config schema`.

use std::io::Write;

use arl_core::RunConfig;
use arl_core::config::AlgoPreset;
use arl_core::registry;

use super::{ConfigArgs, TrainArgs};

// Built once per process from the command line: the size difference costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, clap::Subcommand)]
pub enum ConfigCommand {
    /// Print the resolved run configuration as TOML (defaults ← --algo ← --config ← flags ←
    /// --set); with an algo, first what the preset sets, as comments.
    Show(Show),
    /// Print the JSON Schema of the run configuration.
    Schema,
}

#[derive(Debug, clap::Args)]
pub struct Show {
    #[command(flatten)]
    pub config: ConfigArgs,
    #[command(flatten, next_help_heading = "Training")]
    pub train: TrainArgs,
}

impl ConfigCommand {
    pub fn execute(self, out: &mut dyn Write) -> anyhow::Result<()> {
        match self {
            ConfigCommand::Show(show) => {
                let config = show.config.resolve_with_context(Some(&show.train))?;
                if let Some(name) = &config.algo {
                    let preset = registry::get::<AlgoPreset>(name)?;
                    writeln!(out, "# algo `{name}`: {}", preset.about)?;
                    writeln!(out, "# it sets (keys you set yourself win):")?;
                    for (key, value) in preset.settings {
                        writeln!(out, "#   {key} = {value}")?;
                    }
                }
                write!(out, "{}", config.to_toml())?;
            }
            ConfigCommand::Schema => {
                writeln!(out, "{}", serde_json::to_string_pretty(&RunConfig::json_schema())?)?;
            }
        }
        Ok(())
    }
}
