//! LoRA adapters against PyPI `peft` (tests/fixtures/lora, made by
//! scripts/fixtures/make_lora_fixtures.py): PEFT-made adapters give PEFT's logits in arl,
//! new adapters start as PEFT initializes them, arl writes PEFT's file layout, a LoRA
//! trainer freezes the base, checkpoints only the adapter and its optimizer state and resumes
//! exactly, `arl merge` writes full weights, and adapters that do not fit are refused.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use arl_core::config::LoraConfig;
use arl_core::policy::{Policy, ScoreParams, TrainablePolicy};
use arl_optim::OptimConfig;
use arl_qwen3::{DType, QwenTrainer, TrainSetup, cpu};
use burn::Dispatch;
use burn::tensor::Tensor;
use safetensors::SafeTensors;

/// (adapter fixture, base fixture).
const ADAPTERS: [(&str, &str); 4] =
    [("qwen3-a-qv", "qwen3-a"), ("qwen3-b-rslora", "qwen3-b"), ("llama-layer1", "llama"), ("qwen2-all", "qwen2")];

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

fn base(name: &str) -> String {
    fixtures().join("qwen3").join(name).display().to_string()
}

fn adapter(name: &str) -> PathBuf {
    fixtures().join("lora").join(name)
}

fn to_vec<const D: usize>(t: Tensor<Dispatch, D>) -> Vec<f32> {
    t.into_data().convert::<f32>().to_vec::<f32>().unwrap()
}

fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}

/// (ids, logits) per recorded input of a safetensors file written by a fixture script.
fn recorded(path: &Path) -> Vec<(Vec<u32>, Vec<f32>)> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let mut lens: Vec<usize> = st.names().iter().filter_map(|n| n.strip_prefix("ids_")?.parse().ok()).collect();
    lens.sort();
    lens.iter()
        .map(|n| {
            let ids = st.tensor(&format!("ids_{n}")).unwrap();
            let ids = ids.data().chunks_exact(8).map(|b| i64::from_le_bytes(b.try_into().unwrap()) as u32).collect();
            let lg = st.tensor(&format!("logits_{n}")).unwrap();
            (ids, lg.data().chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect())
        })
        .collect()
}

fn tensor_names(dir: &Path) -> BTreeSet<String> {
    let bytes = std::fs::read(dir.join("adapter_model.safetensors")).unwrap();
    SafeTensors::deserialize(&bytes).unwrap().names().into_iter().map(str::to_string).collect()
}

#[test]
fn peft_made_adapters_give_peft_logits() {
    for (tag, name) in ADAPTERS {
        let model = arl_qwen3::load_adapted(&base(name), Some(&adapter(tag)), &cpu(), DType::F32).unwrap_or_else(|e| panic!("{tag}: {e}"));
        let plain = arl_qwen3::load(&base(name), &cpu()).unwrap();
        for (ids, want) in recorded(&fixtures().join("lora").join(format!("{tag}.logits.safetensors"))) {
            let got = to_vec(model.logits(std::slice::from_ref(&ids)));
            let diff = max_abs_diff(&got, &want);
            let moved = max_abs_diff(&to_vec(plain.logits(std::slice::from_ref(&ids))), &want);
            eprintln!("{tag}, {} tokens: max |logit diff| vs PEFT {diff:.2e} (the adapter moves logits by {moved:.2})", ids.len());
            assert!(diff <= 1e-4, "{tag}, {} tokens: max |logit diff| {diff}", ids.len());
            if ids.len() > 1 {
                assert!(moved > 0.05, "{tag}: the adapter barely changes the logits ({moved}), so this tests nothing");
            }
        }
    }
}

