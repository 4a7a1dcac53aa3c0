//! The bug-fix bank, the `rlimit` sandbox and the `edit` gym through the CLI and registry.

use std::path::PathBuf;
use std::sync::Arc;

use arl_core::config::{EnvConfig, SandboxConfig};
use arl_core::registry::{self, EnvPlugin, SandboxPlugin};
use arl_core::toolcall::parse_turn;
use arl_core::{Split, Step};
use arl_tests::arl;
use serde_json::Value;

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("arl-it-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn list_shows_the_edit_env_and_the_rlimit_sandbox() {
    let doc: Value = serde_json::from_str(&arl(&["list", "--json"]).unwrap()).unwrap();
    assert!(doc["envs"].as_array().unwrap().iter().any(|e| e["name"] == "edit"));
    assert!(doc["sandboxes"].as_array().unwrap().iter().any(|e| e["name"] == "rlimit"));
    assert!(doc["tool_sets"].as_array().unwrap().iter().any(|e| e["name"] == "edit"));
}

#[test]
fn tasks_json_lists_ids_families_and_functions() {
    let train: Vec<Value> = serde_json::from_str(&arl(&["tasks", "--env", "edit", "--json"]).unwrap()).unwrap();
    let held: Vec<Value> = serde_json::from_str(&arl(&["tasks", "--env", "edit", "--split", "heldout", "--json"]).unwrap()).unwrap();
    assert_eq!((train.len(), held.len()), (128, 16));
    for t in train.iter().chain(&held) {
        assert!(t["id"].is_string() && t["family"].is_string() && t["function"].is_string(), "{t}");
    }
    assert!(held.iter().all(|h| h["split"] == "heldout" && train.iter().all(|t| t["id"] != h["id"])));
    let text = arl(&["tasks", "--env", "edit", "--split", "heldout"]).unwrap();
    assert!(text.ends_with("16 heldout tasks\n"), "{text}");
}

#[test]
fn env_options_choose_the_bank_for_every_command_that_names_a_task() {
    let more: Vec<Value> =
        serde_json::from_str(&arl(&["tasks", "--env", "edit", "--env-option", "train_instances=6", "--json"]).unwrap()).unwrap();
    assert_eq!(more.len(), 32 * 6);
    // The first four instances of a template are the default bank's: more instances add tasks.
    let default: Vec<Value> = serde_json::from_str(&arl(&["tasks", "--env", "edit", "--json"]).unwrap()).unwrap();
    assert!(default.iter().all(|t| more.contains(t)));
    let extra = more.iter().find(|t| t["id"].as_str().unwrap().ends_with("-5")).unwrap()["id"].as_str().unwrap();
    let dir = scratch("env-option");
    let source = dir.join("empty.py");
    std::fs::write(&source, "").unwrap();
    let grade = |options: &[&str]| {
        let mut args = vec!["grade", "--env", "edit", "--task", extra, "--source", source.to_str().unwrap()];
        args.extend(options);
        arl(&args)
    };
    let err = grade(&[]).unwrap_err();
    assert!(err.contains(&format!("no task `{extra}`")), "{err}");
    let graded: Value = serde_json::from_str(&grade(&["--env-option", "train_instances=6"]).unwrap()).unwrap();
    assert_eq!(graded["reward"].as_f64(), Some(0.0), "{graded}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn grade_gives_one_to_the_reference_and_zero_to_the_bug() {
    let dir = scratch("grade");
    let out = arl(&["tasks", "--env", "edit", "--split", "heldout", "--dump", dir.to_str().unwrap()]).unwrap();
    assert!(out.starts_with("wrote 16 tasks"), "{out}");
    let task: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("minmax-spread-0/task.json")).unwrap()).unwrap();
    let function = task["data"]["function"].as_str().unwrap();
    let buggy = dir.join(format!("minmax-spread-0/{function}.py"));
    assert!(dir.join(format!("minmax-spread-0/test_{function}.py")).is_file());
    let grade = |source: &PathBuf| -> Value {
        let out = arl(&["grade", "--env", "edit", "--task", "minmax-spread-0", "--source", source.to_str().unwrap()]).unwrap();
        serde_json::from_str(&out).unwrap()
    };
    let fixed = grade(&dir.join("minmax-spread-0/reference.py"));
    assert_eq!((fixed["reward"].as_f64(), fixed["passed"].as_u64()), (Some(1.0), Some(4)), "{fixed}");
    let bug = grade(&buggy);
    assert_eq!(bug["reward"].as_f64(), Some(0.0), "{bug}");
    assert_eq!(bug["cases"].as_array().unwrap().len(), 4);
    let err = arl(&["grade", "--env", "edit", "--task", "nope-0", "--source", buggy.to_str().unwrap()]).unwrap_err();
    assert!(err.contains("no task `nope-0`"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn sandbox_run_prints_the_outcome_as_json() {
    let dir = scratch("sandbox");
    std::fs::write(dir.join("helper.py"), "VALUE = 41\n").unwrap();
    let main = dir.join("main.py");
    std::fs::write(&main, "import os, sys\nsys.path.insert(0, os.getcwd())\nimport helper\nprint(helper.VALUE + 1)\nsys.exit(3)\n")
        .unwrap();
    let doc: Value = serde_json::from_str(&arl(&["sandbox", "run", main.to_str().unwrap(), "--timeout", "5"]).unwrap()).unwrap();
    assert_eq!((doc["exit_code"].as_i64(), doc["stdout"].as_str()), (Some(3), Some("42\n")), "{doc}");
    assert_eq!(doc["timed_out"], Value::Bool(false));
    assert!(doc["signal"].is_null() && doc["stderr"].is_string() && doc["resources"]["wall_ms"].is_u64(), "{doc}");
    let sleeper = dir.join("sleep.py");
    std::fs::write(&sleeper, "import time\ntime.sleep(30)\n").unwrap();
    let doc: Value = serde_json::from_str(&arl(&["sandbox", "run", sleeper.to_str().unwrap(), "--timeout", "0.5"]).unwrap()).unwrap();
    assert_eq!(doc["timed_out"], Value::Bool(true), "{doc}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_oracle_episode_through_the_registry_earns_reward_one() {
    arl_plugins::link();
    let sandbox = (registry::get::<SandboxPlugin>("rlimit").unwrap().build)(&SandboxConfig::default()).unwrap();
    let config = EnvConfig { name: "edit".into(), ..EnvConfig::default() };
    let env = (registry::get::<EnvPlugin>("edit").unwrap().build)(&config, Arc::clone(&sandbox)).unwrap();
    let task = &env.tasks(Split::Heldout).unwrap()[5];
    let fix = task.data["fix"].as_str().unwrap();
    let mut session = env.reset(task).unwrap();
    let turns = [
        format!("<tool_call>\n{{\"name\": \"apply_edit\", \"arguments\": {{\"op\": \"{fix}\"}}}}\n</tool_call>"),
        "<tool_call>\n{\"name\": \"submit\", \"arguments\": {}}\n</tool_call>".to_string(),
    ];
    let mut reward = None;
    for text in &turns {
        if let Step::Done(outcome) = session.step(&parse_turn(text, &env.tools(), 4)).unwrap() {
            reward = Some(outcome.reward);
        }
    }
    assert_eq!(reward, Some(1.0));
}
