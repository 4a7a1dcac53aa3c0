//! `arl sft` end to end on the bundled conversations (examples/sft, made by
//! scripts/fixtures/make_sft_examples.py) with the tiny preset and the real Qwen3 chat
//! template: the held-out loss goes down, full weights or LoRA; a run stopped after two
//! steps and resumed ends exactly where an uninterrupted run ends; the loss falls on the
//! assistant's tokens only; bad data is refused naming its line.

use std::path::{Path, PathBuf};

use arl_chat::HfChatCodec;
use arl_core::config::TrainOn;
use arl_tests::{arl, arl_status, qwen3_tokenizer_dir, scratch_dir};
use arl_train::sft::{parse_line, render};
use serde_json::Value;

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/sft")
}

fn data() -> String {
    examples().join("arithmetic.jsonl").display().to_string()
}

fn heldout() -> String {
    examples().join("arithmetic-heldout.jsonl").display().to_string()
}

/// `arl sft` on the bundled data with the tiny preset; `extra` flags last.
fn sft(out: &Path, extra: &[&str]) -> Result<String, String> {
    let (data, heldout, out) = (data(), heldout(), out.display().to_string());
    let mut args = vec![
        "sft",
        "--data",
        &data,
        "--heldout",
        &heldout,
        "--model",
        "tiny",
        "--batch-size",
        "8",
        "--lr",
        "3e-3",
        "--seed",
        "2",
        "--out",
        &out,
    ];
    args.extend_from_slice(extra);
    arl(&args)
}

fn results(out: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).expect("results.json")).unwrap()
}

