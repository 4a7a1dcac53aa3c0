//! Advantage estimators against the reference script (unequal groups, an all-equal group, a
//! group of one), plus GAE and the KL-in-reward penalty by hand.

use arl_core::AdvantageInput;
use arl_core::config::{AdvantageConfig, KlEstimator};
use arl_core::registry::{self, AdvantagePlugin};

use super::*;
use crate::advantage::gae::Gae;

fn estimator_config(case: &Value) -> AdvantageConfig {
    let mut c = case["config"].as_object().cloned().unwrap_or_default();
    c.insert("name".into(), case["estimator"].clone());
    serde_json::from_value(Value::Object(c)).unwrap()
}

fn run(c: &AdvantageConfig, rewards: &[f64], groups: &[usize]) -> Vec<f64> {
    let e = (registry::get::<AdvantagePlugin>(&c.name).unwrap().build)(c).unwrap();
    e.advantages(&AdvantageInput { rewards, group_ids: groups }).unwrap()
}

#[test]
fn every_estimator_case_matches_the_reference() {
    let fx = fixture();
    let rewards: Vec<f64> = serde_json::from_value(fx["rewards"]["rewards"].clone()).unwrap();
    let groups: Vec<usize> = serde_json::from_value(fx["rewards"]["group_ids"].clone()).unwrap();
    for case in fx["advantages"].as_array().unwrap() {
        let name = case["case"].as_str().unwrap();
        let c = estimator_config(case);
        let got = match case.get("token_counts") {
            Some(counts) => {
                let counts: Vec<f64> = serde_json::from_value(counts.clone()).unwrap();
                let e = (registry::get::<AdvantagePlugin>(&c.name).unwrap().build)(&c).unwrap();
                e.advantages_token_weighted(&AdvantageInput { rewards: &rewards, group_ids: &groups }, &counts).unwrap()
            }
            None => run(&c, &rewards, &groups),
        };
        let want: Vec<f64> = serde_json::from_value(case["expected"].clone()).unwrap();
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_close(&format!("{name}[{i}]"), *g, *w, 1e-12);
        }
    }
}

#[test]
fn hand_computed_edge_cases() {
    let c = |name: &str| AdvantageConfig { name: name.into(), ..AdvantageConfig::default() };
    // All-equal rewards: zero advantage for every estimator that centres.
    for name in ["grpo", "drgrpo", "rloo", "liteppo", "reinforce++", "reinforce++-baseline", "norm"] {
        let a = run(&c(name), &[0.5, 0.5, 0.5], &[1, 1, 1]);
        assert!(a.iter().all(|x| x.abs() < 1e-12), "{name}: {a:?}");
    }
    // A group of one: the group mean is the reward itself (AReaL), so Â = 0; RLOO's
    // leave-one-out baseline of a single episode is 0, so Â = R.
    assert_eq!(run(&c("grpo"), &[0.7], &[4]), vec![0.0]);
    assert_eq!(run(&c("rloo"), &[0.7], &[4]), vec![0.7]);
    // GRPO, G = 2, rewards 1 and 0: mean 0.5, unbiased std √0.5 → ±0.5/(√0.5 + 1e-6).
    let a = run(&c("grpo"), &[1.0, 0.0], &[0, 0]);
    assert_close("grpo G=2", a[0], 0.5 / (0.5f64.sqrt() + 1e-6), 1e-12);
    // RLOO = G/(G−1)·(R − mean): G = 3, rewards 1, 0, 0 → 1.5·(2/3) = 1, 1.5·(−1/3) = −0.5.
    let a = run(&c("rloo"), &[1.0, 0.0, 0.0], &[0, 0, 0]);
    assert_close("rloo", a[0], 1.0, 1e-12);
    assert_close("rloo", a[1], -0.5, 1e-12);
    // Mismatched lengths are a shape error.
    let e = (registry::get::<AdvantagePlugin>("grpo").unwrap().build)(&c("grpo")).unwrap();
    assert!(e.advantages(&AdvantageInput { rewards: &[1.0], group_ids: &[0, 1] }).is_err());
    // γ and λ belong to GAE.
    let err = (registry::get::<AdvantagePlugin>("grpo").unwrap().build)(&AdvantageConfig { gamma: Some(0.9), ..c("grpo") })
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("setting `advantage.gamma` does not apply"), "{err}");
}

