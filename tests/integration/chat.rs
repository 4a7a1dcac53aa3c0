//! `arl render` against the HF parity fixture, and the token layer's load errors.

use std::path::{Path, PathBuf};

use arl_tests::{arl, qwen3_tokenizer_dir, scratch_dir};
use serde_json::Value;

fn fixture() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/chat/qwen3.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn write_json(dir: &Path, name: &str, value: &Value) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, serde_json::to_string(value).unwrap()).unwrap();
    path
}

#[test]
fn render_prints_hfs_text_and_ids() {
    let doc = fixture();
    let model = qwen3_tokenizer_dir();
    let dir = scratch_dir("render");
    for name in ["spec_2_2_two_calls_two_results", "reasoning_before_and_after_last_query", "plain_prompt"] {
        let case = doc["cases"].as_array().unwrap().iter().find(|c| c["name"] == name).unwrap();
        let messages = write_json(&dir, "messages.json", &case["messages"]);
        let mut args =
            vec!["render".to_string(), "--model".into(), model.display().to_string(), "--messages".into(), messages.display().to_string()];
        if case["tools"].is_array() {
            args.extend(["--tools".into(), write_json(&dir, "tools.json", &case["tools"]).display().to_string()]);
        }
        if case["add_generation_prompt"] == true {
            args.push("--add-generation-prompt".into());
        }
        if let Some(on) = case["enable_thinking"].as_bool() {
            args.extend(["--enable-thinking".into(), on.to_string()]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out: Value = serde_json::from_str(&arl(&args).unwrap()).unwrap();
        assert_eq!(out["text"], case["text"], "{name}");
        assert_eq!(out["ids"], case["ids"], "{name}");
    }
}

/// A model directory holding the real tokenizer.json and the given tokenizer_config.json.
fn model_dir(name: &str, config: Option<Value>) -> arl_tests::ScratchDir {
    let dir = scratch_dir(name);
    std::os::unix::fs::symlink(qwen3_tokenizer_dir().join("tokenizer.json"), dir.join("tokenizer.json")).unwrap();
    if let Some(config) = config {
        write_json(&dir, "tokenizer_config.json", &config);
    }
    dir
}

fn render_error(model: &Path, messages: &str) -> String {
    let file = model.join("messages.json");
    std::fs::write(&file, messages).unwrap();
    let err = arl(&["render", "--model", model.to_str().unwrap(), "--messages", file.to_str().unwrap()]).unwrap_err();
    assert_eq!(err.lines().count(), 1, "errors are one line: {err}");
    err
}

#[test]
fn a_missing_tokenizer_file_is_named() {
    let dir = scratch_dir("no-tokenizer");
    let err = render_error(&dir, "[]");
    let expected = format!("tokenizer file {}: not found (a model directory needs tokenizer.json)", dir.join("tokenizer.json").display());
    assert_eq!(err, expected);
}

#[test]
fn a_missing_template_is_named() {
    let dir = model_dir("no-template", Some(serde_json::json!({"eos_token": "<|im_end|>"})));
    let err = render_error(&dir, "[]");
    assert!(err.starts_with("chat template ") && err.contains("chat_template.jinja: not found, and "), "{err}");
}

#[test]
fn a_template_syntax_error_names_the_file_and_line() {
    let config = serde_json::json!({"eos_token": "<|im_end|>", "chat_template": "{% for m in messages %}\n{{ m.content }\n{% endfor %}"});
    let dir = model_dir("bad-syntax", Some(config));
    let err = render_error(&dir, "[]");
    assert!(
        err.starts_with(&format!("chat template {} has a syntax error: syntax error: ", dir.join("tokenizer_config.json").display())),
        "{err}"
    );
    assert!(err.contains("(in chat_template:2)"), "{err}");
}

#[test]
fn a_template_raising_gives_its_message() {
    let template = "{% for m in messages %}{% if m.role not in ['user', 'assistant'] %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{{ m.content }}{% endfor %}";
    let dir = model_dir("raises", Some(serde_json::json!({"eos_token": "<|im_end|>", "chat_template": template})));
    let err = render_error(&dir, r#"[{"role": "tool", "content": "x"}]"#);
    assert_eq!(err, "chat template refused the conversation: Only user and assistant roles are supported!");
}

#[test]
fn an_unknown_repo_id_says_where_it_looked() {
    let err = arl(&["render", "--model", "nobody/nothing-here", "--messages", "/dev/null"]).unwrap_err();
    assert!(err.contains("`nobody/nothing-here` is not a directory, a preset ("), "{err}");
    assert!(err.contains("looked in ") && err.contains("models--nobody--nothing-here/refs/main"), "{err}");
}
