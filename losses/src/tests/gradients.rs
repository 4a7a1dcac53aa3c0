//! Finite-difference gradient checks in Rust: for every fixture case whose loss has no
//! stop-gradient on `log_prob`, burn's autodiff gradient equals the central difference of
//! the loss itself (f64, h = 1e-6). Losses that detach part of their `log_prob` path (CISPO,
//! DPPO, plain IS, GSPO-token) are checked against the reference script's
//! stop-gradient-aware differences in `reference.rs` instead.

use super::*;
use crate::eval::{Batch, evaluate};

const STOP_GRADIENT_CASES: [&str; 5] = ["gspo_token", "cispo", "dppo_tv", "dppo_kl", "is_capped"];

fn loss_at(loss: &dyn PolicyLoss, c: &LossConfig, batch: &Batch) -> f64 {
    evaluate(loss, c.aggregation, c.horizon, batch).unwrap().loss
}

#[test]
#[allow(clippy::needless_range_loop)]
fn autodiff_matches_finite_differences() {
    let fx = fixture();
    let batch = batch();
    let mut checked = 0;
    for case in fx["losses"].as_array().unwrap() {
        let name = case["case"].as_str().unwrap();
        if STOP_GRADIENT_CASES.contains(&name) {
            continue;
        }
        let c = config(case);
        let loss = build(&c);
        let auto = evaluate(loss.as_ref(), c.aggregation, c.horizon, &batch).unwrap().grad_log_prob;
        let h = 1e-6;
        for i in 0..batch.log_prob.len() {
            for t in 0..batch.log_prob[i].len() {
                let mut up = batch.clone();
                up.log_prob[i][t] += h;
                let mut down = batch.clone();
                down.log_prob[i][t] -= h;
                let fd = (loss_at(loss.as_ref(), &c, &up) - loss_at(loss.as_ref(), &c, &down)) / (2.0 * h);
                assert_close(&format!("{name} d/dlog_prob[{i}][{t}]"), auto[i][t], fd, 1e-6);
            }
        }
        checked += 1;
    }
    assert!(checked >= 15, "checked {checked} cases");
}
