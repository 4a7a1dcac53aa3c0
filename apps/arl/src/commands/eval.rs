//! `arl eval`: evaluate a checkpoint (or preset) on an env's held-out split — pass@1 per
//! task with counts and the overall pass@1 with its task-level bootstrap interval.

use std::io::Write;

use arl_core::eval::Bootstrap;
use arl_core::train::eval::evaluate;
use arl_core::train::trainer::rollout_options;

use super::RunArgs;
use super::run::Built;

#[derive(Debug, clap::Args)]
pub struct Eval {
    #[command(flatten)]
    pub args: RunArgs,
}

impl Eval {
    pub fn execute(self, out: &mut dyn Write) -> anyhow::Result<()> {
        let config = self.args.resolve_with_context()?;
        let mut built = Built::new(&config)?;
        for notice in &built.notices {
            eprintln!("{notice}");
        }
        let opts = rollout_options(&config, built.env.as_ref(), config.trainer.seed ^ 0xe7a1);
        let bootstrap = Bootstrap { seed: config.trainer.seed, ..Bootstrap::default() };
        let mut bar = super::progress::Progress::stderr();
        let mut progress = |done: usize, total: usize| bar.update("eval", done, total);
        let e = evaluate(built.env.as_ref(), &built.codec, &mut built.policy, config.eval.n as usize, &opts, &bootstrap, &mut progress)?;
        writeln!(out, "{}", serde_json::to_string_pretty(&e)?)?;
        Ok(())
    }
}
