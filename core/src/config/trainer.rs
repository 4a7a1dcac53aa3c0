//! Settings of the training loop, the evaluation and the outputs.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One step = `prompts` tasks × `group_size` episodes, then `epochs` × `minibatches`
/// updates.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct TrainerConfig {
    /// Training steps (each: roll out, compute advantages, update).
    pub steps: u32,
    /// Episodes per task per step (G).
    pub group_size: u32,
    /// Tasks per step (P).
    pub prompts: u32,
    /// Peak learning rate of AdamW (> 0).
    pub lr: f64,
    /// `constant`, or `cosine`: linear warmup over `warmup_steps` (the last warmup step at
    /// `lr`), then cosine decay from `lr` at the first step after warmup to `lr · min_lr_ratio`
    /// at the last step (`steps − 1`, 0-based; a single step after warmup runs at `lr`).
    pub lr_schedule: LrSchedule,
    /// Steps of linear warmup from lr/warmup_steps to lr (fewer than `steps`); 0: none.
    pub warmup_steps: u32,
    /// The cosine schedule decays to `lr · min_lr_ratio` (0 to 1).
    pub min_lr_ratio: f64,
    /// Passes over a step's episodes in the update (PPO epochs).
    pub epochs: u32,
    /// Optimizer steps per epoch: the step's `prompts × group_size` rows are split into
    /// this many minibatches (at most that many rows).
    pub minibatches: u32,
    /// A minibatch none of whose rows trains (every advantage zero, with a loss in which such
    /// rows contribute nothing): `skip` (the default) takes no optimizer step, so its weights,
    /// AdamW moments and step count stay; `step` takes one on a zero gradient, as torch and
    /// verl do (every minibatch steps: AdamW's momentum still moves the weights, weight decay
    /// applies, the step count advances).
    pub zero_advantage_minibatch: ZeroAdvantageMinibatch,
    /// Rows per micro-batch; unset: no cap on rows (`micro_tokens` still splits).
    pub micro: Option<u32>,
    /// Padded tokens per micro-batch (its rows × its longest row), in the update, its
    /// scoring passes and `arl sft`: rows are taken in order until the next would pass this;
    /// a longer row goes alone. Bounds the update's memory on long multi-turn episodes
    /// (SmolLM2-135M in f32 on the CPU: ~4 MB per padded token of ~1k-token episodes); 0: no
    /// cap. The loss is the same however the rows are split.
    pub micro_tokens: u32,
    /// Episodes decoded at once; unset: all of a step's episodes (`gen_tokens` still splits).
    pub gen_batch: Option<u32>,
    /// KV-cache tokens decoded at once (episodes × the longest one's prompt plus a turn's new
    /// tokens), in training rollouts and evaluations: episodes are taken in order until the
    /// next would pass this; a longer one goes alone. Bounds the sampler's memory: the `tools`
    /// gym's 128 evaluation episodes of ~3k tokens held 19 GB of KV cache at once on
    /// SmolLM2-135M in f32 (46 KB a token; Qwen3-0.6B: 229 KB in f32, 115 KB in bf16). 0: no
    /// cap.
    pub gen_tokens: u32,
    /// Global gradient-norm clip (as torch's `clip_grad_norm_`); 0 disables it.
    pub grad_clip: f64,
    /// AdamW's decoupled weight decay (≥ 0).
    pub weight_decay: f64,
    /// Seed of the task order, the sampler and the evaluation's bootstrap.
    pub seed: u64,
    /// Save a checkpoint every this many steps (0: only the final one), at most one per
    /// `checkpoint_interval_s`. A resumed run restarts after the last one.
    pub checkpoint_every: u32,
    /// Seconds that must pass after a checkpoint (or the run's start) before the next step
    /// checkpoint is written (0: at every `checkpoint_every`-th step, so a kill loses at most
    /// the step in progress). A checkpoint holds the weights and the optimizer's moments, three
    /// times the model in f32: on the CPU main job 1.6 GB per step, 40 % of its wall clock when
    /// written every step. The default, 300, loses at most five minutes and the step in progress.
    pub checkpoint_interval_s: f64,
    /// How many `step-NNNNN` checkpoints to keep, newest first (0: all); `final` is always
    /// kept. Only the newest holds the optimizer state.
    pub keep_checkpoints: u32,
    /// Dynamic sampling (DAPO): roll out fresh tasks up to this many times per step until
    /// `prompts` groups have reward variance; 1 samples once. Above 1 implies
    /// `skip_zero_variance`.
    pub max_sampling_attempts: u32,
    /// Leave groups whose rewards are all equal out of the update (and its normalizer).
    pub skip_zero_variance: bool,
    /// Overlong masking: episodes cut by a turn or token budget leave the loss (they still
    /// count in their group's advantage statistics).
    pub mask_truncated: bool,
    /// Overlong shaping (DAPO): the last this-many tokens of the response budget
    /// (`sampling.max_response_tokens`) ramp a penalty from 0 to −`overlong_penalty`; 0 is off.
    pub overlong_buffer: u32,
    /// Largest overlong penalty, reached at the end of the response budget (≥ 0).
    pub overlong_penalty: f64,
    /// Recompute activations in the backward pass instead of storing them (burn's balanced
    /// checkpointing): less memory, more compute.
    pub gradient_checkpointing: bool,
    /// Async off-policy training. Unset: lockstep (roll out, then update, one after the
    /// other). Set to k: a rollout thread keeps sampling with a snapshot of the weights while
    /// the trainer steps, and a step trains only groups sampled by weights at most k trainer
    /// steps older than its own (a trainer step is `epochs × minibatches` optimizer steps, two
    /// by default); older groups are dropped (counted in `dropped_stale_groups`). 0 overlaps
    /// sampling with the update but trains only groups started under the current weights.
    /// With the default `groups_in_flight` no group is more than 1 step old, so k > 1 only
    /// matters with more groups in flight.
    pub max_steps_off_policy: Option<u32>,
    /// Groups the rollout thread may have started that the trainer has not yet taken (a
    /// group takes a slot when its rollout starts and frees it when the trainer takes it,
    /// trained or dropped); unset: `prompts`, with which a step takes every group started
    /// before it, so staleness never exceeds 1. Only with `max_steps_off_policy`.
    pub groups_in_flight: Option<u32>,
    /// When the rollout thread takes newly published weights: `sync`, at the start of its
    /// next rollout round (every episode of a round sampled by one version); `background`, as
    /// soon as they are published, between the turns of running episodes (an episode counts
    /// from the oldest version that sampled any of its round's turns); `pinned`, by the
    /// schedule and never by timing: step s samples with the weights after max(0, s − k)
    /// steps (k = `max_steps_off_policy` ≥ 1), its rollout rounds issued to the rollout
    /// executor as soon as those weights are published (rollout workers sample them while the
    /// trainer updates; locally they run in turn), so every launcher reproduces the same run.
    /// Only with `max_steps_off_policy`.
    pub weight_sync: WeightSync,
    /// How a step picks its training tasks: `uniform`, every task in turn in a seeded
    /// order; `difficulty`, mostly tasks whose recent pass rate is inside
    /// `trainer.difficulty.band`, with shares of unseen and of solved/failed tasks
    /// ([`DifficultyConfig`]). Lockstep training only.
    pub task_sampler: TaskSampler,
    /// The `difficulty` task sampler's pools and shares.
    pub difficulty: DifficultyConfig,
    /// Continue from the last checkpoint in `output.dir` (`--resume`): weights, optimizer
    /// state, metrics so far; the configuration must match the checkpoint's.
    pub resume: bool,
}

