//! The update: epochs × minibatches of a step's episodes, each minibatch split into
//! micro-batches whose gradients accumulate under ONE normalizer computed from the whole
//! minibatch, then one optimizer step.
//!
//! Memory: scoring projects only policy positions through the LM head. Rows whose advantage
//! is zero are skipped in backward when the loss says they contribute nothing, yet still
//! count in the normalizer, so skipping never changes the gradient.
//!
//! Every score (old, new, reference) is taken at the sampling temperature. The old
//! log-probabilities are recomputed without gradients in the very micro-batches of the
//! gradient pass; the first minibatch of the first epoch, still on-policy, takes them from its
//! own forward pass (detached, as verl's on-policy path does), so its ratios are exactly 1 and
//! nothing is clipped — and its rows are not scored beforehand at all: the metrics of the
//! policy before the update (entropy, sampler–trainer gap, reference KL) take their values
//! from that pass, before its optimizer step. With the default two minibatches this saves
//! half of the no-grad pass; with one, all of it but the rows that do not train. A policy
//! whose gradient pass has dropout (LoRA with `lora.dropout > 0`,
//! [`TrainablePolicy::dropout_in_gradient_pass`]) does not take this shortcut: its forward
//! with dropout is not the policy's, so every row, the first minibatch's too, is scored in the
//! no-grad pass without dropout, as peers compute old log-probabilities (the first
//! minibatch's ratios are then π_dropout/π, not 1).
//!
//! A minibatch with no row to train (all advantages zero, or no policy tokens) takes no
//! optimizer step by default; with [`ZeroAdvantageMinibatch::Step`] it takes one on a zero
//! gradient, as torch and verl do.

use std::time::Instant;

use burn::Dispatch;
use burn::tensor::{Tensor, TensorData};
use serde::{Deserialize, Serialize};

use super::TrainError;
use super::micro::MicroBatching;
use arl_core::Episode;
use arl_core::config::ZeroAdvantageMinibatch;
use arl_core::loss::{Aggregation, LossInput, LossMetrics, Normalizer, PolicyLoss, T2};
use arl_core::policy::{Policy, ScoreParams, TrainablePolicy};

#[derive(Clone, Debug, PartialEq)]
pub struct UpdateOptions {
    pub epochs: u32,
    pub minibatches: u32,
    /// Rows per micro-batch; `None`: no cap on rows.
    pub micro: Option<usize>,
    /// Padded tokens per micro-batch (rows × the longest row); `None`: no cap on tokens.
    pub micro_tokens: Option<usize>,
    pub lr: f64,
    pub aggregation: Aggregation,
    /// H of `constant-horizon` aggregation, in tokens per sequence: the response budget
    /// (verl's fixed response length). Required by that aggregation, unused by the others.
    pub horizon: Option<f64>,
    /// The sampling temperature: the old, new and reference log-probabilities are scored at
    /// it, so they are log-probabilities of the distribution the sampler drew from.
    pub temperature: f64,
    /// A minibatch with no row to train: no optimizer step (`Skip`), or one on a zero
    /// gradient (`Step`, torch's and verl's behaviour); `trainer.zero_advantage_minibatch`.
    pub zero_advantage_minibatch: ZeroAdvantageMinibatch,
}

impl UpdateOptions {
    /// The micro-batches' caps.
    pub fn batching(&self) -> MicroBatching {
        MicroBatching::new(self.micro, self.micro_tokens)
    }
}

impl Default for UpdateOptions {
    fn default() -> Self {
        Self {
            epochs: 1,
            minibatches: 1,
            micro: None,
            micro_tokens: None,
            lr: 1e-5,
            aggregation: Aggregation::TokenMean,
            horizon: None,
            temperature: 1.0,
            zero_advantage_minibatch: ZeroAdvantageMinibatch::Skip,
        }
    }
}

