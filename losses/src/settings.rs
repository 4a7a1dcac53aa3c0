//! Which [`LossConfig`] keys each loss uses, its defaults, and the checks that refuse a key
//! set for a loss that ignores it (one line naming the key and the loss).

use arl_core::config::{KlEstimator, KlPlacement, LossConfig};
use arl_core::{Aggregation, PluginError};

/// The loss families (SPEC.md §4). Each registered name is one of these.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// PPO/GRPO clipped surrogate (§4.1–4.4); `grpo` and `ppo` differ only in aggregation.
    Clipped,
    /// GSPO with the sequence ratio (§4.5).
    GspoSeq,
    /// GSPO's token-level form: sg(s_i)·π/sg(π).
    GspoToken,
    Cispo,
    Sapo,
    DppoTv,
    DppoKl,
    Dro,
    /// Plain importance sampling, −sg(w)·Â·log π.
    Is,
    Reinforce,
    /// Supervised cross-entropy −log π (SFT); advantages are ignored.
    CrossEntropy,
}

/// Keys every loss accepts.
const COMMON: &[&str] = &["aggregation", "horizon", "kl_coef", "kl_estimator", "kl_placement", "entropy_coef", "icepop", "kpop"];

impl Family {
    /// Keys this family uses beyond [`COMMON`].
    pub fn keys(self) -> &'static [&'static str] {
        match self {
            Family::Clipped | Family::GspoSeq | Family::GspoToken => &["clip_low", "clip_high", "dual_clip", "decoupled", "tis"],
            Family::Cispo => &["clip_low", "clip_high", "decoupled", "tis"],
            Family::Sapo => &["tau_pos", "tau_neg", "tis"],
            Family::DppoTv => &["delta_low", "delta_high", "is_cap", "tis"],
            Family::DppoKl => &["delta", "is_cap", "tis"],
            Family::Dro => &["dro_beta", "tis"],
            Family::Is => &["is_cap"],
            Family::Reinforce => &["tis"],
            Family::CrossEntropy => &[],
        }
    }
}

/// A loss's own defaults for the keys left unset.
#[derive(Clone, Copy, Debug)]
pub struct Defaults {
    pub aggregation: Aggregation,
    pub clip: (f64, f64),
}

/// Every setting resolved: the config's value or the loss's default.
#[derive(Clone, Debug)]
pub struct Settings {
    pub family: Family,
    pub aggregation: Aggregation,
    pub clip_low: f64,
    pub clip_high: f64,
    pub dual_clip: Option<f64>,
    pub tau_pos: f64,
    pub tau_neg: f64,
    pub delta_low: f64,
    pub delta_high: f64,
    pub delta: f64,
    pub is_cap: Option<f64>,
    pub dro_beta: f64,
    pub decoupled: bool,
    pub kl_coef: f64,
    pub kl_estimator: KlEstimator,
    pub kl_in_loss: bool,
    pub entropy_coef: f64,
    pub icepop: Option<(f64, f64)>,
    pub kpop: Option<f64>,
    pub tis: Option<f64>,
}

fn set_keys(c: &LossConfig) -> Vec<&'static str> {
    let d = LossConfig::default();
    let mut keys = Vec::new();
    let mut note = |set: bool, key| {
        if set {
            keys.push(key)
        }
    };
    note(c.aggregation.is_some(), "aggregation");
    note(c.horizon.is_some(), "horizon");
    note(c.clip_low.is_some(), "clip_low");
    note(c.clip_high.is_some(), "clip_high");
    note(c.dual_clip.is_some(), "dual_clip");
    note(c.tau_pos.is_some(), "tau_pos");
    note(c.tau_neg.is_some(), "tau_neg");
    note(c.delta_low.is_some(), "delta_low");
    note(c.delta_high.is_some(), "delta_high");
    note(c.delta.is_some(), "delta");
    note(c.is_cap.is_some(), "is_cap");
    note(c.dro_beta.is_some(), "dro_beta");
    note(c.decoupled != d.decoupled, "decoupled");
    note(c.icepop.is_some(), "icepop");
    note(c.kpop.is_some(), "kpop");
    note(c.tis.is_some(), "tis");
    keys
}

