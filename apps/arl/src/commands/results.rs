//! `arl results schema`: the JSON Schema of `results.json` (what `arl run` writes).

use std::io::Write;

use arl_train::trainer::RunReport;

#[derive(Debug, clap::Subcommand)]
pub enum ResultsCommand {
    /// Print the JSON Schema of a run's results.json.
    Schema,
}

impl ResultsCommand {
    pub fn execute(self, out: &mut dyn Write) -> anyhow::Result<()> {
        match self {
            ResultsCommand::Schema => {
                writeln!(out, "{}", serde_json::to_string_pretty(&schemars::schema_for!(RunReport))?)?;
            }
        }
        Ok(())
    }
}
