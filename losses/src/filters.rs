//! Rollout/trainer mismatch corrections (SPEC.md §4.11–4.12), composable with any loss that
//! takes them. All compare the proximal (`old_log_prob`) with the behaviour (sampler) policy
//! and are detached:
//! - the behaviour weight sg(π_old/π_behave) of the decoupled objective, and TIS, which caps
//!   that weight at C (with TIS alone the weight is applied without `decoupled`);
//! - IcePop: drop tokens whose π_old/π_behave leaves [lower, upper];
//! - KPop: drop tokens whose max(KL(P_old‖P_behave), KL(P_behave‖P_old)) over the Bernoulli of
//!   the sampled token's probability exceeds `upper`.
//!
//! Dropped tokens still count in the normalizer (AReaL divides by the pre-mask token count).

use arl_core::{LossError, T2};

use crate::objective::dppo::bernoulli_kl;
use crate::ops::{ind, ratio};
use crate::settings::Settings;

/// What the filters contribute: a weight to multiply the token loss by, and a keep mask.
pub struct Correction {
    pub weight: Option<T2>,
    pub keep: Option<T2>,
}

pub fn correction(s: &Settings, old: &T2, behavior: Option<&T2>) -> Result<Correction, LossError> {
    if !s.needs_behavior() {
        return Ok(Correction { weight: None, keep: None });
    }
    let behavior = behavior.ok_or_else(|| {
        LossError::Invalid("loss.decoupled, loss.tis, loss.icepop and loss.kpop need behavior_log_prob (the sampler's log-probs)".into())
    })?;
    let w = ratio(old.clone(), behavior.clone()).detach();
    let weight = (s.decoupled || s.tis.is_some()).then(|| match s.tis {
        Some(cap) => w.clone().clamp_max(cap),
        None => w.clone(),
    });
    let mut keep: Option<T2> = None;
    let mut and = |k: T2| {
        keep = Some(match keep.take() {
            Some(prev) => prev * k,
            None => k,
        })
    };
    if let Some((lo, hi)) = s.icepop {
        and(ind(w.clone().greater_equal_elem(lo), &w) * ind(w.clone().lower_equal_elem(hi), &w));
    }
    if let Some(upper) = s.kpop {
        let p_old = old.clone().detach().exp();
        let p_beh = behavior.clone().detach().exp();
        let kl = bernoulli_kl(p_old.clone(), p_beh.clone()).max_pair(bernoulli_kl(p_beh, p_old));
        and(ind(kl.lower_equal_elem(upper), &w));
    }
    Ok(Correction { weight, keep })
}
