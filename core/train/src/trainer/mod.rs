//! A training run: the start-up self-check, a held-out evaluation before, `steps` steps of
//! rollout → advantages → update, an evaluation after, and the paired difference — with
//! metrics to the console and `metrics.jsonl`, checkpoints, and `results.json`.
//!
//! [`train_with`] composes the stages, one file each: `start` (resume from a checkpoint, the
//! evaluation before), `steps` (the step loop, lockstep or with a rollout thread ahead) and
//! `finish` (`final`, the evaluation after, `results.json`). `options` derives what the
//! stages take from the configuration; `held_out` runs the held-out evaluations.

mod finish;
mod held_out;
mod options;
mod start;
mod steps;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use self::held_out::HeldOut;
pub use self::options::{batch_options, check_sampling_for_training, eval_options, response_budget, rollout_options, update_options};
use crate::TrainError;
use crate::checkpoint::TrainerState;
use crate::eval::Evaluation;
use crate::metrics::StepMetrics;
use crate::rounds::RolloutExecutor;
use arl_core::chat::ChatCodec;
use arl_core::eval::PairedDifference;
use arl_core::loss::PolicyLoss;
use arl_core::policy::{Policy, TrainablePolicy};
use arl_core::{AdvantageFn, Env, RunConfig};

/// The concrete pieces a run composes (built by name by the caller).
pub struct Parts<'a> {
    pub env: &'a dyn Env,
    pub codec: &'a dyn ChatCodec,
    pub policy: &'a mut dyn TrainablePolicy,
    pub loss: &'a dyn PolicyLoss,
    pub advantage: &'a dyn AdvantageFn,
    /// The frozen reference policy of a KL term (`loss.kl_coef > 0`), if any.
    pub reference: Option<&'a dyn Policy>,
}

/// After this many steps in a row whose loss or gradient was NaN or infinite, the run stops.
pub const MAX_NON_FINITE_STEPS: u32 = 3;

/// Where and with what a run ran (filled in by the caller).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RunMeta {
    pub arl_version: String,
    /// The commit arl was built from (embedded at build time), when it was built from a git
    /// checkout.
    pub git_commit: Option<String>,
    /// The run's id (`run.json`; checkpoints carry it).
    #[serde(default)]
    pub run_id: String,
    /// The model directory the weights came from (unset for a random-weights preset).
    #[serde(default)]
    pub model_dir: Option<String>,
    /// The Hugging Face snapshot (commit hash) of the model, when it came from the hub cache.
    #[serde(default)]
    pub model_snapshot: Option<String>,
    /// The directory of the tokenizer and chat template.
    #[serde(default)]
    pub tokenizer: Option<String>,
    /// The device, as burn names it.
    pub device: String,
    /// The command line.
    pub command: String,
    /// Seconds since the Unix epoch at the start.
    pub started_unix: u64,
}

/// What a run produced: the body of `results.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RunReport {
    pub meta: RunMeta,
    pub config: RunConfig,
    /// The chat layer's start-up self-check summary.
    pub self_check: String,
    pub steps: Vec<StepMetrics>,
    /// The `heldout` split (the coding gyms: bug templates no training task has) before and
    /// after training.
    pub before: Option<Evaluation>,
    pub after: Option<Evaluation>,
    /// pass@1 after − before on the same held-out tasks.
    pub difference: Option<PairedDifference>,
    /// The second held-out split, `heldout_instances` (the coding gyms: the training bugs
    /// under names and operand orders never trained on), when the env has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heldout_instances: Option<SplitResult>,
    /// Tool and episode counters summed over training episodes.
    pub tool_stats: BTreeMap<String, u64>,
    pub wall_seconds: f64,
}

/// A held-out split's evaluations before and after training and their paired difference.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SplitResult {
    pub before: Option<Evaluation>,
    pub after: Option<Evaluation>,
    pub difference: Option<PairedDifference>,
}

/// Run training as `config` says, writing into `out_dir`. `log` receives console lines;
/// `progress(stage, done, total)` is called as episodes finish (for a progress bar).
pub fn train(
    parts: Parts<'_>,
    config: &RunConfig,
    meta: RunMeta,
    out_dir: &Path,
    log: &mut dyn FnMut(&str),
    progress: &mut dyn FnMut(&str, usize, usize),
) -> Result<RunReport, TrainError> {
    train_with(parts, None, config, meta, out_dir, log, progress)
}