#[test]
fn an_adapter_directory_as_model_loads_its_base() {
    // arl's LoRA checkpoints are adapter-only directories naming their base.
    let dir = arl_tests::scratch_dir("adapter-as-model");
    let src = adapter("qwen3-a-qv");
    for f in ["adapter_model.safetensors", "adapter_config.json"] {
        std::fs::copy(src.join(f), dir.join(f)).unwrap();
    }
    let mut config: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.join("adapter_config.json")).unwrap()).unwrap();
    config["base_model_name_or_path"] = base("qwen3-a").into();
    std::fs::write(dir.join("adapter_config.json"), config.to_string()).unwrap();
    let via_dir = arl_qwen3::load(dir.to_str().unwrap(), &cpu()).unwrap();
    let explicit = arl_qwen3::load_adapted(&base("qwen3-a"), Some(&src), &cpu(), DType::F32).unwrap();
    let ids = vec![vec![5u32, 6, 7, 100]];
    assert_eq!(to_vec(via_dir.logits(&ids)), to_vec(explicit.logits(&ids)));
    let err = arl_qwen3::load_adapted(dir.to_str().unwrap(), Some(&src), &cpu(), DType::F32).unwrap_err().to_string();
    assert!(err.contains("is an adapter directory itself, and --adapter"), "{err}");
}

#[test]
fn new_adapters_start_as_peft_initializes_them() {
    let init: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(fixtures().join("lora/init.json")).unwrap()).unwrap();
    let mut model = arl_qwen3::load(&base("qwen3-a"), &cpu()).unwrap();
    // r = 64 as the recorded PEFT draws; q_proj has fan-in 64 (hidden), down_proj 96.
    model.attach_lora(&LoraConfig { rank: 64, ..LoraConfig::default() }, 3).unwrap();
    for (module, fan_in) in [("q_proj", "64"), ("down_proj", "96")] {
        let layer = &model.layers[1];
        let lora = if module == "q_proj" { &layer.self_attn.qkv_proj.loras[0] } else { &layer.mlp.down_proj.lora }.as_ref().unwrap();
        let (a, b) = lora.hf_data();
        let peft = &init[fan_in];
        let (bound, peft_max, peft_std) =
            (peft["bound"].as_f64().unwrap(), peft["max_abs"].as_f64().unwrap(), peft["std"].as_f64().unwrap());
        let max = a.iter().fold(0.0f64, |m, x| m.max(x.abs() as f64));
        let mean = a.iter().map(|&x| x as f64).sum::<f64>() / a.len() as f64;
        let std = (a.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / (a.len() - 1) as f64).sqrt();
        eprintln!("{module}: arl max |A| {max:.5} std {std:.5}; PEFT max {peft_max:.5} std {peft_std:.5} (bound {bound:.5})");
        assert!(max <= bound && max > 0.98 * bound, "{module}: max |A| {max} vs bound {bound}");
        assert!((std / peft_std - 1.0).abs() < 0.05, "{module}: std {std} vs PEFT's {peft_std}");
        assert!(b.iter().all(|&x| x == 0.0) && peft["b_max_abs"].as_f64() == Some(0.0), "B starts at zero");
    }
}

#[test]
fn arl_writes_peft_key_names_and_config_and_reads_them_back() {
    let mut model = arl_qwen3::load(&base("qwen3-a"), &cpu()).unwrap();
    let config = LoraConfig {
        rank: 4,
        alpha: 8.0,
        target_modules: vec!["q_proj".into(), "v_proj".into(), "down_proj".into()],
        ..LoraConfig::default()
    };
    model.attach_lora(&config, 1).unwrap();
    let dir = arl_tests::scratch_dir("arl-adapter");
    model.save_adapter(&dir, Some("tests/fixtures/qwen3/qwen3-a")).unwrap();
    // The same tensor names PEFT wrote for the same targets, with the same shapes.
    let peft = adapter("qwen3-a-qv");
    assert_eq!(tensor_names(&dir), tensor_names(&peft));
    let ours: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.join("adapter_config.json")).unwrap()).unwrap();
    let theirs: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(peft.join("adapter_config.json")).unwrap()).unwrap();
    for (key, value) in ours.as_object().unwrap() {
        assert!(theirs.get(key).is_some(), "adapter_config.json key `{key}` is not one PEFT writes");
        if ["r", "lora_alpha", "peft_type", "bias", "use_rslora", "use_dora", "base_model_name_or_path"].contains(&key.as_str()) {
            assert_eq!(
                value.as_f64().map(|v| v.to_string()).unwrap_or(value.to_string()),
                {
                    let t = &theirs[key];
                    t.as_f64().map(|v| v.to_string()).unwrap_or(t.to_string())
                },
                "{key}"
            );
        }
    }
    let mut targets: Vec<String> = ours["target_modules"].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_string()).collect();
    targets.sort();
    assert_eq!(targets, ["down_proj", "q_proj", "v_proj"]);
    // Reading back gives the same model.
    let back = arl_qwen3::load_adapted(&base("qwen3-a"), Some(&dir), &cpu(), DType::F32).unwrap();
    let ids = vec![vec![9u32, 8, 7, 6, 5]];
    assert_eq!(to_vec(back.logits(&ids)), to_vec(model.logits(&ids)));
}

