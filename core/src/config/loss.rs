//! Settings of the policy loss and of the advantage estimator (SPEC.md §4–5).
//!
//! Loss-specific keys are `Option`s: unset means "the chosen loss's own default" (a PPO clip
//! band is 0.2, GSPO's is 3e-4/4e-4). A key set for a loss that does not use it (a clip band
//! for plain importance sampling) is refused when the loss is built, naming the key.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::Aggregation;

/// The policy loss. Keys not used by the chosen loss must stay unset.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct LossConfig {
    /// Registered loss name (`arl list`).
    pub name: String,
    /// Unset: the loss's own default aggregation.
    pub aggregation: Option<Aggregation>,
    /// Constant horizon H (tokens per sequence) for `constant-horizon` aggregation; unset:
    /// the response budget (`sampling.max_response_tokens`, else `max_turns × max_new_tokens`),
    /// as verl's H is its fixed response length.
    pub horizon: Option<f64>,
    /// Lower clip ε: ratios below 1 − clip_low are clipped. Unset: the loss's default.
    pub clip_low: Option<f64>,
    /// Upper clip ε: ratios above 1 + clip_high are clipped (DAPO's clip-higher).
    pub clip_high: Option<f64>,
    /// Dual clip c > 1: a negative-advantage token's loss is capped at c·|Â| (verl
    /// `clip_ratio_c`). Unset: off.
    pub dual_clip: Option<f64>,
    /// SAPO gate temperature for positive advantages (default 1.0).
    pub tau_pos: Option<f64>,
    /// SAPO gate temperature for non-positive advantages (default 1.05).
    pub tau_neg: Option<f64>,
    /// DPPO total-variation band: a negative-advantage token is masked once p_θ − p_old < −delta_low.
    pub delta_low: Option<f64>,
    /// DPPO total-variation band: a positive-advantage token is masked once p_θ − p_old > delta_high.
    pub delta_high: Option<f64>,
    /// DPPO binary-KL threshold δ.
    pub delta: Option<f64>,
    /// Cap C on the detached importance weight of `is` and `dppo-*` (verl `clip_ratio_c`).
    pub is_cap: Option<f64>,
    /// DRO's β (> 0, no default).
    pub dro_beta: Option<f64>,
    /// Decoupled PPO (AReaL): `old_log_prob` is the proximal policy, `behavior_log_prob` the
    /// sampler's; the loss is weighted by sg(π_prox/π_behave). Needs `behavior_log_prob`.
    pub decoupled: bool,
    /// β of the KL to the reference policy; 0 disables it.
    pub kl_coef: f64,
    /// Which of Schulman's estimators of the KL: `k1`, `k2` or `k3` (verl's `low_var_kl`).
    pub kl_estimator: KlEstimator,
    /// Where the KL goes: added to the token loss, or subtracted from each episode's reward
    /// before advantages (β·Σ_t k(π_sampler, π_ref) over its policy tokens; the loss then
    /// ignores it).
    pub kl_placement: KlPlacement,
    /// Entropy bonus coefficient (the loss subtracts coef·entropy); 0 disables it.
    pub entropy_coef: f64,
    /// IcePop: mask tokens whose π_old/π_behave leaves [lower, upper].
    pub icepop: Option<IcePopConfig>,
    /// KPop: mask tokens whose symmetric binary KL between π_old and π_behave exceeds `upper`.
    pub kpop: Option<KPopConfig>,
    /// Truncated importance sampling: weight each token by sg(min(π_old/π_behave, cap)).
    pub tis: Option<TisConfig>,
}

impl Default for LossConfig {
    fn default() -> Self {
        Self {
            name: "grpo".into(),
            aggregation: None,
            horizon: None,
            clip_low: None,
            clip_high: None,
            dual_clip: None,
            tau_pos: None,
            tau_neg: None,
            delta_low: None,
            delta_high: None,
            delta: None,
            is_cap: None,
            dro_beta: None,
            decoupled: false,
            kl_coef: 0.0,
            kl_estimator: KlEstimator::K3,
            kl_placement: KlPlacement::Loss,
            entropy_coef: 0.0,
            icepop: None,
            kpop: None,
            tis: None,
        }
    }
}

/// Schulman's KL estimators (SPEC.md §4.13), ℓ = log π_θ − log π_ref.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum KlEstimator {
    /// ℓ
    K1,
    /// ½ ℓ²
    K2,
    /// e^{−ℓ} − 1 + ℓ (verl `low_var_kl`)
    K3,
}

impl KlEstimator {
    /// The estimate for one token, ℓ = `log_prob` − `ref_log_prob`; k3 clamps ℓ to ±20 and
    /// its value to ±10, as verl does (arl-losses applies the same on tensors).
    pub fn estimate(self, log_prob: f64, ref_log_prob: f64) -> f64 {
        let l = log_prob - ref_log_prob;
        match self {
            KlEstimator::K1 => l,
            KlEstimator::K2 => 0.5 * l * l,
            KlEstimator::K3 => {
                let l = l.clamp(-20.0, 20.0);
                ((-l).exp() - 1.0 + l).clamp(-10.0, 10.0)
            }
        }
    }
}

/// Where the KL to the reference goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum KlPlacement {
    /// Added to the token loss.
    Loss,
    /// Subtracted from each episode's reward before advantages.
    Reward,
}

/// IcePop's band.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct IcePopConfig {
    /// Tokens with π_old/π_behave below this leave the loss.
    pub lower: f64,
    /// Tokens with π_old/π_behave above this leave the loss.
    pub upper: f64,
}

impl Default for IcePopConfig {
    fn default() -> Self {
        Self { lower: 0.5, upper: 5.0 }
    }
}

/// KPop's threshold.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct KPopConfig {
    /// Tokens whose symmetric binary KL between π_old and π_behave exceeds this leave the loss.
    pub upper: f64,
}

impl Default for KPopConfig {
    fn default() -> Self {
        Self { upper: 2.0 }
    }
}

/// Truncated importance sampling's cap.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct TisConfig {
    /// Largest importance weight π_old/π_behave (> 0).
    pub cap: f64,
}

impl Default for TisConfig {
    fn default() -> Self {
        Self { cap: 2.0 }
    }
}

/// Where a reward statistic is taken (AReaL `NormConfig` levels).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum NormLevel {
    /// Over the episodes of one group (same task, same step).
    Group,
    /// Over every episode of the batch.
    Batch,
    /// Not at all: mean 0, std 1.
    None,
}

/// The advantage estimator. Unset keys take the named estimator's own values
/// (`arl list` names them); a key the estimator does not use is refused.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct AdvantageConfig {
    /// Registered estimator name (`arl list`).
    pub name: String,
    /// Level of the baseline subtracted from each reward.
    pub mean_level: Option<NormLevel>,
    /// Level of the standard deviation the centred reward is divided by.
    pub std_level: Option<NormLevel>,
    /// Baseline of episode i excludes episode i (RLOO).
    pub leave_one_out: Option<bool>,
    /// Bessel's correction (N − 1) in the standard deviation.
    pub std_unbiased: Option<bool>,
    /// Added to the standard deviation before dividing.
    pub eps: Option<f64>,
    /// Discount, for GAE (`arl_losses::gae`).
    pub gamma: Option<f64>,
    /// GAE's λ.
    pub lambda: Option<f64>,
}

impl Default for AdvantageConfig {
    fn default() -> Self {
        Self {
            name: "grpo".into(),
            mean_level: None,
            std_level: None,
            leave_one_out: None,
            std_unbiased: None,
            eps: None,
            gamma: None,
            lambda: None,
        }
    }
}
