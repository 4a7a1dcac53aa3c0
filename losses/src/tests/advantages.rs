//! Advantage estimators against verl's own functions (`tests/fixtures/verl.json`, made by
//! `scripts/fixtures/make_verl_fixtures.py` from a verl checkout) and the AReaL-semantics
//! reference script, on unequal groups with singletons; plus GAE and the KL-in-reward
//! penalty by hand. Every comparison checks the lengths first.

use arl_core::AdvantageInput;
use arl_core::config::{AdvantageConfig, KlEstimator};
use arl_core::registry::{self, AdvantagePlugin};

use super::*;
use crate::advantage::gae::Gae;
use crate::advantage::norm::whiten;

fn estimator_config(case: &Value) -> AdvantageConfig {
    let mut c = case["config"].as_object().cloned().unwrap_or_default();
    c.insert("name".into(), case["estimator"].clone());
    serde_json::from_value(Value::Object(c)).unwrap()
}

fn named(name: &str) -> AdvantageConfig {
    AdvantageConfig { name: name.into(), ..AdvantageConfig::default() }
}

fn run_with(c: &AdvantageConfig, input: &AdvantageInput<'_>) -> Vec<f64> {
    let e = (registry::get::<AdvantagePlugin>(&c.name).unwrap().build)(c).unwrap();
    e.advantages(input).unwrap()
}

fn run(c: &AdvantageConfig, rewards: &[f64], groups: &[usize]) -> Vec<f64> {
    run_with(c, &AdvantageInput::new(rewards, groups))
}

fn f64s(v: &Value) -> Vec<f64> {
    serde_json::from_value(v.clone()).unwrap()
}

fn verl() -> Value {
    serde_json::from_str(include_str!("../../tests/fixtures/verl.json")).expect("verl fixture is JSON")
}

#[test]
fn every_verl_estimator_matches_verls_own_code() {
    let fx = verl();
    let rewards = f64s(&fx["rewards"]);
    let groups: Vec<usize> = serde_json::from_value(fx["group_ids"].clone()).unwrap();
    let tokens = f64s(&fx["response_tokens"]);
    let cases = fx["advantages"].as_array().unwrap();
    let names: Vec<&str> = cases.iter().map(|c| c["estimator"].as_str().unwrap()).collect();
    assert_eq!(names, ["grpo", "drgrpo", "rloo", "reinforce++", "reinforce++-baseline"]);
    for case in cases {
        let name = case["estimator"].as_str().unwrap();
        let input = AdvantageInput { rewards: &rewards, group_ids: &groups, response_tokens: Some(&tokens) };
        let got = run_with(&named(name), &input);
        // verl's masked_mean adds 1e-8 to its token counts, a 1e-10 relative effect.
        assert_all_close(&format!("{name} vs verl {}", case["verl"]), &got, &f64s(&case["expected"]), 1e-9);
    }
}