fn lora_setup(rank: u32) -> TrainSetup {
    TrainSetup { lora: Some(LoraConfig { rank, alpha: 16.0, ..LoraConfig::default() }), seed: 4, ..TrainSetup::default() }
}

/// One cross-entropy step on a fixed sequence.
fn ce_step(p: &mut QwenTrainer, seq: &[u32], lr: f64) {
    let lp = p.score_with_grad(&[seq.to_vec()], None, ScoreParams::default()).unwrap().logprobs;
    p.backward(lp.mean().neg().reshape([1])).unwrap();
    let step = p.step(lr).unwrap();
    assert!(step.grad_norm > 0.0 && !step.non_finite, "{step:?}");
}

fn base_weights(p: &QwenTrainer) -> Vec<f32> {
    let m = p.model();
    let mut v = to_vec(m.layers[0].self_attn.qkv_proj.part(0).weight);
    v.extend(to_vec(m.embed_tokens.val()));
    v
}

#[test]
fn a_lora_trainer_freezes_the_base_and_checkpoints_only_the_adapter() {
    let source = base("qwen3-a");
    let mut p = QwenTrainer::load_setup(&source, &cpu(), OptimConfig::default(), &lora_setup(4)).unwrap();
    let (total, trainable) = p.param_counts();
    let c = p.model().config.clone();
    let per_layer = 4 * (c.hidden_size + c.num_attention_heads * c.head_dim) // q
        + 2 * 4 * (c.hidden_size + c.num_key_value_heads * c.head_dim) // k, v
        + 4 * (c.num_attention_heads * c.head_dim + c.hidden_size) // o
        + 3 * 4 * (c.hidden_size + c.intermediate_size); // gate, up, down
    assert_eq!(trainable, c.num_hidden_layers * per_layer, "only A and B train");
    assert!(total > 10 * trainable);
    let frozen = base_weights(&p);
    let seq: Vec<u32> = (0..20u32).map(|i| (i * 31 + 7) % 300).collect();
    let before = to_vec(p.score(std::slice::from_ref(&seq), None, ScoreParams::default()).unwrap().logprobs);
    for _ in 0..3 {
        ce_step(&mut p, &seq, 1e-2);
    }
    assert_eq!(base_weights(&p), frozen, "the base did not move");
    let after = to_vec(p.score(std::slice::from_ref(&seq), None, ScoreParams::default()).unwrap().logprobs);
    assert!(after.iter().sum::<f32>() > before.iter().sum::<f32>() + 0.1, "the adapters learned the sequence");

    let dir = arl_tests::scratch_dir("lora-ckpt");
    p.save_state(&dir).unwrap();
    let mut files: Vec<String> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    files.sort();
    assert_eq!(files, ["adapter_config.json", "adapter_model.safetensors", "optimizer.safetensors"], "no base weights");
    let opt = std::fs::read(dir.join("optimizer.safetensors")).unwrap();
    let opt = SafeTensors::deserialize(&opt).unwrap();
    let adapters = 7 * c.num_hidden_layers;
    assert_eq!(opt.names().len(), 2 * 2 * adapters, "two moments of A and of B per adapter, nothing of the base");
    let saved: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.join("adapter_config.json")).unwrap()).unwrap();
    assert_eq!(saved["base_model_name_or_path"].as_str(), Some(Path::new(&source).canonicalize().unwrap().to_str().unwrap()));

    // Resume: a fresh trainer (new adapters, new ids) restored from the checkpoint continues
    // exactly as the uninterrupted one.
    let mut resumed = QwenTrainer::load_setup(&source, &cpu(), OptimConfig::default(), &lora_setup(4)).unwrap();
    resumed.load_state(&dir).unwrap();
    for _ in 0..2 {
        ce_step(&mut p, &seq, 1e-2);
        ce_step(&mut resumed, &seq, 1e-2);
    }
    let straight = to_vec(p.score(std::slice::from_ref(&seq), None, ScoreParams::default()).unwrap().logprobs);
    let again = to_vec(resumed.score(std::slice::from_ref(&seq), None, ScoreParams::default()).unwrap().logprobs);
    assert_eq!(straight, again);
    // Another rank does not fit the checkpoint, and says so.
    let mut other = QwenTrainer::load_setup(&source, &cpu(), OptimConfig::default(), &lora_setup(8)).unwrap();
    let err = other.load_state(&dir).unwrap_err().to_string();
    assert!(err.contains("has r = 4, but lora.rank = 8"), "{err}");
}