impl Default for TrainerConfig {
    fn default() -> Self {
        Self {
            steps: 30,
            group_size: 8,
            prompts: 4,
            lr: 2e-5,
            lr_schedule: LrSchedule::Constant,
            warmup_steps: 0,
            min_lr_ratio: 0.0,
            epochs: 1,
            minibatches: 2,
            zero_advantage_minibatch: ZeroAdvantageMinibatch::Skip,
            micro: None,
            micro_tokens: 2048,
            gen_batch: None,
            gen_tokens: 131_072,
            grad_clip: 1.0,
            weight_decay: 0.0,
            seed: 0,
            checkpoint_every: 1,
            checkpoint_interval_s: 300.0,
            keep_checkpoints: 2,
            max_sampling_attempts: 1,
            skip_zero_variance: false,
            mask_truncated: false,
            overlong_buffer: 0,
            overlong_penalty: 1.0,
            gradient_checkpointing: false,
            max_steps_off_policy: None,
            groups_in_flight: None,
            weight_sync: WeightSync::Sync,
            task_sampler: TaskSampler::Uniform,
            difficulty: DifficultyConfig::default(),
            resume: false,
        }
    }
}

/// How a step picks its training tasks (`trainer.task_sampler`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TaskSampler {
    /// Every task in turn, in a seeded shuffled order (then again in the same order).
    #[default]
    Uniform,
    /// By recent pass rate (prime-rl's difficulty pools, AReaL's dynamic filter): see
    /// [`DifficultyConfig`].
    Difficulty,
}