#[test]
fn sft_lowers_the_held_out_loss_on_the_bundled_conversations() {
    qwen3_tokenizer_dir();
    let out = scratch_dir("sft-full");
    let log = sft(&out, &["--steps", "6"]).unwrap();
    assert!(log.contains("arl sft: data=") && log.contains("160 conversations") && log.contains("held out: 32 conversations"), "{log}");
    let r = results(&out);
    let (before, after) = (r["heldout_before"].as_f64().unwrap(), r["heldout_after"].as_f64().unwrap());
    eprintln!("held-out loss {before:.3} → {after:.3}");
    // A random 151936-way model starts near ln(151936) ≈ 11.9 per token.
    assert!(before > 10.0, "{before}");
    assert!(after < before - 1.0, "held-out loss {before} → {after}");
    let steps = r["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 6);
    assert!(steps.iter().all(|s| s["grad_norm"].as_f64().unwrap() > 0.0 && s["sequences"] == 8));
    assert_eq!(std::fs::read_to_string(out.join("metrics.jsonl")).unwrap().lines().count(), 6);
    let fin = out.join("checkpoints/final");
    assert!(fin.join("model.safetensors").is_file() && fin.join("tokenizer.json").is_file() && fin.join("optimizer.safetensors").is_file());
    // The SFT checkpoint is a model `arl run`/`arl eval` take as --model.
    assert!(arl_qwen3::load(fin.to_str().unwrap(), &arl_qwen3::cpu()).is_ok());
}

fn adapter_bytes(dir: &Path) -> Vec<u8> {
    std::fs::read(dir.join("adapter_model.safetensors")).unwrap()
}

#[test]
fn lora_sft_learns_and_resumes_exactly() {
    qwen3_tokenizer_dir();
    let lora = ["--lora", "--set", "lora.rank=4", "--set", "trainer.lr=1e-2"];
    let straight = scratch_dir("sft-lora-a");
    let mut args = lora.to_vec();
    args.extend(["--steps", "4"]);
    sft(&straight, &args).unwrap();
    let r = results(&straight);
    let (before, after) = (r["heldout_before"].as_f64().unwrap(), r["heldout_after"].as_f64().unwrap());
    eprintln!("LoRA held-out loss {before:.3} → {after:.3}");
    assert!(after < before - 0.2, "held-out loss {before} → {after}");
    let fin = straight.join("checkpoints/final");
    let mut files: Vec<String> = std::fs::read_dir(&fin).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    files.sort();
    assert!(!files.contains(&"model.safetensors".to_string()), "a LoRA checkpoint holds no base weights: {files:?}");
    assert!(files.contains(&"adapter_config.json".to_string()) && files.contains(&"optimizer.safetensors".to_string()), "{files:?}");

    // Two steps, then --resume to four: the same losses and the same final adapter.
    let resumed = scratch_dir("sft-lora-b");
    let mut two = lora.to_vec();
    two.extend(["--steps", "2"]);
    sft(&resumed, &two).unwrap();
    let mut four = lora.to_vec();
    four.extend(["--steps", "4", "--resume"]);
    let log = sft(&resumed, &four).unwrap();
    assert!(log.contains("after step 2"), "{log}");
    let (a, b) = (results(&straight), results(&resumed));
    let losses = |r: &Value| r["steps"].as_array().unwrap().iter().map(|s| s["loss"].as_f64().unwrap()).collect::<Vec<_>>();
    assert_eq!(losses(&a), losses(&b));
    assert_eq!(a["heldout_after"], b["heldout_after"]);
    assert_eq!(adapter_bytes(&fin), adapter_bytes(&resumed.join("checkpoints/final")));
    // The adapter checkpoint is a model too: its base comes from adapter_config.json.
    let ckpt = fin.to_str().unwrap().to_string();
    let model = arl_qwen3::load(&ckpt, &arl_qwen3::cpu()).unwrap();
    assert!(model.has_lora());
}

#[test]
fn the_loss_falls_on_the_assistants_tokens_as_the_template_renders_them() {
    let codec = HfChatCodec::load(&qwen3_tokenizer_dir()).unwrap().with_enable_thinking(Some(false));
    let line = r#"{"messages": [{"role": "system", "content": "Use the tools."}, {"role": "user", "content": "What is in a.py?"},
        {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "Read", "arguments": {"file_path": "a.py"}}}]},
        {"role": "tool", "content": "x = 1"}, {"role": "assistant", "content": "It sets x to 1."}],
        "tools": [{"type": "function", "function": {"name": "Read", "description": "Read a file.", "parameters": {"type": "object", "properties": {"file_path": {"type": "string"}}}}}]}"#;
    let ex = parse_line(&line.replace('\n', " "), 1).unwrap();
    let seq = render(&codec, &ex, TrainOn::Assistant).unwrap();
    let text = |keep: bool| -> String {
        let ids: Vec<u32> = seq.ids.iter().zip(&seq.mask).filter(|(_, m)| **m == keep).map(|(i, _)| *i).collect();
        arl_core::ChatCodec::decode(&codec, &ids).unwrap()
    };
    assert_eq!(
        text(true),
        "<tool_call>\n{\"name\": \"Read\", \"arguments\": {\"file_path\": \"a.py\"}}\n</tool_call><|im_end|>It sets x to 1.<|im_end|>"
    );
    // The whole sequence is the template's own text, turn by turn (token-in/token-out): the
    // prompt ends with the empty think block, and so does the prompt after the tool result.
    let all = arl_core::ChatCodec::decode(&codec, &seq.ids).unwrap();
    assert!(all.ends_with(
        "</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\nx = 1\n</tool_response><|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nIt sets x to 1.<|im_end|>"
    ), "{all}");
    // A single-turn conversation is exactly the template's rendering of it (without the `\n`
    // the template writes after the last <|im_end|>).
    let one = parse_line(r#"{"messages": [{"role": "user", "content": "What is 12 + 30?"}, {"role": "assistant", "content": "42"}]}"#, 1)
        .unwrap();
    let seq = render(&codec, &one, TrainOn::Assistant).unwrap();
    let full = codec.encode(&codec.render_typed(&one.messages, &[], false).unwrap()).unwrap();
    assert_eq!(seq.ids.as_slice(), &full[..full.len() - 1]);
    assert_eq!(seq.target_tokens(), 3, "`4`, `2` (Qwen3 splits digits) and <|im_end|>");
}

