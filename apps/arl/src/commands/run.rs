//! `arl run`: resolve and validate the run configuration, then train.

use std::io::Write;

use super::RunArgs;

#[derive(Debug, clap::Args)]
pub struct Run {
    #[command(flatten)]
    pub args: RunArgs,
}

impl Run {
    pub fn execute(self, out: &mut dyn Write) -> anyhow::Result<()> {
        let config = self.args.resolve_with_context()?;
        writeln!(
            out,
            "arl run: configuration valid: env={} loss={} advantage={} sandbox={} model={} backend={}",
            config.env.name,
            config.loss.name,
            config.advantage.name,
            config.sandbox.name,
            config.model.source,
            config.model.backend
        )?;
        anyhow::bail!("training is not implemented in this build yet (the trainer is issue #8); nothing was trained")
    }
}