#[test]
fn gae_token_level_by_hand() {
    // γ = λ = 1, V = 0: every policy token gets the outcome reward.
    let g = Gae { gamma: 1.0, lambda: 1.0 };
    let (a, r) = g.token_level(&[0.0, 0.0, 0.0, 1.0], &[0.0; 4], &[true, false, true, true], 0.0);
    assert_eq!(a, vec![1.0, 0.0, 1.0, 1.0]);
    assert_eq!(r, a);
    // γ = 0.9, λ = 0.5, values 0.2, (obs 9.0), 0.4, 0.5; reward 1 on the last token, EOS.
    // t3: δ = 1 − 0.5 = 0.5; A = 0.5.  t2: δ = 0 + 0.9·0.5 − 0.4 = 0.05; A = 0.05 + 0.45·0.5 = 0.275.
    // t1: observation, skipped.  t0: δ = 0.9·0.4 − 0.2 = 0.16; A = 0.16 + 0.45·0.275 = 0.28375.
    let g = Gae { gamma: 0.9, lambda: 0.5 };
    let (a, r) = g.token_level(&[0.0, 5.0, 0.0, 1.0], &[0.2, 9.0, 0.4, 0.5], &[true, false, true, true], 0.0);
    for (got, want) in a.iter().zip([0.28375, 0.0, 0.275, 0.5]) {
        assert_close("gae", *got, want, 1e-12);
    }
    assert_close("return", r[0], 0.28375 + 0.2, 1e-12);
    // Truncated: bootstrap from the last value.
    let (a, _) = g.token_level(&[0.0], &[0.5], &[true], 0.5);
    assert_close("bootstrap", a[0], 0.9 * 0.5 - 0.5, 1e-12);
}

#[test]
fn gae_turn_level_by_hand() {
    // Two turns (ids 0 and 1) with an observation (−1) between; reward 1 on the last token.
    // Turn values: V_0 = 0.3 (first token of turn 0), V_1 = 0.6. γ = 1, λ = 1:
    // A_1 = 1 − 0.6 = 0.4; A_0 = 0 + 0.6 − 0.3 + 0.4 = 0.7; returns A + V = 1 for both.
    let g = Gae { gamma: 1.0, lambda: 1.0 };
    let (a, r) = g.turn_level(&[0.0, 0.0, 0.0, 0.0, 1.0], &[0.3, 0.9, 0.0, 0.6, 0.8], &[0, 0, -1, 1, 1], 0.0);
    for (got, want) in a.iter().zip([0.7, 0.7, 0.0, 0.4, 0.4]) {
        assert_close("turn gae", *got, want, 1e-12);
    }
    assert_close("turn return", r[0], 1.0, 1e-12);
    assert_close("turn return", r[4], 1.0, 1e-12);
}

#[test]
fn kl_in_reward_by_hand() {
    // k1 penalty −β·(log π_old − log π_ref).
    let p = crate::kl::reward_penalty(0.1, KlEstimator::K1, &[-1.0, -0.5], &[-1.5, -0.5]);
    assert_close("k1", p[0], -0.05, 1e-12);
    assert_eq!(p[1], 0.0);
    // k3 of ℓ = 0.5: e^−0.5 − 1 + 0.5.
    assert_close("k3", crate::kl::estimate_one(KlEstimator::K3, -1.0, -1.5), (-0.5f64).exp() - 0.5, 1e-12);
    assert_close("k2", crate::kl::estimate_one(KlEstimator::K2, -1.0, -1.5), 0.125, 1e-12);
}