/// What an update did.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct UpdateMetrics {
    pub loss: LossMetrics,
    /// The loss metrics of each minibatch, in order (epoch after epoch). The first is
    /// on-policy: its ratios are exactly 1 (with dropout in the gradient pass, π_dropout/π).
    pub minibatch_metrics: Vec<LossMetrics>,
    /// The loss of each minibatch, in order (epoch after epoch).
    pub minibatch_losses: Vec<f64>,
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
    /// Of `seconds`, the no-grad scoring pass before the first optimizer step: the later
    /// minibatches' old log-probabilities, the pre-update metrics, the reference's scores.
    #[serde(default)]
    pub scoring_seconds: f64,
    /// Per episode (in order): the sampler–trainer gap and the behaviour ratio over its policy
    /// tokens, before the update (async training reports them per staleness).
    #[serde(default, skip_serializing)]
    pub episode_gaps: Vec<EpisodeGap>,
}

/// One episode's sums over its policy tokens of |sampler logprob − trainer recomputation|
/// and of π_old/π_behave = exp(trainer − sampler), before the update.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EpisodeGap {
    pub abs_gap_sum: f64,
    pub ratio_sum: f64,
    pub tokens: usize,
}

/// Rows' policy positions: every t ≥ 1 with `policy_mask[t]` (t = 0 has no context).
pub fn policy_positions(ep: &Episode) -> Vec<usize> {
    ep.policy_mask.iter().enumerate().skip(1).filter(|(_, m)| **m).map(|(t, _)| t).collect()
}

/// Teacher-forced logprobs of every episode's policy tokens under `policy` at `temperature`
/// (no gradient), as host vectors aligned with `ids` (0 off the policy positions), scored
/// `rows` episodes at a time.
pub fn recompute_logprobs(policy: &dyn Policy, episodes: &[Episode], rows: usize, temperature: f64) -> Result<Vec<Vec<f32>>, TrainError> {
    Ok(recompute(policy, episodes, rows, ScoreParams::at(temperature))?.logprobs)
}

/// A no-grad scoring pass over a step's episodes.
pub struct Recomputed {
    /// Per episode, aligned with `ids` (0 off the policy positions).
    pub logprobs: Vec<Vec<f32>>,
    /// Mean next-token entropy over the policy positions, when asked for.
    pub entropy_mean: Option<f64>,
}

/// As [`recompute_logprobs`], optionally with the mean entropy over policy tokens.
pub fn recompute(policy: &dyn Policy, episodes: &[Episode], rows: usize, params: ScoreParams) -> Result<Recomputed, TrainError> {
    recompute_in(policy, episodes, MicroBatching::new(Some(rows), None), params)
}

/// As [`recompute`], in the micro-batches of `batching`.
pub fn recompute_in(
    policy: &dyn Policy,
    episodes: &[Episode],
    batching: MicroBatching,
    params: ScoreParams,
) -> Result<Recomputed, TrainError> {
    let all: Vec<usize> = (0..episodes.len()).collect();
    let batches = batching.split(&all, |i| episodes[i].ids.len());
    score_batches(&|s, p, params| policy.score(s, Some(p), params), episodes, &batches, params)
}

type ScoreFn<'a> = dyn Fn(&[Vec<u32>], &[Vec<usize>], ScoreParams) -> Result<arl_core::policy::Scores, arl_core::policy::PolicyError> + 'a;

/// Score the episodes of each batch together with `score` and bring the values to the host
/// (any autodiff graph is dropped with the tensors); every episode must be in exactly one
/// batch. Batches whose rows have no policy positions are not run.
fn score_batches(score: &ScoreFn<'_>, episodes: &[Episode], batches: &[Vec<usize>], params: ScoreParams) -> Result<Recomputed, TrainError> {
    let mut tally = Tally::new(episodes);
    tally.score(score, episodes, batches, params)?;
    Ok(tally.finish(params.entropy))
}

/// Host log-probabilities of a step's episodes (aligned with `ids`, 0 off the policy
/// positions) and entropy sums, filled batch by batch.
struct Tally {
    logprobs: Vec<Vec<f32>>,
    scored: Vec<bool>,
    entropy: (f64, usize),
}

impl Tally {
    fn new(episodes: &[Episode]) -> Self {
        Self {
            logprobs: episodes.iter().map(|ep| vec![0.0f32; ep.ids.len()]).collect(),
            scored: vec![false; episodes.len()],
            entropy: (0.0, 0),
        }
    }

