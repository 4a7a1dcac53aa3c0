//! Batched sampling with a KV cache. Prompts of different lengths are left-padded into one
//! batch (padding keys masked, rotary positions counted from each row's first real token);
//! the prefill runs once, then every step runs the model on the one new token per row against
//! the cache. Finished rows leave the batch (their cache rows are dropped).
//!
//! Each token is drawn on the host from the row's own seeded ChaCha8 stream (seed, row), so a
//! row's sample does not depend on which other rows share its batch; its recorded
//! log-probability is under the distribution actually sampled from (temperature, then top-k,
//! then top-p, renormalised).

use arl_core::policy::{FinishReason, Generation, SamplingParams};
use burn::tensor::backend::Backend;
use burn::tensor::{Int, Tensor, TensorData};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::{KvCache, ModelError, Qwen3};

/// Wall-clock split of one [`generate_timed`] call (seconds).
#[derive(Clone, Copy, Debug, Default)]
pub struct GenTimings {
    /// Prompt forward until the first logits are on the host.
    pub prefill_s: f64,
    /// Every later step (sampling included).
    pub decode_s: f64,
    /// Tokens fed through decode steps (one per active row per step).
    pub decode_tokens: usize,
}

/// Sample a continuation of each prompt; see the module docs.
pub fn generate<B: Backend>(model: &Qwen3<B>, prompts: &[Vec<u32>], opts: &SamplingParams) -> Result<Vec<Generation>, ModelError> {
    generate_timed(model, prompts, opts).map(|(g, _)| g)
}

/// [`generate`], also returning where the time went.
pub fn generate_timed<B: Backend>(
    model: &Qwen3<B>,
    prompts: &[Vec<u32>],
    opts: &SamplingParams,
) -> Result<(Vec<Generation>, GenTimings), ModelError> {
    check(model, prompts, opts)?;
    let mut timings = GenTimings::default();
    let start = std::time::Instant::now();
    let stop_ids = opts.stop_ids.clone().unwrap_or_else(|| model.config.eos_token_ids.clone());
    let device = model.device();
    let b = prompts.len();
    let p = prompts.iter().map(Vec::len).max().unwrap_or(0);
    let pads: Vec<usize> = prompts.iter().map(|x| p - x.len()).collect();
    let mut out: Vec<Generation> =
        (0..b).map(|_| Generation { ids: vec![], sampler_logprobs: vec![], finish: FinishReason::Length }).collect();
    if opts.max_new_tokens == 0 {
        return Ok((out, timings));
    }
    let mut rngs: Vec<ChaCha8Rng> =
        (0..b).map(|r| ChaCha8Rng::seed_from_u64(opts.seed ^ (r as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15))).collect();

    // Prefill: left-padded prompts; a padding query sees only itself (keeps softmax finite).
    let padded: Vec<Vec<u32>> = prompts.iter().map(|x| std::iter::repeat_n(x[0], p - x.len()).chain(x.iter().copied()).collect()).collect();
    let positions: Vec<Vec<usize>> = pads.iter().map(|&pad| (0..p).map(|j| j.saturating_sub(pad)).collect()).collect();
    let mut bias = Vec::with_capacity(b * p * p);
    for &pad in &pads {
        for i in 0..p {
            bias.extend((0..p).map(|j| if j <= i && (j >= pad || j == i) { 0.0 } else { f32::NEG_INFINITY }));
        }
    }
    let bias = Tensor::<B, 3>::from_data(TensorData::new(bias, [b, p, p]), &device);
    let mut cache = KvCache::new(model.config.num_hidden_layers);
    let hidden = model.hidden(&padded, &positions, Some(bias), Some(&mut cache));
    let last: Vec<i64> = (0..b).map(|r| (r * p + p - 1) as i64).collect();
    let mut logits = model.head(hidden.select(0, Tensor::<B, 1, Int>::from_data(TensorData::new(last, [b]), &device)));

    let mut active: Vec<usize> = (0..b).collect(); // original row of each batch row
    let mut decode_start = None;
    loop {
        let vocab = model.config.vocab_size;
        let host = logits.into_data().convert::<f32>().to_vec::<f32>().expect("f32 logits");
        if decode_start.is_none() {
            timings.prefill_s = start.elapsed().as_secs_f64();
            decode_start = Some(std::time::Instant::now());
        }
        let mut next = Vec::with_capacity(active.len());
        for (i, &row) in active.iter().enumerate() {
            let (id, lp) = draw(&host[i * vocab..(i + 1) * vocab], opts, &mut rngs[row]);
            let g = &mut out[row];
            g.ids.push(id);
            g.sampler_logprobs.push(lp);
            if stop_ids.contains(&id) {
                g.finish = FinishReason::Stop;
            } else if g.ids.len() < opts.max_new_tokens {
                next.push((i, row, id));
            }
        }
        if next.is_empty() {
            timings.decode_s = decode_start.map_or(0.0, |t| t.elapsed().as_secs_f64());
            return Ok((out, timings));
        }
        if next.len() < active.len() {
            let keep: Vec<i64> = next.iter().map(|&(i, _, _)| i as i64).collect();
            cache.retain_rows(Tensor::from_data(TensorData::new(keep.clone(), [keep.len()]), &device));
        }
        active = next.iter().map(|&(_, row, _)| row).collect();
        // Decode: one new token per row at key index `l`; padding keys stay masked.
        let l = cache.len();
        let ids: Vec<Vec<u32>> = next.iter().map(|&(_, _, id)| vec![id]).collect();
        let positions: Vec<Vec<usize>> = active.iter().map(|&row| vec![prompts[row].len() + out[row].ids.len() - 1]).collect();
        let bias: Vec<f32> = active
            .iter()
            .flat_map(|&row| {
                let pad = pads[row];
                (0..=l).map(move |j| if j >= pad { 0.0 } else { f32::NEG_INFINITY })
            })
            .collect();
        let bias = Tensor::<B, 3>::from_data(TensorData::new(bias, [active.len(), 1, l + 1]), &device);
        let hidden = model.hidden(&ids, &positions, Some(bias), Some(&mut cache));
        timings.decode_tokens += ids.len();
        logits = model.head(hidden);
    }
}

