//! Ratio-free policy gradients (SPEC.md §4.9–4.10): REINFORCE −Â·log π; plain importance
//! sampling −sg(w)·Â·log π with w = π_θ/π_behave (π_old when no behaviour log-probs are
//! given), optionally capped at `is_cap`, no trust region; DRO
//! −(log π·Â − (β/2)(log π − log π_old)²); and supervised cross-entropy −log π (SFT: every
//! masked token is a target, whatever its advantage).

use super::{Inputs, Term};
use crate::ops::ratio;
use crate::settings::Settings;

pub fn reinforce(x: &Inputs) -> Term {
    let r = ratio(x.log_prob.clone(), x.old_log_prob.clone()).detach();
    Term::plain(-(x.advantages.clone() * x.log_prob.clone()), r)
}

pub fn cross_entropy(x: &Inputs) -> Term {
    let r = ratio(x.log_prob.clone(), x.old_log_prob.clone()).detach();
    Term::plain(-x.log_prob.clone(), r)
}

pub fn importance_sampling(s: &Settings, x: &Inputs) -> Term {
    let base = x.behavior_log_prob.clone().unwrap_or_else(|| x.old_log_prob.clone());
    let w = ratio(x.log_prob.clone(), base).detach();
    let w = match s.is_cap {
        Some(c) => w.clamp_max(c),
        None => w,
    };
    let r = ratio(x.log_prob.clone(), x.old_log_prob.clone()).detach();
    Term::plain(-(w * x.advantages.clone()) * x.log_prob.clone(), r)
}

pub fn dro(s: &Settings, x: &Inputs) -> Term {
    let r = ratio(x.log_prob.clone(), x.old_log_prob.clone()).detach();
    let diff = x.log_prob.clone() - x.old_log_prob.clone();
    let loss = -(x.log_prob.clone() * x.advantages.clone() - diff.powi_scalar(2).mul_scalar(s.dro_beta / 2.0));
    Term::plain(loss, r)
}
