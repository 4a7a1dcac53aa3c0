//! The policy-loss interface. Inputs are `[rows, tokens]` tensors on burn's `Dispatch`
//! backend (CPU, CUDA or libtorch, chosen by the device at run time), so a loss is written
//! once and `Box<dyn PolicyLoss>` works on every device.
//!
//! A loss returns *per-token* terms; reducing them is [`Aggregation`]'s job, with the
//! normalizer passed in explicitly. The trainer computes the normalizer once per minibatch,
//! so splitting a minibatch into micro-batches never changes the gradient:
//!
//! ```ignore
//! let loss = (registry::get::<LossPlugin>(&cfg.name)?.build)(&cfg)?;
//! let agg = Aggregation::resolve(cfg.aggregation, loss.as_ref());
//! let norm = Normalizer::from_masks(agg, cfg.horizon, micro_batches.iter().map(|m| &m.mask))?;
//! for mb in &micro_batches {            // rows with all-zero advantages may be skipped
//!     let t = loss.token_loss(mb)?;     // when loss.zero_advantage_rows_vanish()
//!     let grads = norm.reduce(t.loss, &mb.mask).backward();   // accumulate grads
//! }
//! ```

use burn::Dispatch;
use burn::tensor::Tensor;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::LossError;

/// A `[rows, tokens]` tensor on the `Dispatch` backend, the shape of every loss input.
pub type T2 = Tensor<Dispatch, 2>;

/// Per-token inputs, all `[rows, tokens]`. `mask` is 1 on policy tokens, 0 elsewhere.
#[derive(Clone, Debug)]
pub struct LossInput {
    /// Log-probabilities under the policy being trained (carries gradients).
    pub log_prob: T2,
    /// Log-probabilities under the policy that produced the data (the proximal policy for
    /// the decoupled objective).
    pub old_log_prob: T2,
    /// Each token's advantage: its episode's, broadcast over the row's policy tokens.
    pub advantages: T2,
    /// 1 on the policy tokens being trained, 0 on prompt, observation and padding tokens.
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
    /// `[rows, tokens]` loss terms, 0 off the mask; reduced by [`Normalizer::reduce`].
    pub loss: T2,
    /// What the loss measured on this micro-batch (clip fractions, ratios, KL).
    pub metrics: LossMetrics,
}

/// Metrics every loss reports, over the policy tokens of one micro-batch. Plain numbers.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LossMetrics {
    /// Policy tokens these metrics cover (the weight for [`LossMetrics::merge`]).
    pub tokens: f64,
    /// Fraction of tokens whose ratio was clipped at 1 + clip_high with Â > 0 (no gradient).
    pub clip_frac_high: f64,
    /// Fraction of tokens whose ratio was clipped at 1 − clip_low with Â < 0 (no gradient).
    pub clip_frac_low: f64,
    /// Fraction of tokens whose loss the dual clip capped.
    pub dual_clip_frac: f64,
    /// π_θ/π_old over policy tokens (the sequence ratio for GSPO).
    pub ratio_mean: f64,
    /// Smallest π_θ/π_old over policy tokens.
    pub ratio_min: f64,
    /// Largest π_θ/π_old over policy tokens.
    pub ratio_max: f64,
    /// Fraction of policy tokens dropped by a token mask (IcePop, KPop, DPPO).
    pub masked_frac: f64,
    /// Mean k3 estimate of KL(π_old‖π_θ): r − 1 − log r.
    pub approx_kl: f64,
    /// Mean KL to the reference policy (the configured estimator), when one is given.
    pub ref_kl: Option<f64>,
    /// Mean entropy of the trained policy, when given.
    pub entropy: Option<f64>,
}

impl LossMetrics {
    /// Token-weighted combination of micro-batch metrics (min/max taken over all).
    pub fn merge(parts: &[LossMetrics]) -> LossMetrics {
        let tokens: f64 = parts.iter().map(|m| m.tokens).sum();
        if parts.is_empty() || tokens == 0.0 {
            return LossMetrics::default();
        }
        let mean = |f: &dyn Fn(&LossMetrics) -> f64| parts.iter().map(|m| f(m) * m.tokens).sum::<f64>() / tokens;
        let mean_opt = |f: &dyn Fn(&LossMetrics) -> Option<f64>| {
            parts.iter().all(|m| f(m).is_some() || m.tokens == 0.0).then(|| mean(&|m| f(m).unwrap_or(0.0)))
        };
        let live = parts.iter().filter(|m| m.tokens > 0.0);
        LossMetrics {
            tokens,
            clip_frac_high: mean(&|m| m.clip_frac_high),
            clip_frac_low: mean(&|m| m.clip_frac_low),
            dual_clip_frac: mean(&|m| m.dual_clip_frac),
            ratio_mean: mean(&|m| m.ratio_mean),
            ratio_min: live.clone().map(|m| m.ratio_min).fold(f64::INFINITY, f64::min),
            ratio_max: live.map(|m| m.ratio_max).fold(f64::NEG_INFINITY, f64::max),
            masked_frac: mean(&|m| m.masked_frac),
            approx_kl: mean(&|m| m.approx_kl),
            ref_kl: mean_opt(&|m| m.ref_kl),
            entropy: mean_opt(&|m| m.entropy),
        }
    }
}