    /// Score each batch with `score` and keep its values.
    fn score(&mut self, score: &ScoreFn<'_>, episodes: &[Episode], batches: &[Vec<usize>], params: ScoreParams) -> Result<(), TrainError> {
        for batch in batches {
            let positions: Vec<Vec<usize>> = batch.iter().map(|&i| policy_positions(&episodes[i])).collect();
            if positions.iter().all(Vec::is_empty) {
                batch.iter().for_each(|&i| self.scored[i] = true);
                continue;
            }
            let seqs: Vec<Vec<u32>> = batch.iter().map(|&i| episodes[i].ids.clone()).collect();
            let scores = score(&seqs, &positions, params)?;
            self.keep(batch, &positions, scores.logprobs, scores.entropy)?;
        }
        Ok(())
    }

    /// Keep the values of `batch`'s rows (`positions` per row) from `logprobs` (and
    /// `entropy`), `[rows, width]` tensors.
    fn keep(
        &mut self,
        batch: &[usize],
        positions: &[Vec<usize>],
        logprobs: Tensor<Dispatch, 2>,
        entropy: Option<Tensor<Dispatch, 2>>,
    ) -> Result<(), TrainError> {
        let host = |t: Tensor<Dispatch, 2>| -> Result<Vec<f32>, TrainError> {
            t.into_data().convert::<f32>().to_vec().map_err(|e| TrainError::Other(format!("{e:?}")))
        };
        let width = logprobs.dims()[1];
        let flat = host(logprobs)?;
        let ent = entropy.map(host).transpose()?;
        for (r, &i) in batch.iter().enumerate() {
            self.scored[i] = true;
            for &t in &positions[r] {
                self.logprobs[i][t] = flat[r * width + t];
                if let Some(h) = &ent {
                    self.entropy.0 += h[r * width + t] as f64;
                    self.entropy.1 += 1;
                }
            }
        }
        Ok(())
    }

    fn finish(self, entropy: bool) -> Recomputed {
        let (sum, n) = self.entropy;
        Recomputed { logprobs: self.logprobs, entropy_mean: entropy.then(|| if n > 0 { sum / n as f64 } else { 0.0 }) }
    }
}

/// The update's batches, fixed before anything is scored: minibatches of episode indices, and
/// in each the micro-batches of rows that go through backward (zero-advantage rows left out
/// when the loss allows, rows without policy tokens always). The old log-probabilities are
/// scored in exactly these micro-batches (no batch variance between the two, verl #6280).
/// That alone does not make the on-policy ratio 1: burn's autodiff forward differs from the
/// plain backend's in the last bits (burn-flex fuses softmax only on the plain backend, ~1e-6
/// in log-probability), so the first minibatch uses its own forward, detached, as `old`.
struct Plan {
    minibatches: Vec<PlannedMinibatch>,
}

struct PlannedMinibatch {
    /// Every episode of the minibatch (the normalizer counts them all).
    episodes: Vec<usize>,
    micro: Vec<Vec<usize>>,
    skipped: usize,
}

impl Plan {
    fn new(episodes: &[Episode], advantages: &[f64], opts: &UpdateOptions, skip_zero: bool) -> Self {
        let n = episodes.len();
        let per_minibatch = n.div_ceil(opts.minibatches.max(1) as usize).max(1);
        let batching = opts.batching();
        let all: Vec<usize> = (0..n).collect();
        let minibatches = all
            .chunks(per_minibatch)
            .map(|mb| {
                let mut skipped = 0;
                let micro = batching
                    .split(mb, |i| episodes[i].ids.len())
                    .into_iter()
                    .filter_map(|chunk| {
                        let rows: Vec<usize> = chunk
                            .iter()
                            .copied()
                            .filter(|&i| (!skip_zero || advantages[i] != 0.0) && !policy_positions(&episodes[i]).is_empty())
                            .collect();
                        skipped += chunk.len() - rows.len();
                        (!rows.is_empty()).then_some(rows)
                    })
                    .collect();
                PlannedMinibatch { episodes: mb.to_vec(), micro, skipped }
            })
            .collect();
        Plan { minibatches }
    }

