//! Bad input never costs a run: each case is a command line → its exit status, one error line
//! (what it must say), and no work done (the run folder is neither created nor changed).

use std::collections::BTreeMap;
use std::path::Path;

use arl_tests::{arl, arl_status, scratch_dir};

use crate::test_plugins::STAND_INS;

/// Every file under `dir` with its contents (a folder's state, to compare before and after).
fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.insert(p.strip_prefix(dir).unwrap().display().to_string(), std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

/// `args` must fail with `code`, on one line that contains `says`.
fn refused(args: &[&str], code: u8, says: &str) -> String {
    let (got, result) = arl_status(args);
    let err = result.expect_err(&format!("{args:?} must fail"));
    assert_eq!(got, code, "{args:?}: {err}");
    assert!(err.contains(says), "{args:?}: {err}");
    if got != 2 || !err.starts_with("error: ") {
        // clap renders its own usage errors (several lines); everything else is one line.
        assert_eq!(err.lines().count(), 1, "{args:?}: errors are one line: {err}");
    }
    err
}

#[test]
fn bad_run_settings_exit_2_with_one_line_and_touch_nothing() {
    let root = scratch_dir("bad-run");
    let out = root.join("run");
    let out_s = out.to_str().unwrap();
    let small = ["--prompts", "2", "--group-size", "2"];
    let cases: &[(&[&str], &str)] = &[
        (&["--lr", "-1"], "config key `trainer.lr`: -1 is out of range; valid: > 0"),
        (&["--lr", "nan"], "config key `trainer.lr`: NaN is not a finite number"),
        (&["--lr=inf"], "config key `trainer.lr`: inf is not a finite number"),
        (&["--set", "advantage.eps=0"], "config key `advantage.eps`: 0 is out of range; valid: > 0"),
        (&["--max-new-tokens", "0"], "config key `sampling.max_new_tokens`: 0 is out of range"),
        (&["--micro", "0"], "config key `trainer.micro`: 0 is out of range"),
        (&["--gen-batch", "0"], "config key `trainer.gen_batch`: 0 is out of range"),
        (&["--set", "trainer.minibatches=5"], "config key `trainer.minibatches`: 5 is out of range; valid: 1 to 4"),
        (&["--micro", "3", "--set", "trainer.minibatches=2"], "config key `trainer.micro`: 3 is out of range; valid: 1 to 2"),
        (&["--set", "trainer.grad_clip=-1"], "config key `trainer.grad_clip`: -1 is out of range; valid: ≥ 0"),
        (&["--set", "sampling.max_episode_tokens=0"], "config key `sampling.max_episode_tokens`: 0 is out of range"),
        (&["--set", "trainer.min_lr_ratio=2"], "config key `trainer.min_lr_ratio`: 2 is out of range; valid: 0 to 1"),
        (&["--steps", "3", "--set", "trainer.warmup_steps=3"], "config key `trainer.warmup_steps`: 3 is out of range; valid: 0 to 2"),
        (
            &["--steps", "0"],
            "config key `trainer.steps`: 0 is out of range; valid: ≥ 1 (to evaluate a model without training, use `arl eval`)",
        ),
        (&["--steps", "-1"], "config key `trainer.steps`: invalid value: integer `-1`"),
        (&["--set", "sampling.top_k=0"], "config key `sampling.top_k`: 0 is out of range"),
        (&["--set", "loss.horizon=0"], "config key `loss.horizon`: 0 is out of range"),
        (&["--set", "env.options.nobody_reads_this=1"], "unknown field `nobody_reads_this`"),
        (
            &["--set", "env.name=edit", "--set", "env.options.train_instances=100000000"],
            "env.options.train_instances: 100000000 is out of range",
        ),
        (&["--set", "trainer.stepz=3"], "config key `trainer.stepz`: unknown field `stepz`"),
        (&["--model", "/no/such/model/dir"], "model directory /no/such/model/dir does not exist"),
        (&["--model", "nobody/no-such-model"], "huggingface-cli download nobody/no-such-model"),
        (&["--model", "tny"], "`tny` is not a model directory, a preset (tiny, "),
        (&["--config", "/no/such/run.toml"], "cannot read config file /no/such/run.toml: No such file or directory (os error 2)"),
        (&["--lora", "--set", "lora.rank=0"], "config key `lora.rank`: 0 is out of range; valid: ≥ 1"),
        (&["--set", "lora.rank=-2"], "config key `lora.rank`: invalid value: integer `-2`"),
        (
            &["--lora", "--set", "lora.target_modules=[\"q_proj\", \"attn\"]"],
            "config key `lora.target_modules`: `attn` is not a linear layer of the model; valid: q_proj, k_proj, v_proj, o_proj, \
             gate_proj, up_proj, down_proj",
        ),
        (&["--lora", "--set", "lora.dropout=1.5"], "config key `lora.dropout`: 1.5 is out of range; valid: ≥ 0 and < 1"),
        (&["--rollout-device", "cuda:1"], "config key `model.rollout_device`: is set but trainer.max_steps_off_policy is not"),
        (
            &["--rollout-device", "cpu:1", "--set", "trainer.max_steps_off_policy=1"],
            "config key `model.rollout_device`: `cpu:1`: backend `cpu` has one device; write `cpu`",
        ),
    ];
    for (extra, says) in cases {
        let args: Vec<&str> =
            ["run", "--env", "sum", "--out", out_s].iter().chain(&small).chain(STAND_INS.iter()).chain(extra.iter()).copied().collect();
        let err = refused(&args, 2, says);
        assert!(!err.contains("(os error 2): No such file"), "the cause is printed once: {err}");
        assert!(!out.exists(), "{extra:?} created the run folder");
    }
    // A group-relative estimator with one episode per group has no signal (asked of the
    // estimator, not looked up by name); a batch-level one is fine.
    let args = [
        "run",
        "--env",
        "sum",
        "--group-size",
        "1",
        "--advantage",
        "grpo",
        "--loss",
        "test-zero",
        "--sandbox",
        "test-null",
        "--out",
        out_s,
    ];
    refused(&args, 2, "config key `trainer.group_size`: 1 is out of range; valid: ≥ 2 (estimator `grpo` compares the episodes of a group");
    assert!(arl(&["config", "show", "--group-size", "1", "--advantage", "reinforce++"]).is_ok());
    // Training flags are not evaluation flags.
    for flag in ["--lr", "--steps", "--group-size", "--prompts", "--resume", "--loss", "--advantage", "--algo", "--out", "--micro"] {
        let mut args = vec!["eval", "--env", "sum", flag];
        if flag != "--resume" {
            args.push("1");
        }
        refused(&args, 2, &format!("unexpected argument '{flag}'"));
    }
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn budgets_and_tokenizers_are_checked_before_the_model_trains() {
    let root = scratch_dir("bad-budget");
    let out = root.join("run");
    let out_s = out.to_str().unwrap();
    let base = ["run", "--env", "sum", "--prompts", "2", "--group-size", "2", "--out", out_s];
    // `--model tiny` unless the case names its own model (the default model may change).
    let with = |extra: &[&str]| -> Vec<String> {
        let model: &[&str] = if extra.contains(&"--model") { &[] } else { &["--model", "tiny"] };
        base.iter().chain(STAND_INS.iter()).chain(model).chain(extra).map(|s| s.to_string()).collect()
    };
    let refused = |args: Vec<String>, code: u8, says: &str| refused(&args.iter().map(String::as_str).collect::<Vec<_>>(), code, says);
    // Every prompt of the sum env is longer than 5 tokens.
    refused(with(&["--set", "sampling.max_prompt_tokens=5"]), 2, "config key `sampling.max_prompt_tokens`: 5 leaves no train prompt room");
    refused(
        with(&["--max-new-tokens", "8", "--set", "sampling.max_episode_tokens=12"]),
        2,
        "config key `sampling.max_episode_tokens`: 12 leaves no train prompt room for a turn",
    );
    refused(
        with(&["--set", "trainer.overlong_buffer=1000"]),
        2,
        "config key `trainer.overlong_buffer`: 1000 is longer than the response budget",
    );
    // A model whose vocabulary the tokenizer overruns (512 ids vs Qwen3's tokenizer).
    refused(with(&["--model", "tiny-vocab512"]), 2, "config key `model.tokenizer`: the tokenizer in ");
    // A model directory without a tokenizer is an error, not a silent swap.
    let bare = root.join("bare-model");
    std::fs::create_dir_all(&bare).unwrap();
    arl_qwen3::load("tiny-vocab512", &arl_qwen3::cpu()).unwrap().save_dir(&bare).unwrap();
    refused(with(&["--model", bare.to_str().unwrap()]), 2, "has no tokenizer.json; pass the model's own tokenizer with --tokenizer DIR");
    assert!(!out.exists());
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn a_run_folder_is_protected() {
    let root = scratch_dir("protected");
    let out = root.join("run");
    std::fs::create_dir_all(out.join("checkpoints/step-00007")).unwrap();
    std::fs::write(out.join("config.toml"), "# another run\n").unwrap();
    std::fs::write(out.join("run.log"), "the old run's log\n").unwrap();
    let before = snapshot(&out);
    let out_s = out.to_str().unwrap();
    let run = |extra: &[&str]| -> Vec<String> {
        ["run", "--env", "sum", "--steps", "1", "--eval-n", "0", "--out", out_s]
            .iter()
            .chain(STAND_INS.iter())
            .chain(extra)
            .map(|s| s.to_string())
            .collect()
    };
    let refused = |args: Vec<String>, code: u8, says: &str| refused(&args.iter().map(String::as_str).collect::<Vec<_>>(), code, says);
    let err = refused(run(&[]), 2, "config key `output.dir`: ");
    assert!(err.contains("config.toml, run.log, checkpoints") && err.contains("--overwrite"), "{err}");
    // A start that fails after the folder check (here: the model) changes nothing either.
    refused(run(&["--overwrite", "--model", "/no/such/model"]), 2, "does not exist");
    // --resume finds no checkpoint of a run in it (the directory has no trainer state).
    refused(run(&["--resume"]), 2, "--resume: no checkpoint in");
    refused(run(&["--resume", "--overwrite"]), 2, "cannot be used with");
    assert_eq!(snapshot(&out), before, "refused starts leave the folder as it was");
    // A file where the folder should be.
    let file = root.join("a-file");
    std::fs::write(&file, "x").unwrap();
    let args: Vec<String> =
        ["run", "--env", "sum", "--out", file.to_str().unwrap()].iter().chain(STAND_INS.iter()).map(|s| s.to_string()).collect();
    refused(args, 2, "exists and is not a directory");
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn other_commands_refuse_bad_input_with_exit_2() {
    let dir = scratch_dir("bad-commands");
    let write = |name: &str, text: &str| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p.display().to_string()
    };
    let empty_seq = write("empty.json", r#"{"sequences": [[]]}"#);
    let no_seqs = write("none.json", r#"{"sequences": []}"#);
    let bad_pos = write("pos.json", r#"{"sequences": [[1, 2]], "positions": [[0]]}"#);
    let big_id = write("big.json", r#"{"sequences": [[1, 600]]}"#);
    let rewards = write("rewards.json", r#"{"rewards": [1, 0, 1], "group_ids": [0, 0]}"#);
    let ragged =
        write("ragged.json", r#"{"log_prob": [[0.0, 0.0]], "old_log_prob": [[0.0]], "advantages": [[1.0, 1.0]], "mask": [[1.0, 1.0]]}"#);
    let not_json = write("bad.json", "{");
    let tokens = write("tokens.json", r#"{"sequences": [[1, 2, 3]]}"#);
    let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    let (qwen3_b, qwen3_a_adapter) = (fixtures.join("qwen3/qwen3-b"), fixtures.join("lora/qwen3-a-qv"));
    let (qwen3_b, qwen3_a_adapter) = (qwen3_b.to_str().unwrap(), qwen3_a_adapter.to_str().unwrap());
    let merged = dir.join("merged").display().to_string();
    let another_base = "tensor `base_model.model.model.layers.0.mlp.down_proj.lora_A.weight` has shape [4, 96], but the base model's \
                        `model.layers.0.mlp.down_proj` needs [4, 80]";
    let cases: Vec<(Vec<&str>, u8, &str)> = vec![
        (vec!["score", "--model", qwen3_b, "--adapter", qwen3_a_adapter, "--input", &tokens], 2, another_base),
        (vec!["merge", "--model", qwen3_b, "--adapter", qwen3_a_adapter, "--out", &merged], 2, another_base),
        (
            vec!["merge", "--model", qwen3_b, "--adapter", "/no/such/adapter", "--out", &merged],
            2,
            "--adapter /no/such/adapter: no such directory",
        ),
        (vec!["score", "--model", "tiny-vocab512", "--input", &empty_seq], 2, "sequence 0 is empty"),
        (vec!["score", "--model", "tiny-vocab512", "--input", &no_seqs], 2, "`sequences` is empty"),
        (vec!["score", "--model", "tiny-vocab512", "--input", &bad_pos], 2, "position 0 is not in 1..2"),
        (vec!["score", "--model", "tiny-vocab512", "--input", &big_id], 2, "token id 600 is outside the model's vocabulary (size 512)"),
        (vec!["score", "--model", "tiny-vocab512", "--input", &not_json], 2, "EOF while parsing"),
        (vec!["score", "--input", "/no/such/tokens.json"], 2, "--input /no/such/tokens.json: no such file"),
        (vec!["advantages", "--advantage", "grpo", "--input", &rewards], 2, "3 rewards but 2 group ids"),
        (vec!["advantages", "--estimator", "grpo", "--input", &rewards], 2, "unexpected argument '--estimator'"),
        (vec!["loss", "eval", "--loss", "grpo", "--input", &ragged], 2, "old_log_prob row 0 has 1 tokens, log_prob rows have 2"),
        (vec!["loss", "eval", "--loss", "grpo", "--agg", "token-mean", "--input", &ragged], 2, "unexpected argument '--agg'"),
        (vec!["generate", "--model", "tiny-vocab512", "--prompt", "1", "--top-p", "2"], 2, "--top-p 2: must be in (0, 1]"),
        (vec!["generate", "--model", "tiny-vocab512", "--prompt", "1", "--max-new-tokens", "0"], 2, "0 is not in 1.."),
        (vec!["sandbox", "run", "--timeout", "0", &empty_seq], 2, "--timeout 0: must be > 0"),
        (vec!["grade", "--task", "no-such-task", "--source", &empty_seq], 2, "no task `no-such-task` in env `edit`"),
        (vec!["grade", "--env", "nope", "--task", "x", "--source", &empty_seq], 2, "unknown env `nope`"),
        (vec!["run", "--smoke", "--smoke-n", "0"], 2, "0 is not in 1.."),
        (vec!["bench", "sandbox", "--jobs", "0"], 2, "--jobs must be ≥ 1"),
        (vec!["tasks", "--env", "nope"], 2, "unknown env `nope`"),
        (vec!["tasks", "--env", "edit", "--env-option", "train_instances"], 2, "expected KEY=VALUE, e.g. train_instances=16"),
        (vec!["tasks", "--env", "tools", "--env-option", "bogus=1", "--transcripts", &merged], 2, "unknown field `bogus`"),
        (vec!["grade", "--env", "edit", "--env-option", "train_instances=-1", "--task", "x", "--source", &empty_seq], 2, "train_instances"),
        (
            vec!["tasks", "--env", "tools", "--env-option", "heldout_instances=0"],
            2,
            "env.options.heldout_instances: 0 is out of range; valid: 1 to 1000",
        ),
    ];
    for (args, code, says) in &cases {
        refused(args, *code, says);
    }
    if arl_core::BackendKind::ALL.iter().filter(|b| b.compiled_in()).count() < 2 {
        refused(&["crosscheck"], 2, "name at least two backends to compare (this binary has cpu");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_failure_while_working_exits_1_and_names_the_path() {
    let dir = scratch_dir("runtime-failure");
    let source = dir.join("fix.py");
    std::fs::write(&source, "def f():\n    return 1\n").unwrap();
    let task = arl(&["tasks", "--env", "edit", "--json"]).unwrap();
    let tasks: serde_json::Value = serde_json::from_str(&task).unwrap();
    let id = tasks[0]["id"].as_str().unwrap();
    // The stand-in sandbox cannot run jobs: a runtime failure, not bad input.
    refused(&["grade", "--task", id, "--source", source.to_str().unwrap(), "--sandbox", "test-null"], 1, "grading in the sandbox");
    // Writing under a regular file fails with the path in the message.
    let blocker = dir.join("blocker");
    std::fs::write(&blocker, "x").unwrap();
    let target = blocker.join("tasks");
    refused(&["tasks", "--env", "edit", "--dump", target.to_str().unwrap()], 1, &format!("creating {}", target.display()));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A writer whose reader has gone, as stdout is in `arl tasks | head`.
struct ClosedPipe;

impl std::io::Write for ClosedPipe {
    fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
        Err(std::io::Error::from(std::io::ErrorKind::BrokenPipe))
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_closed_pipe_ends_quietly_with_status_0() {
    arl_plugins::link();
    let err = arl::run(["arl", "tasks", "--env", "edit"], &mut ClosedPipe).unwrap_err();
    assert_eq!(arl::exit_code(&err), 0, "{err:#}");
}
