//! arl-qwen3 against HF transformers' recorded logits (tests/fixtures/qwen3, made by
//! scripts/fixtures/make_qwen3_fixtures.py), sampler/scorer agreement, scoring with
//! gradients, save → load, and the load errors users meet.

use std::path::{Path, PathBuf};

use arl_core::policy::{FinishReason, SamplingParams, ScoreParams};
use arl_qwen3::{DispatchQwen3, Qwen3, cpu, sample, score};
use burn::tensor::Tensor;
use burn::{Dispatch, DispatchDevice};
use safetensors::SafeTensors;

const FIXTURES: [&str; 4] = ["qwen3-a", "qwen3-b", "qwen2", "llama"];

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/qwen3")
}

fn load(name: &str) -> DispatchQwen3 {
    Qwen3::load_dir(&fixtures().join(name), &cpu()).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn to_vec<const D: usize>(t: Tensor<Dispatch, D>) -> Vec<f32> {
    t.into_data().convert::<f32>().to_vec::<f32>().unwrap()
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("arl-qwen3-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// HF's inputs and logits for one fixture: (ids, logits [T·V]) per input length.
fn reference(name: &str) -> Vec<(Vec<u32>, Vec<f32>)> {
    reference_file(&format!("{name}.logits.safetensors"))
}

fn reference_file(file: &str) -> Vec<(Vec<u32>, Vec<f32>)> {
    let bytes = std::fs::read(fixtures().join(file)).unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let mut lens: Vec<usize> = st.names().iter().filter_map(|n| n.strip_prefix("ids_")?.parse().ok()).collect();
    lens.sort();
    lens.iter()
        .map(|n| {
            let ids = st.tensor(&format!("ids_{n}")).unwrap();
            let ids = ids.data().chunks_exact(8).map(|b| i64::from_le_bytes(b.try_into().unwrap()) as u32).collect();
            let lg = st.tensor(&format!("logits_{n}")).unwrap();
            let lg = lg.data().chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect();
            (ids, lg)
        })
        .collect()
}

fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}

#[test]
fn logits_equal_hf_transformers_on_every_fixture() {
    for name in FIXTURES {
        let model = load(name);
        for (ids, want) in reference(name) {
            let got = to_vec(model.logits(std::slice::from_ref(&ids)));
            let diff = max_abs_diff(&got, &want);
            eprintln!("{name}, {} tokens: max |logit diff| vs HF {diff:.2e}", ids.len());
            assert!(diff <= 1e-4, "{name}, {} tokens: max |logit diff| {diff}", ids.len());
            let spread = want.iter().fold(0.0f32, |m, x| m.max(x.abs()));
            assert!(spread > 0.5, "{name}: logits too small ({spread}) to test anything");
        }
    }
}

fn mean_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).sum::<f32>() / a.len() as f32
}

/// bf16 and f16: our logits against HF computing in the same dtype (`--half-precision`
/// references), next to how far HF's own half-precision logits are from its f32 ones.
#[test]
fn half_precision_logits_follow_hf_transformers_in_the_same_dtype() {
    use arl_qwen3::DType;
    // Tolerances (max, mean |Δ logit|): about what separates HF's half precision from its own
    // f32 (printed below); kernels round in different orders, so ours sits at that distance too.
    for (dtype, tag, max_tol, mean_tol) in [(DType::Bf16, "bf16", 0.125, 0.02), (DType::F16, "f16", 0.02, 0.004)] {
        for name in FIXTURES {
            let model = arl_qwen3::load_as(fixtures().join(name).to_str().unwrap(), &cpu(), dtype).unwrap();
            assert_eq!(model.dtype(), arl_qwen3::device::burn_dtype(dtype));
            let f32_ref = reference(name);
            for ((ids, want), (_, exact)) in reference_file(&format!("{name}.logits-{tag}.safetensors")).into_iter().zip(f32_ref) {
                let logits = model.logits(std::slice::from_ref(&ids));
                assert_eq!(logits.dtype(), burn::tensor::DType::F32, "logits are f32 whatever the model's dtype");
                let got = to_vec(logits);
                let (ours, hf_noise) = (max_abs_diff(&got, &want), max_abs_diff(&want, &exact));
                let (ours_mean, hf_mean) = (mean_abs_diff(&got, &want), mean_abs_diff(&want, &exact));
                eprintln!(
                    "{name} {tag}, {} tokens: |ours − HF {tag}| max {ours:.2e} mean {ours_mean:.2e}; \
                     |HF {tag} − HF f32| max {hf_noise:.2e} mean {hf_mean:.2e}",
                    ids.len()
                );
                // The computation really is in half precision: it moved away from f32.
                assert!(max_abs_diff(&got, &exact) > 0.0, "{name} {tag}: logits equal the f32 ones");
                assert!(ours <= max_tol && ours_mean <= mean_tol, "{name} {tag}, {} tokens: max {ours}, mean {ours_mean}", ids.len());
            }
        }
    }
}