fn check<B: Backend>(model: &Qwen3<B>, prompts: &[Vec<u32>], opts: &SamplingParams) -> Result<(), ModelError> {
    let bad = |m: String| Err(ModelError::Request(m));
    let vocab = model.config.vocab_size;
    for (r, x) in prompts.iter().enumerate() {
        if x.is_empty() {
            return bad(format!("prompt {r} is empty (give at least one token id)"));
        }
        if let Some(&id) = x.iter().find(|&&id| id as usize >= vocab) {
            return bad(format!("prompt {r}: token id {id} is outside the vocabulary (size {vocab})"));
        }
    }
    if !(opts.temperature >= 0.0 && opts.temperature.is_finite()) {
        return bad(format!("temperature {} must be finite and ≥ 0", opts.temperature));
    }
    if let Some(tp) = opts.top_p
        && !(tp > 0.0 && tp <= 1.0)
    {
        return bad(format!("top_p {tp} must be in (0, 1]"));
    }
    if opts.top_k == Some(0) {
        return bad("top_k must be ≥ 1".into());
    }
    Ok(())
}

/// Draw one token from `logits` (one row) and return it with its log-probability under the
/// sampling distribution (f64 arithmetic on the f32 logits).
pub fn draw(logits: &[f32], opts: &SamplingParams, rng: &mut impl Rng) -> (u32, f32) {
    if opts.temperature == 0.0 {
        let (id, _) = logits.iter().enumerate().fold((0, f32::NEG_INFINITY), |best, (i, &x)| if x > best.1 { (i, x) } else { best });
        return (id as u32, 0.0);
    }
    let inv_t = 1.0 / opts.temperature;
    let truncated = opts.top_k.is_some_and(|k| k < logits.len()) || opts.top_p.is_some_and(|p| p < 1.0);
    if !truncated {
        // The whole vocabulary: one pass for the normaliser, one to find the sample.
        let m = logits.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b)) as f64 * inv_t;
        let total: f64 = logits.iter().map(|&x| (x as f64 * inv_t - m).exp()).sum();
        let target = rng.random::<f64>() * total;
        let mut cum = 0.0;
        let mut last = 0;
        for (i, &x) in logits.iter().enumerate() {
            let p = (x as f64 * inv_t - m).exp();
            if p > 0.0 {
                last = i;
            }
            cum += p;
            if target < cum {
                last = i;
                break;
            }
        }
        return (last as u32, (logits[last] as f64 * inv_t - m - total.ln()) as f32);
    }
    // Candidates (id, scaled logit): the kept set after top-k, then top-p.
    let mut cand: Vec<(u32, f64)> = logits.iter().enumerate().map(|(i, &x)| (i as u32, x as f64 * inv_t)).collect();
    {
        let order = |a: &(u32, f64), b: &(u32, f64)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
        if let Some(k) = opts.top_k.filter(|&k| k < cand.len()) {
            cand.select_nth_unstable_by(k.max(1) - 1, order);
            cand.truncate(k.max(1));
        }
        cand.sort_by(order);
        if let Some(top_p) = opts.top_p.filter(|&p| p < 1.0) {
            // Keep the smallest prefix whose probability reaches top_p (always ≥ 1 token).
            let lse = log_sum_exp(&cand);
            let mut cum = 0.0;
            let mut keep = cand.len();
            for (i, &(_, z)) in cand.iter().enumerate() {
                cum += (z - lse).exp();
                if cum >= top_p {
                    keep = i + 1;
                    break;
                }
            }
            cand.truncate(keep);
        }
    }
    let lse = log_sum_exp(&cand);
    let u: f64 = rng.random::<f64>();
    let mut cum = 0.0;
    for &(id, z) in &cand {
        cum += (z - lse).exp();
        if u < cum {
            return (id, (z - lse) as f32);
        }
    }
    // Rounding left `cum` a hair under 1: take the last candidate with nonzero mass.
    let &(id, z) = cand.iter().rev().find(|(_, z)| (z - lse).exp() > 0.0).unwrap_or(&cand[0]);
    (id, (z - lse) as f32)
}

