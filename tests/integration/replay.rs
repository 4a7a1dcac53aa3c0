//! `arl env replay`: a scripted episode through the CLI, under both sandboxes.

use arl_tests::{arl, arl_status, scratch_dir};
use serde_json::{Value, json};

const TASK: &str = "compare-count_positive-0";

/// The task's data as `arl tasks --dump` writes it.
fn task_data(dir: &std::path::Path) -> Value {
    arl(&["tasks", "--env", "tools", "--plain-names", "--dump", dir.to_str().unwrap()]).unwrap();
    let text = std::fs::read_to_string(dir.join(TASK).join("task.json")).unwrap();
    serde_json::from_str::<Value>(&text).unwrap()["data"].clone()
}

fn replay(dir: &std::path::Path, name: &str, script: &Value, sandbox: &str) -> Value {
    let path = dir.join(format!("{name}.json"));
    std::fs::write(&path, script.to_string()).unwrap();
    let out = arl(&["env", "replay", "--task", TASK, "--plain-names", "--sandbox", sandbox, "--calls", path.to_str().unwrap()])
        .unwrap_or_else(|e| panic!("{e}"));
    serde_json::from_str(&out).unwrap()
}

/// Each authored op applied with Read + Edit + pytest + a final answer: the fix earns 1, the
/// two wrong ones 0; the observations and counters are in the report.
fn oracle_and_wrong_fixes(sandbox: &str) {
    let dir = scratch_dir(&format!("replay-{sandbox}"));
    let data = task_data(&dir);
    let src = format!("/repo/{}.py", data["function"].as_str().unwrap());
    let mut rewards = Vec::new();
    for op in data["ops"].as_array().unwrap() {
        let script = json!([
            {"name": "Read", "arguments": {"file_path": src}},
            [{"name": "Edit", "arguments": {"file_path": src, "old_string": op["old"], "new_string": op["new"]}},
             {"name": "Bash", "arguments": {"command": "pytest -q"}}],
            {"name": "Bash", "arguments": {"cmd": "no such argument"}},
            "Done: the tests pass."
        ]);
        let doc = replay(&dir, op["name"].as_str().unwrap(), &script, sandbox);
        let turns = doc["turns"].as_array().unwrap();
        assert_eq!(turns.len(), 4, "{doc:#}");
        assert_eq!(turns[0]["observations"][0]["outcome"]["status"], "ok");
        assert!(turns[0]["observations"][0]["outcome"]["text"].as_str().unwrap().contains("     1\tdef count_positive"));
        let pytest = turns[1]["observations"][1]["outcome"]["text"].as_str().unwrap();
        assert!(pytest.contains("passed") || pytest.contains("failed"), "{pytest}");
        assert_eq!(turns[2]["observations"][0]["outcome"]["status"], "malformed");
        assert_eq!(turns[3]["final"], true);
        assert_eq!(doc["stats"]["malformed_calls"], 1);
        assert_eq!(doc["stats"]["counters"]["edit_calls"], 1);
        assert_eq!(doc["stats"]["counters"]["final_claims_pass"], 1);
        assert_eq!(doc["sandbox"], sandbox);
        let fixed = op["name"] == data["fix"];
        rewards.push((op["name"].as_str().unwrap().to_string(), doc["reward"].as_f64().unwrap(), fixed));
    }
    for (name, reward, fixed) in &rewards {
        assert_eq!(*reward, if *fixed { 1.0 } else { 0.0 }, "op {name} under {sandbox}: {rewards:?}");
    }
    assert_eq!(rewards.iter().filter(|r| r.2).count(), 1);
}

#[test]
fn replay_of_the_oracle_earns_one_and_of_a_wrong_fix_zero_under_rlimit() {
    oracle_and_wrong_fixes("rlimit");
}

#[test]
fn replay_of_the_oracle_earns_one_and_of_a_wrong_fix_zero_under_wasm() {
    oracle_and_wrong_fixes("wasm");
}

/// A script without a final answer is graded as it stands and marked truncated.
#[test]
fn replay_without_a_final_answer_is_graded_as_truncated() {
    let dir = scratch_dir("replay-truncated");
    let doc = replay(&dir, "short", &json!([{"name": "Bash", "arguments": {"command": "ls"}}]), "rlimit");
    assert_eq!(doc["stats"]["truncated"], true);
    assert_eq!(doc["reward"], 0.0);
}

#[test]
fn replay_names_a_bad_calls_file_and_an_unknown_task() {
    let dir = scratch_dir("replay-bad");
    let bad = dir.join("bad.json");
    std::fs::write(&bad, "[42]").unwrap();
    let (code, err) = arl_status(&["env", "replay", "--task", TASK, "--calls", bad.to_str().unwrap()]);
    let err = err.unwrap_err();
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("element 0") && err.contains("final text"), "{err}");
    std::fs::write(&bad, "[\"done\"]").unwrap();
    let err = arl(&["env", "replay", "--task", "nope-0", "--calls", bad.to_str().unwrap()]).unwrap_err();
    assert!(err.contains("no task `nope-0`"), "{err}");
    let err = arl(&["env", "replay", "--task", TASK, "--calls", dir.join("missing.json").to_str().unwrap()]).unwrap_err();
    assert!(err.contains("no such file"), "{err}");
}
