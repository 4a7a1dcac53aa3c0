//! GSPO (SPEC.md §4.5): the sequence ratio s_i = exp((1/|y_i|) Σ_t log r_{i,t}) in the
//! clipped surrogate with the sequence's advantage. `seq` puts the sequence loss on each of
//! its tokens (so `seq-mean-token-mean` yields it once per sequence); `token` is the
//! token-level form s_{i,t} = sg(s_i)·π_θ(y_t)/sg(π_θ(y_t)) with per-token advantages, whose
//! value equals s_i and whose gradient flows per token. verl caps the log sequence ratio at 10.

use super::{Inputs, Term, clipped_surrogate};
use crate::ops::{LOG_RATIO_CLAMP, row_mean, widen};
use crate::settings::Settings;

const SEQ_LOG_RATIO_MAX: f64 = 10.0;

fn seq_log_ratio(x: &Inputs) -> arl_core::T2 {
    let log_ratio = (x.log_prob.clone() - x.old_log_prob.clone()).clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP);
    row_mean(log_ratio, &x.mask).clamp(-LOG_RATIO_CLAMP, SEQ_LOG_RATIO_MAX)
}

pub fn seq(s: &Settings, x: &Inputs) -> Term {
    let s_i = seq_log_ratio(x).exp();
    let adv_i = row_mean(x.advantages.clone(), &x.mask);
    let t = clipped_surrogate(s, s_i, adv_i);
    let like = &x.log_prob;
    Term {
        loss: widen(t.loss, like),
        ratio: widen(t.ratio, like),
        clipped_high: t.clipped_high.map(|c| widen(c, like)),
        clipped_low: t.clipped_low.map(|c| widen(c, like)),
        dual_clipped: t.dual_clipped.map(|c| widen(c, like)),
        keep: None,
    }
}

pub fn token(s: &Settings, x: &Inputs) -> Term {
    let s_i = widen(seq_log_ratio(x).detach(), &x.log_prob);
    let log_s = s_i + x.log_prob.clone() - x.log_prob.clone().detach();
    clipped_surrogate(s, log_s.exp(), x.advantages.clone())
}
