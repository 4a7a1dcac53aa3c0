//! The policy-gradient term of each loss family (SPEC.md §4), per token, before the shared
//! parts (behaviour weight, token filters, KL, entropy, mask) that [`crate::loss`] adds.

mod cispo;
mod clipped;
pub(crate) mod dppo;
mod gspo;
mod pg;
mod sapo;

use arl_core::T2;

use crate::settings::{Family, Settings};

/// What a family's term needs: `log_prob` carries gradients; the rest are detached.
pub struct Inputs {
    pub log_prob: T2,
    pub old_log_prob: T2,
    pub advantages: T2,
    pub mask: T2,
    /// The sampler's log-probs (plain IS weights against them when given).
    pub behavior_log_prob: Option<T2>,
}

/// One family's per-token term and the indicators its metrics need (all detached, 0/1).
pub struct Term {
    /// Per-token loss, not yet masked.
    pub loss: T2,
    /// The ratio the metrics report (π_θ/π_old per token, or GSPO's sequence ratio).
    pub ratio: T2,
    pub clipped_high: Option<T2>,
    pub clipped_low: Option<T2>,
    pub dual_clipped: Option<T2>,
    /// 1 where the family keeps the token (DPPO's trust-region mask).
    pub keep: Option<T2>,
}

impl Term {
    fn plain(loss: T2, ratio: T2) -> Self {
        Term { loss, ratio, clipped_high: None, clipped_low: None, dual_clipped: None, keep: None }
    }
}

pub fn term(s: &Settings, x: &Inputs) -> Term {
    match s.family {
        Family::Clipped => clipped::term(s, x),
        Family::GspoSeq => gspo::seq(s, x),
        Family::GspoToken => gspo::token(s, x),
        Family::Cispo => cispo::term(s, x),
        Family::Sapo => sapo::term(s, x),
        Family::DppoTv => dppo::tv(s, x),
        Family::DppoKl => dppo::binary_kl(s, x),
        Family::Dro => pg::dro(s, x),
        Family::Is => pg::importance_sampling(s, x),
        Family::Reinforce => pg::reinforce(x),
        Family::CrossEntropy => pg::cross_entropy(x),
    }
}

/// The PPO clipped surrogate with optional dual clip, on a given ratio (token or sequence):
/// max(−Â r, −Â clip(r, 1−ε_low, 1+ε_high)), and for Â < 0 capped at −c·Â.
pub(crate) fn clipped_surrogate(s: &Settings, ratio: T2, adv: T2) -> Term {
    use crate::ops::ind;
    let r_det = ratio.clone().detach();
    let pg1 = -adv.clone() * ratio.clone();
    let pg2 = -adv.clone() * ratio.clamp(1.0 - s.clip_low, 1.0 + s.clip_high);
    let mut loss = pg1.max_pair(pg2);
    let pos = ind(adv.clone().greater_elem(0.0), &adv);
    let neg = ind(adv.clone().lower_elem(0.0), &adv);
    let clipped_high = ind(r_det.clone().greater_elem(1.0 + s.clip_high), &adv) * pos;
    let clipped_low = ind(r_det.clone().lower_elem(1.0 - s.clip_low), &adv) * neg.clone();
    let mut dual_clipped = None;
    if let Some(c) = s.dual_clip {
        let cap = -adv.clone() * c;
        let capped = loss.clone().detach().greater(cap.clone());
        let is_neg = adv.clone().lower_elem(0.0);
        dual_clipped = Some(ind(capped, &adv) * neg);
        loss = loss.clone().mask_where(is_neg, loss.min_pair(cap));
    }
    Term { loss, ratio: r_det, clipped_high: Some(clipped_high), clipped_low: Some(clipped_low), dual_clipped, keep: None }
}
