//! Every loss case of the fixture: the loss value and d loss / d log_prob from burn's
//! autodiff (f64, CPU) against the reference script's values and stop-gradient-aware
//! finite differences.

use super::*;
use crate::eval::evaluate;

#[test]
fn every_loss_case_matches_the_reference() {
    let fx = fixture();
    let batch = batch();
    let cases = fx["losses"].as_array().unwrap();
    assert!(cases.len() >= 20);
    for case in cases {
        let name = case["case"].as_str().unwrap();
        let c = config(case);
        let loss = build(&c);
        let got = evaluate(loss.as_ref(), c.aggregation, c.horizon, &batch).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_close(&format!("{name} loss"), got.loss, case["expected_loss"].as_f64().unwrap(), 1e-9);
        assert_rows_close(&format!("{name} grad"), &got.grad_log_prob, &rows(&case["expected_grad"]), 1e-7);
    }
}

#[test]
fn every_registered_loss_has_a_reference_case() {
    let fx = fixture();
    let covered: Vec<&str> = fx["losses"].as_array().unwrap().iter().map(|c| c["loss"].as_str().unwrap()).collect();
    for plugin in registry::all::<LossPlugin>().unwrap() {
        if plugin.origin.starts_with("arl_losses") {
            assert!(covered.contains(&plugin.name), "loss `{}` has no reference case", plugin.name);
        }
    }
}

#[test]
fn metrics_report_clipping_and_masking() {
    let batch = batch();
    let fx = fixture();
    let case = |n: &str| fx["losses"].as_array().unwrap().iter().find(|c| c["case"] == n).unwrap().clone();
    let eval = |n: &str| {
        let c = config(&case(n));
        evaluate(build(&c).as_ref(), c.aggregation, c.horizon, &batch).unwrap().metrics
    };
    // grpo: 9 policy tokens. Row 0 (Â>0): r = e^0.05, e^1, e^1 → two clipped high. Row 1
    // (Â<0): r = e^0.1, e^0.7, e^-1.1, e^0.05 → one clipped low. Row 3: e^0.05, e^-0.05.
    let m = eval("grpo");
    assert_eq!(m.tokens, 9.0);
    assert_close("clip_frac_high", m.clip_frac_high, 2.0 / 9.0, 1e-12);
    assert_close("clip_frac_low", m.clip_frac_low, 1.0 / 9.0, 1e-12);
    assert_close("ratio_max", m.ratio_max, 1f64.exp(), 1e-12);
    assert_close("ratio_min", m.ratio_min, (-1.1f64).exp(), 1e-12);
    assert_eq!(m.masked_frac, 0.0);
    assert!(m.approx_kl > 0.0);
    assert!(m.ref_kl.is_some() && m.entropy.is_some(), "given inputs are reported");
    // Dual clip c = 1.5 caps row 1's token with r = e^0.7 ≈ 2.01 > 1.5.
    let m = eval("dual_clip_tight");
    assert_close("dual_clip_frac", m.dual_clip_frac, 1.0 / 9.0, 1e-12);
    // IcePop [0.8, 1.25] drops π_old/π_behave = e^0.8 (row 1) and e^0.65 (row 3).
    assert_close("icepop masked_frac", eval("icepop").masked_frac, 2.0 / 9.0, 1e-12);
    assert_close("kpop masked_frac", eval("kpop").masked_frac, 3.0 / 9.0, 1e-12);
}

#[test]
fn sapo_matches_the_plain_policy_gradient_on_policy() {
    // At r = 1 the SAPO gate's gradient w.r.t. log π is −Â (SPEC §4.7), for both temperatures.
    let mut b = batch();
    b.old_log_prob = b.log_prob.clone();
    let c = LossConfig { name: "sapo".into(), aggregation: Some(arl_core::Aggregation::TokenSum), ..LossConfig::default() };
    let sapo = evaluate(build(&c).as_ref(), c.aggregation, None, &b).unwrap();
    let c = LossConfig { name: "reinforce".into(), aggregation: Some(arl_core::Aggregation::TokenSum), ..LossConfig::default() };
    let pg = evaluate(build(&c).as_ref(), c.aggregation, None, &b).unwrap();
    assert_rows_close("sapo vs reinforce gradient", &sapo.grad_log_prob, &pg.grad_log_prob, 1e-12);
}

#[test]
fn kl_in_the_reward_leaves_the_loss_alone() {
    let b = batch();
    let plain = LossConfig::default();
    let in_reward = LossConfig { kl_coef: 0.1, kl_placement: arl_core::config::KlPlacement::Reward, ..LossConfig::default() };
    let a = evaluate(build(&plain).as_ref(), None, None, &b).unwrap();
    let r = evaluate(build(&in_reward).as_ref(), None, None, &b).unwrap();
    assert_eq!(a.loss, r.loss);
    assert_eq!(a.grad_log_prob, r.grad_log_prob);
    assert!(r.metrics.ref_kl.is_some(), "the KL is still reported");
}

#[test]
fn cross_entropy_ignores_advantages_and_never_skips_a_row() {
    let c = LossConfig { name: "cross-entropy".into(), ..LossConfig::default() };
    let loss = build(&c);
    assert!(!loss.zero_advantage_rows_vanish(), "a zero-advantage row still has targets");
    let mut b = batch();
    let with = evaluate(loss.as_ref(), None, None, &b).unwrap();
    for row in &mut b.advantages {
        row.iter_mut().for_each(|a| *a = 0.0);
    }
    let without = evaluate(loss.as_ref(), None, None, &b).unwrap();
    assert_eq!(with.loss, without.loss);
    assert_eq!(with.grad_log_prob, without.grad_log_prob);
    // Token-mean: d/d log π = −mask / Σ mask.
    let n: f64 = b.mask.iter().flatten().sum();
    for (g, m) in with.grad_log_prob.iter().flatten().zip(b.mask.iter().flatten()) {
        assert_close("grad", *g, -m / n, 1e-7);
    }
}
