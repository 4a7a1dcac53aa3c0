//! One SFT optimizer step over a batch of rendered conversations, and the held-out loss.
//!
//! The batch's loss is the policy loss (`cross-entropy`: −log π) on every target token,
//! reduced by the loss's aggregation (token-mean) under ONE [`Normalizer`] computed from the
//! whole batch before any micro-batch runs, so how the batch is split (`trainer.micro`,
//! `trainer.micro_tokens`) never changes the gradient; then one
//! optimizer step (global-norm clip, AdamW) at `lr`. The LM head sees only target positions.

use std::time::Instant;

use burn::tensor::{Tensor, TensorData};
use serde::{Deserialize, Serialize};

use super::data::SftSequence;
use crate::TrainError;
use crate::micro::MicroBatching;
use arl_core::loss::{Aggregation, LossInput, Normalizer, PolicyLoss, T2};
use arl_core::policy::{Policy, ScoreParams, TrainablePolicy};

/// What one SFT step did.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SftStep {
    /// The batch's loss (token-mean −log π over its target tokens, for `cross-entropy`).
    pub loss: f64,
    /// Target tokens in the batch.
    pub tokens: usize,
    /// Conversations in the batch.
    pub sequences: usize,
    /// Global gradient norm before clipping.
    pub grad_norm: f64,
    pub clipped: bool,
    pub micro_batches: u32,
    /// The loss or the gradient was NaN or infinite: no step was taken.
    pub non_finite: bool,
    pub seconds: f64,
}

/// Score `batch` with gradients in the micro-batches of `batching`, backpropagate each
/// micro-batch's share of the batch loss, and take one optimizer step at `lr`.
pub fn sft_step(
    policy: &mut dyn TrainablePolicy,
    loss: &dyn PolicyLoss,
    batch: &[&SftSequence],
    batching: MicroBatching,
    lr: f64,
) -> Result<SftStep, TrainError> {
    let start = Instant::now();
    let rows: Vec<&SftSequence> = batch.iter().copied().filter(|s| s.target_tokens() > 0).collect();
    let lengths: Vec<f64> = rows.iter().map(|s| s.target_tokens() as f64).collect();
    let width = rows.iter().map(|s| s.ids.len()).max().unwrap_or(1);
    let aggregation = Aggregation::resolve(None, loss);
    let norm = Normalizer::from_lengths(aggregation, Some(width as f64), &lengths, width)?;
    let device = policy.device();
    let mut out = SftStep { tokens: lengths.iter().sum::<f64>() as usize, sequences: batch.len(), ..SftStep::default() };
    let all: Vec<usize> = (0..rows.len()).collect();
    for micro in batching.split(&all, |i| rows[i].ids.len()) {
        let chunk: Vec<&SftSequence> = micro.iter().map(|&i| rows[i]).collect();
        let seqs: Vec<Vec<u32>> = chunk.iter().map(|s| s.ids.clone()).collect();
        let positions: Vec<Vec<usize>> = chunk.iter().map(|s| s.positions()).collect();
        let scores = policy.score_with_grad(&seqs, Some(&positions), ScoreParams::default())?;
        let w = scores.logprobs.dims()[1];
        let on_positions = |value: f32| -> T2 {
            let mut v = vec![0.0f32; chunk.len() * w];
            for (r, ps) in positions.iter().enumerate() {
                for &t in ps {
                    v[r * w + t] = value;
                }
            }
            Tensor::from_data(TensorData::new(v, [chunk.len(), w]), &device)
        };
        let mask = on_positions(1.0);
        let input = LossInput {
            old_log_prob: scores.logprobs.clone().detach(),
            log_prob: scores.logprobs,
            advantages: mask.clone(),
            mask,
            ref_log_prob: None,
            behavior_log_prob: None,
            entropy: None,
        };
        let token_loss = loss.token_loss(&input)?;
        let scalar = norm.reduce(token_loss.loss, &input.mask);
        let value = scalar.clone().into_data().convert::<f64>().to_vec::<f64>().map(|v| v[0]).unwrap_or(f64::NAN);
        if !value.is_finite() {
            policy.discard_gradients();
            out.non_finite = true;
            out.loss = value;
            out.seconds = start.elapsed().as_secs_f64();
            return Ok(out);
        }
        out.loss += value;
        policy.backward(scalar)?;
    }
    if !rows.is_empty() {
        let step = policy.step(lr)?;
        out.grad_norm = step.grad_norm;
        out.clipped = step.clipped;
        out.micro_batches = step.micro_batches;
        out.non_finite = step.non_finite;
    }
    out.seconds = start.elapsed().as_secs_f64();
    Ok(out)
}

/// The mean −log π of every target token of `seqs` under `policy` (no gradient), scored
/// in the micro-batches of `batching`: the held-out loss. `None` when there are no targets.
pub fn mean_nll(policy: &dyn Policy, seqs: &[SftSequence], batching: MicroBatching) -> Result<Option<f64>, TrainError> {
    let (mut sum, mut n) = (0.0f64, 0usize);
    let all: Vec<usize> = (0..seqs.len()).collect();
    for micro in batching.split(&all, |i| seqs[i].ids.len()) {
        let chunk: Vec<&SftSequence> = micro.iter().map(|&i| &seqs[i]).collect();
        let ids: Vec<Vec<u32>> = chunk.iter().map(|s| s.ids.clone()).collect();
        let positions: Vec<Vec<usize>> = chunk.iter().map(|s| s.positions()).collect();
        if positions.iter().all(Vec::is_empty) {
            continue;
        }
        let scores = policy.score(&ids, Some(&positions), ScoreParams::default())?;
        let w = scores.logprobs.dims()[1];
        let lp: Vec<f32> = scores.logprobs.into_data().convert::<f32>().to_vec().map_err(|e| TrainError::Other(format!("{e:?}")))?;
        for (r, ps) in positions.iter().enumerate() {
            for &t in ps {
                sum -= lp[r * w + t] as f64;
                n += 1;
            }
        }
    }
    Ok((n > 0).then(|| sum / n as f64))
}
