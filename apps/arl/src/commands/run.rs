//! `arl run`: resolve and validate the run configuration, build every piece by name, and
//! train (arl-core's `train::trainer`), writing metrics, checkpoints and `results.json` into
//! `output.dir` with the console log beside them (`run.log`). `--smoke` checks instead of
//! training (smoke.rs).

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use arl_chat::HfChatCodec;
use arl_core::policy::{Policy, TrainablePolicy};
use arl_core::registry::{self, AdvantagePlugin, EnvPlugin, LossPlugin, SandboxPlugin};
use arl_core::train::trainer::{Parts, RunMeta, train};
use arl_core::{AdvantageFn, Env, PolicyLoss, RunConfig};
use arl_optim::OptimConfig;
use arl_qwen3::{QwenPolicy, QwenTrainer};

use super::RunArgs;

#[derive(Debug, clap::Args)]
pub struct Run {
    #[command(flatten)]
    pub args: RunArgs,
    /// Check the chat template and the tools, run --smoke-n held-out episodes, print
    /// transcripts and tool counters, and exit without training (smoke.rs).
    #[arg(long)]
    pub smoke: bool,
    /// Held-out episodes of --smoke.
    #[arg(long, default_value_t = 4, requires = "smoke")]
    pub smoke_n: usize,
}

impl Run {
    pub fn execute(self, out: &mut dyn Write) -> anyhow::Result<()> {
        let config = self.args.resolve_with_context()?;
        let out_dir = PathBuf::from(&config.output.dir);
        std::fs::create_dir_all(&out_dir).with_context(|| format!("creating output directory {}", out_dir.display()))?;
        if !config.trainer.resume {
            // A resumed run keeps the file of the run it continues (same config but `resume`).
            std::fs::write(out_dir.join("config.toml"), config.to_toml())?;
        }
        // A resumed run continues the console log of the run it continues.
        let log_path = out_dir.join("run.log");
        let mut log_file = std::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .append(config.trainer.resume)
            .truncate(!config.trainer.resume)
            .open(&log_path)
            .with_context(|| format!("opening {}", log_path.display()))?;

        let Built { env, codec, loss, advantage, mut policy, notices } = Built::new(&config)?;
        let reference = if self.smoke { None } else { load_reference(&config)? };
        let policy_device = TrainablePolicy::device(&policy);

        let mut log = |line: &str| {
            let _ = writeln!(out, "{line}");
            let _ = writeln!(log_file, "{line}");
        };
        log(&format!(
            "arl run: env={} loss={} advantage={} sandbox={} model={} backend={} {} → {}",
            config.env.name,
            config.loss.name,
            config.advantage.name,
            config.sandbox.name,
            config.model.source,
            config.model.backend,
            if self.smoke { format!("smoke (no training, {} episodes)", self.smoke_n) } else { format!("steps={}", config.trainer.steps) },
            out_dir.display()
        ));
        for notice in &notices {
            log(notice);
        }
        if self.smoke {
            return super::smoke::smoke(&config, env.as_ref(), &codec, &mut policy, self.smoke_n, &out_dir, &mut log);
        }
        let parts = Parts {
            env: env.as_ref(),
            codec: &codec,
            policy: &mut policy,
            loss: loss.as_ref(),
            advantage: advantage.as_ref(),
            reference: reference.as_ref().map(|r| r as &dyn Policy),
        };
        let mut bar = super::progress::Progress::stderr();
        let mut progress = |stage: &str, done: usize, total: usize| bar.update(stage, done, total);
        let meta = RunMeta {
            arl_version: env!("CARGO_PKG_VERSION").to_string(),
            git_commit: git_commit(),
            device: format!("{:?}", policy_device),
            command: std::env::args().collect::<Vec<_>>().join(" "),
            started_unix: std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0),
        };
        train(parts, &config, meta, &out_dir, &mut log, &mut progress)?;
        Ok(())
    }
}

/// Every piece of a run, built by name from the config.
pub struct Built {
    pub env: Box<dyn Env>,
    pub codec: HfChatCodec,
    pub loss: Box<dyn PolicyLoss>,
    pub advantage: Box<dyn AdvantageFn>,
    pub policy: QwenTrainer,
    /// Lines for the console about choices arl made (the chat template).
    pub notices: Vec<String>,
}

impl Built {
    pub fn new(config: &RunConfig) -> anyhow::Result<Self> {
        let sandbox = (registry::get::<SandboxPlugin>(&config.sandbox.name)?.build)(&config.sandbox)?;
        let env = (registry::get::<EnvPlugin>(&config.env.name)?.build)(&config.env, sandbox)?;
        let loss = (registry::get::<LossPlugin>(&config.loss.name)?.build)(&config.loss)?;
        let advantage = (registry::get::<AdvantagePlugin>(&config.advantage.name)?.build)(&config.advantage)?;
        let (codec, notice) = super::chat_codec::load(&config.model, !env.tools().is_empty())?;
        let device = arl_qwen3::device::device(config.model.backend, config.model.device_index, config.model.dtype)?;
        let optim =
            OptimConfig { weight_decay: config.trainer.weight_decay, grad_clip: config.trainer.grad_clip, ..OptimConfig::default() };
        let policy =
            QwenTrainer::load_with(&config.model.source, &device, optim, config.model.dtype, config.trainer.gradient_checkpointing)
                .with_context(|| format!("loading model `{}`", config.model.source))?;
        Ok(Self { env, codec, loss, advantage, policy, notices: notice.into_iter().collect() })
    }
}

/// The frozen KL reference when `loss.kl_coef > 0`: `model.reference`, else `model.source`
/// (the initial policy, also when resuming), on the policy's device without autodiff.
fn load_reference(config: &RunConfig) -> anyhow::Result<Option<QwenPolicy>> {
    if config.loss.kl_coef <= 0.0 {
        return Ok(None);
    }
    let device = arl_qwen3::device::device(config.model.backend, config.model.device_index, config.model.dtype)?;
    let source = config.model.reference.as_deref().unwrap_or(&config.model.source);
    let reference =
        QwenPolicy::load_as(source, &device, config.model.dtype).with_context(|| format!("loading the reference model `{source}`"))?;
    Ok(Some(reference))
}

/// The source tree's commit, when `git` and a checkout are there.
fn git_commit() -> Option<String> {
    let out = std::process::Command::new("git").args(["rev-parse", "HEAD"]).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}