#[test]
fn a_bf16_base_trains_f32_adapters() {
    let setup = TrainSetup { dtype: DType::Bf16, ..lora_setup(4) };
    let mut p = QwenTrainer::load_setup(&base("qwen3-a"), &cpu(), OptimConfig::default(), &setup).unwrap();
    let m = p.model();
    assert_eq!(m.dtype(), burn::tensor::DType::BF16);
    let lora = m.layers[0].self_attn.qkv_proj.loras[0].as_ref().unwrap();
    assert_eq!((lora.a.val().dtype(), lora.b.val().dtype()), (burn::tensor::DType::F32, burn::tensor::DType::F32));
    let seq: Vec<u32> = (0..16u32).map(|i| (i * 13 + 2) % 300).collect();
    ce_step(&mut p, &seq, 1e-2);
    let lora = p.model().layers[0].self_attn.qkv_proj.loras[0].as_ref().unwrap();
    assert_eq!(lora.b.val().dtype(), burn::tensor::DType::F32, "still f32 after a step");
    assert!(to_vec(lora.b.val()).iter().any(|&x| x != 0.0), "B moved");
}

#[test]
fn an_adapter_merged_into_the_weights_trains_as_a_full_model() {
    let setup = TrainSetup { adapter: Some(adapter("qwen3-a-qv")), ..TrainSetup::default() };
    let p = QwenTrainer::load_setup(&base("qwen3-a"), &cpu(), OptimConfig::default(), &setup).unwrap();
    assert!(!p.model().has_lora() && p.lora().is_none());
    let (total, trainable) = p.param_counts();
    assert_eq!(total, trainable);
    let (ids, want) = recorded(&fixtures().join("lora/qwen3-a-qv.logits.safetensors")).pop().unwrap();
    let got = to_vec(p.model().logits(&[ids]));
    assert!(max_abs_diff(&got, &want) <= 1e-4);
}

#[test]
fn arl_merge_writes_full_weights_with_the_adapters_logits() {
    let out = arl_tests::scratch_dir("merged");
    let adapter_dir = adapter("llama-layer1");
    let line =
        arl_tests::arl(&["merge", "--model", &base("llama"), "--adapter", adapter_dir.to_str().unwrap(), "--out", out.to_str().unwrap()])
            .unwrap();
    assert!(line.contains("merged 7 adapters"), "{line}");
    assert!(out.join("model.safetensors").is_file() && out.join("config.json").is_file());
    assert!(!out.join("adapter_config.json").exists());
    let merged = arl_qwen3::Qwen3::<Dispatch>::load_dir(&out, &cpu()).unwrap();
    assert!(!merged.has_lora());
    for (ids, want) in recorded(&fixtures().join("lora/llama-layer1.logits.safetensors")) {
        let diff = max_abs_diff(&to_vec(merged.logits(std::slice::from_ref(&ids))), &want);
        assert!(diff <= 1e-4, "merged vs PEFT: {diff}");
    }
}

