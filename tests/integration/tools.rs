//! The `tools` gym through the CLI and the registry.

use std::sync::Arc;

use arl_core::config::{EnvConfig, SandboxConfig};
use arl_core::registry::{self, EnvPlugin, SandboxPlugin, ToolSetPlugin};
use arl_core::toolcall::parse_turn;
use arl_core::{Split, Step};
use arl_tests::arl;
use serde_json::{Value, json};

#[test]
fn list_shows_the_tools_env_and_the_claude_code_tool_set() {
    let doc: Value = serde_json::from_str(&arl(&["list", "--json"]).unwrap()).unwrap();
    assert!(doc["envs"].as_array().unwrap().iter().any(|e| e["name"] == "tools"));
    assert!(doc["tool_sets"].as_array().unwrap().iter().any(|e| e["name"] == "claude-code"));
    let tools = (registry::get::<ToolSetPlugin>("claude-code").unwrap().build)(&Default::default()).unwrap();
    let names: Vec<String> = tools.schemas().into_iter().map(|s| s.name).collect();
    assert_eq!(names, ["Read", "Edit", "Write", "Bash"]);
}

#[test]
fn tasks_lists_the_tools_bank() {
    let held: Vec<Value> =
        serde_json::from_str(&arl(&["tasks", "--env", "tools", "--split", "heldout", "--json"]).unwrap()).unwrap();
    let edit: Vec<Value> =
        serde_json::from_str(&arl(&["tasks", "--env", "edit", "--split", "heldout", "--json"]).unwrap()).unwrap();
    assert_eq!(held.len(), 16);
    assert_eq!(held, edit, "both gyms draw on the same bank");
}

#[test]
fn an_oracle_episode_through_the_registry_earns_reward_one_and_a_wrong_edit_zero() {
    arl_plugins::link();
    let sandbox = (registry::get::<SandboxPlugin>("rlimit").unwrap().build)(&SandboxConfig::default()).unwrap();
    let config = EnvConfig { name: "tools".into(), ..EnvConfig::default() };
    let env = (registry::get::<EnvPlugin>("tools").unwrap().build)(&config, Arc::clone(&sandbox)).unwrap();
    let task = &env.tasks(Split::Heldout).unwrap()[5];
    let function = task.data["function"].as_str().unwrap();
    let src = format!("/repo/{function}.py");
    let fix = task.data["fix"].as_str().unwrap();
    let ops = task.data["ops"].as_array().unwrap();
    let call = |name: &str, args: Value| format!("<tool_call>\n{}\n</tool_call>", json!({"name": name, "arguments": args}));
    for op in ops {
        let turns = [
            call("Read", json!({"file_path": src})),
            call("Edit", json!({"file_path": src, "old_string": op["old"], "new_string": op["new"]})),
            call("Bash", json!({"command": "pytest"})),
            "Fixed.".to_string(),
        ];
        let mut session = env.reset(task).unwrap();
        let mut reward = None;
        for text in &turns {
            if let Step::Done(outcome) = session.step(&parse_turn(text, &env.tools(), 4)).unwrap() {
                reward = Some(outcome.reward);
            }
        }
        let expected = if op["name"] == fix { 1.0 } else { 0.0 };
        assert_eq!(reward, Some(expected), "op {}", op["name"]);
    }
}

#[test]
fn grade_takes_tasks_of_the_tools_env() {
    let dir = std::env::temp_dir().join(format!("arl-it-tools-grade-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = arl(&["tasks", "--env", "tools", "--split", "heldout", "--dump", dir.to_str().unwrap()]).unwrap();
    assert!(out.starts_with("wrote 16 tasks"), "{out}");
    let reference = dir.join("minmax-spread-0/reference.py");
    let out = arl(&["grade", "--env", "tools", "--task", "minmax-spread-0", "--source", reference.to_str().unwrap()]).unwrap();
    let doc: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["reward"].as_f64(), Some(1.0), "{doc}");
    std::fs::remove_dir_all(&dir).unwrap();
}
