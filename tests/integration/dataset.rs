//! The `dataset` env end to end: `arl run` for one step with every reward function, and its
//! bad input refused with one line, exit status 2.

use arl_tests::{arl, arl_status, scratch_dir};

const LINES: &str = r#"{"prompt": "What is 2 + 3?", "answer": 5}
{"prompt": "Name the capital of France.", "answer": "Paris"}
{"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 10 * 4?"}], "answer": "40"}
{"prompt": "What is half of 9?", "answer": 4.5}
{"prompt": "Spell cat backwards.", "answer": "tac"}
"#;

#[test]
fn one_step_runs_with_every_reward_function() {
    let root = scratch_dir("dataset-run");
    let data = root.join("tasks.jsonl");
    std::fs::write(&data, LINES).unwrap();
    let path = format!("env.options.path={:?}", data.to_str().unwrap());
    let rewards = [
        ("exact", None),
        ("hash", None),
        ("numeric", Some("env.options.tolerance=0.01")),
        ("regex", Some(r#"env.options.pattern="([0-9]+)""#)),
        ("boxed", None),
    ];
    for (reward, extra) in rewards {
        let out = root.join(reward);
        let reward_key = format!("env.options.reward={reward:?}");
        let mut args =
            vec!["run", "--env", "dataset", "--set", &path, "--set", &reward_key, "--model", "tiny", "--steps", "1", "--prompts", "2"];
        args.extend(["--group-size", "2", "--eval-n", "1", "--set", "env.options.max_new_tokens=4", "--set", "output.checkpoints=false"]);
        args.extend(["--out", out.to_str().unwrap()]);
        if let Some(e) = extra {
            args.extend(["--set", e]);
        }
        let log = arl(&args).unwrap_or_else(|e| panic!("{reward}: {e}"));
        let results: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
        assert_eq!(results["steps"].as_array().unwrap().len(), 1, "{reward}: {log}");
        assert_eq!(results["config"]["env"]["options"]["reward"], reward);
        // 5 lines, 20 % held out: 1 held-out task, 4 training tasks.
        assert_eq!(results["before"]["summary"]["tasks"], 1, "{reward}");
    }
    std::fs::remove_dir_all(&root).unwrap();
}

/// Issue #49: a weighted reward list runs end to end; each component's mean is in
/// `metrics.jsonl`, on the console line and in `results.json`'s before and after.
#[test]
fn a_weighted_reward_list_logs_each_component() {
    let root = scratch_dir("dataset-weighted");
    let data = root.join("tasks.jsonl");
    std::fs::write(&data, LINES).unwrap();
    let out = root.join("run");
    let path = format!("env.options.path={:?}", data.to_str().unwrap());
    let rewards = r#"env.options.rewards=[{name="hash", weight=1.0}, {name="format-number", weight=0.5}]"#;
    let mut args = vec!["run", "--env", "dataset", "--set", &path, "--set", rewards, "--model", "tiny", "--steps", "1"];
    args.extend(["--prompts", "2", "--group-size", "2", "--eval-n", "1", "--set", "env.options.max_new_tokens=4"]);
    args.extend(["--set", "output.checkpoints=false", "--out", out.to_str().unwrap()]);
    let log = arl(&args).unwrap();
    let line = std::fs::read_to_string(out.join("metrics.jsonl")).unwrap();
    let m: serde_json::Value = serde_json::from_str(line.lines().next().unwrap()).unwrap();
    let components = m["rewards"].as_object().unwrap_or_else(|| panic!("no rewards: {m}"));
    assert_eq!(components.keys().collect::<Vec<_>>(), ["format-number", "hash"], "{m}");
    assert!(log.contains("(format-number "), "{log}");
    let results: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    for when in ["before", "after"] {
        assert!(results[when]["rewards"]["hash"].is_number(), "{when}: {}", results[when]);
    }
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn bad_dataset_input_is_refused_with_one_line() {
    let root = scratch_dir("dataset-bad");
    let good = root.join("good.jsonl");
    std::fs::write(&good, LINES).unwrap();
    let no_answer = root.join("no-answer.jsonl");
    std::fs::write(&no_answer, "{\"prompt\": \"a\", \"answer\": 1}\n{\"prompt\": \"b\"}\n").unwrap();
    let out = root.join("run");
    let set = |k: &str, v: &str| format!("env.options.{k}={v:?}");
    let cases: Vec<(Vec<String>, &str)> = vec![
        (vec![], "env.options.path is required"),
        (
            vec![set("path", good.to_str().unwrap()), set("reward", "gsm8k")],
            "no reward function `gsm8k`; valid: boxed, exact, format-boxed, format-hash, format-number, hash, length, numeric, regex",
        ),
        (vec![set("path", no_answer.to_str().unwrap())], "no-answer.jsonl line 2: no `answer`"),
        (vec![set("path", good.to_str().unwrap()), set("reward", "regex")], "env.options.pattern is required"),
        (vec![set("path", good.to_str().unwrap()), set("pattern", "(")], "env.options.pattern: not a regular expression"),
        (vec![set("path", good.to_str().unwrap()), "env.options.rewrd=1".into()], "unknown field `rewrd`"),
        (vec![set("path", "/no/such.jsonl")], "env.options.path /no/such.jsonl: No such file"),
        (
            vec![set("path", good.to_str().unwrap()), r#"env.options.rewards=[{name="hash", weight=-1.0}]"#.into()],
            "env.options.rewards[0].weight: -1 is out of range; valid: finite and ≥ 0",
        ),
        (
            vec![set("path", good.to_str().unwrap()), r#"env.options.rewards=[{name="hash"}, {name="format-hash", weight=nan}]"#.into()],
            "config key `env.options.rewards[1].weight`: not a finite number",
        ),
        (
            vec![set("path", good.to_str().unwrap()), r#"env.options.rewards=[{name="hash"}, {name="hashh"}]"#.into()],
            "env.options.rewards[1].name: no reward function `hashh`; valid: boxed, exact, format-boxed",
        ),
        (
            vec![set("path", good.to_str().unwrap()), r#"env.options.rewards=[{name="format-hash", weight=1.0}]"#.into()],
            "env.options.rewards: no correctness component",
        ),
    ];
    for (sets, says) in cases {
        let mut args: Vec<String> =
            ["run", "--env", "dataset", "--model", "tiny", "--out", out.to_str().unwrap()].map(String::from).to_vec();
        for s in sets {
            args.extend(["--set".to_string(), s]);
        }
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, result) = arl_status(&argv);
        let err = result.expect_err("must fail");
        assert_eq!(code, 2, "{err}");
        assert!(err.contains(says), "{err} (want {says})");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(!out.exists(), "nothing written");
    }
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn prompts_dropped_for_length_and_identical_rewards_are_counted_per_step() {
    let root = scratch_dir("dataset-metrics");
    let data = root.join("tasks.jsonl");
    // Twenty tasks, a third of them with a prompt far over a 64-token budget.
    let long = "Please read this carefully. ".repeat(40);
    let lines: String = (0..20)
        .map(|i| {
            let prompt = if i % 3 == 0 { format!("{long}What is {i} + 1?") } else { format!("What is {i} + 1?") };
            format!("{}\n", serde_json::json!({"prompt": prompt, "answer": i + 1}))
        })
        .collect();
    std::fs::write(&data, lines).unwrap();
    let out = root.join("run");
    let path = format!("env.options.path={:?}", data.to_str().unwrap());
    let mut args = vec!["run", "--env", "dataset", "--set", &path, "--model", "tiny", "--steps", "1", "--prompts", "16"];
    args.extend(["--group-size", "2", "--eval-n", "0", "--set", "env.options.max_new_tokens=4", "--set", "output.checkpoints=false"]);
    args.extend(["--set", "sampling.max_prompt_tokens=64", "--out", out.to_str().unwrap()]);
    arl(&args).unwrap();
    let line = std::fs::read_to_string(out.join("metrics.jsonl")).unwrap();
    let m: serde_json::Value = serde_json::from_str(line.lines().next().unwrap()).unwrap();
    let dropped = m["prompts_over_budget"].as_u64().unwrap();
    assert!(dropped > 0 && dropped.is_multiple_of(2), "whole groups of long prompts are dropped: {m}");
    assert_eq!(Some(dropped), m["finish"]["prompt_budget"].as_u64(), "{m}");
    // A dropped prompt's group has reward 0 throughout: equal, but not identical-nonzero.
    let zero_var = m["zero_variance_groups"].as_f64().unwrap();
    let nonzero = m["identical_nonzero_groups"].as_f64().unwrap();
    assert!(zero_var >= (dropped / 2) as f64 / 16.0 && nonzero <= zero_var - (dropped / 2) as f64 / 16.0 + 1e-12, "{m}");
    std::fs::remove_dir_all(&root).unwrap();
}

/// Issue #49: a few-shot block from its own file reaches the prompt the model sees (the
/// held-out transcript in `results.json`), after the system message; a file of lines that are
/// not tasks, or an example that would leak a held-out answer, is refused with one line,
/// exit 2, before anything loads.
#[test]
fn a_few_shot_block_is_in_every_prompt_and_never_leaks_a_held_out_answer() {
    let root = scratch_dir("dataset-few-shot");
    let data = root.join("tasks.jsonl");
    std::fs::write(&data, LINES).unwrap();
    let shots = root.join("shots.jsonl");
    std::fs::write(&shots, "{\"prompt\": \"What is 1 + 1?\", \"answer\": 2, \"solution\": \"1 + 1 = 2\\n#### 2\"}\n{\"prompt\": \"What is 3 * 3?\", \"answer\": 9}\n").unwrap();
    let out = root.join("run");
    let set = |k: &str, v: &str| format!("env.options.{k}={v:?}");
    let (path, few_shot) = (set("path", data.to_str().unwrap()), set("few_shot", shots.to_str().unwrap()));
    let mut args =
        vec!["run", "--env", "dataset", "--set", &path, "--set", &few_shot, "--set", "env.options.system=\"Answer after ####.\""];
    args.extend(["--model", "tiny", "--steps", "1", "--prompts", "2", "--group-size", "2", "--eval-n", "1"]);
    args.extend(["--set", "env.options.max_new_tokens=4", "--set", "output.checkpoints=false", "--out", out.to_str().unwrap()]);
    let log = arl(&args).unwrap();
    let results: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    let text = results["before"]["transcripts"][0]["text"].as_str().unwrap_or_else(|| panic!("no transcript: {log}"));
    // The held-out task (seed 0, 20 % of 5 lines) and its line.
    let held_id = results["before"]["transcripts"][0]["task_id"].as_str().unwrap().to_string();
    let line_of_held = LINES.lines().enumerate().find(|(i, _)| held_id == format!("tasks-{}", i + 1)).map(|(_, l)| l);
    let held: serde_json::Value =
        serde_json::from_str(line_of_held.unwrap_or_else(|| panic!("held-out task {held_id}: {results}"))).unwrap();
    let at = |s: &str| text.find(s).unwrap_or_else(|| panic!("no {s:?} in {text}"));
    // The system message first: `system`'s before a prompt line, a conversation's own.
    let system = if held.get("prompt").is_some() { "Answer after ####." } else { "Be brief." };
    assert!(at(system) < at("What is 1 + 1?"), "{text}");
    assert!(at("What is 1 + 1?") < at("1 + 1 = 2\n#### 2") && at("1 + 1 = 2\n#### 2") < at("What is 3 * 3?"), "{text}");
    std::fs::remove_dir_all(&out).unwrap();

    let leak = root.join("leak.jsonl");
    let leaking = serde_json::json!({"prompt": "Another question", "answer": held["answer"]});
    std::fs::write(&leak, format!("{{\"prompt\": \"What is 1 + 1?\", \"answer\": 2}}\n{leaking}\n")).unwrap();
    let bad = root.join("bad.jsonl");
    std::fs::write(&bad, "{\"prompt\": \"What is 1 + 1?\", \"answer\": 2}\n{\"prompt\": \"no answer\"}\n").unwrap();
    let cases: Vec<(Vec<String>, &str)> = vec![
        (vec![set("few_shot", bad.to_str().unwrap())], "bad.jsonl line 2: no `answer`"),
        (vec![set("few_shot", "/no/shots.jsonl")], "env.options.few_shot /no/shots.jsonl: No such file"),
        (vec![set("few_shot", leak.to_str().unwrap())], "leak.jsonl line 2: the example's answer"),
        (
            vec![set("few_shot", shots.to_str().unwrap()), "env.options.few_shot_n=3".into()],
            "env.options.few_shot_n: 3 is out of range; valid: 1 to 2",
        ),
        (vec!["env.options.few_shot_n=1".into()], "need env.options.few_shot"),
    ];
    for (sets, says) in cases {
        let mut args: Vec<String> =
            ["run", "--env", "dataset", "--model", "tiny", "--out", out.to_str().unwrap(), "--set", &path].map(String::from).to_vec();
        for s in sets {
            args.extend(["--set".to_string(), s]);
        }
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, result) = arl_status(&argv);
        let err = result.expect_err("must fail");
        assert_eq!(code, 2, "{err}");
        assert!(err.contains(says), "{err} (want {says})");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(!out.exists(), "nothing written");
    }
    // The overlap, allowed on purpose, loads.
    let mut args =
        vec!["run", "--env", "dataset", "--set", &path, "--model", "tiny", "--smoke", "--smoke-n", "1", "--out", out.to_str().unwrap()];
    let allowed = set("few_shot", leak.to_str().unwrap());
    args.extend(["--set", &allowed, "--set", "env.options.few_shot_allow_overlap=true", "--set", "env.options.max_new_tokens=4"]);
    arl(&args).unwrap();
}