#[test]
fn singletons_and_whitening_follow_verl() {
    // A group of one: verl's GRPO takes mean 0, std 1, so Â = R/(1 + eps); RLOO and Dr.GRPO R.
    assert_all_close("grpo singleton", &run(&named("grpo"), &[0.7], &[4]), &[0.7 / (1.0 + 1e-6)], 1e-15);
    assert_all_close("drgrpo", &run(&named("drgrpo"), &[0.7, 0.2, 0.4], &[4, 1, 1]), &[0.7, -0.1, 0.1], 1e-12);
    assert_all_close("rloo", &run(&named("rloo"), &[0.7, 0.2, 0.4], &[4, 1, 1]), &[0.7, -0.2, 0.2], 1e-12);
    // AReaL's estimators centre a group of one on itself.
    assert_eq!(run(&named("liteppo"), &[0.7, 0.0, 1.0], &[4, 1, 1])[0], 0.0);
    // REINFORCE++-baseline: R − group mean (a singleton keeps R), then whitened over tokens:
    // centred (0.7, −0.5, 0.5) with 1, 3 and 1 tokens → token mean −0.06.
    let tokens = [1.0, 3.0, 1.0];
    let input = AdvantageInput { rewards: &[0.7, 0.0, 1.0], group_ids: &[4, 1, 1], response_tokens: Some(&tokens) };
    let got = run_with(&named("reinforce++-baseline"), &input);
    let m: f64 = (0.7 - 1.5 + 0.5) / 5.0;
    let v = ((0.7 - m).powi(2) + 3.0 * (-0.5 - m).powi(2) + (0.5 - m).powi(2)) / 4.0;
    let want: Vec<f64> = [0.7, -0.5, 0.5].iter().map(|x| (x - m) / (v + 1e-8).sqrt()).collect();
    assert_all_close("reinforce++-baseline", &got, &want, 1e-12);
    // Over tokens the whitened advantages have mean 0 (not over episodes, lengths differ).
    let token_mean: f64 = got.iter().zip(tokens).map(|(a, n)| a * n).sum::<f64>() / 5.0;
    assert!(token_mean.abs() < 1e-12 && (got.iter().sum::<f64>() / 3.0).abs() > 1e-3, "{got:?}");
    // Deliberate difference: with one response token in the batch verl's masked_var raises
    // ("The sum of the mask is one"); arl takes variance 1, so the lone token's Â is 0.
    let one = AdvantageInput { rewards: &[0.7, 0.3], group_ids: &[0, 1], response_tokens: Some(&[1.0, 0.0]) };
    assert_all_close("one token", &run_with(&named("reinforce++"), &one), &[0.0, -0.4 / (1.0f64 + 1e-8).sqrt()], 1e-12);
}

#[test]
fn gae_matches_verls_returns_and_whitened_advantages() {
    let fx = verl();
    let g = &fx["gae"];
    let gae = Gae { gamma: g["gamma"].as_f64().unwrap(), lambda: g["lambda"].as_f64().unwrap() };
    let (rewards, values, mask) = (rows(&g["rewards"]), rows(&g["values"]), rows(&g["mask"]));
    let (want_ret, want_adv) = (rows(&g["returns"]), rows(&g["advantages_whitened"]));
    assert_eq!((values.len(), mask.len(), want_ret.len(), want_adv.len()), (rewards.len(), rewards.len(), rewards.len(), rewards.len()));
    // verl whitens GAE's advantages over the response mask; arl's Gae returns them raw, and
    // `whiten` (verl's masked_whiten) gives verl's numbers from them.
    let (mut raw, mut verl_adv) = (Vec::new(), Vec::new());
    for (i, r) in rewards.iter().enumerate() {
        let m: Vec<bool> = mask[i].iter().map(|&x| x > 0.0).collect();
        let (adv, ret) = gae.token_level(r, &values[i], &m, 0.0);
        assert_eq!((adv.len(), ret.len()), (r.len(), r.len()));
        for t in (0..r.len()).filter(|&t| m[t]) {
            assert_close(&format!("gae return [{i}][{t}]"), ret[t], want_ret[i][t], 1e-12);
            raw.push(adv[t]);
            verl_adv.push(want_adv[i][t]);
        }
    }
    assert_eq!(raw.len(), 9);
    assert_all_close("whitened gae", &whiten(&raw, &vec![1.0; raw.len()], true, 1e-8), &verl_adv, 1e-9);
}

#[test]
fn areal_cases_match_the_reference() {
    let fx = fixture();
    let rewards = f64s(&fx["rewards"]["rewards"]);
    let groups: Vec<usize> = serde_json::from_value(fx["rewards"]["group_ids"].clone()).unwrap();
    let cases = fx["advantages"].as_array().unwrap();
    assert!(cases.len() >= 7, "{} cases", cases.len());
    for case in cases {
        let name = case["case"].as_str().unwrap();
        let c = estimator_config(case);
        let got = match case.get("token_counts") {
            Some(counts) => {
                let counts = f64s(counts);
                let e = (registry::get::<AdvantagePlugin>(&c.name).unwrap().build)(&c).unwrap();
                e.advantages_token_weighted(&AdvantageInput::new(&rewards, &groups), &counts).unwrap()
            }
            None => run(&c, &rewards, &groups),
        };
        assert_all_close(name, &got, &f64s(&case["expected"]), 1e-12);
    }
}

