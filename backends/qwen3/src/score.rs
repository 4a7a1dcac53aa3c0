//! Teacher-forced scoring: `log p(ids[t] | ids[..t])` at requested positions only. The hidden
//! states of the rows that predict those tokens are gathered *before* the final norm and the
//! LM head, and the head runs a chunk of rows at a time ([`head`]), so no `[N, vocab]` logits
//! exist for all N scored tokens at once. On an autodiff device [`score`] carries gradients;
//! the trainer's [`score_deferred`] leaves the head's gradient to a recomputation after the
//! loss's backward, so its memory is bounded by one chunk in the backward pass too.
//!
//! The logits are divided by the temperature before the log-softmax, as the sampler divides
//! them before drawing ([`crate::sample::draw`]), so tokens sampled at temperature T and
//! scored at T get the log-probabilities the sampler recorded (verl's actor divides its logits
//! by the rollout temperature the same way). Entropies are of that same distribution.

use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{IndexingUpdateOp, Int, Tensor, TensorData};

use arl_core::policy::ScoreParams;

use crate::head::{self, DeferredHead};
use crate::{ModelError, Qwen3};

/// `[rows, tokens]` (tokens = longest sequence); entry `[r, t]` is the score of token `t` of
/// row `r` if requested, else 0.
pub struct ScoreOutput<B: Backend> {
    pub logprobs: Tensor<B, 2>,
    pub entropy: Option<Tensor<B, 2>>,
}

/// The positions scored when none are given: every `t` in `1..len`.
pub fn all_positions(sequences: &[Vec<u32>]) -> Vec<Vec<usize>> {
    sequences.iter().map(|s| (1..s.len()).collect()).collect()
}

/// Score `sequences` (right-padded internally) at `positions` (per row, `1 ≤ t < len`) at
/// `params.temperature`. The LM head holds [`head::CHUNK_LOGITS`] logits at a time:
/// [`head::chunk_rows`] rows, or on a host device with f32 weights a group of rows against a
/// block of the vocabulary ([`crate::host_head`]).
pub fn score<B: Backend>(
    model: &Qwen3<B>,
    sequences: &[Vec<u32>],
    positions: Option<&[Vec<usize>]>,
    params: ScoreParams,
) -> Result<ScoreOutput<B>, ModelError> {
    let Some(req) = Request::new(model, sequences, positions, params)? else {
        return Ok(zeros(model, sequences, params.entropy));
    };
    let device = model.device();
    let n = req.targets.len();
    let rows = head::chunk_rows(model.config.vocab_size);
    let (lp, ent) = head::scores(model, req.normed, &req.targets, params.temperature, params.entropy, rows);
    let slots = Tensor::<B, 1, Int>::from_data(TensorData::new(req.slots, [n]), &device);
    let [b, l] = req.shape;
    let place = |values: Tensor<B, 1>| {
        Tensor::<B, 1>::zeros([b * l], &device).scatter(0, slots.clone(), values, IndexingUpdateOp::Add).reshape([b, l])
    };
    Ok(ScoreOutput { logprobs: place(lp), entropy: ent.map(place) })
}

/// [`score`] for the trainer on an autodiff device: the returned scores are leaves, and the
/// LM head's gradient is left to [`DeferredHead::surrogate`] after the loss's backward (see
/// [`head`]); `None` when nothing was requested (the scores are then constant zeros).
pub fn score_deferred<B: AutodiffBackend>(
    model: &Qwen3<B>,
    sequences: &[Vec<u32>],
    positions: Option<&[Vec<usize>]>,
    params: ScoreParams,
) -> Result<(ScoreOutput<B>, Option<DeferredHead<B>>), ModelError> {
    score_deferred_with(model, sequences, positions, params, head::chunk_rows(model.config.vocab_size))
}

/// [`score_deferred`] with `chunk_rows` rows of logits per chunk (on the host path,
/// `chunk_rows · vocab` logits per block).
pub fn score_deferred_with<B: AutodiffBackend>(
    model: &Qwen3<B>,
    sequences: &[Vec<u32>],
    positions: Option<&[Vec<usize>]>,
    params: ScoreParams,
    chunk_rows: usize,
) -> Result<(ScoreOutput<B>, Option<DeferredHead<B>>), ModelError> {
    let Some(req) = Request::new(model, sequences, positions, params)? else {
        return Ok((zeros(model, sequences, params.entropy), None));
    };
    let (t, entropy) = (params.temperature, params.entropy);
    let head = DeferredHead::forward(model, req.normed, req.targets, req.slots, req.shape, t, entropy, chunk_rows.max(1));
    Ok((ScoreOutput { logprobs: head.logprobs.clone(), entropy: head.entropy.clone() }, Some(head)))
}

