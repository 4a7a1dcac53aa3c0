//! The sampler that keeps KV between calls, against the one it replaced: the same ids and
//! log-probabilities on recorded seeds (tests/fixtures/qwen3/sampler-streams.json, written by
//! scripts/fixtures/make_sampler_streams.py with the sampler before issue #17), a turn that
//! prefills only its new suffix, a group prefilled once, and the prefix cache dropped when the
//! weights change.

use std::path::{Path, PathBuf};

use arl_core::policy::{Generation, Policy, SamplingParams};
use arl_qwen3::prefix::PrefixCache;
use arl_qwen3::{DispatchQwen3, Qwen3, cpu, sample};
use burn::Dispatch;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/qwen3")
}

fn load(name: &str) -> DispatchQwen3 {
    Qwen3::load_dir(&fixtures().join(name), &cpu()).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn params(case: &serde_json::Value) -> SamplingParams {
    SamplingParams {
        temperature: case["temperature"].as_f64().unwrap(),
        top_k: case["top_k"].as_u64().map(|k| k as usize),
        top_p: case["top_p"].as_f64(),
        max_new_tokens: case["max_new_tokens"].as_u64().unwrap() as usize,
        seed: case["seed"].as_u64().unwrap(),
        stop_ids: None,
    }
}

/// The largest |a − b| over the pairs of log-probabilities (as far as the shorter goes).
fn max_gap(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0f32, f32::max)
}

fn same(got: &[Generation], want: &[Generation], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (r, (g, w)) in got.iter().zip(want).enumerate() {
        assert_eq!((&g.ids, g.finish), (&w.ids, w.finish), "{what}, row {r}");
        let worst = max_gap(&g.sampler_logprobs, &w.sampler_logprobs);
        // Ids exactly; log-probabilities to the project's 1e-5 (this build's kernels, burn-flex
        // with simd and rayon, sum in another order: ≈1.4e-6 seen on log-probs near −12).
        assert!(worst <= 1e-5, "{what}, row {r}: log-probabilities differ by {worst}");
    }
}

#[test]
fn sampler_streams_are_unchanged() {
    let cases: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(fixtures().join("sampler-streams.json")).unwrap()).unwrap();
    assert!(cases.len() >= 12);
    for case in &cases {
        let model = load(case["model"].as_str().unwrap());
        let prompts: Vec<Vec<u32>> = serde_json::from_value(case["prompts"].clone()).unwrap();
        let want: Vec<Generation> = serde_json::from_value(case["generations"].clone()).unwrap();
        let what = format!("{} T={} k={} p={} seed {}", case["model"], case["temperature"], case["top_k"], case["top_p"], case["seed"]);
        let (got, t) = sample::generate_timed(&model, &prompts, &params(case)).unwrap();
        same(&got, &want, &what);
        // A group's prompt is prefilled once, and so is a prefix shared by new prompts.
        let distinct: std::collections::BTreeSet<&Vec<u32>> = prompts.iter().collect();
        assert!(t.prefill_tokens <= distinct.iter().map(|p| p.len()).sum::<usize>(), "{what}: {t:?}");
        // With a prefix cache the first call samples the same.
        let mut cache = PrefixCache::<Dispatch>::default();
        let (cached, _) = sample::generate_cached(&model, &prompts, &params(case), &mut cache).unwrap();
        same(&cached, &want, &format!("{what}, with a prefix cache"));
    }
}

#[test]
fn the_next_turn_prefills_only_its_new_suffix() {
    for name in ["qwen3-a", "llama"] {
        let model = load(name);
        let first: Vec<Vec<u32>> = vec![vec![5, 17, 42, 8, 9], (0..30).map(|i| (i * 7 % 300) as u32).collect(), vec![250, 1]];
        let opts = SamplingParams { max_new_tokens: 6, seed: 3, stop_ids: Some(vec![]), ..Default::default() };
        let mut cache = PrefixCache::<Dispatch>::default();
        let (gens, t1) = sample::generate_cached(&model, &first, &opts, &mut cache).unwrap();
        assert_eq!(t1.reused_tokens, 0);
        // The next turn: history, the sampled turn, an observation of a few tokens.
        let obs: [&[u32]; 3] = [&[3, 4, 5], &[6], &[7, 8, 9, 10, 11, 12, 13]];
        let second: Vec<Vec<u32>> =
            first.iter().zip(&gens).zip(obs).map(|((p, g), o)| p.iter().chain(&g.ids).chain(o).copied().collect()).collect();
        let next = SamplingParams { seed: 4, ..opts.clone() };
        let (cached, t2) = sample::generate_cached(&model, &second, &next, &mut cache).unwrap();
        // Prefilled: the last sampled token (never fed) and the observation.
        let want: usize = obs.iter().map(|o| o.len() + 1).sum();
        assert_eq!(t2.prefill_tokens, want, "{name}: {t2:?}");
        assert_eq!(t2.reused_tokens, second.iter().map(|p| p.len()).sum::<usize>() - want);
        // The same samples as prefilling everything afresh.
        let (fresh, t3) = sample::generate_timed(&model, &second, &next).unwrap();
        assert_eq!(t3.reused_tokens, 0);
        for (r, (a, b)) in cached.iter().zip(&fresh).enumerate() {
            assert_eq!(a.ids, b.ids, "{name} row {r}");
            let worst = max_gap(&a.sampler_logprobs, &b.sampler_logprobs);
            assert!(worst <= 1e-5, "{name} row {r}: {worst}");
        }
        // New prompts around a cached one: prefilled in two groups (new, cached) whose rows
        // come back in the prompts' order.
        let mixed = vec![vec![1, 2, 3], second[1].iter().chain(&cached[1].ids).chain(&[4]).copied().collect(), vec![200, 100]];
        let (got, t4) = sample::generate_cached(&model, &mixed, &next, &mut cache).unwrap();
        assert_eq!(t4.prefill_tokens, 3 + 2 + 2, "{name}: {t4:?}");
        let (fresh, _) = sample::generate_timed(&model, &mixed, &next).unwrap();
        for (r, (a, b)) in got.iter().zip(&fresh).enumerate() {
            assert_eq!(a.ids, b.ids, "{name} mixed row {r}");
            let worst = max_gap(&a.sampler_logprobs, &b.sampler_logprobs);
            assert!(worst <= 1e-5, "{name} mixed row {r}: {worst}");
        }
    }
}

