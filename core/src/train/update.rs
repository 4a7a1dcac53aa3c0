//! The update: epochs × minibatches of a step's episodes, each minibatch split into
//! micro-batches whose gradients accumulate under ONE normalizer computed from the whole
//! minibatch, then one optimizer step.
//!
//! Memory: scoring projects only policy positions through the LM head. Rows whose advantage
//! is zero are skipped in backward when the loss says they contribute nothing, yet still
//! count in the normalizer, so skipping never changes the gradient.

use std::time::Instant;

use burn::Dispatch;
use burn::tensor::{Tensor, TensorData};
use serde::{Deserialize, Serialize};

use super::TrainError;
use crate::Episode;
use crate::loss::{Aggregation, LossInput, LossMetrics, Normalizer, PolicyLoss, T2};
use crate::policy::{Policy, TrainablePolicy};

#[derive(Clone, Debug, PartialEq)]
pub struct UpdateOptions {
    pub epochs: u32,
    pub minibatches: u32,
    /// Rows per micro-batch; `None`: a whole minibatch at once.
    pub micro: Option<usize>,
    pub lr: f64,
    pub aggregation: Aggregation,
    pub horizon: Option<f64>,
}

/// What an update did.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct UpdateMetrics {
    pub loss: LossMetrics,
    /// Mean of the minibatch losses.
    pub loss_value: f64,
    pub grad_norm_mean: f64,
    pub grad_norm_max: f64,
    pub optimizer_steps: u32,
    /// |sampler logprob − trainer recomputation before the update| over policy tokens.
    pub logprob_gap_mean: f64,
    pub logprob_gap_max: f64,
    pub policy_tokens: usize,
    /// Mean next-token entropy of the policy before the update, over policy tokens.
    pub entropy: Option<f64>,
    /// Mean k3 estimate of KL(π_θ‖π_ref) before the update, over policy tokens (with a
    /// reference policy).
    pub ref_kl: Option<f64>,
    /// Rows skipped in backward (zero advantage) but counted in the normalizer.
    pub skipped_rows: usize,
    /// Optimizer steps not taken because a minibatch's loss or gradient was NaN or infinite
    /// (the weights stay as they were; those minibatches leave `loss_value` and the grad norms).
    #[serde(default)]
    pub non_finite_steps: u32,
    pub tokens_per_s: f64,
    pub seconds: f64,
}

/// Rows' policy positions: every t ≥ 1 with `policy_mask[t]` (t = 0 has no context).
pub fn policy_positions(ep: &Episode) -> Vec<usize> {
    ep.policy_mask.iter().enumerate().skip(1).filter(|(_, m)| **m).map(|(t, _)| t).collect()
}

/// Teacher-forced logprobs of every episode's policy tokens under `policy` (no gradient),
/// as host vectors aligned with `ids` (0 off the policy positions).
pub fn recompute_logprobs(policy: &dyn Policy, episodes: &[Episode], rows: usize) -> Result<Vec<Vec<f32>>, TrainError> {
    Ok(recompute(policy, episodes, rows, false)?.logprobs)
}

/// A no-grad scoring pass over a step's episodes.
pub struct Recomputed {
    /// Per episode, aligned with `ids` (0 off the policy positions).
    pub logprobs: Vec<Vec<f32>>,
    /// Mean next-token entropy over the policy positions, when asked for.
    pub entropy_mean: Option<f64>,
}