#[test]
fn adapters_that_do_not_fit_are_refused_naming_the_tensor() {
    // qwen3-a's adapter (hidden 64) on qwen3-b (hidden 48).
    let err = arl_qwen3::load_adapted(&base("qwen3-b"), Some(&adapter("qwen3-a-qv")), &cpu(), DType::F32).unwrap_err().to_string();
    assert!(
        err.contains(
            "tensor `base_model.model.model.layers.0.mlp.down_proj.lora_A.weight` has shape [4, 96], but the base model's \
                      `model.layers.0.mlp.down_proj` needs [4, 80]"
        ) && err.contains("made for another base model (its adapter_config.json names base model `tests/fixtures/qwen3/qwen3-a`)"),
        "{err}"
    );
    // qwen3-b has 3 layers, qwen2 2: layer 2 is not there.
    let err = arl_qwen3::load_adapted(&base("qwen2"), Some(&adapter("qwen3-b-rslora")), &cpu(), DType::F32).unwrap_err().to_string();
    assert!(err.contains("has shape") || err.contains("which this base model does not have"), "{err}");
    // What arl does not compute is refused, not approximated.
    let dir = arl_tests::scratch_dir("dora");
    for f in ["adapter_model.safetensors", "adapter_config.json"] {
        std::fs::copy(adapter("qwen3-a-qv").join(f), dir.join(f)).unwrap();
    }
    let cfg = std::fs::read_to_string(dir.join("adapter_config.json")).unwrap().replace("\"use_dora\": false", "\"use_dora\": true");
    std::fs::write(dir.join("adapter_config.json"), cfg).unwrap();
    let err = arl_qwen3::load_adapted(&base("qwen3-a"), Some(&dir), &cpu(), DType::F32).unwrap_err().to_string();
    assert!(err.ends_with("use_dora is true; arl computes plain LoRA, not DoRA"), "{err}");
}

#[test]
fn sampling_and_scoring_use_the_unmerged_adapter() {
    let policy = arl_qwen3::QwenPolicy::load_adapted(&base("qwen3-a"), Some(&adapter("qwen3-a-qv")), &cpu(), DType::F32).unwrap();
    assert!(policy.model.has_lora());
    let mut policy = policy;
    let params = arl_core::policy::SamplingParams { max_new_tokens: 6, seed: 3, stop_ids: Some(vec![]), ..Default::default() };
    let gens = policy.generate(&[vec![1, 2, 3]], &params).unwrap();
    let mut seq = vec![1u32, 2, 3];
    seq.extend(&gens[0].ids);
    let positions: Vec<usize> = (3..seq.len()).collect();
    let scored = to_vec(policy.score(&[seq.clone()], Some(std::slice::from_ref(&positions)), ScoreParams::default()).unwrap().logprobs);
    for (k, &t) in positions.iter().enumerate() {
        assert!((scored[t] - gens[0].sampler_logprobs[k]).abs() < 1e-5, "token {t}: {} vs {}", scored[t], gens[0].sampler_logprobs[k]);
    }
}

#[test]
fn dropout_acts_only_in_the_gradient_pass() {
    let seq: Vec<u32> = (0..16u32).map(|i| (i * 7 + 3) % 300).collect();
    let trainer = |dropout: f64| {
        let mut setup = lora_setup(4);
        setup.lora.as_mut().unwrap().dropout = dropout;
        let mut p = QwenTrainer::load_setup(&base("qwen3-a"), &cpu(), OptimConfig::default(), &setup).unwrap();
        ce_step(&mut p, &seq, 5e-2); // B ≠ 0, so the adapters' input matters
        p
    };
    let gap = |p: &QwenTrainer| {
        let plain = to_vec(p.score(std::slice::from_ref(&seq), None, ScoreParams::default()).unwrap().logprobs);
        let again = to_vec(p.score(std::slice::from_ref(&seq), None, ScoreParams::default()).unwrap().logprobs);
        assert_eq!(plain, again, "no dropout without gradients");
        let grad = to_vec(p.score_with_grad(std::slice::from_ref(&seq), None, ScoreParams::default()).unwrap().logprobs);
        max_abs_diff(&plain, &grad)
    };
    assert!(gap(&trainer(0.0)) < 1e-5);
    assert!(gap(&trainer(0.5)) > 1e-3, "dropout 0.5 changes the gradient pass");
}