#[test]
fn a_policy_reuses_its_rows_until_the_weights_change() {
    use arl_core::policy::TrainablePolicy;
    let src = fixtures().join("qwen3-a");
    let mut policy = arl_qwen3::QwenTrainer::load(src.to_str().unwrap(), &cpu(), Default::default()).unwrap();
    let a: Vec<u32> = (10..20).collect();
    let prompts = vec![a.clone(), a, vec![9; 9]];
    let opts = SamplingParams { max_new_tokens: 4, stop_ids: Some(vec![]), ..Default::default() };
    let before = policy.prefill_tokens().unwrap();
    let gens = policy.generate(&prompts, &opts).unwrap();
    // The two identical prompts are prefilled once.
    assert_eq!(policy.prefill_tokens().unwrap() - before, 10 + 9);
    let next: Vec<Vec<u32>> = prompts.iter().zip(&gens).map(|(p, g)| p.iter().chain(&g.ids).chain(&[1, 2]).copied().collect()).collect();
    let mid = policy.prefill_tokens().unwrap();
    policy.generate(&next, &opts).unwrap();
    assert_eq!(policy.prefill_tokens().unwrap() - mid, 3 * 3, "one sampled token and two observation tokens per row");
    // An optimizer step changes the weights: nothing cached may be reused.
    let scores = policy.score_with_grad(&next, None, Default::default()).unwrap();
    policy.backward(scores.logprobs.sum()).unwrap();
    policy.step(1e-3).unwrap();
    let after = policy.prefill_tokens().unwrap();
    policy.generate(&next, &opts).unwrap();
    assert_eq!(policy.prefill_tokens().unwrap() - after, next.iter().map(|p| p.len()).sum::<usize>() as u64);
}

/// Rows that finish early stay in the batch as placeholders until a quarter of it has
/// finished, then leave it together; neither may change what the other rows sample. Against
/// the same batch with no stop ids (no row finishes before the last step): each row equals it
/// up to its first stop id.
#[test]
fn rows_that_finish_early_do_not_change_the_others() {
    for name in ["qwen3-a", "llama"] {
        let model = load(name);
        let prompts: Vec<Vec<u32>> = (0..12u32).map(|r| (0..3 + r % 5).map(|i| (r * 31 + i * 7) % 200 + 1).collect()).collect();
        let stop: Vec<u32> = (0..400).filter(|id| id % 7 == 0).collect();
        let opts = SamplingParams { max_new_tokens: 24, seed: 11, stop_ids: Some(stop.clone()), ..Default::default() };
        let (early, _) = sample::generate_timed(&model, &prompts, &opts).unwrap();
        let (full, _) = sample::generate_timed(&model, &prompts, &SamplingParams { stop_ids: Some(vec![]), ..opts.clone() }).unwrap();
        let lengths: std::collections::BTreeSet<usize> = early.iter().map(|g| g.ids.len()).collect();
        // Finishes spread over several steps, and at least three rows (a quarter) before the last.
        assert!(lengths.len() >= 4, "{name}: finish lengths {lengths:?}");
        let last = *lengths.iter().max().unwrap();
        assert!(early.iter().filter(|g| g.ids.len() < last).count() >= 3, "{name}: {lengths:?}");
        for (r, (e, f)) in early.iter().zip(&full).enumerate() {
            let n = e.ids.len();
            assert_eq!(e.ids[..], f.ids[..n], "{name} row {r}");
            let first_stop = f.ids.iter().position(|id| stop.contains(id));
            assert_eq!(e.finish == arl_core::policy::FinishReason::Stop, first_stop == Some(n - 1), "{name} row {r}");
            let worst = max_gap(&e.sampler_logprobs, &f.sampler_logprobs);
            assert!(worst <= 1e-5, "{name} row {r}: {worst}");
        }
    }
}
