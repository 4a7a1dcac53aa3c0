//! `arl run`: resolve and validate the run configuration, check the run folder, build every
//! piece by name, and only then claim the folder and train (arl-core's `train::trainer`),
//! writing metrics, checkpoints and `results.json` into `output.dir` with the console log
//! beside them (`run.log`). A start that fails at any point before training changes nothing
//! in the folder. `--smoke` checks instead of training (smoke.rs).

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use arl_chat::HfChatCodec;
use arl_core::config::Launcher;
use arl_core::policy::{Policy, TrainablePolicy};
use arl_core::registry::{self, AdvantagePlugin, EnvPlugin, LossPlugin, SandboxPlugin};
use arl_core::{AdvantageFn, Env, PolicyLoss, RunConfig};
use arl_optim::OptimConfig;
use arl_qwen3::hub::Source;
use arl_qwen3::{QwenPolicy, QwenTrainer, TrainSetup};
use arl_train::dist::Coordinator;
use arl_train::run_dir::{self, Start};
use arl_train::trainer::{Parts, train, train_with};

use super::run_args::{ConfigArgs, TrainArgs};

const EXAMPLES: &str = "\
Examples:
  arl run                                         the default configuration, end to end
  arl run --env edit --model Qwen/Qwen3-0.6B --steps 50 --out runs/edit
  arl run --config run.toml --set loss.clip_high=0.28 --set trainer.lr=3e-6
  arl run --algo dapo --env tools --sandbox wasm --out runs/dapo
  arl run --out runs/edit --resume                continue a killed run (same flags)
  arl run --out runs/edit --overwrite             replace the run in runs/edit
  arl run --env tools --smoke                     check the template and tools, no training
  arl config show --algo dapo                     what a run would use, as TOML";

#[derive(Debug, clap::Args)]
#[command(after_help = EXAMPLES)]
pub struct Run {
    #[command(flatten)]
    pub config: ConfigArgs,
    #[command(flatten, next_help_heading = "Training")]
    pub train: TrainArgs,
    /// Replace the run in --out: its files (run.json, config.toml, run.log, metrics.jsonl,
    /// results.json, checkpoints/) are removed once the new run has loaded; other files stay.
    #[arg(long, conflicts_with = "resume")]
    pub overwrite: bool,
    /// Check the chat template and the tools, run --smoke-n held-out episodes, print
    /// transcripts and tool counters, and exit without training (writes only smoke.json).
    #[arg(long, conflicts_with_all = ["resume", "overwrite"])]
    pub smoke: bool,
    /// Held-out episodes of --smoke.
    #[arg(long, default_value_t = 4, requires = "smoke", value_parser = clap::value_parser!(u32).range(1..))]
    pub smoke_n: u32,
    /// --launcher slurm: print the two sbatch scripts instead of submitting them.
    #[arg(long, conflicts_with = "smoke")]
    pub dry_run: bool,
    /// --launcher slurm: after submitting, print metrics.jsonl as it grows until the trainer
    /// job ends.
    #[arg(long, conflicts_with_all = ["smoke", "dry_run"])]
    pub follow: bool,
    /// Run as the trainer job of --launcher slurm (its sbatch script passes this).
    #[arg(long, hide = true)]
    pub slurm_job: bool,
}