    /// The scoring batches of a no-grad pass: every planned micro-batch (but the first
    /// minibatch's with `skip_first`), then the rows no micro-batch trains, in micro-batches
    /// of their own.
    fn scoring_batches(&self, episodes: &[Episode], batching: MicroBatching, skip_first: bool) -> Vec<Vec<usize>> {
        let n = episodes.len();
        let mut planned = vec![false; n];
        for &i in self.minibatches.iter().flat_map(|m| m.micro.iter().flatten()) {
            planned[i] = true;
        }
        let mut batches: Vec<Vec<usize>> =
            self.minibatches.iter().skip(usize::from(skip_first)).flat_map(|m| m.micro.iter().cloned()).collect();
        let rest: Vec<usize> = (0..n).filter(|&i| !planned[i]).collect();
        batches.extend(batching.split(&rest, |i| episodes[i].ids.len()));
        batches
    }
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
    if opts.aggregation == Aggregation::ConstantHorizon && opts.horizon.is_none() {
        return Err(TrainError::Other(
            "constant-horizon aggregation needs a horizon H (UpdateOptions::horizon, the response budget in tokens; \
             `arl run` passes loss.horizon, else sampling.max_response_tokens)"
                .into(),
        ));
    }
    let plan = Plan::new(episodes, advantages, opts, loss.zero_advantage_rows_vanish());
    let at = ScoreParams::at(opts.temperature);
    // The first minibatch's rows are scored by its own gradient pass (on-policy: those
    // log-probabilities are its `old`), so the no-grad pass leaves them out; their values
    // for the metrics and later epochs are taken from that pass, before the optimizer step.
    // Not with dropout in that pass: then every row is scored here, without it.
    let first_from_grad = opts.epochs > 0 && !policy.dropout_in_gradient_pass();
    let batches = plan.scoring_batches(episodes, opts.batching(), first_from_grad);
    let scoring = Instant::now();
    let mut before = Tally::new(episodes);
    before.score(&|s, p, params| policy.score(s, Some(p), params), episodes, &batches, at.with_entropy(true))?;
    let reference = reference
        .map(|r| {
            score_batches(
                &|s, p, params| r.score(s, Some(p), params),
                episodes,
                &plan.scoring_batches(episodes, opts.batching(), false),
                at,
            )
        })
        .transpose()?
        .map(|r| r.logprobs);
    let mut m = UpdateMetrics { scoring_seconds: scoring.elapsed().as_secs_f64(), ..UpdateMetrics::default() };
    let mut recorded = false;

