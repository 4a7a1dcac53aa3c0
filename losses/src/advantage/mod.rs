//! Advantage estimators: outcome rewards with group ids in, one advantage per episode out
//! (SPEC.md §5.1), plus GAE given value estimates ([`gae`], SPEC.md §5.2).

pub mod gae;
pub mod norm;

use arl_core::config::{AdvantageConfig, NormLevel};
use arl_core::{AdvantageFn, AdvantageInput, LossError, PluginError};

pub use norm::Norm;

/// A named estimator: its [`Norm`] defaults, overridable key by key from the config.
pub struct Estimator {
    pub name: &'static str,
    pub norm: Norm,
}

/// The defaults of each named estimator. The verl estimators (GRPO, Dr.GRPO, RLOO,
/// REINFORCE++, REINFORCE++-baseline) follow verl's `core_algos.py` on every edge case (a group
/// of one: mean 0, std 1; REINFORCE++ whitens over response tokens), checked against numbers
/// from verl's own functions (`losses/tests/fixtures/verl.json`); `liteppo` and `norm` are
/// AReaL's `NormConfig` (verl has no such estimator).
pub fn defaults(name: &str) -> Option<Norm> {
    use NormLevel::*;
    let n = |mean_level, std_level, leave_one_out, eps| Norm {
        mean_level,
        std_level,
        leave_one_out,
        std_unbiased: true,
        eps,
        lone_group_baseline_zero: true,
        whiten: false,
    };
    let areal = |mean_level, std_level, eps| Norm { lone_group_baseline_zero: false, ..n(mean_level, std_level, false, eps) };
    let whiten = |mean_level| Norm { whiten: true, ..n(mean_level, Batch, false, 1e-8) };
    Some(match name {
        "grpo" => n(Group, Group, false, 1e-6),
        "drgrpo" => n(Group, None, false, 1e-6),
        "rloo" => n(Group, None, true, 1e-6),
        "liteppo" => areal(Group, Batch, 1e-6),
        "reinforce++" => whiten(Batch),
        "reinforce++-baseline" => whiten(Group),
        "norm" => areal(Batch, Batch, 1e-5),
        _ => return Option::None,
    })
}

impl Estimator {
    pub fn build(name: &'static str, c: &AdvantageConfig) -> Result<Self, PluginError> {
        let fail = |message: String| PluginError { kind: "advantage estimator", name: name.to_string(), message };
        for (key, set) in [("gamma", c.gamma.is_some()), ("lambda", c.lambda.is_some())] {
            if set {
                return Err(fail(format!(
                    "setting `advantage.{key}` does not apply to outcome-reward estimators (it is GAE's, arl_losses::advantage::gae)"
                )));
            }
        }
        let d = defaults(name).ok_or_else(|| fail("no such estimator".into()))?;
        let norm = Norm {
            mean_level: c.mean_level.unwrap_or(d.mean_level),
            std_level: c.std_level.unwrap_or(d.std_level),
            leave_one_out: c.leave_one_out.unwrap_or(d.leave_one_out),
            std_unbiased: c.std_unbiased.unwrap_or(d.std_unbiased),
            eps: c.eps.unwrap_or(d.eps),
            lone_group_baseline_zero: d.lone_group_baseline_zero,
            whiten: d.whiten,
        };
        if norm.eps.is_nan() || norm.eps < 0.0 {
            return Err(fail(format!("`advantage.eps` must be >= 0, got {}", norm.eps)));
        }
        if norm.leave_one_out && norm.mean_level == NormLevel::None {
            return Err(fail("setting `advantage.leave_one_out` needs mean_level group or batch".into()));
        }
        Ok(Estimator { name, norm })
    }
}

impl AdvantageFn for Estimator {
    fn advantages(&self, input: &AdvantageInput<'_>) -> Result<Vec<f64>, LossError> {
        input.check()?;
        if let Some(r) = input.rewards.iter().find(|r| !r.is_finite()) {
            return Err(LossError::Invalid(format!("reward {r} is not finite")));
        }
        Ok(match input.response_tokens {
            Some(tokens) => self.norm.apply_with_lengths(input.rewards, input.group_ids, tokens),
            None => self.norm.apply(input.rewards, input.group_ids),
        })
    }

    fn advantages_token_weighted(&self, input: &AdvantageInput<'_>, token_counts: &[f64]) -> Result<Vec<f64>, LossError> {
        input.check()?;
        if token_counts.len() != input.rewards.len() {
            return Err(LossError::Shape(format!("{} rewards but {} token counts", input.rewards.len(), token_counts.len())));
        }
        if let Some(c) = token_counts.iter().find(|c| !(c.is_finite() && **c >= 0.0)) {
            return Err(LossError::Invalid(format!("token count {c} is not a count")));
        }
        Ok(self.norm.apply_weighted(input.rewards, input.group_ids, token_counts))
    }
}
