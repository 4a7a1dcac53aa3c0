//! `arl tasks --transcripts`: the `edit` and `tools` gyms' oracle played through real
//! sessions (the tests run in the rlimit sandbox) becomes SFT data whose trained tokens are
//! exactly what the rollout parser reads back as the same tool calls; noise makes wrong
//! edits that the hidden tests reject; held-out tasks and bad rates are refused.

use arl_chat::HfChatCodec;
use arl_core::config::TrainOn;
use arl_core::toolcall::parse_turn;
use arl_core::{ChatCodec, ParsedCall, Role};
use arl_tests::{arl, arl_status, qwen3_tokenizer_dir, scratch_dir};
use arl_train::sft::{read_jsonl, render};
use serde_json::Value;

fn transcripts(env: &str, file: &std::path::Path, extra: &[&str]) -> String {
    let mut args = vec!["tasks", "--env", env, "--transcripts", file.to_str().unwrap(), "--limit", "8"];
    args.extend_from_slice(extra);
    arl(&args).unwrap_or_else(|e| panic!("{env}: {e}"))
}

fn metas(file: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(file).unwrap().lines().map(|l| serde_json::from_str::<Value>(l).unwrap()["meta"].clone()).collect()
}

#[test]
fn oracle_transcripts_are_sft_data_the_rollout_parser_reads_back() {
    let codec = HfChatCodec::load(&qwen3_tokenizer_dir()).unwrap().with_enable_thinking(Some(false));
    let root = scratch_dir("transcripts");
    for env in ["edit", "tools"] {
        let file = root.join(format!("{env}.jsonl"));
        let log = transcripts(env, &file, &["--repeats", "2"]);
        assert!(log.contains("wrote 16 transcripts") && log.contains("16 rewarded (100.0 %)"), "{log}");
        let examples = read_jsonl(&file).unwrap();
        assert_eq!(examples.len(), 16);
        for (ex, meta) in examples.iter().zip(metas(&file)) {
            assert_eq!(meta["reward"], 1.0, "{env}: {meta}");
            assert_eq!(meta["counters"]["test_runs"], 1, "{env}: the oracle runs the public tests: {meta}");
            let seq = render(&codec, ex, TrainOn::Assistant).unwrap();
            // Each run of trained tokens is one assistant turn, as the policy would write it.
            let mut turns: Vec<Vec<u32>> = Vec::new();
            for (t, (&id, &m)) in seq.ids.iter().zip(&seq.mask).enumerate() {
                if m {
                    if t == 0 || !seq.mask[t - 1] {
                        turns.push(Vec::new());
                    }
                    turns.last_mut().unwrap().push(id);
                }
            }
            let assistants: Vec<_> = ex.messages.iter().filter(|m| m.role == Role::Assistant).collect();
            assert_eq!(turns.len(), assistants.len(), "{env}");
            for (ids, message) in turns.iter().zip(assistants) {
                let text = codec.decode(ids).unwrap();
                let parsed = parse_turn(&text, &ex.tools, 8);
                let expected: Vec<ParsedCall> = message.tool_calls.iter().map(|c| ParsedCall::Call(c.function.clone())).collect();
                assert_eq!(parsed.calls, expected, "{env}: {text}");
                if expected.is_empty() {
                    assert!(text.starts_with(&message.content), "{env}: {text}");
                }
            }
        }
    }
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn noise_makes_wrong_edits_skipped_reads_and_untested_answers() {
    let root = scratch_dir("transcripts-noise");
    for env in ["edit", "tools"] {
        let file = root.join(format!("{env}.jsonl"));
        let log = transcripts(env, &file, &["--wrong-edit-rate", "1", "--skip-read-rate", "1", "--skip-test-rate", "1"]);
        assert!(log.contains("wrote 8 transcripts") && log.contains(" 0 rewarded (0.0 %)"), "{log}");
        for meta in metas(&file) {
            assert_eq!(meta["reward"], 0.0, "{env}: a distractor edit fails the hidden tests: {meta}");
            assert!(meta["counters"].get("test_runs").is_none(), "{env}: {meta}");
        }
    }
    // In `tools`, an edit before any read is refused by the tool; the script then reads and edits.
    let first: Value = serde_json::from_str(std::fs::read_to_string(root.join("tools.jsonl")).unwrap().lines().next().unwrap()).unwrap();
    let m = first["messages"].as_array().unwrap();
    assert!(m[3]["content"].as_str().unwrap().starts_with("File has not been read yet"), "{m:?}");
    assert_eq!(m[4]["tool_calls"][0]["function"]["name"], "Read");
    assert_eq!(first["meta"]["counters"]["edit_before_read"], 1);
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn held_out_tasks_and_bad_rates_are_refused_with_one_line() {
    let root = scratch_dir("transcripts-bad");
    let file = root.join("t.jsonl");
    let f = file.to_str().unwrap();
    let cases: [(&[&str], &str); 3] = [
        (&["--split", "heldout"], "transcripts are made from train tasks only (held-out tasks must stay unseen): drop --split heldout"),
        (&["--wrong-edit-rate", "1.5"], "--wrong-edit-rate 1.5 is not a probability: give a value in [0, 1]"),
        (&["--repeats", "0"], "--repeats 0 writes nothing: give 1 or more"),
    ];
    for (extra, message) in cases {
        let mut args = vec!["tasks", "--env", "edit", "--transcripts", f];
        args.extend_from_slice(extra);
        let (code, result) = arl_status(&args);
        assert_eq!((code, result), (2, Err(message.to_string())), "{extra:?}");
        assert!(!file.exists());
    }
    let (code, result) = arl_status(&["tasks", "--env", "sum", "--transcripts", f]);
    assert_eq!(
        (code, result),
        (2, Err("env `sum` has no oracle to script transcripts with (the `edit` and `tools` gyms have one)".into()))
    );
    std::fs::remove_dir_all(&root).unwrap();
}
