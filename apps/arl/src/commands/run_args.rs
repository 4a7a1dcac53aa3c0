//! The flags shared by every command that resolves a run configuration (`run`,
//! `config show`). Each flag is shorthand for one config key; `--set` reaches any key.

use std::path::PathBuf;

use anyhow::Context;
use arl_core::RunConfig;
use arl_core::config::Overrides;

#[derive(Debug, Default, clap::Args)]
pub struct RunArgs {
    /// TOML run configuration; flags and --set override it.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Algorithm preset (algo; `arl list`): sets loss, advantage and clip keys beneath the
    /// config file, the other flags and --set.
    #[arg(long)]
    pub algo: Option<String>,
    /// Environment (env.name).
    #[arg(long)]
    pub env: Option<String>,
    /// Policy loss (loss.name).
    #[arg(long)]
    pub loss: Option<String>,
    /// Advantage estimator (advantage.name).
    #[arg(long)]
    pub advantage: Option<String>,
    /// Sandbox for model-written code (sandbox.name).
    #[arg(long)]
    pub sandbox: Option<String>,
    /// Model directory, Hugging Face repo id (local cache only) or preset (model.source).
    #[arg(long)]
    pub model: Option<String>,
    /// cpu | cuda | tch | tch-cuda (model.backend).
    #[arg(long)]
    pub backend: Option<String>,
    /// GPU ordinal (model.device_index).
    #[arg(long)]
    pub device_index: Option<i64>,
    /// f32 | bf16 | f16 (model.dtype).
    #[arg(long)]
    pub dtype: Option<String>,
    /// Training steps (trainer.steps).
    #[arg(long)]
    pub steps: Option<i64>,
    /// Episodes per task per step (trainer.group_size).
    #[arg(long)]
    pub group_size: Option<i64>,
    /// Tasks per step (trainer.prompts).
    #[arg(long)]
    pub prompts: Option<i64>,
    /// Learning rate (trainer.lr).
    #[arg(long)]
    pub lr: Option<f64>,
    /// Rows per micro-batch (trainer.micro).
    #[arg(long)]
    pub micro: Option<i64>,
    /// Episodes decoded at once (trainer.gen_batch).
    #[arg(long)]
    pub gen_batch: Option<i64>,
    /// Seed of the trainer (trainer.seed).
    #[arg(long)]
    pub seed: Option<i64>,
    /// New tokens per assistant turn (sampling.max_new_tokens).
    #[arg(long)]
    pub max_new_tokens: Option<i64>,
    /// Assistant turns per episode (env.max_turns).
    #[arg(long)]
    pub max_turns: Option<i64>,
    /// Episodes per held-out task in evaluation (eval.n).
    #[arg(long)]
    pub eval_n: Option<i64>,
    /// Output directory (output.dir).
    #[arg(long, value_name = "DIR")]
    pub out: Option<String>,
    /// Continue from the last checkpoint in --out (trainer.resume).
    #[arg(long)]
    pub resume: bool,
    /// Set any config key, e.g. --set loss.clip_high=0.28 (repeatable, applied last).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
}

impl RunArgs {
    /// Defaults ← --algo preset ← --config ← flags ← --set, then validated against the
    /// registry. The preset only fills keys nothing else set (`algo` itself follows the
    /// usual order: --set algo=… beats --algo, which beats the file's `algo`).
    pub fn resolve(&self) -> anyhow::Result<RunConfig> {
        let mut o = Overrides::default();
        macro_rules! flag {
            ($field:ident => $key:literal) => {
                if let Some(v) = &self.$field {
                    o.set($key, v.clone());
                }
            };
        }
        flag!(algo => "algo");
        flag!(env => "env.name");
        flag!(loss => "loss.name");
        flag!(advantage => "advantage.name");
        flag!(sandbox => "sandbox.name");
        flag!(model => "model.source");
        flag!(backend => "model.backend");
        flag!(device_index => "model.device_index");
        flag!(dtype => "model.dtype");
        flag!(steps => "trainer.steps");
        flag!(group_size => "trainer.group_size");
        flag!(prompts => "trainer.prompts");
        flag!(lr => "trainer.lr");
        flag!(micro => "trainer.micro");
        flag!(gen_batch => "trainer.gen_batch");
        flag!(seed => "trainer.seed");
        flag!(max_new_tokens => "sampling.max_new_tokens");
        flag!(max_turns => "env.max_turns");
        flag!(eval_n => "eval.n");
        flag!(out => "output.dir");
        if self.resume {
            o.set("trainer.resume", true);
        }
        for arg in &self.set {
            o.push_set(arg)?;
        }
        let config = RunConfig::load(self.config.as_deref(), &o)?;
        config.validate()?;
        Ok(config)
    }

    /// As [`resolve`](Self::resolve), with the config file named in the error context.
    pub fn resolve_with_context(&self) -> anyhow::Result<RunConfig> {
        match &self.config {
            Some(path) => self.resolve().with_context(|| format!("run configuration {}", path.display())),
            None => self.resolve(),
        }
    }
}