/// HF's input and logits of 300 tokens (recorded with the gradient references): attention runs
/// in chunks of `QUERY_CHUNK` (128) queries, so this is 2 full chunks and a partial one.
fn long_reference(name: &str) -> (Vec<u32>, Vec<f32>) {
    let bytes = std::fs::read(fixtures().join(format!("{name}.grads.safetensors"))).unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let ids = st.tensor("ids_300").unwrap().data().chunks_exact(8).map(|b| i64::from_le_bytes(b.try_into().unwrap()) as u32).collect();
    let logits = st.tensor("logits_300").unwrap().data().chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect();
    (ids, logits)
}

#[test]
fn logits_of_sequences_longer_than_an_attention_chunk_equal_hf_transformers() {
    const { assert!(300 > 2 * arl_qwen3::layers::QUERY_CHUNK) };
    for name in FIXTURES {
        let model = load(name);
        let (ids, want) = long_reference(name);
        let got = to_vec(model.logits(std::slice::from_ref(&ids)));
        let diff = max_abs_diff(&got, &want);
        eprintln!("{name}, {} tokens: max |logit diff| vs HF {diff:.2e}", ids.len());
        assert!(diff <= 1e-4, "{name}, {} tokens: max |logit diff| {diff}", ids.len());
    }
}

/// A prompt longer than an attention chunk, left-padded beside short ones: the prefill runs
/// chunks under a padding mask, decoding attends to it from the cache, and each sampled
/// token's log-probability is the teacher-forced score (checked against HF above).
#[test]
fn sampling_after_a_prompt_longer_than_an_attention_chunk_matches_the_scorer() {
    for name in ["qwen3-b", "llama"] {
        let model = load(name);
        let long = long_reference(name).0[..200].to_vec();
        let prompts = vec![vec![5, 17, 42], long, vec![250]];
        let gens = sample::generate(&model, &prompts, &full_length(6, 9)).unwrap();
        let seqs: Vec<Vec<u32>> = prompts.iter().zip(&gens).map(|(p, g)| p.iter().chain(&g.ids).copied().collect()).collect();
        let positions: Vec<Vec<usize>> = prompts.iter().zip(&seqs).map(|(p, s)| (p.len()..s.len()).collect()).collect();
        let lp = to_vec(score::score(&model, &seqs, Some(&positions), ScoreParams::default()).unwrap().logprobs);
        let width = seqs.iter().map(Vec::len).max().unwrap();
        let mut worst = 0.0f32;
        for (r, g) in gens.iter().enumerate() {
            assert_eq!(g.ids.len(), 6);
            for (i, &sampled) in g.sampler_logprobs.iter().enumerate() {
                worst = worst.max((lp[r * width + prompts[r].len() + i] - sampled).abs());
            }
        }
        eprintln!("{name}: long prompt, sampler vs scorer max |Δ logprob| {worst:.2e}");
        assert!(worst <= 1e-5, "{name}: long prompt, sampler vs scorer max |Δ logprob| {worst}");
    }
}

#[test]
fn batched_right_padded_logits_equal_single_sequence_logits() {
    let model = load("qwen3-a");
    let refs = reference("qwen3-a");
    let (short, long) = (&refs[1].0, &refs[2].0);
    let s = score::score(&model, &[long.clone(), short.clone()], None, ScoreParams::default()).unwrap();
    let alone = score::score(&model, std::slice::from_ref(short), None, ScoreParams::default()).unwrap();
    let batched = to_vec(s.logprobs.slice([1..2, 0..short.len()]));
    assert!(max_abs_diff(&batched, &to_vec(alone.logprobs)) < 1e-5);
}

