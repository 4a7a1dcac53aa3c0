//! Reward normalization with AReaL's `NormConfig` levels (SPEC.md §5.1), at episode level,
//! with verl's edge cases for the estimators that come from verl:
//!
//! Â_i = (R_i − b_i) / (σ_i + eps)
//!
//! - b_i, the baseline, is the mean of R over episode i's group (`mean_level = group`), over the
//!   batch (`batch`), or 0 (`none`). With `leave_one_out` it excludes R_i:
//!   (Σ R − R_i)/(n − 1); a set of one has baseline 0 (AReaL and verl).
//! - σ_i is the root mean square of R − b over the group or batch (`std_level`), divided by
//!   n − 1 when `std_unbiased` (by n otherwise). An unbiased σ of a single episode, or any σ of
//!   none, is 1. `std_level = none` divides by 1 with no eps.
//! - A group of one: with [`Norm::lone_group_baseline_zero`] (the verl estimators: GRPO,
//!   Dr.GRPO, RLOO, REINFORCE++-baseline) its baseline is 0 and its σ 1, as verl's
//!   `compute_grpo_outcome_advantage` sets mean 0 / std 1, so Â = R/(1 + eps) for GRPO and R for
//!   Dr.GRPO and RLOO. Without it (AReaL's `norm` and `liteppo`) its baseline is its own reward,
//!   so Â = 0. All-equal rewards give Â = 0 either way.
//! - [`Norm::whiten`] (REINFORCE++, verl's `masked_whiten`): after the baseline, the centred
//!   values are whitened over the *response tokens* of each `std_level` set: x − m over
//!   √(v + eps), m and v the token-weighted mean and unbiased variance (an episode with n
//!   response tokens counts n times), so the result has mean 0 over tokens. Where the set has
//!   at most one token verl raises an error (`masked_var`); arl takes v = 1 there instead (a
//!   deliberate difference, pinned by a test).
//!
//! Response-token counts come from [`AdvantageInput::response_tokens`](arl_core::AdvantageInput);
//! only the whitening uses them. AReaL computes *every* statistic over valid tokens:
//! [`Norm::apply_weighted`] (`AdvantageFn::advantages_token_weighted`) does that.

use std::collections::BTreeMap;

use arl_core::config::NormLevel;

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Norm {
    pub mean_level: NormLevel,
    pub std_level: NormLevel,
    pub leave_one_out: bool,
    pub std_unbiased: bool,
    pub eps: f64,
    /// A group of one gets baseline 0 and σ 1 (verl), not its own mean (AReaL); fixed by the
    /// named estimator, not a config key.
    pub lone_group_baseline_zero: bool,
    /// Whiten over response tokens with √(var + eps) (verl's `masked_whiten`, REINFORCE++)
    /// instead of dividing by σ + eps; fixed by the named estimator, not a config key.
    pub whiten: bool,
}

/// Indices of the episodes of each group, in order of first appearance.
fn groups(group_ids: &[usize]) -> Vec<Vec<usize>> {
    let mut order: BTreeMap<usize, usize> = BTreeMap::new();
    let mut out: Vec<Vec<usize>> = Vec::new();
    for (i, g) in group_ids.iter().enumerate() {
        let slot = *order.entry(*g).or_insert_with(|| {
            out.push(Vec::new());
            out.len() - 1
        });
        out[slot].push(i);
    }
    out
}

/// verl's `masked_whiten` on per-episode values, episode i standing for `weights[i]` equal
/// response tokens: (x − m)/√(v + eps) with m the weighted mean and v the weighted variance,
/// unbiased (Σw − 1) when asked; v = 1 where Σw ≤ 1 (verl raises there).
pub fn whiten(values: &[f64], weights: &[f64], unbiased: bool, eps: f64) -> Vec<f64> {
    let n: f64 = weights.iter().sum();
    let mean = if n > 0.0 { values.iter().zip(weights).map(|(x, w)| x * w).sum::<f64>() / n } else { 0.0 };
    let sq: f64 = values.iter().zip(weights).map(|(x, w)| w * (x - mean).powi(2)).sum();
    let var = if unbiased {
        if n <= 1.0 { 1.0 } else { sq / (n - 1.0) }
    } else if n == 0.0 {
        1.0
    } else {
        sq / n
    };
    let scale = (var + eps).sqrt();
    values.iter().map(|x| (x - mean) / scale).collect()
}

