//! The policy-loss interface. Inputs are `[rows, tokens]` tensors on burn's `Dispatch`
//! backend (CPU, CUDA or libtorch, chosen by the device at run time), so a loss is written
//! once and `Box<dyn PolicyLoss>` works on every device.
//!
//! A loss returns *per-token* terms; reducing them is [`Aggregation`]'s job, with the
//! normalizer passed in explicitly. The trainer computes the normalizer once per minibatch,
//! so splitting a minibatch into micro-batches never changes the gradient.

use burn::Dispatch;
use burn::tensor::Tensor;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::LossError;

pub type T2 = Tensor<Dispatch, 2>;

/// Per-token inputs, all `[rows, tokens]`. `mask` is 1 on policy tokens, 0 elsewhere.
#[derive(Clone, Debug)]
pub struct LossInput {
    /// Log-probabilities under the policy being trained (carries gradients).
    pub log_prob: T2,
    /// Log-probabilities under the policy that produced the data (the proximal policy for
    /// the decoupled objective).
    pub old_log_prob: T2,
    pub advantages: T2,
    pub mask: T2,
    /// Reference policy, for a KL term.
    pub ref_log_prob: Option<T2>,
    /// The sampler's (behaviour) log-probabilities, for the decoupled objective and
    /// rollout/trainer mismatch corrections.
    pub behavior_log_prob: Option<T2>,
    /// Per-token entropy of the trained policy, for an entropy bonus and metrics.
    pub entropy: Option<T2>,
}

/// Per-token loss terms (already multiplied by the mask) and their metrics.
#[derive(Clone, Debug)]
pub struct TokenLoss {
    pub loss: T2,
    pub metrics: LossMetrics,
}

/// Metrics every loss reports (over masked tokens). Values are plain numbers, not tensors.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LossMetrics {
    pub clip_frac_high: f64,
    pub clip_frac_low: f64,
    pub ratio_mean: f64,
    pub ratio_min: f64,
    pub ratio_max: f64,
    pub masked_frac: f64,
    pub approx_kl: f64,
    pub entropy: Option<f64>,
}

pub trait PolicyLoss: Send + Sync {
    /// Per-token loss terms for one micro-batch.
    fn token_loss(&self, input: &LossInput) -> Result<TokenLoss, LossError>;
    /// How this loss reduces its token terms unless the config says otherwise.
    fn default_aggregation(&self) -> Aggregation;
}

/// How per-token terms become one scalar (SPEC.md §5.3).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Aggregation {
    /// Σ ℓ / Σ mask over the minibatch.
    TokenMean,
    /// (1/N) Σ_i (1/|o_i|) Σ_t ℓ.
    SeqMeanTokenMean,
    /// (1/N) Σ_i Σ_t ℓ.
    SeqMeanTokenSum,
    /// Σ ℓ / (N · horizon): Dr.GRPO's constant normalizer.
    ConstantHorizon,
}