impl Settings {
    pub fn resolve(name: &str, family: Family, defaults: Defaults, c: &LossConfig) -> Result<Self, PluginError> {
        let fail = |message: String| PluginError { kind: "loss", name: name.to_string(), message };
        for key in set_keys(c) {
            if !COMMON.contains(&key) && !family.keys().contains(&key) {
                return Err(fail(format!(
                    "setting `loss.{key}` does not apply to this loss (it uses: {}); unset it or pick another loss",
                    family.keys().iter().map(|k| format!("loss.{k}")).collect::<Vec<_>>().join(", ")
                )));
            }
        }
        let aggregation = c.aggregation.unwrap_or(defaults.aggregation);
        if c.horizon.is_some() && aggregation != Aggregation::ConstantHorizon {
            return Err(fail(format!("setting `loss.horizon` applies only to constant-horizon aggregation, not {}", aggregation.name())));
        }
        let s = Settings {
            family,
            aggregation,
            clip_low: c.clip_low.unwrap_or(defaults.clip.0),
            clip_high: c.clip_high.unwrap_or(defaults.clip.1),
            dual_clip: c.dual_clip,
            tau_pos: c.tau_pos.unwrap_or(1.0),
            tau_neg: c.tau_neg.unwrap_or(1.05),
            delta_low: c.delta_low.unwrap_or(0.15),
            delta_high: c.delta_high.unwrap_or(0.15),
            delta: c.delta.unwrap_or(0.05),
            is_cap: c.is_cap.or(match family {
                Family::DppoTv | Family::DppoKl => Some(20.0),
                _ => None,
            }),
            dro_beta: c.dro_beta.unwrap_or(f64::NAN),
            decoupled: c.decoupled,
            kl_coef: c.kl_coef,
            kl_estimator: c.kl_estimator,
            kl_in_loss: c.kl_placement == KlPlacement::Loss,
            entropy_coef: c.entropy_coef,
            icepop: c.icepop.as_ref().map(|i| (i.lower, i.upper)),
            kpop: c.kpop.as_ref().map(|k| k.upper),
            tis: c.tis.as_ref().map(|t| t.cap),
        };
        s.check().map_err(fail)?;
        Ok(s)
    }

    fn check(&self) -> Result<(), String> {
        let need = |ok: bool, key: &str, what: &str, v: f64| {
            if ok { Ok(()) } else { Err(format!("`loss.{key}` must be {what}, got {v}")) }
        };
        need(self.clip_low >= 0.0, "clip_low", ">= 0", self.clip_low)?;
        need(self.clip_high >= 0.0, "clip_high", ">= 0", self.clip_high)?;
        if let Some(c) = self.dual_clip {
            need(c > 1.0, "dual_clip", "> 1", c)?;
        }
        need(self.tau_pos > 0.0, "tau_pos", "> 0", self.tau_pos)?;
        need(self.tau_neg > 0.0, "tau_neg", "> 0", self.tau_neg)?;
        need(self.delta_low >= 0.0, "delta_low", ">= 0", self.delta_low)?;
        need(self.delta_high >= 0.0, "delta_high", ">= 0", self.delta_high)?;
        need(self.delta >= 0.0, "delta", ">= 0", self.delta)?;
        if let Some(c) = self.is_cap {
            need(c > 0.0, "is_cap", "> 0", c)?;
        }
        if self.family == Family::Dro {
            if self.dro_beta.is_nan() {
                return Err("`loss.dro_beta` must be set (> 0); DRO has no default".into());
            }
            need(self.dro_beta > 0.0, "dro_beta", "> 0", self.dro_beta)?;
        }
        need(self.kl_coef >= 0.0, "kl_coef", ">= 0", self.kl_coef)?;
        need(self.entropy_coef >= 0.0, "entropy_coef", ">= 0", self.entropy_coef)?;
        if let Some((lo, hi)) = self.icepop
            && !(lo >= 0.0 && lo < hi)
        {
            return Err(format!("`loss.icepop` needs 0 <= lower < upper, got [{lo}, {hi}]"));
        }
        if let Some(k) = self.kpop {
            need(k > 0.0, "kpop.upper", "> 0", k)?;
        }
        if let Some(c) = self.tis {
            need(c > 0.0, "tis.cap", "> 0", c)?;
        }
        Ok(())
    }

    /// Whether the loss reads `behavior_log_prob`.
    pub fn needs_behavior(&self) -> bool {
        self.decoupled || self.tis.is_some() || self.icepop.is_some() || self.kpop.is_some()
    }
}
