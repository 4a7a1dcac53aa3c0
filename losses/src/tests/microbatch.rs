//! Micro-batch invariance: one minibatch as 1, 2 or 4 micro-batches, each reduced with the
//! minibatch's one `Normalizer`, sums to the same loss and gradient; rows whose advantages
//! are all zero can be skipped in backward (still counted in the normalizer) with the same
//! result, whenever the loss says such rows vanish.

use arl_core::Aggregation;

use super::*;
use crate::eval::{Batch, evaluate_with};

/// Loss and gradient of `batch` computed as micro-batches of `rows_per_micro` rows, with
/// `skip` rows left out of backward entirely (their gradient is then 0).
fn accumulated(loss: &dyn PolicyLoss, c: &LossConfig, batch: &Batch, rows_per_micro: usize, skip: &[usize]) -> (f64, Vec<Vec<f64>>) {
    let aggregation = arl_core::Aggregation::resolve(c.aggregation, loss);
    let normalizer = batch.normalizer(aggregation, c.horizon).unwrap();
    let n = batch.log_prob.len();
    let width = batch.log_prob[0].len();
    let (mut total, mut grad) = (0.0, vec![vec![0.0; width]; n]);
    let mut start = 0;
    while start < n {
        let end = (start + rows_per_micro).min(n);
        let keep: Vec<usize> = (start..end).filter(|r| !skip.contains(r)).collect();
        if !keep.is_empty() {
            let mut part = batch.rows(start..end);
            let local: Vec<usize> = keep.iter().map(|r| r - start).collect();
            let pick = |x: &Vec<Vec<f64>>| local.iter().map(|&r| x[r].clone()).collect::<Vec<_>>();
            part = Batch {
                log_prob: pick(&part.log_prob),
                old_log_prob: pick(&part.old_log_prob),
                advantages: pick(&part.advantages),
                mask: pick(&part.mask),
                ref_log_prob: part.ref_log_prob.as_ref().map(pick),
                behavior_log_prob: part.behavior_log_prob.as_ref().map(pick),
                entropy: part.entropy.as_ref().map(pick),
            };
            let e = evaluate_with(loss, &part, &normalizer).unwrap();
            total += e.loss;
            for (k, &row) in keep.iter().enumerate() {
                grad[row] = e.grad_log_prob[k].clone();
            }
        }
        start = end;
    }
    (total, grad)
}

#[test]
fn one_two_and_four_micro_batches_give_the_same_gradient() {
    let fx = fixture();
    let batch = batch();
    for case in fx["losses"].as_array().unwrap() {
        let name = case["case"].as_str().unwrap();
        let c = config(case);
        let loss = build(&c);
        let (whole, grad) = accumulated(loss.as_ref(), &c, &batch, 4, &[]);
        assert_close(&format!("{name} whole vs reference"), whole, case["expected_loss"].as_f64().unwrap(), 1e-9);
        for micro in [2, 1] {
            let (l, g) = accumulated(loss.as_ref(), &c, &batch, micro, &[]);
            assert!((l - whole).abs() <= 1e-6, "{name}: {micro} rows per micro-batch: loss {l} vs {whole}");
            assert_eq!(g.iter().flatten().count(), grad.iter().flatten().count());
            for (a, b) in g.iter().flatten().zip(grad.iter().flatten()) {
                assert!((a - b).abs() <= 1e-6, "{name}: {micro} rows per micro-batch: grad {a} vs {b}");
            }
        }
    }
}

#[test]
fn every_aggregation_is_micro_batch_invariant() {
    let batch = batch();
    for aggregation in Aggregation::ALL {
        let c = LossConfig { name: "grpo".into(), aggregation: Some(aggregation), ..LossConfig::default() };
        let loss = build(&c);
        let (whole, grad) = accumulated(loss.as_ref(), &c, &batch, 4, &[]);
        for micro in [2, 1] {
            let (l, g) = accumulated(loss.as_ref(), &c, &batch, micro, &[]);
            assert!((l - whole).abs() <= 1e-6, "{}: {l} vs {whole}", aggregation.name());
            assert_eq!(g.iter().flatten().count(), grad.iter().flatten().count());
            for (a, b) in g.iter().flatten().zip(grad.iter().flatten()) {
                assert!((a - b).abs() <= 1e-6, "{}: grad {a} vs {b}", aggregation.name());
            }
        }
    }
}

#[test]
fn zero_advantage_rows_skipped_in_backward_but_counted_give_the_same_result() {
    let mut batch = batch();
    // Row 1 (4 policy tokens) gets zero advantages; row 2 is a zero-length response.
    batch.advantages[1] = vec![0.0; 4];
    let fx = fixture();
    let mut checked = 0;
    for case in fx["losses"].as_array().unwrap() {
        let name = case["case"].as_str().unwrap();
        let c = config(case);
        let loss = build(&c);
        if !loss.zero_advantage_rows_vanish() {
            continue;
        }
        for micro in [4, 2, 1] {
            let (all, g_all) = accumulated(loss.as_ref(), &c, &batch, micro, &[]);
            let (skipped, g_skipped) = accumulated(loss.as_ref(), &c, &batch, micro, &[1, 2]);
            assert!((all - skipped).abs() <= 1e-12, "{name}: loss {all} vs {skipped}");
            assert_eq!(g_all.iter().flatten().count(), g_skipped.iter().flatten().count());
            for (a, b) in g_all.iter().flatten().zip(g_skipped.iter().flatten()) {
                assert!((a - b).abs() <= 1e-12, "{name}: grad {a} vs {b}");
            }
        }
        checked += 1;
    }
    assert!(checked >= 15, "checked {checked}");
    // Rows with a KL or entropy term do not vanish, and the loss says so.
    let c = LossConfig { kl_coef: 0.1, ..LossConfig::default() };
    assert!(!build(&c).zero_advantage_rows_vanish());
}

#[test]
fn normalizer_from_tensor_masks_equals_the_one_from_lengths() {
    let b = batch();
    let device = crate::eval::cpu_device();
    let masks: Vec<_> = [0..1, 1..3, 3..4].into_iter().map(|r| b.rows(r).input(&device).unwrap().mask).collect();
    for aggregation in Aggregation::ALL {
        let from_masks = arl_core::Normalizer::from_masks(aggregation, None, masks.iter()).unwrap();
        assert_eq!(from_masks, b.normalizer(aggregation, None).unwrap());
        assert_eq!((from_masks.tokens, from_masks.sequences, from_masks.horizon), (9.0, 3.0, 4.0));
    }
}
