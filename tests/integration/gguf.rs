//! GGUF import (arl-gguf) against HF transformers' own GGUF loader (tests/fixtures/gguf, made
//! by scripts/fixtures/make_gguf_fixtures.py): logits of tiny llama/qwen2/qwen3 files (K-quants,
//! Q8_0/Q4_0/Q4_1/Q5_0, F16, BF16, llama's permuted q/k rows), next-token log-probabilities of
//! the real SmolLM2-135M-Instruct, tokenizer ids on a corpus, chat template renders, arl's
//! tools template; and the errors for files arl cannot convert.

use std::path::{Path, PathBuf};

use arl_chat::HfChatCodec;
use arl_qwen3::{DispatchQwen3, Qwen3, cpu};
use arl_tests::{arl, scratch_dir, smollm2_dir};
use safetensors::SafeTensors;
use serde_json::Value;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/gguf")
}

fn json(name: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(fixtures().join(name)).unwrap()).unwrap()
}

fn ids(v: &Value) -> Vec<u32> {
    v.as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u32).collect()
}

/// `tiny-<arch>.gguf` converted into a scratch directory of the test `test`.
fn convert_tiny(arch: &str, test: &str) -> arl_tests::ScratchDir {
    let out = scratch_dir(&format!("gguf-{arch}-{test}"));
    arl_gguf::convert(&fixtures().join(format!("tiny-{arch}.gguf")), &out).unwrap_or_else(|e| panic!("{arch}: {e}"));
    out
}

fn log_softmax(row: &[f32]) -> Vec<f64> {
    let max = row.iter().fold(f32::NEG_INFINITY, |m, &x| m.max(x)) as f64;
    let lse = row.iter().map(|&x| (x as f64 - max).exp()).sum::<f64>().ln() + max;
    row.iter().map(|&x| x as f64 - lse).collect()
}

#[test]
fn tiny_gguf_files_give_hf_transformers_logits() {
    for arch in ["llama", "qwen2", "qwen3"] {
        let dir = convert_tiny(arch, "logits");
        let model: DispatchQwen3 = Qwen3::load_dir(&dir, &cpu()).unwrap();
        let doc = json(&format!("tiny-{arch}.json"));
        let bytes = std::fs::read(fixtures().join(format!("tiny-{arch}.logits.safetensors"))).unwrap();
        let st = SafeTensors::deserialize(&bytes).unwrap();
        for (i, seq) in doc["sequences"].as_array().unwrap().iter().enumerate() {
            let seq = ids(seq);
            let want: Vec<f32> = st
                .tensor(&format!("logits.{i}"))
                .unwrap()
                .data()
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
                .collect();
            let got = model.logits(std::slice::from_ref(&seq)).into_data().convert::<f32>().to_vec::<f32>().unwrap();
            assert_eq!(got.len(), want.len(), "{arch} seq {i}");
            let diff = got.iter().zip(&want).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
            let spread = want.iter().fold(0f32, |m, x| m.max(x.abs()));
            eprintln!("tiny-{arch}, {} tokens: max |logit diff| vs HF {diff:.2e} (logits up to {spread:.2})", seq.len());
            assert!(spread > 0.1, "{arch}: logits too small to test anything");
            assert!(diff <= 1e-4, "{arch} seq {i}: max |logit diff| {diff}");
        }
    }
}

/// ids with `add_special_tokens = True`, as the fixture's `tok(text)`.
fn check_tokenizer(dir: &Path, doc: &Value, what: &str) {
    let tokenizer = tokenizers::Tokenizer::from_file(dir.join("tokenizer.json")).unwrap();
    let corpus = doc["corpus"].as_array().unwrap();
    assert_eq!(corpus.len(), doc["ids"].as_array().unwrap().len());
    for (text, want) in corpus.iter().zip(doc["ids"].as_array().unwrap()) {
        let got = tokenizer.encode(text.as_str().unwrap(), true).unwrap().get_ids().to_vec();
        assert_eq!(got, ids(want), "{what}: {text}");
    }
}

/// Chat template renders (text and ids) of the model's own template.
fn check_renders(dir: &Path, doc: &Value, what: &str) {
    let codec = HfChatCodec::load(dir).unwrap();
    let renders = doc["renders"].as_array().unwrap();
    assert!(!renders.is_empty());
    for case in renders {
        let messages = case["messages"].as_array().unwrap();
        let text = codec.render(messages, None, case["add_generation_prompt"].as_bool().unwrap()).unwrap();
        assert_eq!(text, case["text"].as_str().unwrap(), "{what}: {messages:?}");
        assert_eq!(codec.encode(&text).unwrap(), ids(&case["ids"]), "{what}: {text:?}");
        // The path the trainer takes (environment text never parsed for control tokens) gives
        // HF's ids for these ordinary conversations too (issue #50).
        let add_generation_prompt = case["add_generation_prompt"].as_bool().unwrap();
        assert_eq!(codec.render_ids(messages, None, add_generation_prompt).unwrap(), ids(&case["ids"]), "{what}: {text:?}");
    }
}