impl Run {
    pub fn execute(self, out: &mut dyn Write) -> anyhow::Result<()> {
        let config = self.config.resolve_with_context(Some(&self.train))?;
        if !self.smoke {
            arl_train::trainer::check_sampling_for_training(&config)?;
        }
        let out_dir = PathBuf::from(&config.output.dir);
        let submit = config.cluster.launcher == Launcher::Slurm && !self.slurm_job;
        if (self.dry_run || self.follow) && !submit {
            return Err(crate::usage!(
                "--{} goes with --launcher slurm (it prints or follows the sbatch jobs); this run's launcher is `{}`",
                if self.dry_run { "dry-run" } else { "follow" },
                config.cluster.launcher.name()
            ));
        }
        if submit && !self.smoke {
            return self.submit(&config, out_dir, out);
        }
        if self.smoke {
            let Built { env, codec, mut policy, notes, .. } = Built::new(&config)?;
            let mut log = |line: &str| {
                let _ = writeln!(out, "{line}");
            };
            log(&header(&config, &format!("smoke (no training, {})", arl_train::trainer::plural(self.smoke_n as usize, "episode"))));
            notes.iter().for_each(|n| log(n));
            std::fs::create_dir_all(&out_dir).with_context(|| format!("creating {}", out_dir.display()))?;
            return super::smoke::smoke(&config, env.as_ref(), &codec, &mut policy, self.smoke_n as usize, &out_dir, &mut log);
        }
        // A tracker directory that cannot be written is refused before anything loads.
        if let Some(dir) = &config.output.tensorboard {
            arl_train::tensorboard::check_dir(std::path::Path::new(dir))
                .map_err(|message| arl_core::ConfigError::Invalid { key: "output.tensorboard".into(), message })?;
        }
        // Read only: refuse another run's folder, or a resume that cannot continue, before loading.
        let start = run_dir::check_start(&out_dir, &config, self.overwrite)?;
        let Built { env, codec, loss, advantage, mut policy, notes } = Built::new(&config)?;
        let reference = load_reference(&config)?;
        let policy_device = TrainablePolicy::device(&policy);

        // Everything loaded: now the folder is this run's.
        let (meta, mut log_file) = super::run_folder::claim(&config, &out_dir, &start, codec.dir(), format!("{policy_device:?}"))?;
        let mut log = |line: &str| {
            let _ = writeln!(out, "{line}");
            let _ = writeln!(log_file, "{line}");
        };
        log(&header(&config, &format!("steps={}", config.trainer.steps)));
        if let Start::Overwrite { files } = &start {
            log(&format!("overwrote the previous run's {}", files.join(", ")));
        }
        notes.iter().for_each(|n| log(n));
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
        match config.cluster.launcher {
            Launcher::Local => {
                train(parts, &config, meta, &out_dir, &mut log, &mut progress)?;
            }
            Launcher::Procs => {
                let mut coordinator = Coordinator::create(&out_dir, &config.cluster, &run_dir::new_run_id())?;
                let workers = super::procs::Workers::spawn(&out_dir, config.cluster.rollout_workers)?;
                coordinator.set_watch(workers.watch());
                log(&format!(
                    "rollouts: {} (logs in {})",
                    arl_train::trainer::plural(config.cluster.rollout_workers as usize, "worker process"),
                    coordinator.layout().logs().display()
                ));
                let trained = train_with(parts, Some(&mut coordinator), &config, meta, &out_dir, &mut log, &mut progress);
                coordinator.stop()?;
                workers.finish(std::time::Duration::from_secs(10));
                trained?;
            }
            Launcher::Slurm => {
                let mut coordinator = Coordinator::create(&out_dir, &config.cluster, &run_dir::new_run_id())?;
                let jobs = super::slurm::read_jobs(&out_dir)?;
                if let Some(j) = &jobs {
                    let every = std::time::Duration::from_secs_f64(config.cluster.lease_timeout_s.min(30.0));
                    coordinator.set_watch(super::slurm::watch_workers(j.workers.clone(), every));
                }
                let workers = jobs.map(|j| format!("job array {}", j.workers));
                log(&format!(
                    "rollouts: {} Slurm workers ({}; logs in {})",
                    config.cluster.rollout_workers,
                    workers.unwrap_or_else(|| "started by hand".into()),
                    super::slurm::dir(&out_dir).display()
                ));
                let trained = train_with(parts, Some(&mut coordinator), &config, meta, &out_dir, &mut log, &mut progress);
                coordinator.stop()?;
                trained?;
            }
        }
        log(&format!("report: arl report {}", out_dir.display()));
        Ok(())
    }
}

impl Run {
    /// `--launcher slurm` on a login node: check what can be checked here, then render and
    /// submit the trainer job and the worker array (slurm.rs). The folder is claimed by the
    /// trainer job once it has loaded, as in a local run.
    fn submit(&self, config: &RunConfig, out_dir: PathBuf, out: &mut dyn Write) -> anyhow::Result<()> {
        if !self.dry_run {
            super::slurm::need_on_path("sbatch", "--launcher slurm")?;
        }
        let run_dir = std::path::absolute(&out_dir).with_context(|| format!("resolving {}", out_dir.display()))?;
        super::slurm::check_path(&run_dir)?;
        super::slurm::check_shared(&run_dir, &config.cluster.slurm)?;
        let start = run_dir::check_start(&run_dir, config, self.overwrite)?;
        let req =
            super::slurm::Submit { config, run_dir, mode: super::slurm::Mode::of(&start), dry_run: self.dry_run, follow: self.follow };
        super::slurm::submit(req, out)
    }
}

fn header(config: &RunConfig, what: &str) -> String {
    format!(
        "arl run: env={} loss={} advantage={} sandbox={} model={} backend={} {what} → {}",
        config.env.name,
        config.loss.name,
        config.advantage.name,
        config.sandbox.name,
        config.model.source,
        config.model.backend,
        config.output.dir
    )
}