    let device = policy.device();
    let mut metrics = Vec::new();
    let mut losses = Vec::new();
    let mut grad_norms = Vec::new();
    for epoch in 0..opts.epochs {
        for (k, mb) in plan.minibatches.iter().enumerate() {
            // Before the first optimizer step the policy is the one that produced `old`.
            let on_policy = first_from_grad && epoch == 0 && k == 0;
            let lengths: Vec<f64> = mb.episodes.iter().map(|&i| policy_positions(&episodes[i]).len() as f64).collect();
            // (The horizon is checked above for constant-horizon; the others ignore it.)
            let norm = Normalizer::from_lengths(opts.aggregation, Some(opts.horizon.unwrap_or(1.0)), &lengths, 0)?;
            let mut mb_loss = 0.0;
            let mut mb_metrics = Vec::new();
            let mut non_finite = false;
            m.skipped_rows += mb.skipped;
            for rows in &mb.micro {
                let seqs: Vec<Vec<u32>> = rows.iter().map(|&i| episodes[i].ids.clone()).collect();
                let positions: Vec<Vec<usize>> = rows.iter().map(|&i| policy_positions(&episodes[i])).collect();
                let mut scores = policy.score_with_grad(&seqs, Some(&positions), at.with_entropy(on_policy || loss.needs_entropy()))?;
                if on_policy {
                    before.keep(rows, &positions, scores.logprobs.clone().detach(), scores.entropy.clone().map(Tensor::detach))?;
                    if !loss.needs_entropy() {
                        scores.entropy = None;
                    }
                }
                let old = &before.logprobs;
                let w = scores.logprobs.dims()[1];
                let build = |f: &dyn Fn(usize, usize) -> f32| -> T2 {
                    let mut v = vec![0.0f32; rows.len() * w];
                    for (r, &i) in rows.iter().enumerate() {
                        for &t in &positions[r] {
                            v[r * w + t] = f(i, t);
                        }
                    }
                    Tensor::from_data(TensorData::new(v, [rows.len(), w]), &device)
                };
                let old_log_prob = if on_policy { scores.logprobs.clone().detach() } else { build(&|i, t| old[i][t]) };
                let input = LossInput {
                    log_prob: scores.logprobs,
                    old_log_prob,
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
                mb_metrics.push(token_loss.metrics);
                policy.backward(scalar)?;
            }
            // Nothing to train: torch and verl still step, on a zero gradient.
            let zero_step = mb.micro.is_empty() && opts.zero_advantage_minibatch == ZeroAdvantageMinibatch::Step;
            if zero_step {
                policy.backward_zero()?;
            }
            if (!mb.micro.is_empty() || zero_step) && !non_finite {
                let step = policy.step(opts.lr)?;
                non_finite = step.non_finite;
                if !non_finite {
                    grad_norms.push(step.grad_norm);
                    m.optimizer_steps += 1;
                }
            }
            if on_policy {
                // A non-finite loss stopped the pass early: score the rest as the no-grad pass
                // would have (the optimizer step was not taken, so the policy is still `old`'s).
                let left: Vec<Vec<usize>> = mb.micro.iter().filter(|rows| rows.iter().any(|&i| !before.scored[i])).cloned().collect();
                before.score(&|s, p, params| policy.score(s, Some(p), params), episodes, &left, at.with_entropy(true))?;
                record_before(&mut m, episodes, &before, reference.as_deref());
                recorded = true;
            }
            if non_finite {
                m.non_finite_steps += 1;
                continue;
            }
            losses.push(mb_loss);
            m.minibatch_metrics.push(LossMetrics::merge(&mb_metrics));
            metrics.extend(mb_metrics);
        }
    }
    if !recorded {
        // No minibatch ran (no episodes, or no epochs).
        record_before(&mut m, episodes, &before, reference.as_deref());
    }
    m.loss = LossMetrics::merge(&metrics);
    m.loss_value = if losses.is_empty() { 0.0 } else { losses.iter().sum::<f64>() / losses.len() as f64 };
    m.minibatch_losses = losses;
    m.grad_norm_mean = if grad_norms.is_empty() { 0.0 } else { grad_norms.iter().sum::<f64>() / grad_norms.len() as f64 };
    m.grad_norm_max = grad_norms.iter().copied().fold(0.0, f64::max);
    m.seconds = start.elapsed().as_secs_f64();
    let scored: usize = episodes.iter().map(|e| e.ids.len()).sum::<usize>() * opts.epochs as usize;
    m.tokens_per_s = if m.seconds > 0.0 { scored as f64 / m.seconds } else { 0.0 };
    Ok(m)
}

/// The metrics of the policy before the update, once every episode has been scored: the
/// entropy, the KL to the reference and the sampler–trainer gap.
fn record_before(m: &mut UpdateMetrics, episodes: &[Episode], before: &Tally, reference: Option<&[Vec<f32>]>) {
    debug_assert!(before.scored.iter().all(|s| *s), "every episode is scored before the metrics");
    let (sum, n) = before.entropy;
    m.entropy = Some(if n > 0 { sum / n as f64 } else { 0.0 });
    let old = &before.logprobs;
    m.ref_kl = reference.map(|r| mean_ref_kl(episodes, old, r));
    let (mut gap_sum, mut gap_n) = (0.0f64, 0usize);
    for (ep, row) in episodes.iter().zip(old) {
        let mut e = EpisodeGap::default();
        for t in policy_positions(ep) {
            let gap = (ep.sampler_logprobs[t] - row[t]).abs() as f64;
            gap_sum += gap;
            gap_n += 1;
            m.logprob_gap_max = m.logprob_gap_max.max(gap);
            e.abs_gap_sum += gap;
            e.ratio_sum += (row[t] as f64 - ep.sampler_logprobs[t] as f64).exp();
            e.tokens += 1;
        }
        m.episode_gaps.push(e);
    }
    m.logprob_gap_mean = if gap_n > 0 { gap_sum / gap_n as f64 } else { 0.0 };
    m.policy_tokens = gap_n;
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