fn prompts() -> Vec<Vec<u32>> {
    vec![vec![5, 17, 42], vec![7; 9], vec![250], vec![1, 2, 3, 4, 5, 6]]
}

fn full_length(max_new_tokens: usize, seed: u64) -> SamplingParams {
    SamplingParams { max_new_tokens, seed, stop_ids: Some(vec![]), ..Default::default() }
}

/// Sampled at T and scored at T, tokens get the sampler's log-probabilities; scored at 1
/// (what the trainer did before scores took a temperature) they do not.
#[test]
fn scores_at_the_sampling_temperature_equal_the_sampler_logprobs() {
    let model = load("qwen3-a");
    let prompts = prompts();
    for temperature in [0.7, 1.6] {
        let gens = sample::generate(&model, &prompts, &SamplingParams { temperature, ..full_length(12, 5) }).unwrap();
        let seqs: Vec<Vec<u32>> = prompts.iter().zip(&gens).map(|(p, g)| p.iter().chain(&g.ids).copied().collect()).collect();
        let positions: Vec<Vec<usize>> = prompts.iter().zip(&seqs).map(|(p, s)| (p.len()..s.len()).collect()).collect();
        let width = seqs.iter().map(Vec::len).max().unwrap();
        let gap = |params: ScoreParams| {
            let lp = to_vec(score::score(&model, &seqs, Some(&positions), params).unwrap().logprobs);
            let mut worst = 0.0f32;
            for (r, g) in gens.iter().enumerate() {
                assert_eq!(g.sampler_logprobs.len(), 12);
                for (i, &sampled) in g.sampler_logprobs.iter().enumerate() {
                    worst = worst.max((lp[r * width + prompts[r].len() + i] - sampled).abs());
                }
            }
            worst
        };
        let (at_t, at_1) = (gap(ScoreParams::at(temperature)), gap(ScoreParams::default()));
        eprintln!("T = {temperature}: sampler vs scorer max |Δ logprob| at T {at_t:.2e}, at 1 {at_1:.2e}");
        assert!(at_t <= 1e-5, "T = {temperature}: scored at T, max |Δ| {at_t}");
        assert!(at_1 > 1e-2, "T = {temperature}: scoring at 1 should not match ({at_1})");
    }
    let err = score::score(&model, &[vec![1, 2, 3]], None, ScoreParams::at(0.0)).err().unwrap().to_string();
    assert!(err.contains("temperature 0 must be finite and > 0"), "{err}");
}

/// `arl score --temperature` scores what `arl generate --temperature` sampled.
#[test]
fn arl_score_takes_the_sampling_temperature() {
    let dir = fixtures().join("qwen3-a");
    let model = dir.to_str().unwrap();
    let out = arl_tests::arl(&[
        "generate",
        "--model",
        model,
        "--prompt",
        "5,17,42",
        "--max-new-tokens",
        "6",
        "--temperature",
        "0.7",
        "--seed",
        "3",
    ])
    .unwrap();
    let g: serde_json::Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
    let ids: Vec<u32> = serde_json::from_value(g["ids"].clone()).unwrap();
    let sampled: Vec<f32> = serde_json::from_value(g["sampler_logprobs"].clone()).unwrap();
    let seq: Vec<u32> = [5, 17, 42].into_iter().chain(ids.iter().copied()).collect();
    let input = tmp("score-temperature");
    std::fs::create_dir_all(&input).unwrap();
    let file = input.join("tokens.json");
    std::fs::write(&file, serde_json::json!({ "sequences": [seq], "positions": [(3..3 + ids.len()).collect::<Vec<_>>()] }).to_string())
        .unwrap();
    let score = |t: &str| -> Vec<f32> {
        let out = arl_tests::arl(&["score", "--model", model, "--input", file.to_str().unwrap(), "--temperature", t]).unwrap();
        let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
        serde_json::from_value(doc["logprobs"][0].clone()).unwrap()
    };
    let (at_t, at_1) = (score("0.7"), score("1"));
    assert!(!sampled.is_empty() && at_t.len() == sampled.len(), "{at_t:?} vs {sampled:?}");
    assert!(max_abs_diff(&at_t, &sampled) <= 1e-5, "{at_t:?} vs {sampled:?}");
    assert!(max_abs_diff(&at_1, &sampled) > 1e-3);
    std::fs::remove_dir_all(&input).unwrap();
}

