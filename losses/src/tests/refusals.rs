//! Settings that do not apply, bad values and missing inputs fail with one clear line.

use arl_core::config::{IcePopConfig, TisConfig};
use arl_core::registry::{self, LossPlugin};
use arl_core::{LossError, LossInput};

use super::*;

fn refusal(c: LossConfig) -> String {
    let plugin = registry::get::<LossPlugin>(&c.name).unwrap();
    let err = (plugin.build)(&c).err().unwrap_or_else(|| panic!("{} accepted {c:?}", c.name)).to_string();
    assert_eq!(err.lines().count(), 1, "{err}");
    err
}

fn named(name: &str) -> LossConfig {
    LossConfig { name: name.into(), ..LossConfig::default() }
}

#[test]
fn a_clip_band_for_plain_importance_sampling_is_refused() {
    let err = refusal(LossConfig { clip_high: Some(0.28), ..named("is") });
    assert!(err.starts_with("loss `is`: setting `loss.clip_high` does not apply to this loss (it uses: loss.is_cap)"), "{err}");
}

#[test]
fn keys_of_other_families_are_refused() {
    for (c, key) in [
        (LossConfig { tau_pos: Some(1.0), ..named("grpo") }, "tau_pos"),
        (LossConfig { dro_beta: Some(0.1), ..named("reinforce") }, "dro_beta"),
        (LossConfig { delta: Some(0.1), ..named("dppo-tv") }, "delta"),
        (LossConfig { dual_clip: Some(3.0), ..named("cispo") }, "dual_clip"),
        (LossConfig { decoupled: true, ..named("sapo") }, "decoupled"),
        (LossConfig { tis: Some(TisConfig::default()), ..named("is") }, "tis"),
        (LossConfig { clip_low: Some(0.2), ..named("dppo-kl") }, "clip_low"),
    ] {
        let err = refusal(c);
        assert!(err.contains(&format!("setting `loss.{key}` does not apply")), "{err}");
    }
}

#[test]
fn a_horizon_without_constant_horizon_aggregation_is_refused() {
    let err = refusal(LossConfig { horizon: Some(512.0), ..named("grpo") });
    assert!(err.contains("applies only to constant-horizon aggregation, not token-mean"), "{err}");
}

#[test]
fn bad_values_are_refused() {
    assert!(refusal(LossConfig { dual_clip: Some(0.5), ..named("ppo") }).contains("`loss.dual_clip` must be > 1, got 0.5"));
    assert!(refusal(named("dro")).contains("`loss.dro_beta` must be set"));
    assert!(refusal(LossConfig { dro_beta: Some(-1.0), ..named("dro") }).contains("must be > 0"));
    let bad_band = LossConfig { icepop: Some(IcePopConfig { lower: 2.0, upper: 1.0 }), ..named("grpo") };
    assert!(refusal(bad_band).contains("lower < upper"));
}

#[test]
fn missing_inputs_and_bad_shapes_are_errors() {
    let device = crate::eval::cpu_device();
    let b = batch();
    let mut input: LossInput = b.input(&device).unwrap();
    input.behavior_log_prob = None;
    input.ref_log_prob = None;
    let decoupled = build(&LossConfig { decoupled: true, ..LossConfig::default() });
    let err = decoupled.token_loss(&input).err().unwrap();
    assert!(err.to_string().contains("need behavior_log_prob"), "{err}");
    let kl = build(&LossConfig { kl_coef: 0.1, ..LossConfig::default() });
    assert!(kl.token_loss(&input).err().unwrap().to_string().contains("needs ref_log_prob"));
    let short = b.rows(0..2).input(&device).unwrap();
    input.advantages = short.advantages;
    let err = build(&LossConfig::default()).token_loss(&input).err().unwrap();
    assert!(matches!(err, LossError::Shape(_)), "{err}");
}
