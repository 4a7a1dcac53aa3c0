//! `arl eval`: evaluate a checkpoint (or preset) on one of an env's held-out splits — pass@1 per
//! task with counts and the overall pass@1 with its task-level bootstrap interval, every
//! episode's response length and finish, and the tool statistics. Takes only the flags an
//! evaluation reads (no training flags).

use std::io::Write;

use arl_core::eval::Bootstrap;
use arl_train::eval::evaluate_split;
use arl_train::trainer::eval_options;

use super::run::Built;
use super::run_args::ConfigArgs;

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  arl eval --env edit --model runs/edit/checkpoints/final\n  arl eval --env tools --model Qwen/Qwen3-0.6B --eval-n 8 --sandbox wasm\n  arl eval --env tools --model smollm2-135m --adapter runs/tools/checkpoints/final --split heldout-instances"
)]
pub struct Eval {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Which held-out split: tasks of kinds training never sees (the gyms' held-out bug
    /// templates), or new instances of the training kinds (the gyms' training bugs under other
    /// names).
    #[arg(long, value_enum, default_value = "heldout")]
    pub split: HeldoutArg,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum HeldoutArg {
    Heldout,
    HeldoutInstances,
}

impl Eval {
    pub fn execute(self, out: &mut dyn Write) -> anyhow::Result<()> {
        let config = self.config.resolve_with_context(None)?;
        if config.eval.n == 0 {
            return Err(crate::usage!("--eval-n 0 evaluates nothing; pass --eval-n N with N ≥ 1"));
        }
        let mut built = Built::new(&config)?;
        for note in &built.notes {
            eprintln!("{note}");
        }
        let opts = eval_options(&config, built.env.as_ref());
        let bootstrap = Bootstrap { seed: config.trainer.seed, ..Bootstrap::default() };
        let mut bar = super::progress::Progress::stderr();
        let mut progress = |done: usize, total: usize| bar.update("eval", done, total);
        let split = match self.split {
            HeldoutArg::Heldout => arl_core::Split::Heldout,
            HeldoutArg::HeldoutInstances => arl_core::Split::HeldoutInstances,
        };
        if built.env.tasks(split)?.is_empty() {
            return Err(crate::usage!("env `{}` has no {split} tasks; evaluate --split heldout", config.env.name));
        }
        let n = config.eval.n as usize;
        let e = evaluate_split(built.env.as_ref(), &built.codec, &mut built.policy, split, n, &opts, &bootstrap, &mut progress)?;
        writeln!(out, "{}", serde_json::to_string_pretty(&e)?)?;
        Ok(())
    }
}