/// As [`recompute_logprobs`], optionally with the mean entropy over policy tokens.
pub fn recompute(policy: &dyn Policy, episodes: &[Episode], rows: usize, entropy: bool) -> Result<Recomputed, TrainError> {
    let host = |t: burn::tensor::Tensor<Dispatch, 2>| -> Result<Vec<f32>, TrainError> {
        t.into_data().convert::<f32>().to_vec().map_err(|e| TrainError::Other(format!("{e:?}")))
    };
    let mut out = Vec::with_capacity(episodes.len());
    let (mut ent_sum, mut ent_n) = (0.0f64, 0usize);
    for chunk in episodes.chunks(rows.max(1)) {
        let seqs: Vec<Vec<u32>> = chunk.iter().map(|e| e.ids.clone()).collect();
        let positions: Vec<Vec<usize>> = chunk.iter().map(policy_positions).collect();
        if positions.iter().all(Vec::is_empty) {
            out.extend(chunk.iter().map(|ep| vec![0.0f32; ep.ids.len()]));
            continue;
        }
        let scores = policy.score(&seqs, Some(&positions), entropy)?;
        let width = scores.logprobs.dims()[1];
        let flat = host(scores.logprobs)?;
        let ent = scores.entropy.map(host).transpose()?;
        for (r, ep) in chunk.iter().enumerate() {
            let mut row = vec![0.0f32; ep.ids.len()];
            for &t in &positions[r] {
                row[t] = flat[r * width + t];
                if let Some(h) = &ent {
                    ent_sum += h[r * width + t] as f64;
                    ent_n += 1;
                }
            }
            out.push(row);
        }
    }
    let entropy_mean = entropy.then(|| if ent_n > 0 { ent_sum / ent_n as f64 } else { 0.0 });
    Ok(Recomputed { logprobs: out, entropy_mean })
}

/// Run the update with no reference policy (see [`update_with_reference`]).
pub fn update(
    policy: &mut dyn TrainablePolicy,
    loss: &dyn PolicyLoss,
    episodes: &[Episode],
    advantages: &[f64],
    opts: &UpdateOptions,
) -> Result<UpdateMetrics, TrainError> {
    update_with_reference(policy, None, loss, episodes, advantages, opts)
}

