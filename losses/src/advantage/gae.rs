//! Generalized advantage estimation given value estimates (SPEC.md §5.2). A critic comes
//! later; these functions take the values as plain numbers.
//!
//! Token level (verl): walk backwards over one trajectory; on policy tokens
//! δ_t = r_t + γ V_next − V_t, A_t = δ_t + γλ A_next, then V_next ← V_t; non-policy
//! (observation) tokens get A = 0 and carry V_next and A_next through unchanged (their
//! rewards are ignored). Returns G_t = A_t + V_t. `bootstrap` is V after the last token: 0
//! for an EOS-terminated trajectory, the last value for a truncated one.
//!
//! Turn level (AReaL `gae_timestep_unit = turn`): each turn u (tokens sharing a turn id ≥ 0)
//! is one step, r_u = Σ of its token rewards, V_u = the value at its first token; the
//! recurrence runs over turns and A_u, G_u are broadcast to the turn's tokens.

use arl_core::config::AdvantageConfig;

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Gae {
    pub gamma: f64,
    pub lambda: f64,
}

impl Gae {
    /// γ and λ from the config; 1 when unset.
    pub fn from_config(c: &AdvantageConfig) -> Self {
        Gae { gamma: c.gamma.unwrap_or(1.0), lambda: c.lambda.unwrap_or(1.0) }
    }

    /// (advantages, returns) per token of one trajectory.
    pub fn token_level(&self, rewards: &[f64], values: &[f64], mask: &[bool], bootstrap: f64) -> (Vec<f64>, Vec<f64>) {
        let n = rewards.len();
        assert!(values.len() == n && mask.len() == n, "rewards, values and mask must have one entry per token");
        let (mut adv, mut ret) = (vec![0.0; n], vec![0.0; n]);
        let (mut next_value, mut last) = (bootstrap, 0.0);
        for t in (0..n).rev() {
            if !mask[t] {
                continue;
            }
            let delta = rewards[t] + self.gamma * next_value - values[t];
            last = delta + self.gamma * self.lambda * last;
            adv[t] = last;
            ret[t] = last + values[t];
            next_value = values[t];
        }
        (adv, ret)
    }

    /// (advantages, returns) per token, stepping over turns; tokens with turn id < 0 get 0.
    pub fn turn_level(&self, rewards: &[f64], values: &[f64], turn_ids: &[i64], bootstrap: f64) -> (Vec<f64>, Vec<f64>) {
        let n = rewards.len();
        assert!(values.len() == n && turn_ids.len() == n, "rewards, values and turn_ids must have one entry per token");
        // Turns in order of first appearance: (id, reward sum, value at first token).
        let mut turns: Vec<(i64, f64, f64)> = Vec::new();
        for t in 0..n {
            let id = turn_ids[t];
            if id < 0 {
                continue;
            }
            match turns.iter_mut().find(|(u, _, _)| *u == id) {
                Some(turn) => turn.1 += rewards[t],
                None => turns.push((id, rewards[t], values[t])),
            }
        }
        let mut per_turn = vec![(0.0, 0.0); turns.len()];
        let (mut next_value, mut last) = (bootstrap, 0.0);
        for (k, &(_, r, v)) in turns.iter().enumerate().rev() {
            let delta = r + self.gamma * next_value - v;
            last = delta + self.gamma * self.lambda * last;
            per_turn[k] = (last, last + v);
            next_value = v;
        }
        let (mut adv, mut ret) = (vec![0.0; n], vec![0.0; n]);
        for t in 0..n {
            if let Some(k) = turns.iter().position(|(u, _, _)| *u == turn_ids[t]) {
                (adv[t], ret[t]) = per_turn[k];
            }
        }
        (adv, ret)
    }
}