/// As [`train`], with lockstep's rollout rounds run by `rollouts` (rollout workers,
/// `arl_train::dist`); `None`: in this process ([`LocalRollouts`](crate::rounds::LocalRollouts)).
/// Held-out evaluations always run here.
pub fn train_with(
    parts: Parts<'_>,
    rollouts: Option<&mut dyn RolloutExecutor>,
    config: &RunConfig,
    meta: RunMeta,
    out_dir: &Path,
    log: &mut dyn FnMut(&str),
    progress: &mut dyn FnMut(&str, usize, usize),
) -> Result<RunReport, TrainError> {
    let start = Instant::now();
    let pinned = config.trainer.weight_sync == arl_core::config::WeightSync::Pinned;
    if rollouts.is_some() && config.trainer.max_steps_off_policy.is_some() && !pinned {
        return Err(TrainError::Config(arl_core::ConfigError::Invalid {
            key: "trainer.max_steps_off_policy".into(),
            message: "rollout workers need lockstep or pinned training (trainer.weight_sync = \"pinned\"); \
                      unset it, pin it, or roll out locally"
                .into(),
        }));
    }
    check_sampling_for_training(config)?;
    std::fs::create_dir_all(out_dir).map_err(TrainError::at(out_dir))?;
    let Parts { env, codec, policy, loss, advantage, reference } = parts;
    let self_check = codec.self_check()?;
    log(&self_check);
    let rollout_opts = rollout_options(config, env, config.trainer.seed);
    let batch_opts = batch_options(config, &rollout_opts)?;
    let run_id = (!meta.run_id.is_empty()).then(|| meta.run_id.clone());

    let resumed = start::resume(policy, config, out_dir, run_id.as_deref(), log)?;
    let earlier_seconds = resumed.state.as_ref().map_or(0.0, |s| s.wall_seconds);
    let run = Run { config, env, codec, out_dir, run_id, start, earlier_seconds };
    let held_out = HeldOut::new(config, env, codec)?;
    let before = start::evaluate_before(&run, &held_out, policy, resumed.state.as_ref(), log, progress)?;
    let learner = steps::Learner { policy: &mut *policy, loss, advantage, reference };
    let trained = steps::train_steps(&run, learner, rollouts, &rollout_opts, &batch_opts, &before, resumed.state, log, progress)?;
    finish::finish(&run, &held_out, policy, self_check, meta, before, trained, resumed.at_final, log, progress)
}

/// What every stage of a run reads: the configuration, the env and chat codec, the run folder
/// and identity, and the clock.
struct Run<'a> {
    config: &'a RunConfig,
    env: &'a dyn Env,
    codec: &'a dyn ChatCodec,
    out_dir: &'a Path,
    run_id: Option<String>,
    start: Instant,
    /// Seconds the run spent before this process (from the checkpoint it resumed).
    earlier_seconds: f64,
}

impl Run<'_> {
    /// Seconds the run has spent, in this process and before.
    fn wall_seconds(&self) -> f64 {
        self.earlier_seconds + self.start.elapsed().as_secs_f64()
    }

    /// The trainer state of a checkpoint after `step` steps, with the evaluations before
    /// training (no evaluation after, no task sampler state, nothing in flight: callers add them).
    fn state(
        &self,
        step: u32,
        before: &[Option<Evaluation>; 2],
        steps: &[StepMetrics],
        tool_stats: &BTreeMap<String, u64>,
        tasks_used: usize,
    ) -> TrainerState {
        TrainerState {
            step,
            config: self.config.clone(),
            steps: steps.to_vec(),
            before: before[0].clone(),
            before_instances: before[1].clone(),
            tool_stats: tool_stats.clone(),
            wall_seconds: self.wall_seconds(),
            tasks_used,
            run_id: self.run_id.clone(),
            ..TrainerState::default()
        }
    }
}

/// `1 episode`, `4 episodes`.
pub fn plural(n: usize, noun: &str) -> String {
    if n == 1 { format!("1 {noun}") } else { format!("{n} {noun}s") }
}

/// A seeded permutation of 0..n (Fisher–Yates with splitmix64).
pub(crate) fn shuffled(n: usize, seed: u64) -> Vec<usize> {
    let mut v: Vec<usize> = (0..n).collect();
    arl_core::rng::SplitMix64(seed ^ 0x5eed).shuffle(&mut v);
    v
}
