//! `arl worker RUN_DIR`: a rollout worker. It builds the env, the chat codec and the sandbox
//! by name from the run folder's `config.toml`, as `arl run` does, then takes rollout rounds
//! from `RUN_DIR/dist/` until the trainer ends the run (arl-core's `train::dist`). `arl run
//! --launcher procs` starts these itself.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use arl_core::policy::Policy;
use arl_core::registry::{self, EnvPlugin, SandboxPlugin};
use arl_core::{RunConfig, Split};
use arl_qwen3::QwenPolicy;
use arl_train::dist::worker::{self, Fault, WorkerOptions};
use arl_train::dist::{Index, Layout, PROTOCOL, read_json};
use arl_train::rounds::RoundContext;
use arl_train::trainer::rollout_options;

#[derive(Debug, clap::Args)]
pub struct Worker {
    /// The run folder of a run with `cluster.launcher = "procs"` (its config.toml and dist/).
    pub run_dir: PathBuf,
    /// This worker's number (heartbeat `dist/workers/w{N}.json`; claims carry it).
    #[arg(long, default_value_t = 0)]
    pub worker_id: u32,
    /// Wait up to this many seconds for the trainer to publish the run (its config.toml and
    /// dist/index.json) before giving up; a Slurm worker starts while its trainer loads.
    #[arg(long, value_name = "SECONDS", default_value_t = 0)]
    pub wait_for_trainer: u64,
}

impl Worker {
    pub fn execute(self, out: &mut dyn Write) -> anyhow::Result<()> {
        let config_path = self.run_dir.join("config.toml");
        let index_path = Layout::of(&self.run_dir).index();
        let t0 = std::time::Instant::now();
        while !(config_path.is_file() && index_path.is_file()) && t0.elapsed().as_secs() < self.wait_for_trainer {
            std::thread::sleep(Duration::from_millis(500));
        }
        if !config_path.is_file() {
            return Err(crate::usage!(
                "{}: no such file; point arl worker at the run folder of a run started with --launcher procs or slurm",
                config_path.display()
            ));
        }
        let text = std::fs::read_to_string(&config_path).with_context(|| format!("reading {}", config_path.display()))?;
        let config = RunConfig::from_toml_str(&text).with_context(|| format!("run configuration {}", config_path.display()))?;
        let layout = Layout::of(&self.run_dir);
        // The trainer writes the index before it starts any worker.
        let Some(index) = read_json::<Index>(&layout.index())? else {
            return Err(crate::usage!(
                "{}: no such file; the run in {} does not roll out through workers (start it with --launcher procs)",
                layout.index().display(),
                self.run_dir.display()
            ));
        };
        if index.protocol != PROTOCOL || index.arl_version != env!("CARGO_PKG_VERSION") {
            return Err(crate::usage!(
                "{} is a run of arl {} (protocol {}), this is arl {} (protocol {PROTOCOL}); start workers of the trainer's version",
                self.run_dir.display(),
                index.arl_version,
                index.protocol,
                env!("CARGO_PKG_VERSION")
            ));
        }
        let fault = Fault::from_env().map_err(|e| crate::usage!("{e}"))?;
        let sandbox = (registry::get::<SandboxPlugin>(&config.sandbox.name)?.build)(&config.sandbox)?;
        let env = (registry::get::<EnvPlugin>(&config.env.name)?.build)(&config.env, sandbox)?;
        let (codec, _) = super::chat_codec::load(&config.model, super::chat_codec::env_sends_tools(env.as_ref()))?;
        let tasks = env.tasks(Split::Train)?;
        let rollout = rollout_options(&config, env.as_ref(), config.trainer.seed);
        let ctx = RoundContext::new(env.as_ref(), &codec, &tasks, config.trainer.group_size as usize, rollout);
        let device = arl_qwen3::device::device(config.model.backend, config.model.device_index, config.model.dtype)?;
        let (source, dtype, lora) = (config.model.source.clone(), config.model.dtype, config.lora.is_some());
        // LoRA publishes the adapter only: the base comes from model.source.
        let mut load = |dir: &std::path::Path| -> Result<Box<dyn Policy>, String> {
            let policy = if lora {
                QwenPolicy::load_adapted(&source, Some(dir), &device, dtype)
            } else {
                QwenPolicy::load_as(&dir.display().to_string(), &device, dtype)
            };
            policy.map(|p| Box::new(p) as Box<dyn Policy>).map_err(|e| e.to_string())
        };
        let beat_every = Duration::from_secs_f64((config.cluster.lease_timeout_s / 5.0).clamp(0.05, 5.0));
        let idle_timeout = Duration::from_secs_f64(config.cluster.worker_idle_timeout_s);
        let opts = WorkerOptions { worker: self.worker_id, beat_every, fault, idle_timeout };
        let mut log = |line: &str| {
            let _ = writeln!(out, "{line}");
        };
        log(&format!("arl worker w{}: pid {}, run {}", self.worker_id, std::process::id(), self.run_dir.display()));
        worker::run(&layout, &ctx, &opts, &mut load, &mut log)?;
        Ok(())
    }
}