impl Norm {
    fn baseline(&self, rewards: &[f64], w: &[f64], members: &[usize], out: &mut [f64]) {
        if self.lone_group_baseline_zero && members.len() == 1 {
            out[members[0]] = 0.0;
            return;
        }
        let n: f64 = members.iter().map(|&i| w[i]).sum();
        let sum: f64 = members.iter().map(|&i| w[i] * rewards[i]).sum();
        for &i in members {
            out[i] = if self.leave_one_out {
                if n <= 1.0 { 0.0 } else { (sum - rewards[i]) / (n - 1.0) }
            } else if n == 0.0 {
                0.0
            } else {
                sum / n
            };
        }
    }

    fn std(&self, rewards: &[f64], w: &[f64], baseline: &[f64], members: &[usize], out: &mut [f64]) {
        let n: f64 = members.iter().map(|&i| w[i]).sum();
        let sq: f64 = members.iter().map(|&i| w[i] * (rewards[i] - baseline[i]).powi(2)).sum();
        let var = if self.std_unbiased {
            if n <= 1.0 { 1.0 } else { sq / (n - 1.0) }
        } else if n == 0.0 {
            1.0
        } else {
            sq / n
        };
        for &i in members {
            out[i] = var.sqrt();
        }
    }

    /// Every episode weighs 1 (and counts as one response token).
    pub fn apply(&self, rewards: &[f64], group_ids: &[usize]) -> Vec<f64> {
        let ones = vec![1.0; rewards.len()];
        self.run(rewards, group_ids, &ones, &ones)
    }

    /// Every episode weighs 1 in the baseline and σ; the whitening counts episode i's
    /// `response_tokens[i]` tokens (verl).
    pub fn apply_with_lengths(&self, rewards: &[f64], group_ids: &[usize], response_tokens: &[f64]) -> Vec<f64> {
        self.run(rewards, group_ids, &vec![1.0; rewards.len()], response_tokens)
    }

    /// Episode i weighs `weights[i]` (its policy-token count, for AReaL's token-level
    /// statistics) everywhere: sums, counts and the n ≤ 1 cases are over tokens, and
    /// leave-one-out leaves out one token's value, as AReaL's masked statistics do; a group
    /// of one is centred on itself, as AReaL does (whatever the estimator).
    pub fn apply_weighted(&self, rewards: &[f64], group_ids: &[usize], weights: &[f64]) -> Vec<f64> {
        Norm { lone_group_baseline_zero: false, ..*self }.run(rewards, group_ids, weights, weights)
    }

    fn run(&self, rewards: &[f64], group_ids: &[usize], weights: &[f64], tokens: &[f64]) -> Vec<f64> {
        let n = rewards.len();
        let all: Vec<usize> = (0..n).collect();
        let groups = groups(group_ids);
        let sets = |level: NormLevel| -> Vec<&[usize]> {
            match level {
                NormLevel::Group => groups.iter().map(|g| g.as_slice()).collect(),
                NormLevel::Batch => vec![all.as_slice()],
                NormLevel::None => Vec::new(),
            }
        };
        let mut baseline = vec![0.0; n];
        for members in sets(self.mean_level) {
            self.baseline(rewards, weights, members, &mut baseline);
        }
        let centred: Vec<f64> = (0..n).map(|i| rewards[i] - baseline[i]).collect();
        if self.whiten {
            let mut out = centred.clone();
            for members in sets(self.std_level) {
                let x: Vec<f64> = members.iter().map(|&i| centred[i]).collect();
                let w: Vec<f64> = members.iter().map(|&i| tokens[i]).collect();
                for (&i, v) in members.iter().zip(whiten(&x, &w, self.std_unbiased, self.eps)) {
                    out[i] = v;
                }
            }
            return out;
        }
        let eps = if self.std_level == NormLevel::None { 0.0 } else { self.eps };
        let mut std = vec![1.0; n];
        for members in sets(self.std_level) {
            if self.lone_group_baseline_zero && self.std_level == NormLevel::Group && members.len() == 1 {
                continue; // σ 1, as verl
            }
            self.std(rewards, weights, &baseline, members, &mut std);
        }
        (0..n).map(|i| centred[i] / (std[i] + eps)).collect()
    }
}
