//! Settings of the training loop, the evaluation and the outputs.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One step = `prompts` tasks × `group_size` episodes, then `epochs` × `minibatches`
/// updates.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct TrainerConfig {
    pub steps: u32,
    /// Episodes per task per step (G).
    pub group_size: u32,
    /// Tasks per step (P).
    pub prompts: u32,
    pub lr: f64,
    pub epochs: u32,
    pub minibatches: u32,
    /// Rows per micro-batch; unset: a whole minibatch at once.
    pub micro: Option<u32>,
    /// Episodes decoded at once; unset: all of a step's episodes.
    pub gen_batch: Option<u32>,
    /// Global gradient-norm clip (as torch's `clip_grad_norm_`); 0 disables it.
    pub grad_clip: f64,
    pub weight_decay: f64,
    pub seed: u64,
    /// Save a checkpoint every this many steps (0: only the final one).
    pub checkpoint_every: u32,
}

impl Default for TrainerConfig {
    fn default() -> Self {
        Self {
            steps: 20,
            group_size: 8,
            prompts: 8,
            lr: 1e-5,
            epochs: 1,
            minibatches: 2,
            micro: None,
            gen_batch: None,
            grad_clip: 1.0,
            weight_decay: 0.0,
            seed: 0,
            checkpoint_every: 0,
        }
    }
}

/// Held-out evaluation before and after training.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct EvalConfig {
    /// Episodes per held-out task.
    pub n: u32,
}

impl Default for EvalConfig {
    fn default() -> Self {
        Self { n: 4 }
    }
}

/// Where a run writes its metrics, checkpoints and results.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct OutputConfig {
    pub dir: String,
}

impl Default for OutputConfig {
    fn default() -> Self {
        Self { dir: "runs/latest".into() }
    }
}