fn log_sum_exp(cand: &[(u32, f64)]) -> f64 {
    let m = cand.iter().map(|c| c.1).fold(f64::NEG_INFINITY, f64::max);
    m + cand.iter().map(|c| (c.1 - m).exp()).sum::<f64>().ln()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(temperature: f64, top_k: Option<usize>, top_p: Option<f64>) -> SamplingParams {
        SamplingParams { temperature, top_k, top_p, ..Default::default() }
    }

    #[test]
    fn logprob_is_under_the_truncated_distribution() {
        let logits = [2.0f32, 1.0, 0.0, -1.0];
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        for _ in 0..50 {
            let (id, lp) = draw(&logits, &opts(1.0, Some(2), None), &mut rng);
            assert!(id < 2);
            let z = (logits[0] as f64).exp() + (logits[1] as f64).exp();
            assert!((lp as f64 - (logits[id as usize] as f64 - z.ln())).abs() < 1e-6);
        }
        // top_p 0.5: token 0 alone has p = 0.644 ≥ 0.5, so it is always drawn, with log-prob 0.
        let (id, lp) = draw(&logits, &opts(1.0, None, Some(0.5)), &mut rng);
        assert_eq!((id, lp), (0, 0.0));
        // temperature 2 halves the logits.
        let (id, lp) = draw(&logits, &opts(2.0, None, None), &mut rng);
        let lse = logits.iter().map(|&x| (x as f64 / 2.0).exp()).sum::<f64>().ln();
        assert!((lp as f64 - (logits[id as usize] as f64 / 2.0 - lse)).abs() < 1e-6);
    }

    #[test]
    fn greedy_takes_the_argmax_with_a_point_mass() {
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        assert_eq!(draw(&[0.1, 3.0, 2.0], &opts(0.0, None, None), &mut rng), (1, 0.0));
    }
}
