//! KL to a reference policy (SPEC.md §4.13): Schulman's k1/k2/k3 with ℓ = log π − log π_ref,
//! in the loss (added per token, β·k) or folded into the reward ([`reward_penalty`]).
//! k3 clamps ℓ to ±20 and its value to ±10, as verl does.

use arl_core::T2;
use arl_core::config::KlEstimator;

use crate::ops::LOG_RATIO_CLAMP;

const K3_CLAMP: f64 = 10.0;

/// Per-token KL estimate on tensors (gradients flow through `log_prob`).
pub fn estimate(estimator: KlEstimator, log_prob: T2, ref_log_prob: T2) -> T2 {
    let l = log_prob - ref_log_prob;
    match estimator {
        KlEstimator::K1 => l,
        KlEstimator::K2 => l.powi_scalar(2).mul_scalar(0.5),
        KlEstimator::K3 => {
            let l = l.clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP);
            (l.clone().neg().exp().sub_scalar(1.0) + l).clamp(-K3_CLAMP, K3_CLAMP)
        }
    }
}

/// The same estimate for one token, on the host ([`KlEstimator::estimate`]).
pub fn estimate_one(estimator: KlEstimator, log_prob: f64, ref_log_prob: f64) -> f64 {
    estimator.estimate(log_prob, ref_log_prob)
}

/// KL in the reward: the per-token penalty −β·k(π_old, π_ref) to add to token rewards
/// before returns/GAE (AReaL `kl_ctl`, verl `use_kl_in_reward`; usually k1).
pub fn reward_penalty(coef: f64, estimator: KlEstimator, old_log_prob: &[f64], ref_log_prob: &[f64]) -> Vec<f64> {
    old_log_prob.iter().zip(ref_log_prob).map(|(o, r)| -coef * estimate_one(estimator, *o, *r)).collect()
}
