//! Reward normalization with AReaL's `NormConfig` semantics (SPEC.md §5.1), at episode level:
//!
//! Â_i = (R_i − b_i) / (σ_i + eps)
//!
//! - b_i, the baseline, is the mean of R over episode i's group (`mean_level = group`), over the
//!   batch (`batch`), or 0 (`none`). With `leave_one_out` it excludes R_i:
//!   (Σ R − R_i)/(n − 1); a set of one has baseline 0 (AReaL).
//! - σ_i is the root mean square of R − b over the group or batch (`std_level`), divided by
//!   n − 1 when `std_unbiased` (by n otherwise). An unbiased σ of a single episode, or any σ of
//!   none, is 1. `std_level = none` divides by 1 with no eps.
//! - A group of one therefore gets Â = 0 under group mean (verl's GRPO differs: it takes
//!   mean 0 / std 1 there, so Â = R); all-equal rewards give Â = 0.
//!
//! The REINFORCE++ estimators divide by √(var + eps) instead, as verl's `masked_whiten` does.
//!
//! AReaL computes these statistics over valid *tokens* (a long response weighs more):
//! [`AdvantageFn::advantages_token_weighted`](arl_core::AdvantageFn::advantages_token_weighted)
//! with each episode's policy-token count does the same; plain `advantages` counts every
//! episode once (verl's GRPO/RLOO, which score sequences).

use std::collections::BTreeMap;

use arl_core::config::NormLevel;

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Norm {
    pub mean_level: NormLevel,
    pub std_level: NormLevel,
    pub leave_one_out: bool,
    pub std_unbiased: bool,
    pub eps: f64,
    /// Divide by √(var + eps) instead of σ + eps (verl's `masked_whiten`, used by
    /// REINFORCE++); not a config key, fixed by the named estimator.
    pub eps_in_sqrt: bool,
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

impl Norm {
    fn baseline(&self, rewards: &[f64], w: &[f64], members: &[usize], out: &mut [f64]) {
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
        let std = if self.eps_in_sqrt { (var + self.eps).sqrt() } else { var.sqrt() };
        for &i in members {
            out[i] = std;
        }
    }

    /// Every episode weighs 1.
    pub fn apply(&self, rewards: &[f64], group_ids: &[usize]) -> Vec<f64> {
        self.apply_weighted(rewards, group_ids, &vec![1.0; rewards.len()])
    }

    /// Episode i weighs `weights[i]` (its policy-token count, for AReaL's token-level
    /// statistics): sums, counts and the n ≤ 1 cases are over tokens, and leave-one-out
    /// leaves out one token's value, as AReaL's masked statistics do.
    pub fn apply_weighted(&self, rewards: &[f64], group_ids: &[usize], weights: &[f64]) -> Vec<f64> {
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
        let eps = if self.std_level == NormLevel::None || self.eps_in_sqrt { 0.0 } else { self.eps };
        let mut std = vec![1.0; n];
        for members in sets(self.std_level) {
            self.std(rewards, weights, &baseline, members, &mut std);
        }
        (0..n).map(|i| (rewards[i] - baseline[i]) / (std[i] + eps)).collect()
    }
}