/// The `difficulty` task sampler (`[trainer.difficulty]`). Each training task keeps its
/// pass rate over its last `window` groups (an episode passes with reward ≥ 1; episodes lost
/// to infrastructure failures do not count). A task never drawn is *unseen*; a drawn one is
/// *too hard* at a rate ≤ `band[0]`, *too easy* at a rate ≥ `band[1]`, and *learning*
/// between them. Each draw takes an unseen task with probability `unseen_share`, a too easy
/// or too hard one with probability `revisit_share` (so their rates stay fresh), else a
/// learning one; from an empty pool it falls back to learning, unseen, then the rest. No task
/// is drawn twice in one step. Deterministic in `trainer.seed`; its state is in checkpoints.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct DifficultyConfig {
    /// `[lo, hi]`, 0 ≤ lo < hi ≤ 1: a task learns while lo < its pass rate < hi.
    pub band: [f64; 2],
    /// Share of draws from unseen tasks (0 to 1).
    pub unseen_share: f64,
    /// Share of draws from too easy and too hard tasks (0 to 1; with `unseen_share` at most 1).
    pub revisit_share: f64,
    /// Groups per task its pass rate is taken over, newest first (≥ 1).
    pub window: u32,
}

impl Default for DifficultyConfig {
    fn default() -> Self {
        Self { band: [0.0, 1.0], unseen_share: 0.25, revisit_share: 0.1, window: 2 }
    }
}

/// How the learning rate moves over the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum LrSchedule {
    /// `lr` at every step (after any warmup).
    Constant,
    /// Cosine decay to `lr · min_lr_ratio` at the last step.
    Cosine,
}

/// When async sampling takes new weights (`trainer.weight_sync`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum WeightSync {
    /// Between rollout rounds.
    #[default]
    Sync,
    /// Between the turns of running episodes (in-flight weight updates).
    Background,
    /// By the schedule: step s samples with the weights after max(0, s − k) steps, in the
    /// rollout executor (no rollout thread); the same run with every launcher.
    Pinned,
}

/// What a minibatch with no row to train does (`trainer.zero_advantage_minibatch`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ZeroAdvantageMinibatch {
    /// No optimizer step (arl's choice: a zero gradient carries no signal).
    #[default]
    Skip,
    /// An optimizer step on a zero gradient (torch's and verl's behaviour).
    Step,
}

impl TrainerConfig {
    /// Groups the rollout thread may have in flight: `groups_in_flight`, else `prompts`.
    pub fn groups_in_flight(&self) -> u32 {
        self.groups_in_flight.unwrap_or(self.prompts)
    }