/// Two assistant messages in a row: the first turn ends and the next generation prompt opens
/// the second, both masked, as a rollout's empty observation would — exactly the template's
/// own rendering of the conversation (arl's ChatML template), never
/// `…One.<|im_end|>Two.<|im_end|>`, which neither the template nor a rollout produces. Qwen3's
/// own template renders the first turn differently once another follows it (its empty think
/// block goes), so there such a line is refused, as any turn that template would re-render.
#[test]
fn consecutive_assistant_turns_render_with_the_templates_boundary() {
    let qwen3 = HfChatCodec::load(&qwen3_tokenizer_dir()).unwrap().with_enable_thinking(Some(false));
    let chatml = qwen3.with_chatml_tools().unwrap();
    let line = r#"{"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "One."}, {"role": "assistant", "content": "Two."}]}"#;
    let ex = parse_line(line, 1).unwrap();
    let seq = render(&chatml, &ex, TrainOn::Assistant).unwrap();
    let text = |keep: bool| -> String {
        let ids: Vec<u32> = seq.ids.iter().zip(&seq.mask).filter(|(_, m)| **m == keep).map(|(i, _)| *i).collect();
        arl_core::ChatCodec::decode(&chatml, &ids).unwrap()
    };
    assert_eq!(text(true), "One.<|im_end|>Two.<|im_end|>");
    let full = chatml.encode(&chatml.render_typed(&ex.messages, &[], false).unwrap()).unwrap();
    assert_eq!(seq.ids.as_slice(), &full[..full.len() - 1], "{}", arl_core::ChatCodec::decode(&chatml, &seq.ids).unwrap());
    let all = arl_core::ChatCodec::decode(&chatml, &seq.ids).unwrap();
    assert!(all.ends_with("One.<|im_end|>\n<|im_start|>assistant\nTwo.<|im_end|>"), "{all}");
    let err = render(&qwen3, &ex, TrainOn::Assistant).unwrap_err().to_string();
    assert!(err.starts_with("chat template is not append-only here: adding an assistant turn changes what the template rendered"), "{err}");
}

#[test]
fn bad_sft_input_is_one_line_naming_the_file_line_and_problem() {
    qwen3_tokenizer_dir();
    let dir = scratch_dir("sft-bad");
    let file = dir.join("bad.jsonl");
    let good = r#"{"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}"#;
    std::fs::write(&file, format!("{good}\n\n{{\"prompt\": \"q\", \"completion\": \"a\"}}\n")).unwrap();
    let out = dir.join("run");
    let (f, o) = (file.display().to_string(), out.display().to_string());
    let (code, err) = arl_status(&["sft", "--data", &f, "--model", "tiny", "--out", &o]);
    let err = err.unwrap_err();
    assert_eq!(code, 2);
    assert_eq!(err, format!("SFT data {f}, line 3: not a conversation: no \"messages\" array (keys: prompt, completion)"));
    assert!(!out.exists(), "a refused start writes nothing");
    // Config keys: an unknown target module lists the model's linear layers; rank 0.
    std::fs::write(&file, format!("{good}\n{good}\n")).unwrap();
    let (code, err) = arl_status(&["sft", "--data", &f, "--out", &o, "--set", "lora.target_modules=[\"qkv\"]"]);
    assert_eq!(code, 2);
    assert_eq!(
        err.unwrap_err(),
        "config key `lora.target_modules`: `qkv` is not a linear layer of the model; valid: q_proj, k_proj, v_proj, o_proj, gate_proj, \
         up_proj, down_proj"
    );
    let (code, err) = arl_status(&["sft", "--data", &f, "--out", &o, "--lora", "--set", "lora.rank=0"]);
    assert_eq!((code, err.unwrap_err().as_str()), (2, "config key `lora.rank`: 0 is out of range; valid: ≥ 1"));
    let (code, err) = arl_status(&["sft", "--out", &o]);
    assert_eq!(code, 2);
    assert!(err.unwrap_err().starts_with("config key `sft.data`: is empty"));
    // Longer than sft.max_tokens: the line and the fix.
    let (code, err) = arl_status(&["sft", "--data", &f, "--model", "tiny", "--out", &o, "--set", "sft.max_tokens=5"]);
    let err = err.unwrap_err();
    assert_eq!(code, 2, "{err}");
    assert!(err.ends_with("line 1: 15 tokens, over sft.max_tokens = 5; raise sft.max_tokens or shorten it"), "{err}");
}