#[test]
fn tiny_gguf_tokenizers_and_templates_equal_hf_transformers() {
    for arch in ["llama", "qwen2", "qwen3"] {
        let dir = convert_tiny(arch, "tokenizer");
        let doc = json(&format!("tiny-{arch}.json"));
        check_tokenizer(&dir, &doc, arch);
        check_renders(&dir, &doc, arch);
    }
}

#[test]
fn smollm2_tokenizer_and_template_equal_hf_transformers() {
    let doc = json("smollm2.json");
    check_tokenizer(&smollm2_dir(), &doc, "smollm2");
    check_renders(&smollm2_dir(), &doc, "smollm2");
}

#[test]
fn smollm2_log_probabilities_equal_hf_transformers() {
    let model: DispatchQwen3 = Qwen3::load_dir(&smollm2_dir(), &cpu()).unwrap();
    let doc = json("smollm2.json");
    let tokenizer = tokenizers::Tokenizer::from_file(smollm2_dir().join("tokenizer.json")).unwrap();
    let mut worst = 0f64;
    for case in doc["scored"].as_array().unwrap() {
        let seq = ids(&case["ids"]);
        assert_eq!(tokenizer.encode(case["text"].as_str().unwrap(), false).unwrap().get_ids(), &seq[..]);
        let want: Vec<f64> = case["logprobs"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
        let logits = model.logits(std::slice::from_ref(&seq)).into_data().convert::<f32>().to_vec::<f32>().unwrap();
        let vocab = logits.len() / seq.len();
        for t in 1..seq.len() {
            let lp = log_softmax(&logits[(t - 1) * vocab..t * vocab])[seq[t] as usize];
            let diff = (lp - want[t - 1]).abs();
            worst = worst.max(diff);
            assert!(diff <= 1e-4, "{:?} token {t}: logprob {lp} vs HF {}", case["text"], want[t - 1]);
        }
    }
    eprintln!("smollm2: max |logprob diff| vs HF transformers {worst:.2e}");
}

#[test]
fn smollm2_greedy_continuation_equals_hf_transformers() {
    let doc = json("smollm2.json");
    let prompt = ids(&doc["greedy_prompt_ids"]);
    let want = ids(&doc["greedy_ids"]);
    let prompt_arg = prompt.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
    let out = arl(&[
        "generate",
        "--model",
        "smollm2-135m",
        "--prompt",
        &prompt_arg,
        "--max-new-tokens",
        &want.len().to_string(),
        "--temperature",
        "0",
    ])
    .unwrap();
    let doc: Value = serde_json::from_str(out.trim().lines().last().unwrap()).unwrap();
    eprintln!("arl generate: {doc}");
    let got = ids(&doc["ids"]);
    assert_eq!(got, want, "greedy continuation of {prompt:?}");
}

#[test]
fn arls_tools_template_renders_as_hf_transformers_does() {
    let codec = HfChatCodec::load(&smollm2_dir()).unwrap();
    assert!(codec.ignores_tools().unwrap(), "SmolLM2's own template ignores tools");
    let codec = codec.with_chatml_tools().unwrap();
    assert!(!codec.ignores_tools().unwrap());
    for case in json("chatml-tools.json").as_array().unwrap() {
        let tools = case["tools"].as_array().map(|t| t.as_slice());
        let text = codec.render(case["messages"].as_array().unwrap(), tools, case["add_generation_prompt"].as_bool().unwrap()).unwrap();
        assert_eq!(text, case["text"].as_str().unwrap());
    }
    use arl_core::ChatCodec;
    let report = codec.self_check().unwrap();
    eprintln!("self-check with the tools template: {report}");
}

#[test]
fn a_gguf_path_is_a_model_source() {
    let path = fixtures().join("tiny-qwen2.gguf");
    let out =
        arl(&["generate", "--model", path.to_str().unwrap(), "--prompt", "20,21,22", "--max-new-tokens", "3", "--seed", "1"]).unwrap();
    assert!(out.contains("\"ids\""), "{out}");
    let dir = scratch_dir("gguf-render");
    let rendered = dir.join("m.json");
    std::fs::write(&rendered, r#"[{"role": "user", "content": "hi"}]"#).unwrap();
    let out = arl(&["render", "--model", path.to_str().unwrap(), "--messages", rendered.to_str().unwrap()]).unwrap();
    assert!(out.contains("<|im_start|>user"), "{out}");
}

/// A scratch directory holding `patched.gguf`: a copy of a tiny fixture with the bytes right
/// after the first occurrence of `after` overwritten by `to`.
fn patched(name: &str, after: &[u8], to: &[u8]) -> arl_tests::ScratchDir {
    let mut bytes = std::fs::read(fixtures().join(name)).unwrap();
    let at = bytes.windows(after.len()).position(|w| w == after).expect("pattern in the fixture") + after.len();
    bytes[at..at + to.len()].copy_from_slice(to);
    let dir = scratch_dir(&format!("gguf-patched-{}", to.len() + at));
    std::fs::write(dir.join("patched.gguf"), bytes).unwrap();
    dir
}

fn convert_error(gguf: &Path) -> String {
    let out = gguf.parent().unwrap().join("out");
    let err = arl(&["convert", gguf.to_str().unwrap(), "--out", out.to_str().unwrap()]).unwrap_err();
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(!out.exists(), "nothing half-written: {err}");
    let leftovers: Vec<_> = std::fs::read_dir(gguf.parent().unwrap()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(leftovers.len(), 1, "only the input is left: {leftovers:?}");
    err
}

#[test]
fn files_arl_cannot_convert_are_one_line_errors_that_write_nothing() {
    // An architecture arl has no model code for: general.architecture's value, a string (8).
    let mut key = 20u64.to_le_bytes().to_vec();
    key.extend(b"general.architecture");
    key.extend(8u32.to_le_bytes());
    key.extend(5u64.to_le_bytes());
    let err = convert_error(&patched("tiny-qwen2.gguf", &key, b"gemma").join("patched.gguf"));
    assert!(err.contains("architecture `gemma` is not supported (supported: llama, qwen2, qwen3)"), "{err}");

    // A tokenizer arl cannot build (a sentencepiece vocabulary).
    let mut key = 20u64.to_le_bytes().to_vec();
    key.extend(b"tokenizer.ggml.model");
    key.extend(8u32.to_le_bytes());
    key.extend(4u64.to_le_bytes());
    let err = convert_error(&patched("tiny-qwen2.gguf", &key, b"bert").join("patched.gguf"));
    assert!(err.contains("tokenizer model `bert`") && err.contains("supported: gpt2"), "{err}");

    // A quantization type arl cannot read (IQ2_XXS = 16): the tensor table entry of
    // blk.0.attn_q.weight is name, 2 dims, [64, 64], type.
    let name = b"blk.0.attn_q.weight";
    let mut entry = (name.len() as u64).to_le_bytes().to_vec();
    entry.extend(name);
    entry.extend(2u32.to_le_bytes());
    entry.extend(64u64.to_le_bytes());
    entry.extend(64u64.to_le_bytes());
    let err = convert_error(&patched("tiny-qwen2.gguf", &entry, &16u32.to_le_bytes()).join("patched.gguf"));
    assert!(err.contains("ggml type id 16 is not supported") && err.contains("Q4_K"), "{err}");

    // A truncated file.
    let dir = scratch_dir("gguf-truncated");
    let bytes = std::fs::read(fixtures().join("tiny-qwen2.gguf")).unwrap();
    for cut in [bytes.len() - 100, 2000, 30] {
        let path = dir.join("patched.gguf");
        std::fs::write(&path, &bytes[..cut]).unwrap();
        let err = convert_error(&path);
        assert!(err.contains("truncated"), "{cut}: {err}");
    }

    // Not a GGUF file at all.
    let path = dir.join("patched.gguf");
    std::fs::write(&path, b"PK\x03\x04 a zip, say").unwrap();
    assert!(convert_error(&path).contains("does not start with the GGUF magic"));
}

#[test]
fn convert_refuses_a_non_empty_output_directory() {
    let dir = scratch_dir("gguf-nonempty");
    std::fs::write(dir.join("keep.txt"), "mine").unwrap();
    let gguf = fixtures().join("tiny-qwen3.gguf");
    let err = arl(&["convert", gguf.to_str().unwrap(), "--out", dir.to_str().unwrap()]).unwrap_err();
    assert!(err.contains("not empty"), "{err}");
    assert_eq!(std::fs::read_to_string(dir.join("keep.txt")).unwrap(), "mine");
}
