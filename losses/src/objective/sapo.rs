//! SAPO (SPEC.md §4.7): a soft gate instead of a hard clip, −(4/τ)·σ(τ(r−1))·Â with
//! τ = tau_pos where Â > 0 and tau_neg otherwise; the ratio is not detached. Its gradient
//! w.r.t. log π is −Â·4σ(1−σ)·r, which is −Â at r = 1.

use burn::tensor::activation::sigmoid;

use super::{Inputs, Term};
use crate::ops::{full_like, ratio};
use crate::settings::Settings;

pub fn term(s: &Settings, x: &Inputs) -> Term {
    let r = ratio(x.log_prob.clone(), x.old_log_prob.clone());
    let adv = x.advantages.clone();
    let tau = full_like(&adv, s.tau_neg).mask_fill(adv.clone().greater_elem(0.0), s.tau_pos);
    let gate = sigmoid(tau.clone() * r.clone().sub_scalar(1.0)) * tau.recip().mul_scalar(4.0);
    Term::plain(-(gate * adv), r.detach())
}