#[test]
fn gradient_checkpointing_takes_the_same_lora_step() {
    let seq: Vec<u32> = (0..16u32).map(|i| (i * 11 + 5) % 300).collect();
    let run = |gradient_checkpointing: bool| {
        let setup = TrainSetup { gradient_checkpointing, ..lora_setup(4) };
        let mut p = QwenTrainer::load_setup(&base("qwen3-a"), &cpu(), OptimConfig::default(), &setup).unwrap();
        for _ in 0..2 {
            ce_step(&mut p, &seq, 1e-2);
        }
        to_vec(p.score(std::slice::from_ref(&seq), None, ScoreParams::default()).unwrap().logprobs)
    };
    let (plain, checkpointed) = (run(false), run(true));
    assert!(max_abs_diff(&plain, &checkpointed) < 1e-5, "{}", max_abs_diff(&plain, &checkpointed));
}

/// With LoRA dropout the gradient pass is random, so the update takes the old
/// log-probabilities and the metrics of the policy before it from the no-grad pass (no
/// dropout) for every minibatch, the first too, as peers compute old log-probabilities: the
/// sampler–trainer gap and the entropy are those of one no-grad scoring of every episode, and
/// the first minibatch's ratios are π_dropout/π rather than 1.
#[test]
fn with_dropout_the_old_logprobs_and_the_metrics_before_the_update_have_none() {
    use arl_train::update::{UpdateOptions, recompute, update};
    let (loss, _) = crate::trainer::grpo();
    let mut setup = lora_setup(4);
    setup.lora.as_mut().unwrap().dropout = 0.5;
    let mut p = QwenTrainer::load_setup(&base("qwen3-a"), &cpu(), OptimConfig::default(), &setup).unwrap();
    assert!(p.dropout_in_gradient_pass());
    ce_step(&mut p, &(0..16u32).map(|i| (i * 7 + 3) % 300).collect::<Vec<_>>(), 5e-2); // B ≠ 0
    // Four episodes of 4 prompt and 8 policy tokens; their sampler log-probabilities are the
    // no-grad scores, so the gap before the update is 0 up to rounding.
    let (prompt, len) = (4usize, 12usize);
    let seqs: Vec<Vec<u32>> = (0..4u32).map(|k| (0..len as u32).map(|i| (i * 13 + k * 29 + 1) % 300).collect()).collect();
    let positions: Vec<Vec<usize>> = seqs.iter().map(|_| (prompt..len).collect()).collect();
    let plain = to_vec(p.score(&seqs, Some(&positions), ScoreParams::at(1.0)).unwrap().logprobs);
    let episodes: Vec<arl_core::Episode> = seqs
        .iter()
        .enumerate()
        .map(|(r, ids)| arl_core::Episode {
            task_id: format!("t{r}"),
            group: r / 2,
            ids: ids.clone(),
            policy_mask: (0..len).map(|t| t >= prompt).collect(),
            sampler_logprobs: (0..len).map(|t| if t >= prompt { plain[r * len + t] } else { 0.0 }).collect(),
            turn_ids: (0..len).map(|t| if t >= prompt { 0 } else { -1 }).collect(),
            ..Default::default()
        })
        .collect();
    let before = recompute(&p, &episodes, 4, ScoreParams::at(1.0).with_entropy(true)).unwrap();
    let opts = UpdateOptions { minibatches: 2, lr: 1e-3, ..UpdateOptions::default() };
    let m = update(&mut p, loss.as_ref(), &episodes, &[1.0, -1.0, 1.0, -1.0], &opts).unwrap();
    assert_eq!((m.optimizer_steps, m.policy_tokens), (2, 4 * (len - prompt)));
    assert!(m.logprob_gap_max < 1e-5, "the gap before the update has no dropout in it: max {}", m.logprob_gap_max);
    assert!((m.entropy.unwrap() - before.entropy_mean.unwrap()).abs() < 1e-5, "{:?} vs {:?}", m.entropy, before.entropy_mean);
    let first = &m.minibatch_metrics[0];
    assert!(first.ratio_max > 1.0 + 1e-4 || first.ratio_min < 1.0 - 1e-4, "π_dropout/π: {first:?}");
}
