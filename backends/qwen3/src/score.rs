//! Teacher-forced scoring: `log p(ids[t] | ids[..t])` at requested positions only. The hidden
//! states of the rows that predict those tokens are gathered *before* the final norm and the
//! LM head, so the `[N, vocab]` logits grow with the number of scored tokens N, not with
//! sequence length × vocabulary. On an autodiff device the result carries gradients.
//!
//! The logits are divided by the temperature before the log-softmax, as the sampler divides
//! them before drawing ([`crate::sample::draw`]), so tokens sampled at temperature T and
//! scored at T get the log-probabilities the sampler recorded (verl's actor divides its logits
//! by the rollout temperature the same way). Entropies are of that same distribution.

use burn::tensor::activation::log_softmax;
use burn::tensor::backend::Backend;
use burn::tensor::{IndexingUpdateOp, Int, Tensor, TensorData};

use arl_core::policy::ScoreParams;

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
/// `params.temperature`.
pub fn score<B: Backend>(
    model: &Qwen3<B>,
    sequences: &[Vec<u32>],
    positions: Option<&[Vec<usize>]>,
    params: ScoreParams,
) -> Result<ScoreOutput<B>, ModelError> {
    let ScoreParams { temperature, entropy } = params;
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
    let device = model.device();
    let (b, l) = (sequences.len(), sequences.iter().map(Vec::len).max().unwrap_or(0));
    let padded: Vec<Vec<u32>> = sequences.iter().map(|s| s.iter().copied().chain(std::iter::repeat(0)).take(l).collect()).collect();
    let pos: Vec<Vec<usize>> = (0..b).map(|_| (0..l).collect()).collect();
    // Right padding: causal attention alone keeps padding out of every real position.
    let hidden = model.hidden(&padded, &pos, None, None);

    let mut rows = Vec::new(); // hidden row that predicts the token
    let mut slots = Vec::new(); // where the score goes in [rows·tokens]
    let mut targets = Vec::new();
    for (r, ts) in positions.iter().enumerate() {
        for &t in ts {
            rows.push((r * l + t - 1) as i64);
            slots.push((r * l + t) as i64);
            targets.push(sequences[r][t] as i64);
        }
    }
    let n = rows.len();
    let int1 = |v: Vec<i64>| Tensor::<B, 1, Int>::from_data(TensorData::new(v, [n]), &device);
    if n == 0 {
        let zeros = Tensor::zeros([b, l], &device);
        return Ok(ScoreOutput { logprobs: zeros.clone(), entropy: entropy.then_some(zeros) });
    }
    let logits = model.head(hidden.select(0, int1(rows)));
    let logits = if temperature == 1.0 { logits } else { logits.div_scalar(temperature) };
    let lp = log_softmax(logits, 1);
    let picked = lp.clone().gather(1, int1(targets).reshape([n, 1])).reshape([n]);
    let place = |values: Tensor<B, 1>| {
        Tensor::<B, 1>::zeros([b * l], &device).scatter(0, int1(slots.clone()), values, IndexingUpdateOp::Add).reshape([b, l])
    };
    let ent = entropy.then(|| place(lp.clone().exp().mul(lp).sum_dim(1).reshape([n]).neg()));
    Ok(ScoreOutput { logprobs: place(picked), entropy: ent })
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
