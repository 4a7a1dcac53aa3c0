//! DPPO (SPEC.md §4.8): a trust region on the probability p = π(a), not the ratio.
//! Loss_t = −Â·sg(min(r, C))·log π_θ·keep, where `keep` is the binary total-variation mask
//! (keep if Â > 0 and p_θ − p_old ≤ δ_high, or Â ≤ 0 and p_θ − p_old ≥ −δ_low) or the
//! binary-KL mask (drop only if KL(Bern(p_old)‖Bern(p_θ)) > δ and p moved in the
//! advantage's direction). Â = 0 takes the negative branch, as in verl.

use arl_core::T2;

use super::{Inputs, Term};
use crate::ops::{ind, ratio};
use crate::settings::Settings;

/// p clamped away from 0 and 1 so the Bernoulli KL stays finite.
const P_EPS: f64 = 1e-12;

fn weighted(s: &Settings, x: &Inputs, keep: T2) -> Term {
    let r = ratio(x.log_prob.clone(), x.old_log_prob.clone()).detach();
    let w = match s.is_cap {
        Some(c) => r.clone().clamp_max(c),
        None => r.clone(),
    };
    let loss = -(x.advantages.clone() * w * keep.clone()) * x.log_prob.clone();
    let mut t = Term::plain(loss, r);
    t.keep = Some(keep);
    t
}

pub fn tv(s: &Settings, x: &Inputs) -> Term {
    let adv = &x.advantages;
    let diff = x.log_prob.clone().detach().exp() - x.old_log_prob.clone().exp();
    let pos = ind(adv.clone().greater_elem(0.0), adv);
    let non_pos = pos.clone().neg().add_scalar(1.0);
    let keep = pos * ind(diff.clone().lower_equal_elem(s.delta_high), adv) + non_pos * ind(diff.greater_equal_elem(-s.delta_low), adv);
    weighted(s, x, keep)
}

/// KL(Bern(p)‖Bern(q)) per token.
pub fn bernoulli_kl(p: T2, q: T2) -> T2 {
    let p = p.clamp(P_EPS, 1.0 - P_EPS);
    let q = q.clamp(P_EPS, 1.0 - P_EPS);
    let one_p = p.clone().neg().add_scalar(1.0);
    let one_q = q.clone().neg().add_scalar(1.0);
    p.clone() * (p.log() - q.log()) + one_p.clone() * (one_p.log() - one_q.log())
}

fn binary_kl_mask(s: &Settings, x: &Inputs) -> T2 {
    let adv = &x.advantages;
    let p = x.log_prob.clone().detach().exp();
    let p_old = x.old_log_prob.clone().exp();
    let kl = bernoulli_kl(p_old.clone(), p.clone());
    let pos = ind(adv.clone().greater_elem(0.0), adv);
    let non_pos = pos.clone().neg().add_scalar(1.0);
    let up = ind(p.clone().greater(p_old.clone()), adv);
    let down = ind(p.lower(p_old), adv);
    let along = pos * up + non_pos * down;
    let drop = ind(kl.greater_elem(s.delta), adv) * along;
    drop.neg().add_scalar(1.0)
}

pub fn binary_kl(s: &Settings, x: &Inputs) -> Term {
    weighted(s, x, binary_kl_mask(s, x))
}