#[test]
fn sampler_logprobs_equal_teacher_forced_scores() {
    for name in ["qwen3-a", "qwen3-b", "llama"] {
        let model = load(name);
        let prompts = prompts();
        let gens = sample::generate(&model, &prompts, &full_length(12, 7)).unwrap();
        let seqs: Vec<Vec<u32>> = prompts.iter().zip(&gens).map(|(p, g)| p.iter().chain(&g.ids).copied().collect()).collect();
        let positions: Vec<Vec<usize>> = prompts.iter().zip(&seqs).map(|(p, s)| (p.len()..s.len()).collect()).collect();
        let scored = score::score(&model, &seqs, Some(&positions), ScoreParams::default()).unwrap();
        let width = seqs.iter().map(Vec::len).max().unwrap();
        let lp = to_vec(scored.logprobs);
        let mut worst = 0.0f32;
        for (r, g) in gens.iter().enumerate() {
            assert_eq!(g.ids.len(), 12);
            assert_eq!(g.finish, FinishReason::Length);
            for (i, &sampled) in g.sampler_logprobs.iter().enumerate() {
                worst = worst.max((lp[r * width + prompts[r].len() + i] - sampled).abs());
            }
        }
        eprintln!("{name}: sampler vs scorer max |Δ logprob| {worst:.2e}");
        assert!(worst <= 1e-5, "{name}: sampler vs scorer max |Δ logprob| {worst}");
    }
}

#[test]
fn generation_is_seeded_and_a_row_does_not_depend_on_its_batch() {
    let model = load("qwen3-b");
    let prompts = prompts();
    let a = sample::generate(&model, &prompts, &full_length(10, 3)).unwrap();
    let b = sample::generate(&model, &prompts, &full_length(10, 3)).unwrap();
    assert_eq!(a, b, "same seed, same samples");
    let c = sample::generate(&model, &prompts, &full_length(10, 4)).unwrap();
    assert_ne!(a, c, "another seed, other samples");
    // Row 1 (the longest prompt) decoded alone: same tokens; proves padding is masked.
    let mut alone = SamplingParams { ..full_length(10, 3) };
    alone.seed = 3 ^ 0x9E37_79B9_7F4A_7C15; // the stream row 1 of the batch used
    let single = sample::generate(&model, &prompts[1..2], &alone).unwrap();
    assert_eq!(single[0].ids, a[1].ids);
    assert!(max_abs_diff(&single[0].sampler_logprobs, &a[1].sampler_logprobs) < 1e-5);
}

#[test]
fn generation_stops_on_eos_and_at_max_new_tokens() {
    let model = load("qwen3-b"); // eos_token_id [2, 3] in config and generation_config
    assert_eq!(model.config.eos_token_ids, vec![2, 3]);
    let every_id: Vec<u32> = (0..300).collect();
    let params = SamplingParams { max_new_tokens: 5, stop_ids: Some(every_id), ..Default::default() };
    for g in sample::generate(&model, &prompts(), &params).unwrap() {
        assert_eq!((g.ids.len(), g.finish), (1, FinishReason::Stop));
    }
    let params = SamplingParams { max_new_tokens: 40, seed: 1, ..Default::default() };
    for g in sample::generate(&model, &prompts(), &params).unwrap() {
        let stopped = g.ids.iter().position(|id| [2, 3].contains(id));
        match g.finish {
            FinishReason::Stop => assert_eq!(stopped, Some(g.ids.len() - 1)),
            FinishReason::Length => assert_eq!((stopped, g.ids.len()), (None, 40)),
        }
    }
    let greedy = SamplingParams { temperature: 0.0, max_new_tokens: 6, stop_ids: Some(vec![]), ..Default::default() };
    let g = sample::generate(&model, &prompts()[..1], &greedy).unwrap();
    assert_eq!(g[0].sampler_logprobs, vec![0.0; 6]);
    let truncated = SamplingParams { top_k: Some(5), top_p: Some(0.9), temperature: 0.7, ..full_length(8, 2) };
    assert!(sample::generate(&model, &prompts(), &truncated).unwrap().iter().all(|g| g.ids.len() == 8));
}