/// Run the update on one step's episodes with per-episode `advantages`. With a frozen
/// `reference`, its logprobs of the episode tokens (scored once, no gradient) go to the loss
/// as `ref_log_prob`, and the metrics report the KL of the pre-update policy to it.
pub fn update_with_reference(
    policy: &mut dyn TrainablePolicy,
    reference: Option<&dyn Policy>,
    loss: &dyn PolicyLoss,
    episodes: &[Episode],
    advantages: &[f64],
    opts: &UpdateOptions,
) -> Result<UpdateMetrics, TrainError> {
    let start = Instant::now();
    if episodes.len() != advantages.len() {
        return Err(TrainError::Other(format!("{} episodes, {} advantages", episodes.len(), advantages.len())));
    }
    let micro = opts.micro.unwrap_or(usize::MAX).max(1);
    let rows = micro.min(episodes.len().max(1));
    let before = recompute(&*policy, episodes, rows, true)?;
    let old = before.logprobs;
    let reference = reference.map(|r| recompute_logprobs(r, episodes, rows)).transpose()?;
    let mut m = UpdateMetrics { entropy: before.entropy_mean, ..UpdateMetrics::default() };
    if let Some(r) = &reference {
        m.ref_kl = Some(mean_ref_kl(episodes, &old, r));
    }
    let (mut gap_sum, mut gap_n) = (0.0f64, 0usize);
    for (ep, row) in episodes.iter().zip(&old) {
        for t in policy_positions(ep) {
            let gap = (ep.sampler_logprobs[t] - row[t]).abs() as f64;
            gap_sum += gap;
            gap_n += 1;
            m.logprob_gap_max = m.logprob_gap_max.max(gap);
        }
    }
    m.logprob_gap_mean = if gap_n > 0 { gap_sum / gap_n as f64 } else { 0.0 };
    m.policy_tokens = gap_n;

    let n = episodes.len();
    let per_minibatch = n.div_ceil(opts.minibatches.max(1) as usize).max(1);
    let skip_zero = loss.zero_advantage_rows_vanish();
    let device = policy.device();
    let mut metrics = Vec::new();
    let mut losses = Vec::new();
    let mut grad_norms = Vec::new();
    for _epoch in 0..opts.epochs {
        for mb in (0..n).collect::<Vec<_>>().chunks(per_minibatch) {
            let lengths: Vec<f64> = mb.iter().map(|&i| policy_positions(&episodes[i]).len() as f64).collect();
            let width = mb.iter().map(|&i| episodes[i].ids.len()).max().unwrap_or(0);
            let norm = Normalizer::from_lengths(opts.aggregation, opts.horizon, &lengths, width)?;
            let mut mb_loss = 0.0;
            let mut any = false;
            let mut non_finite = false;
            let metrics_before = metrics.len();
            for chunk in mb.chunks(micro) {
                let rows: Vec<usize> = chunk
                    .iter()
                    .copied()
                    .filter(|&i| (!skip_zero || advantages[i] != 0.0) && !policy_positions(&episodes[i]).is_empty())
                    .collect();
                m.skipped_rows += chunk.len() - rows.len();
                if rows.is_empty() {
                    continue;
                }
                let seqs: Vec<Vec<u32>> = rows.iter().map(|&i| episodes[i].ids.clone()).collect();
                let positions: Vec<Vec<usize>> = rows.iter().map(|&i| policy_positions(&episodes[i])).collect();
                let scores = policy.score_with_grad(&seqs, Some(&positions), loss.needs_entropy())?;
                let w = scores.logprobs.dims()[1];
                let build = |f: &dyn Fn(usize, usize) -> f32| -> T2 {
                    let mut v = vec![0.0f32; rows.len() * w];
                    for (r, &i) in rows.iter().enumerate() {
                        for &t in &policy_positions(&episodes[i]) {
                            v[r * w + t] = f(i, t);
                        }
                    }
                    Tensor::from_data(TensorData::new(v, [rows.len(), w]), &device)
                };
                let input = LossInput {
                    log_prob: scores.logprobs,
                    old_log_prob: build(&|i, t| old[i][t]),
                    advantages: build(&|i, _| advantages[i] as f32),
                    mask: build(&|_, _| 1.0),
                    ref_log_prob: reference.as_ref().map(|r| build(&|i, t| r[i][t])),
                    behavior_log_prob: Some(build(&|i, t| episodes[i].sampler_logprobs[t])),
                    entropy: scores.entropy,
                };
                let token_loss = loss.token_loss(&input)?;
                let scalar = norm.reduce(token_loss.loss, &input.mask);
                let value = scalar.clone().into_scalar_f64();
                if !value.is_finite() {
                    // Nothing of this minibatch reaches the weights.
                    non_finite = true;
                    policy.discard_gradients();
                    break;
                }
                mb_loss += value;
                metrics.push(token_loss.metrics);
                policy.backward(scalar)?;
                any = true;
            }
            if any && !non_finite {
                let step = policy.step(opts.lr)?;
                non_finite = step.non_finite;
                if !non_finite {
                    grad_norms.push(step.grad_norm);
                    m.optimizer_steps += 1;
                }
            }
            if non_finite {
                m.non_finite_steps += 1;
                metrics.truncate(metrics_before);
                continue;
            }
            losses.push(mb_loss);
        }
    }
    m.loss = LossMetrics::merge(&metrics);
    m.loss_value = if losses.is_empty() { 0.0 } else { losses.iter().sum::<f64>() / losses.len() as f64 };
    m.grad_norm_mean = if grad_norms.is_empty() { 0.0 } else { grad_norms.iter().sum::<f64>() / grad_norms.len() as f64 };
    m.grad_norm_max = grad_norms.iter().copied().fold(0.0, f64::max);
    m.seconds = start.elapsed().as_secs_f64();
    let scored: usize = episodes.iter().map(|e| e.ids.len()).sum::<usize>() * opts.epochs as usize;
    m.tokens_per_s = if m.seconds > 0.0 { scored as f64 / m.seconds } else { 0.0 };
    Ok(m)
}

/// k3 (e^{−ℓ} − 1 + ℓ, ℓ = log π_θ − log π_ref): unbiased, never negative, 0 when equal.
fn mean_ref_kl(episodes: &[Episode], logprobs: &[Vec<f32>], reference: &[Vec<f32>]) -> f64 {
    let (mut sum, mut n) = (0.0f64, 0usize);
    for (i, ep) in episodes.iter().enumerate() {
        for t in policy_positions(ep) {
            let l = logprobs[i][t] as f64 - reference[i][t] as f64;
            sum += (-l).exp() - 1.0 + l;
            n += 1;
        }
    }
    if n > 0 { sum / n as f64 } else { 0.0 }
}

trait IntoF64 {
    fn into_scalar_f64(self) -> f64;
}

impl IntoF64 for Tensor<Dispatch, 1> {
    fn into_scalar_f64(self) -> f64 {
        self.into_data().convert::<f64>().to_vec::<f64>().map(|v| v[0]).unwrap_or(f64::NAN)
    }
}
