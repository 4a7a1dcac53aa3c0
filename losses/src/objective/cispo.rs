//! CISPO (MiniMax-M1, SPEC.md §4.6): −sg(clip(r, 1−ε_low, 1+ε_high))·Â·log π_θ. The weight,
//! not the token, is clipped, so every token keeps a gradient. Clip fractions count tokens
//! whose weight was clipped, whatever the advantage's sign.

use super::{Inputs, Term};
use crate::ops::{ind, ratio};
use crate::settings::Settings;

pub fn term(s: &Settings, x: &Inputs) -> Term {
    let r = ratio(x.log_prob.clone(), x.old_log_prob.clone()).detach();
    let w = r.clone().clamp(1.0 - s.clip_low, 1.0 + s.clip_high);
    let loss = -(w * x.advantages.clone()) * x.log_prob.clone();
    let mut t = Term::plain(loss, r.clone());
    t.clipped_high = Some(ind(r.clone().greater_elem(1.0 + s.clip_high), &r));
    t.clipped_low = Some(ind(r.clone().lower_elem(1.0 - s.clip_low), &r));
    t
}