#[test]
fn every_registered_estimator_is_checked_against_a_reference() {
    let verl_names: Vec<String> =
        verl()["advantages"].as_array().unwrap().iter().map(|c| c["estimator"].as_str().unwrap().into()).collect();
    let areal: Vec<String> = fixture()["advantages"].as_array().unwrap().iter().map(|c| c["estimator"].as_str().unwrap().into()).collect();
    for plugin in registry::all::<AdvantagePlugin>().unwrap() {
        if plugin.origin.starts_with("arl_losses") {
            let n = plugin.name.to_string();
            assert!(verl_names.contains(&n) || areal.contains(&n), "estimator `{n}` has no reference case");
        }
    }
}

#[test]
fn hand_computed_edge_cases() {
    let c = named;
    // All-equal rewards: zero advantage for every estimator that centres.
    for name in ["grpo", "drgrpo", "rloo", "liteppo", "reinforce++", "reinforce++-baseline", "norm"] {
        let a = run(&c(name), &[0.5, 0.5, 0.5], &[1, 1, 1]);
        assert_eq!(a.len(), 3, "{name}");
        assert!(a.iter().all(|x| x.abs() < 1e-12), "{name}: {a:?}");
    }
    // GRPO, G = 2, rewards 1 and 0: mean 0.5, unbiased std √0.5 → ±0.5/(√0.5 + 1e-6).
    let a = run(&c("grpo"), &[1.0, 0.0], &[0, 0]);
    let g = 0.5 / (0.5f64.sqrt() + 1e-6);
    assert_all_close("grpo G=2", &a, &[g, -g], 1e-12);
    // RLOO = G/(G−1)·(R − mean): G = 3, rewards 1, 0, 0 → 1.5·(2/3) = 1, 1.5·(−1/3) = −0.5.
    assert_all_close("rloo", &run(&c("rloo"), &[1.0, 0.0, 0.0], &[0, 0, 0]), &[1.0, -0.5, -0.5], 1e-12);
    // Mismatched lengths are a shape error.
    let e = (registry::get::<AdvantagePlugin>("grpo").unwrap().build)(&c("grpo")).unwrap();
    assert!(e.advantages(&AdvantageInput::new(&[1.0], &[0, 1])).is_err());
    let short = AdvantageInput { rewards: &[1.0, 0.0], group_ids: &[0, 0], response_tokens: Some(&[3.0]) };
    assert!(e.advantages(&short).is_err());
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
    assert_all_close("gae", &a, &[0.28375, 0.0, 0.275, 0.5], 1e-12);
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
    assert_all_close("turn gae", &a, &[0.7, 0.7, 0.0, 0.4, 0.4], 1e-12);
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

/// Every aggregation against verl's `agg_loss` on a loss matrix with a fully masked row:
/// `constant-horizon` is `seq-mean-token-sum-norm` with H = `loss_scale_factor`, and with no H
/// verl falls back to the padded (response) width, as `Normalizer::from_masks` does.
#[test]
fn aggregations_match_verls_agg_loss() {
    use arl_core::{Aggregation, Normalizer};
    let fx = verl();
    let a = &fx["aggregation"];
    let device = crate::eval::cpu_device();
    let loss = crate::eval::tensor(&rows(&a["loss"]), &device).unwrap();
    let mask = crate::eval::tensor(&rows(&a["mask"]), &device).unwrap();
    let cases = a["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 6);
    for case in cases {
        let mode = case["loss_agg_mode"].as_str().unwrap();
        let aggregation: Aggregation = if mode == "seq-mean-token-sum-norm" { Aggregation::ConstantHorizon } else { mode.parse().unwrap() };
        let horizon = case["loss_scale_factor"].as_f64();
        let norm = Normalizer::from_masks(aggregation, horizon, [&mask]).unwrap();
        let got = norm.reduce(loss.clone() * mask.clone(), &mask).into_data().convert::<f64>().to_vec::<f64>().unwrap()[0];
        // verl adds 1e-8 to each row's token count in seq-mean-token-mean (~3e-9 relative here).
        assert_close(&format!("{mode} (H {horizon:?}) vs verl agg_loss"), got, case["expected"].as_f64().unwrap(), 1e-8);
    }
}