#[test]
fn scoring_at_positions_matches_full_scoring_and_entropy_is_sane() {
    let model = load("qwen2");
    let seqs = vec![(0..20).map(|i| (i * 13 % 300) as u32).collect::<Vec<_>>(), vec![9, 8, 7, 6]];
    let full = score::score(&model, &seqs, None, ScoreParams::default().with_entropy(true)).unwrap();
    let some = score::score(&model, &seqs, Some(&[vec![3, 19], vec![1]]), ScoreParams::default().with_entropy(true)).unwrap();
    let (f, s) = (to_vec(full.logprobs), to_vec(some.logprobs));
    for (i, (a, b)) in f.iter().zip(&s).enumerate() {
        if [3, 19, 20 + 1].contains(&i) {
            assert!((a - b).abs() < 1e-5 && *b < 0.0, "position {i}: {a} vs {b}");
        } else {
            assert_eq!(*b, 0.0, "position {i} was not requested");
        }
    }
    let ent = to_vec(full.entropy.unwrap());
    assert!(ent[1] > 0.0 && ent[1] <= (300f32).ln() + 1e-4, "{}", ent[1]);
    assert_eq!(ent[0], 0.0, "position 0 is never scored");
    let err = score::score(&model, &seqs, Some(&[vec![0], vec![]]), ScoreParams::default()).err().unwrap().to_string();
    assert!(err.contains("position 0"), "{err}");
}

#[test]
fn scoring_on_an_autodiff_device_has_gradients() {
    let device = DispatchDevice::autodiff(cpu());
    let model: DispatchQwen3 = Qwen3::load_dir(&fixtures().join("qwen3-a"), &device).unwrap();
    let out = score::score(&model, &[vec![1, 2, 3, 4, 5]], Some(&[vec![3, 4]]), ScoreParams::default().with_entropy(true)).unwrap();
    let loss = out.logprobs.sum() + out.entropy.unwrap().sum();
    let grads = loss.backward();
    let q = model.layers[0].self_attn.qkv_proj.part(0);
    let g = q.merged.val().grad(&grads).expect("q_proj has a gradient").slice([0..q.weight.dims()[0], q.columns]);
    assert!(to_vec(g).iter().any(|x| *x != 0.0));
    let g = model.embed_tokens.val().grad(&grads).expect("embeddings have a gradient");
    assert!(to_vec(g).iter().any(|x| *x != 0.0));
}

