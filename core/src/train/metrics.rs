//! Per-step metrics: one JSON object per step in `metrics.jsonl`, one console line.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Everything measured in one training step.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StepMetrics {
    pub step: u32,
    pub lr: f64,
    pub episodes: usize,
    pub reward_mean: f64,
    /// Fraction of episodes with reward 1.
    pub pass_rate: f64,
    /// Fraction of sampled groups whose rewards were all equal (no learning signal).
    pub zero_variance_groups: f64,
    /// Fraction of sampled groups left out of the update (zero-variance skip, dynamic
    /// sampling's surplus).
    pub zero_variance_skipped: f64,
    /// Rollout rounds this step (dynamic sampling resamples).
    pub sampling_attempts: u32,
    /// Mean reward after overlong shaping (equals `reward_mean` without shaping).
    pub shaped_reward_mean: f64,
    pub overlong_penalty_mean: f64,
    /// Truncated episodes left out of the loss (`mask_truncated`).
    pub masked_truncated: usize,
    pub loss: f64,
    pub entropy: Option<f64>,
    pub clip_frac_high: f64,
    pub clip_frac_low: f64,
    pub ratio_mean: f64,
    pub grad_norm: f64,
    /// |sampler logprob − trainer recomputation| before the update, over policy tokens.
    pub logprob_gap_mean: f64,
    pub logprob_gap_max: f64,
    /// Episodes that ended on the turn or token budget rather than a final answer.
    pub truncated_frac: f64,
    pub malformed_call_rate: f64,
    pub failed_call_rate: f64,
    pub policy_tokens: usize,
    pub generate_tokens_per_s: f64,
    pub update_tokens_per_s: f64,
    pub rollout_seconds: f64,
    pub update_seconds: f64,
    pub step_seconds: f64,
}

impl StepMetrics {
    /// The console line.
    pub fn line(&self) -> String {
        format!(
            "step {:>3}  reward {:.3}  pass {:.3}  zero-var {:.2} (skipped {:.2}, {} rounds)  loss {:+.4}  clip {:.3}/{:.3}  gap {:.1e}/{:.1e}  \
             gnorm {:.3}  trunc {:.2}  malformed {:.2}  gen {:.0} tok/s  upd {:.0} tok/s  {:.1}s",
            self.step,
            self.reward_mean,
            self.pass_rate,
            self.zero_variance_groups,
            self.zero_variance_skipped,
            self.sampling_attempts,
            self.loss,
            self.clip_frac_low,
            self.clip_frac_high,
            self.logprob_gap_mean,
            self.logprob_gap_max,
            self.grad_norm,
            self.truncated_frac,
            self.malformed_call_rate,
            self.generate_tokens_per_s,
            self.update_tokens_per_s,
            self.step_seconds,
        )
    }
}
