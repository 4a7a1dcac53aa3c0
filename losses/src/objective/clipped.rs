//! PPO/GRPO clipped surrogate (SPEC.md §4.1–4.4): r = π_θ/π_old per token, separate low and
//! high clip (DAPO's clip-higher), optional dual clip (verl `clip_ratio_c`).

use super::{Inputs, Term, clipped_surrogate};
use crate::ops::ratio;
use crate::settings::Settings;

pub fn term(s: &Settings, x: &Inputs) -> Term {
    let r = ratio(x.log_prob.clone(), x.old_log_prob.clone());
    clipped_surrogate(s, r, x.advantages.clone())
}