/// A checked scoring request, run through the body: the normed hidden rows that predict the
/// requested tokens, in request order, with their targets and places in `[rows · tokens]`.
struct Request<B: Backend> {
    normed: Tensor<B, 2>,
    targets: Vec<u32>,
    slots: Vec<i64>,
    shape: [usize; 2],
}

impl<B: Backend> Request<B> {
    fn new(
        model: &Qwen3<B>,
        sequences: &[Vec<u32>],
        positions: Option<&[Vec<usize>]>,
        params: ScoreParams,
    ) -> Result<Option<Self>, ModelError> {
        let temperature = params.temperature;
        if !(temperature > 0.0 && temperature.is_finite()) {
            return Err(ModelError::Request(format!(
                "scoring temperature {temperature} must be finite and > 0 (greedy sampling, temperature 0, records no log-probabilities to score against)"
            )));
        }
        let default;
        let positions = match positions {
            Some(p) => p,
            None => {
                default = all_positions(sequences);
                &default
            }
        };
        check(model, sequences, positions)?;
        let (b, l) = (sequences.len(), sequences.iter().map(Vec::len).max().unwrap_or(0));
        let mut rows = Vec::new(); // hidden row that predicts the token
        let mut slots = Vec::new(); // where the score goes in [rows·tokens]
        let mut targets = Vec::new();
        for (r, ts) in positions.iter().enumerate() {
            for &t in ts {
                rows.push((r * l + t - 1) as i64);
                slots.push((r * l + t) as i64);
                targets.push(sequences[r][t]);
            }
        }
        if rows.is_empty() {
            return Ok(None);
        }
        let padded: Vec<Vec<u32>> = sequences.iter().map(|s| s.iter().copied().chain(std::iter::repeat(0)).take(l).collect()).collect();
        let pos: Vec<Vec<usize>> = (0..b).map(|_| (0..l).collect()).collect();
        // Right padding: causal attention alone keeps padding out of every real position.
        let hidden = model.hidden(&padded, &pos, None, None);
        let n = rows.len();
        let rows = Tensor::<B, 1, Int>::from_data(TensorData::new(rows, [n]), &model.device());
        Ok(Some(Self { normed: model.norm.forward(hidden.select(0, rows)), targets, slots, shape: [b, l] }))
    }
}

fn zeros<B: Backend>(model: &Qwen3<B>, sequences: &[Vec<u32>], entropy: bool) -> ScoreOutput<B> {
    let (b, l) = (sequences.len(), sequences.iter().map(Vec::len).max().unwrap_or(0));
    let zeros = Tensor::zeros([b, l], &model.device());
    ScoreOutput { logprobs: zeros.clone(), entropy: entropy.then_some(zeros) }
}

fn check<B: Backend>(model: &Qwen3<B>, sequences: &[Vec<u32>], positions: &[Vec<usize>]) -> Result<(), ModelError> {
    let bad = |m: String| Err(ModelError::Request(m));
    if sequences.is_empty() {
        return bad("no sequences to score".into());
    }
    if positions.len() != sequences.len() {
        return bad(format!("{} position lists for {} sequences", positions.len(), sequences.len()));
    }
    let vocab = model.config.vocab_size;
    for (r, (s, ts)) in sequences.iter().zip(positions).enumerate() {
        if s.is_empty() {
            return bad(format!("sequence {r} is empty"));
        }
        if let Some(&id) = s.iter().find(|&&id| id as usize >= vocab) {
            return bad(format!("sequence {r}: token id {id} is outside the vocabulary (size {vocab})"));
        }
        if let Some(&t) = ts.iter().find(|&&t| t == 0 || t >= s.len()) {
            return bad(format!("sequence {r}: position {t} is not in 1..{} (position t scores token t given tokens before it)", s.len()));
        }
    }
    Ok(())
}