/// A policy-gradient loss (PPO-clip, GSPO, DPPO, …): a plugin chosen by `[loss]`, turning
/// log-probabilities and advantages into per-token loss terms.
pub trait PolicyLoss: Send + Sync {
    /// Per-token loss terms for one micro-batch, already multiplied by `mask`.
    fn token_loss(&self, input: &LossInput) -> Result<TokenLoss, LossError>;
    /// How this loss reduces its token terms unless the config says otherwise
    /// (`loss.aggregation`); see [`Aggregation::resolve`].
    fn default_aggregation(&self) -> Aggregation;
    /// True when a row whose advantages are all zero contributes exactly zero loss and zero
    /// gradient (no KL, entropy or DRO penalty term), so the trainer may skip it in backward
    /// while still counting it in the [`Normalizer`].
    fn zero_advantage_rows_vanish(&self) -> bool {
        false
    }
    /// True when the loss uses `LossInput::entropy` (an entropy bonus), so the update must
    /// score entropy with gradients.
    fn needs_entropy(&self) -> bool {
        false
    }
}

/// How per-token terms become one scalar (SPEC.md §5.3). N counts the rows of the minibatch
/// with at least one policy token (a zero-length response contributes nothing and is not
/// counted); |o_i| is row i's policy-token count.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Aggregation {
    /// Σ ℓ / Σ mask over the minibatch (DAPO).
    TokenMean,
    /// Σ ℓ.
    TokenSum,
    /// (1/N) Σ_i (1/|o_i|) Σ_t ℓ (original GRPO, GSPO, SAPO in verl).
    SeqMeanTokenMean,
    /// (1/N) Σ_i Σ_t ℓ.
    SeqMeanTokenSum,
    /// Σ ℓ / (N · H): Dr.GRPO's constant normalizer (verl `seq-mean-token-sum-norm`).
    ConstantHorizon,
}

impl Aggregation {
    /// Every aggregation, in the order messages list them.
    pub const ALL: [Aggregation; 5] = [
        Aggregation::TokenMean,
        Aggregation::TokenSum,
        Aggregation::SeqMeanTokenMean,
        Aggregation::SeqMeanTokenSum,
        Aggregation::ConstantHorizon,
    ];

    /// The configured aggregation, else the loss's default.
    pub fn resolve(configured: Option<Aggregation>, loss: &dyn PolicyLoss) -> Aggregation {
        configured.unwrap_or_else(|| loss.default_aggregation())
    }

    /// The name as written in `loss.aggregation` (kebab-case, verl's spelling).
    pub fn name(self) -> &'static str {
        match self {
            Aggregation::TokenMean => "token-mean",
            Aggregation::TokenSum => "token-sum",
            Aggregation::SeqMeanTokenMean => "seq-mean-token-mean",
            Aggregation::SeqMeanTokenSum => "seq-mean-token-sum",
            Aggregation::ConstantHorizon => "constant-horizon",
        }
    }
}

impl std::str::FromStr for Aggregation {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Aggregation::ALL.into_iter().find(|a| a.name() == s).ok_or_else(|| {
            let names: Vec<_> = Aggregation::ALL.iter().map(|a| a.name()).collect();
            format!("unknown aggregation `{s}`; valid: {}", names.join(", "))
        })
    }
}

/// The denominators of one minibatch, computed once from *all* its masks before any
/// micro-batch runs. Each micro-batch's [`Normalizer::reduce`] is then its exact share of
/// the minibatch loss, so gradients accumulated over 1, 2 or 4 micro-batches are equal, and a
/// row skipped in backward (zero advantage) still counts. Normalizers of data-parallel ranks
/// combine with [`Normalizer::merge`] (global counts, prime-rl #2359).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Normalizer {
    /// How [`Normalizer::reduce`] turns token terms into the scalar loss.
    pub aggregation: Aggregation,
    /// Σ mask over the minibatch.
    pub tokens: f64,
    /// Rows with at least one policy token (N).
    pub sequences: f64,
    /// H for `constant-horizon`.
    pub horizon: f64,
}