/// Every piece of a run, built by name from the config, with what is worth telling the user
/// (`notes`: a random-weights model, budgets some prompts exceed).
pub struct Built {
    pub env: Box<dyn Env>,
    pub codec: HfChatCodec,
    pub loss: Box<dyn PolicyLoss>,
    pub advantage: Box<dyn AdvantageFn>,
    pub policy: QwenTrainer,
    pub notes: Vec<String>,
}

impl Built {
    /// Everything but the weights is checked first (the env, the tokenizer, the token budgets
    /// against the real prompts), then the model loads and its vocabulary is checked against
    /// the tokenizer.
    pub fn new(config: &RunConfig) -> anyhow::Result<Self> {
        let sandbox = (registry::get::<SandboxPlugin>(&config.sandbox.name)?.build)(&config.sandbox)?;
        let env = (registry::get::<EnvPlugin>(&config.env.name)?.build)(&config.env, sandbox)?;
        let loss = (registry::get::<LossPlugin>(&config.loss.name)?.build)(&config.loss)?;
        let advantage = (registry::get::<AdvantagePlugin>(&config.advantage.name)?.build)(&config.advantage)?;
        let (codec, template_note) = super::chat_codec::load(&config.model, super::chat_codec::env_sends_tools(env.as_ref()))?;
        let mut notes = arl_train::preflight::preflight(config, env.as_ref(), &codec)?.warnings;
        notes.extend(template_note);
        if let Ok(Source::Preset(name)) = arl_qwen3::hub::resolve(&config.model.source) {
            notes.insert(
                0,
                format!(
                    "note: model `{name}` is a preset with random weights: it cannot learn, so this shows the pipeline working, \
                     not a model improving; pass a checkpoint with --model"
                ),
            );
        }
        let (mut policy, lora_note) = load_policy(config)?;
        super::chat_codec::check_vocab(&codec, policy.model().config.vocab_size, &config.model)?;
        notes.extend(lora_note);
        if let Some(device) = arl_qwen3::device::rollout_device_for(&config.model)? {
            policy.set_rollout_device(Some(device));
            notes.push(format!(
                "async sampling on {}, the update on {}: the weights are copied there after every step",
                config.model.rollout_device.as_deref().unwrap_or_default(),
                arl_core::DeviceSpec { backend: config.model.backend, index: config.model.device_index }
            ));
        }
        Ok(Self { env, codec, loss, advantage, policy, notes })
    }
}

/// The policy to train, as `[model]`, `[lora]` and `[trainer]` say: every weight, or LoRA
/// adapters on the frozen base; with a note on what trains when it is LoRA.
pub fn load_policy(config: &RunConfig) -> anyhow::Result<(QwenTrainer, Option<String>)> {
    let device = arl_qwen3::device::device(config.model.backend, config.model.device_index, config.model.dtype)?;
    let optim = OptimConfig { weight_decay: config.trainer.weight_decay, grad_clip: config.trainer.grad_clip, ..OptimConfig::default() };
    let setup = TrainSetup {
        dtype: config.model.dtype,
        gradient_checkpointing: config.trainer.gradient_checkpointing,
        lora: config.lora.clone(),
        adapter: config.model.adapter.as_ref().map(PathBuf::from),
        seed: config.trainer.seed,
    };
    let policy = QwenTrainer::load_setup(&config.model.source, &device, optim, &setup).with_context(|| match &config.model.adapter {
        Some(a) => format!("loading model `{}` with adapter {a}", config.model.source),
        None => format!("loading model `{}`", config.model.source),
    })?;
    let note = policy.lora().map(|l| {
        let (total, trainable) = policy.param_counts();
        format!(
            "LoRA: rank {}, alpha {}{} on {}: {trainable} of {total} parameters train ({:.2}%), the base is frozen",
            l.rank,
            l.alpha,
            if l.use_rslora { " (rsLoRA)" } else { "" },
            l.target_modules.join(", "),
            100.0 * trainable as f64 / total.max(1) as f64
        )
    });
    Ok((policy, note))
}

/// The frozen KL reference when `loss.kl_coef > 0`: `model.reference`, else `model.source`
/// with `model.adapter` (the initial policy, also when resuming), on the policy's device
/// without autodiff.
fn load_reference(config: &RunConfig) -> anyhow::Result<Option<QwenPolicy>> {
    if config.loss.kl_coef <= 0.0 {
        return Ok(None);
    }
    let device = arl_qwen3::device::device(config.model.backend, config.model.device_index, config.model.dtype)?;
    let (source, adapter) = match &config.model.reference {
        Some(r) => (r.as_str(), None),
        None => (config.model.source.as_str(), config.model.adapter.as_deref().map(std::path::Path::new)),
    };
    let reference = QwenPolicy::load_adapted(source, adapter, &device, config.model.dtype)
        .with_context(|| format!("loading the reference model `{source}`"))?;
    Ok(Some(reference))
}
