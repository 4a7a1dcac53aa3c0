//! Cross-checking log-probabilities between backends: the same checkpoint and the same tokens
//! scored on two devices must agree. [`compare`] reduces two backends' per-token logprobs to
//! the mean and max |Δ|, a mismatch KL and the worst token (where it is, with its context).
//!
//! The mismatch KL is the k3 estimator `E[exp(r) − 1 − r]`, `r = lp_b − lp_a`, over tokens
//! sampled from backend `a`'s distribution: an unbiased, non-negative estimate of KL(p_a‖p_b)
//! (exact when the tokens come from `a`; for other pairs it is the same formula on those
//! tokens).

use burn::tensor::backend::Backend;
use serde::Serialize;

use crate::{ModelError, Qwen3, score};

/// Tokens on each side of the worst token shown as context.
pub const CONTEXT: usize = 8;

/// Per-token logprobs of scored positions: `[row][k]` for `positions[row][k]`.
pub type Scores = Vec<Vec<f32>>;

/// Score `sequences` at `positions` on `model` and bring the logprobs to the host (f32).
pub fn score_rows<B: Backend>(model: &Qwen3<B>, sequences: &[Vec<u32>], positions: &[Vec<usize>]) -> Result<Scores, ModelError> {
    let lp = score::score(model, sequences, Some(positions), Default::default())?.logprobs;
    let width = lp.dims()[1];
    let flat = lp.into_data().convert::<f32>().to_vec::<f32>().map_err(|e| ModelError::Request(format!("reading logprobs: {e:?}")))?;
    Ok(positions.iter().enumerate().map(|(r, ts)| ts.iter().map(|&t| flat[r * width + t]).collect()).collect())
}

/// The token where two backends disagree most.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Worst {
    pub row: usize,
    /// Index in the row's sequence of the scored token.
    pub position: usize,
    pub token: u32,
    pub logprob_a: f32,
    pub logprob_b: f32,
    pub abs_diff: f32,
    /// Up to [`CONTEXT`] token ids before the scored token.
    pub context_before: Vec<u32>,
    /// Up to [`CONTEXT`] token ids after it.
    pub context_after: Vec<u32>,
}

/// Agreement of backends `a` and `b` on the same tokens.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct PairStats {
    pub a: String,
    pub b: String,
    pub tokens: usize,
    pub mean_abs_diff: f64,
    pub max_abs_diff: f32,
    pub mismatch_kl: f64,
    /// `None` when nothing was scored.
    pub worst: Option<Worst>,
}

/// Compare two backends' scores of `sequences` at `positions` (see the module docs).
/// A NaN on either side counts as an infinite difference.
pub fn compare(a: (&str, &Scores), b: (&str, &Scores), sequences: &[Vec<u32>], positions: &[Vec<usize>]) -> PairStats {
    let (mut n, mut sum, mut kl, mut worst): (usize, f64, f64, Option<Worst>) = (0, 0.0, 0.0, None);
    for (r, ts) in positions.iter().enumerate() {
        for (k, &t) in ts.iter().enumerate() {
            let (la, lb) = (a.1[r][k], b.1[r][k]);
            let d = if la.is_nan() || lb.is_nan() { f32::INFINITY } else { (la - lb).abs() };
            let ratio = (lb - la) as f64;
            n += 1;
            sum += d as f64;
            kl += ratio.exp() - 1.0 - ratio;
            if worst.as_ref().is_none_or(|w| d > w.abs_diff) {
                let s = &sequences[r];
                worst = Some(Worst {
                    row: r,
                    position: t,
                    token: s[t],
                    logprob_a: la,
                    logprob_b: lb,
                    abs_diff: d,
                    context_before: s[t.saturating_sub(CONTEXT)..t].to_vec(),
                    context_after: s[t + 1..(t + 1 + CONTEXT).min(s.len())].to_vec(),
                });
            }
        }
    }
    let mean = |x: f64| if n == 0 { 0.0 } else { x / n as f64 };
    PairStats {
        a: a.0.to_string(),
        b: b.0.to_string(),
        tokens: n,
        mean_abs_diff: mean(sum),
        max_abs_diff: worst.as_ref().map_or(0.0, |w| w.abs_diff),
        mismatch_kl: mean(kl),
        worst,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_worst_token_and_its_context() {
        let seqs = vec![vec![1, 2, 3, 4], vec![5, 6, 7]];
        let pos = vec![vec![1, 2, 3], vec![1, 2]];
        let a: Scores = vec![vec![-1.0, -2.0, -3.0], vec![-1.0, -1.0]];
        let b: Scores = vec![vec![-1.0, -2.5, -3.0], vec![-1.0, -1.1]];
        let s = compare(("x", &a), ("y", &b), &seqs, &pos);
        assert_eq!(s.tokens, 5);
        assert_eq!(s.max_abs_diff, 0.5);
        assert!((s.mean_abs_diff - 0.6 / 5.0).abs() < 1e-6);
        let w = s.worst.unwrap();
        assert_eq!((w.row, w.position, w.token), (0, 2, 3));
        assert_eq!((w.context_before, w.context_after), (vec![1, 2], vec![4]));
        assert!(s.mismatch_kl > 0.0);
    }

    #[test]
    fn identical_scores_agree_and_nan_is_caught() {
        let seqs = vec![vec![1, 2, 3]];
        let pos = vec![vec![1, 2]];
        let a: Scores = vec![vec![-1.0, -2.0]];
        let s = compare(("x", &a), ("y", &a), &seqs, &pos);
        assert_eq!((s.max_abs_diff, s.mean_abs_diff, s.mismatch_kl), (0.0, 0.0, 0.0));
        let b: Scores = vec![vec![-1.0, f32::NAN]];
        assert_eq!(compare(("x", &a), ("y", &b), &seqs, &pos).max_abs_diff, f32::INFINITY);
    }
}