impl Normalizer {
    /// From the policy-token count of every row of the minibatch. `horizon` unset: the
    /// padded width (`padded_width`, the longest row's token dimension).
    pub fn from_lengths(aggregation: Aggregation, horizon: Option<f64>, lengths: &[f64], padded_width: usize) -> Result<Self, LossError> {
        let horizon = horizon.unwrap_or(padded_width as f64);
        if aggregation == Aggregation::ConstantHorizon && (horizon.is_nan() || horizon <= 0.0) {
            return Err(LossError::Invalid(format!("constant-horizon needs a horizon > 0, got {horizon}")));
        }
        Ok(Self { aggregation, tokens: lengths.iter().sum(), sequences: lengths.iter().filter(|&&l| l > 0.0).count() as f64, horizon })
    }

    /// From the masks of every micro-batch of the minibatch (reads them back to the host).
    pub fn from_masks<'a>(
        aggregation: Aggregation,
        horizon: Option<f64>,
        masks: impl IntoIterator<Item = &'a T2>,
    ) -> Result<Self, LossError> {
        let mut lengths = Vec::new();
        let mut width = 0;
        for mask in masks {
            width = width.max(mask.dims()[1]);
            lengths.extend(row_sums(mask));
        }
        Self::from_lengths(aggregation, horizon, &lengths, width)
    }

    /// Sum the counts of two shards (data-parallel ranks) of one minibatch.
    pub fn merge(self, other: Normalizer) -> Normalizer {
        Normalizer {
            tokens: self.tokens + other.tokens,
            sequences: self.sequences + other.sequences,
            horizon: self.horizon.max(other.horizon),
            ..self
        }
    }

    /// This micro-batch's share of the minibatch loss. `loss` is the per-token loss (already
    /// masked); `mask` the policy mask, used only for `seq-mean-token-mean`'s |o_i|.
    pub fn reduce(&self, loss: T2, mask: &T2) -> Tensor<Dispatch, 1> {
        let n = self.sequences.max(1.0);
        match self.aggregation {
            Aggregation::TokenMean => loss.sum().div_scalar(self.tokens.max(1.0)),
            Aggregation::TokenSum => loss.sum(),
            Aggregation::SeqMeanTokenSum => loss.sum().div_scalar(n),
            Aggregation::ConstantHorizon => loss.sum().div_scalar(n * self.horizon),
            Aggregation::SeqMeanTokenMean => {
                let lengths = mask.clone().sum_dim(1).clamp_min(1.0);
                (loss.sum_dim(1) / lengths).sum().div_scalar(n)
            }
        }
    }
}

/// Per-row sums of a `[rows, tokens]` tensor, on the host.
pub fn row_sums(t: &T2) -> Vec<f64> {
    t.clone().sum_dim(1).into_data().convert::<f64>().to_vec::<f64>().expect("f64 data")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizer_counts_tokens_and_non_empty_rows() {
        let n = Normalizer::from_lengths(Aggregation::TokenMean, None, &[3.0, 0.0, 4.0], 6).unwrap();
        assert_eq!((n.tokens, n.sequences, n.horizon), (7.0, 2.0, 6.0));
        let n = Normalizer::from_lengths(Aggregation::ConstantHorizon, Some(512.0), &[1.0], 6).unwrap();
        assert_eq!(n.horizon, 512.0);
        assert!(Normalizer::from_lengths(Aggregation::ConstantHorizon, Some(0.0), &[1.0], 6).is_err());
        let merged = n.merge(Normalizer { tokens: 2.0, sequences: 1.0, ..n });
        assert_eq!((merged.tokens, merged.sequences), (3.0, 2.0));
    }

    #[test]
    fn aggregation_names_round_trip() {
        for a in Aggregation::ALL {
            assert_eq!(a.name().parse::<Aggregation>().unwrap(), a);
            let json = serde_json::to_string(&a).unwrap();
            assert_eq!(json, format!("\"{}\"", a.name()));
        }
        assert!("mean".parse::<Aggregation>().unwrap_err().starts_with("unknown aggregation `mean`; valid: token-mean"));
    }

    #[test]
    fn metrics_merge_by_token_weight() {
        let a = LossMetrics { tokens: 1.0, clip_frac_high: 1.0, ratio_min: 0.5, ratio_max: 2.0, entropy: Some(1.0), ..Default::default() };
        let b = LossMetrics { tokens: 3.0, clip_frac_high: 0.0, ratio_min: 0.9, ratio_max: 1.1, entropy: Some(2.0), ..Default::default() };
        let m = LossMetrics::merge(&[a, b]);
        assert_eq!(m.tokens, 4.0);
        assert_eq!(m.clip_frac_high, 0.25);
        assert_eq!((m.ratio_min, m.ratio_max), (0.5, 2.0));
        assert_eq!(m.entropy, Some(1.75));
        assert_eq!(m.ref_kl, None);
    }
}