    /// The learning rate of `step` (0-based) under the schedule.
    pub fn lr_at(&self, step: u32) -> f64 {
        if step < self.warmup_steps {
            return self.lr * (step + 1) as f64 / self.warmup_steps as f64;
        }
        match self.lr_schedule {
            LrSchedule::Constant => self.lr,
            LrSchedule::Cosine => {
                // Decay intervals between the first step after warmup and the last step run.
                let span = self.steps.saturating_sub(self.warmup_steps + 1);
                let progress = if span == 0 { 0.0 } else { ((step - self.warmup_steps) as f64 / span as f64).min(1.0) };
                let min = self.lr * self.min_lr_ratio;
                min + (self.lr - min) * 0.5 * (1.0 + (std::f64::consts::PI * progress).cos())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warmup_then_cosine_reaches_the_floor_at_the_last_step_run() {
        // Steps 0..=10 run (the trainer's loop is 0..steps); warmup 0 and 1, decay 2..=10.
        let c =
            TrainerConfig { lr: 1.0, steps: 11, warmup_steps: 2, lr_schedule: LrSchedule::Cosine, min_lr_ratio: 0.1, ..Default::default() };
        assert_eq!((c.lr_at(0), c.lr_at(1)), (0.5, 1.0));
        assert!((c.lr_at(2) - 1.0).abs() < 1e-12);
        // Halfway through the decay (step 6 of 2..=10): the midpoint of 1.0 and 0.1.
        assert!((c.lr_at(6) - 0.55).abs() < 1e-12);
        let last = c.steps - 1;
        assert!((c.lr_at(last) - 0.1).abs() < 1e-12, "the last step run is at the floor: {}", c.lr_at(last));
        assert!(c.lr_at(last - 1) > 0.1 + 1e-3);
        // Without warmup the first step is at lr and the last at the floor.
        let c = TrainerConfig { lr: 1.0, steps: 5, lr_schedule: LrSchedule::Cosine, min_lr_ratio: 0.0, ..Default::default() };
        assert_eq!(c.lr_at(0), 1.0);
        assert!(c.lr_at(4).abs() < 1e-12, "{}", c.lr_at(4));
        // A single step after warmup runs at lr (no zero learning rate for a one-step run).
        let one = TrainerConfig { lr: 1.0, steps: 1, lr_schedule: LrSchedule::Cosine, ..Default::default() };
        assert_eq!(one.lr_at(0), 1.0);
        let constant = TrainerConfig { lr: 0.3, ..Default::default() };
        assert_eq!(constant.lr_at(17), 0.3);
    }
}

/// Held-out evaluation before and after training.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct EvalConfig {
    /// Episodes per held-out task.
    pub n: u32,
    /// Softmax temperature of the held-out episodes (> 0). Unset: `sampling.temperature`, so
    /// the evaluation samples as training does; set it (e.g. 1.0) to train at another
    /// temperature and still measure the policy at this one, before and after alike.
    pub temperature: Option<f64>,
}

impl Default for EvalConfig {
    fn default() -> Self {
        Self { n: 4, temperature: None }
    }
}

/// Where a run writes its metrics, checkpoints and results.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct OutputConfig {
    /// The run folder: `run.log`, `config.toml`, `metrics.jsonl`, `results.json`,
    /// `checkpoints/`. A new run refuses a folder that holds another run (`--overwrite`).
    pub dir: String,
    /// Write checkpoints (every `trainer.checkpoint_every` steps and at the end) under
    /// `<dir>/checkpoints`.
    pub checkpoints: bool,
    /// A directory for TensorBoard event files (`tensorboard --logdir`): every number of
    /// `metrics.jsonl`, per step. Unset: none written.
    pub tensorboard: Option<String>,
}

impl Default for OutputConfig {
    fn default() -> Self {
        Self { dir: "runs/latest".into(), checkpoints: true, tensorboard: None }
    }
}