#[test]
fn save_then_load_round_trips_bit_exactly() {
    for name in ["qwen3-a", "qwen3-b", "qwen2", "llama"] {
        let model = load(name);
        let dir = tmp(&format!("save-{name}"));
        model.save_dir(&dir).unwrap();
        let again = Qwen3::<Dispatch>::load_dir(&dir, &cpu()).unwrap();
        assert_eq!(again.config.eos_token_ids, model.config.eos_token_ids);
        let (a, b) = (model.hf_tensors(), again.hf_tensors());
        assert_eq!(a.len(), b.len());
        for ((na, sa, va), (nb, sb, vb)) in a.iter().zip(&b) {
            assert_eq!((na, sa), (nb, sb));
            assert!(va.iter().zip(vb).all(|(x, y)| x.to_bits() == y.to_bits()), "{name}: {na} changed");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

/// Copy a fixture so a test can break it.
fn broken_copy(name: &str, tag: &str, edit: impl Fn(&str) -> String) -> PathBuf {
    let dir = tmp(tag);
    std::fs::create_dir_all(&dir).unwrap();
    for f in std::fs::read_dir(fixtures().join(name)).unwrap() {
        let f = f.unwrap().path();
        std::fs::copy(&f, dir.join(f.file_name().unwrap())).unwrap();
    }
    let cfg = std::fs::read_to_string(dir.join("config.json")).unwrap();
    std::fs::write(dir.join("config.json"), edit(&cfg)).unwrap();
    dir
}

fn load_err(dir: &Path) -> String {
    Qwen3::<Dispatch>::load_dir(dir, &cpu()).expect_err("load must fail").to_string()
}

#[test]
fn load_errors_name_the_problem() {
    let dir = broken_copy("qwen2", "shape", |c| c.replace(r#""intermediate_size": 64"#, r#""intermediate_size": 65"#));
    let err = load_err(&dir);
    assert!(err.contains("model.layers.0.mlp.gate_proj.weight") && err.contains("[64, 32]") && err.contains("[65, 32]"), "{err}");

    let dir2 = broken_copy("qwen2", "arch", |c| c.replace("Qwen2ForCausalLM", "GPTNeoXForCausalLM").replace(r#""qwen2""#, r#""gpt_neox""#));
    let err = load_err(&dir2);
    assert!(err.contains("unsupported architecture `GPTNeoXForCausalLM`"), "{err}");

    std::fs::remove_file(dir.join("model.safetensors")).unwrap();
    std::fs::write(dir.join("config.json"), std::fs::read(fixtures().join("qwen2/config.json")).unwrap()).unwrap();
    let err = load_err(&dir);
    assert!(err.contains("model.safetensors") && err.contains("missing file"), "{err}");

    // A tensor the config requires but the file lacks: an untied head without lm_head.weight.
    std::fs::copy(fixtures().join("qwen2/model.safetensors"), dir.join("model.safetensors")).unwrap();
    let untied = std::fs::read_to_string(fixtures().join("qwen2/config.json"))
        .unwrap()
        .replace(r#""tie_word_embeddings": true"#, r#""tie_word_embeddings": false"#);
    std::fs::write(dir.join("config.json"), untied).unwrap();
    let err = load_err(&dir);
    assert!(err.contains("tensor `lm_head.weight` is missing"), "{err}");

    std::fs::remove_file(dir.join("config.json")).unwrap();
    let err = load_err(&dir);
    assert!(err.contains("config.json"), "{err}");
    for d in [dir, dir2] {
        std::fs::remove_dir_all(d).unwrap();
    }
}

#[test]
fn a_tied_checkpoint_loads_with_and_without_lm_head_weight() {
    // qwen3-a ships lm_head.weight although tied (like Qwen3-0.6B); qwen2 does not. Both pass
    // the parity test above; here: the tied head is the embedding.
    let model = load("qwen3-a");
    assert!(model.lm_head.is_none() && model.config.tie_word_embeddings);
    assert!(load("qwen2").lm_head.is_none());
    assert!(load("llama").lm_head.is_some());
}

#[test]
fn cli_score_prints_logprobs_at_every_or_the_requested_positions() {
    let dir = tmp("cli-score");
    std::fs::create_dir_all(&dir).unwrap();
    let model_dir = fixtures().join("qwen3-a");
    let model = model_dir.to_str().unwrap();
    let input = dir.join("tokens.json");
    std::fs::write(&input, r#"{"sequences": [[1, 2, 3, 4], [5, 6]]}"#).unwrap();
    let out = arl_tests::arl(&["score", "--model", model, "--backend", "cpu", "--input", input.to_str().unwrap()]).unwrap();
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    let rows = doc["logprobs"].as_array().unwrap();
    assert_eq!((rows[0].as_array().unwrap().len(), rows[1].as_array().unwrap().len()), (3, 1));
    let direct = to_vec(score::score(&load("qwen3-a"), &[vec![1, 2, 3, 4]], None, ScoreParams::default()).unwrap().logprobs);
    assert!((rows[0][2].as_f64().unwrap() as f32 - direct[3]).abs() < 1e-6);

    std::fs::write(&input, r#"{"sequences": [[1, 2, 3, 4]], "positions": [[3]]}"#).unwrap();
    let out = arl_tests::arl(&["score", "--model", model, "--input", input.to_str().unwrap(), "--entropy"]).unwrap();
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["logprobs"][0].as_array().unwrap().len(), 1);
    assert!((doc["logprobs"][0][0].as_f64().unwrap() - rows[0][2].as_f64().unwrap()).abs() < 1e-5);
    assert!(doc["entropy"][0][0].as_f64().unwrap() > 0.0);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn cli_generate_and_bench_gen_run_on_a_preset() {
    let out = arl_tests::arl(&["generate", "--model", "tiny-vocab512", "--prompt", "1,2,3", "--prompt", "[4 5]", "--max-new-tokens", "4"])
        .unwrap();
    let lines: Vec<serde_json::Value> = out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 2);
    assert!(lines.iter().all(|g| g["ids"].as_array().unwrap().len() == g["sampler_logprobs"].as_array().unwrap().len()));
    let out =
        arl_tests::arl(&["bench", "gen", "--model", "tiny-vocab512", "--batch", "2", "--prompt-len", "3", "--new-tokens", "3"]).unwrap();
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(doc["decode_tokens_per_s"].as_f64().unwrap() > 0.0 && doc["prefill_tokens_per_s"].as_f64().unwrap() > 0.0);
    // The warm-up generates as many tokens as the timed call (every KV length seen before it).
    assert_eq!(doc["warmup_new_tokens"], 3, "{doc}");
    let out = arl_tests::arl(&["bench", "ops", "--adds", "20", "--matmuls", "2", "--rows", "2"]).unwrap();
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    for key in ["us_per_add", "us_per_matmul"] {
        assert!(doc[key].as_f64().is_some_and(|us| us > 0.0 && us.is_finite()), "{key}: {doc}");
    }
    let out = arl_tests::arl(&["bench", "score", "--model", "tiny-vocab512", "--batch", "2", "--seq-len", "8", "--steps", "1"]).unwrap();
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(doc["tokens_per_s"].as_f64().unwrap() > 0.0);
    let lora =
        ["bench", "score", "--model", "tiny-vocab512", "--batch", "2", "--seq-len", "8", "--steps", "1", "--lora", "--lora-rank", "2"];
    let out = arl_tests::arl(&lora).unwrap();
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    let (all, trained) = (doc["params"].as_u64().unwrap(), doc["trainable_params"].as_u64().unwrap());
    assert!(doc["tokens_per_s"].as_f64().unwrap() > 0.0 && trained > 0 && trained < all / 10, "{doc}");
}

#[test]
fn cli_model_errors_are_one_clear_line() {
    let err = arl_tests::arl(&["generate", "--model", "arl-test/not-a-model", "--prompt", "1"]).unwrap_err();
    assert!(
        err.contains("arl-test/not-a-model") && err.contains("models--arl-test--not-a-model") && err.contains("huggingface-cli download"),
        "{err}"
    );
    let err = arl_tests::arl(&["generate", "--model", "tiny-vocab512", "--prompt", "hello"]).unwrap_err();
    assert!(err.contains("not a token id"), "{err}");
    let err = arl_tests::arl(&["generate", "--model", "tiny-vocab512", "--prompt", "999"]).unwrap_err();
    assert!(err.contains("outside the vocabulary"), "{err}");
    let err = arl_tests::arl(&["generate", "--model", "tiny-vocab512", "--backend", "metal", "--prompt", "1"]).unwrap_err();
    assert!(err.contains("unknown backend `metal`"), "{err}");
}

#[test]
fn presets_are_seeded_and_resolve_by_name() {
    let a = arl_qwen3::load("tiny-vocab512", &cpu()).unwrap().hf_tensors();
    let b = arl_qwen3::load("tiny-vocab512", &cpu()).unwrap().hf_tensors();
    assert!(a == b, "same preset, same weights");
    let tiny = arl_qwen3::load("tiny", &cpu()).unwrap();
    assert_eq!(tiny.config.vocab_size, 151_936);
    assert_eq!(tiny.config.eos_token_ids, vec![151_645, 151_643]);
    assert_ne!(tiny.config.head_dim, tiny.config.hidden_size / tiny.config.num_attention_heads);
}

#[test]
fn the_policy_samples_the_same_on_a_training_device_and_scores_with_gradients() {
    use arl_core::policy::Policy;
    let src = fixtures().join("qwen3-a");
    let mut plain = arl_qwen3::QwenPolicy::load(src.to_str().unwrap(), &cpu()).unwrap();
    let mut train = arl_qwen3::QwenPolicy::load(src.to_str().unwrap(), &DispatchDevice::autodiff(cpu())).unwrap();
    let params = full_length(6, 9);
    let a = plain.generate(&prompts(), &params).unwrap();
    let b = train.generate(&prompts(), &params).unwrap();
    assert_eq!(a, b);
    let seqs: Vec<Vec<u32>> = prompts().iter().zip(&b).map(|(p, g)| p.iter().chain(&g.ids).copied().collect()).collect();
    let scores = train.score(&seqs, None, ScoreParams::default()).unwrap();
    let grads = scores.logprobs.sum().backward();
    assert!(train.model.norm.weight.val().grad(&grads).is_some());
}
