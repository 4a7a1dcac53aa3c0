//! [`Loss`]: one loss family's term plus the shared parts, as a [`PolicyLoss`]:
//!
//! ℓ_t = mask_t · ( keep_t · w_t · term_t + β·KL_t − c_H·H_t )
//!
//! where `term` is the family's per-token loss (SPEC.md §4), `w` the behaviour weight
//! (decoupled/TIS), `keep` the product of the token masks (DPPO, IcePop, KPop), KL the
//! reference-policy estimate when `kl_placement = "loss"`, and H the given entropy.

use arl_core::config::LossConfig;
use arl_core::{Aggregation, LossError, LossInput, LossMetrics, PluginError, PolicyLoss, T2, TokenLoss};

use crate::objective::{self, Inputs};
use crate::ops::{host, masked_mean, masked_min_max};
use crate::settings::{Defaults, Family, Settings};
use crate::{filters, kl};

pub struct Loss {
    pub name: &'static str,
    pub settings: Settings,
}

impl Loss {
    pub fn build(name: &'static str, family: Family, defaults: Defaults, config: &LossConfig) -> Result<Self, PluginError> {
        Ok(Loss { name, settings: Settings::resolve(name, family, defaults, config)? })
    }
}

fn check_shapes(input: &LossInput) -> Result<(), LossError> {
    let dims = input.log_prob.dims();
    let named = [
        ("old_log_prob", Some(&input.old_log_prob)),
        ("advantages", Some(&input.advantages)),
        ("mask", Some(&input.mask)),
        ("ref_log_prob", input.ref_log_prob.as_ref()),
        ("behavior_log_prob", input.behavior_log_prob.as_ref()),
        ("entropy", input.entropy.as_ref()),
    ];
    for (name, t) in named {
        if let Some(t) = t
            && t.dims() != dims
        {
            return Err(LossError::Shape(format!("{name} is {:?} but log_prob is {dims:?}", t.dims())));
        }
    }
    Ok(())
}

impl PolicyLoss for Loss {
    fn token_loss(&self, input: &LossInput) -> Result<TokenLoss, LossError> {
        check_shapes(input)?;
        let s = &self.settings;
        let mask = input.mask.clone().detach();
        let x = Inputs {
            log_prob: input.log_prob.clone(),
            old_log_prob: input.old_log_prob.clone().detach(),
            advantages: input.advantages.clone().detach(),
            mask: mask.clone(),
            behavior_log_prob: input.behavior_log_prob.clone().map(|b| b.detach()),
        };
        let term = objective::term(s, &x);
        let corr = filters::correction(s, &x.old_log_prob, x.behavior_log_prob.as_ref())?;
        let mut loss = term.loss;
        if let Some(w) = corr.weight {
            loss = loss * w;
        }
        let keep = match (term.keep, corr.keep) {
            (Some(a), Some(b)) => Some(a * b),
            (a, b) => a.or(b),
        };
        if let Some(k) = &keep {
            loss = loss * k.clone();
        }
        let mut ref_kl = None;
        if let Some(reference) = &input.ref_log_prob {
            let k = kl::estimate(s.kl_estimator, x.log_prob.clone(), reference.clone().detach());
            ref_kl = Some(k.clone());
            if s.kl_coef > 0.0 && s.kl_in_loss {
                loss = loss + k.mul_scalar(s.kl_coef);
            }
        } else if s.kl_coef > 0.0 && s.kl_in_loss {
            return Err(LossError::Invalid("loss.kl_coef > 0 with kl_placement = \"loss\" needs ref_log_prob".into()));
        }
        if s.entropy_coef > 0.0 {
            let h = input.entropy.clone().ok_or_else(|| LossError::Invalid("loss.entropy_coef > 0 needs entropy".into()))?;
            loss = loss - h.mul_scalar(s.entropy_coef);
        }
        let loss = loss * mask.clone();

        let m = host(&mask);
        let frac = |t: &Option<T2>| t.as_ref().map(|t| masked_mean(&host(t), &m)).unwrap_or(0.0);
        let ratio = host(&term.ratio);
        let (ratio_min, ratio_max) = masked_min_max(&ratio, &m);
        let k3: Vec<f64> = ratio.iter().map(|r| r - 1.0 - r.ln()).collect();
        let metrics = LossMetrics {
            tokens: m.iter().sum(),
            clip_frac_high: frac(&term.clipped_high),
            clip_frac_low: frac(&term.clipped_low),
            dual_clip_frac: frac(&term.dual_clipped),
            ratio_mean: masked_mean(&ratio, &m),
            ratio_min,
            ratio_max,
            masked_frac: keep.as_ref().map(|k| 1.0 - masked_mean(&host(k), &m)).unwrap_or(0.0),
            approx_kl: masked_mean(&k3, &m),
            ref_kl: ref_kl.map(|k| masked_mean(&host(&k), &m)),
            entropy: input.entropy.as_ref().map(|h| masked_mean(&host(h), &m)),
        };
        Ok(TokenLoss { loss, metrics })
    }

    fn default_aggregation(&self) -> Aggregation {
        self.settings.aggregation
    }

    fn zero_advantage_rows_vanish(&self) -> bool {
        let s = &self.settings;
        // A row with advantage 0 still has a gradient through DRO's and cross-entropy's own
        // terms, a KL in the loss, or an entropy bonus.
        let other_terms = matches!(s.family, Family::Dro | Family::CrossEntropy) || (s.kl_coef > 0.0 && s.kl_in_loss);
        !other_terms && s.entropy_coef == 0.0
    }

    fn needs_entropy(&self) -> bool {
        self.settings.entropy_coef > 0.0
    }
}
