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
    let held: Vec<Value> = serde_json::from_str(&arl(&["tasks", "--env", "tools", "--split", "heldout", "--json"]).unwrap()).unwrap();
    let edit: Vec<Value> = serde_json::from_str(&arl(&["tasks", "--env", "edit", "--split", "heldout", "--json"]).unwrap()).unwrap();
    assert_eq!(held.len(), 16);
    assert_eq!(held, edit, "both gyms draw on the same bank");
}

#[test]
fn an_oracle_episode_earns_reward_one_and_a_wrong_edit_zero_under_rlimit() {
    oracle_episodes("rlimit");
}

/// The same episodes with CPython on WASI: the emulated pytest and the grader run unchanged.
#[test]
fn an_oracle_episode_earns_reward_one_and_a_wrong_edit_zero_under_wasm() {
    oracle_episodes("wasm");
}

fn oracle_episodes(sandbox: &str) {
    arl_plugins::link();
    let config = SandboxConfig { name: sandbox.into(), ..SandboxConfig::default() };
    let sandbox = (registry::get::<SandboxPlugin>(sandbox).unwrap().build)(&config).unwrap_or_else(|e| panic!("{e}"));
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
            match session.step(&parse_turn(text, &env.tools(), 4)).unwrap() {
                Step::Done(outcome) => reward = Some(outcome.reward),
                Step::Observe(results) => {
                    for r in results {
                        assert!(matches!(r.outcome, arl_core::ToolOutcome::Ok(_)), "{} under {}: {:?}", r.name, sandbox.name(), r.outcome);
                    }
                }
            }
        }
        let expected = if op["name"] == fix { 1.0 } else { 0.0 };
        assert_eq!(reward, Some(expected), "op {} under {}", op["name"], sandbox.name());
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

#[test]
fn run_smoke_checks_the_tools_and_runs_held_out_episodes_without_training() {
    let dir = arl_tests::scratch_dir("tools-smoke");
    let out = arl(&[
        "run",
        "--env",
        "tools",
        "--model",
        "tiny",
        "--sandbox",
        "rlimit",
        "--smoke",
        "--smoke-n",
        "2",
        "--max-new-tokens",
        "8",
        "--max-turns",
        "2",
        "--out",
        dir.to_str().unwrap(),
    ])
    .unwrap();
    assert!(out.contains("sandbox=rlimit"), "{out}");
    assert!(out.contains("smoke: chat self-check passed"), "{out}");
    assert!(
        out.contains("smoke: tool schemas render: Read(file_path, offset, limit), Edit(file_path, old_string, new_string, replace_all)"),
        "{out}"
    );
    for tool in ["tool Read", "tool Edit", "tool Write", "tool Bash"] {
        assert!(out.contains(tool), "{tool}: {out}");
    }
    assert!(out.contains("smoke: episode 1 task="), "{out}");
    assert!(out.contains("smoke: transcript of episode 0"), "{out}");
    assert!(out.contains("no training"), "{out}");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("smoke.json")).unwrap()).unwrap();
    assert_eq!(doc["sandbox"], "rlimit");
    assert_eq!(doc["episodes"].as_array().unwrap().len(), 2);
    assert_real_pytest_output(&doc, "platform linux");
    assert!(!dir.join("results.json").exists() && !dir.join("checkpoints").exists(), "a smoke run trains nothing");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bench_sandbox_reports_both_sandboxes() {
    let out = arl(&["bench", "sandbox", "--jobs", "2", "--json"]).unwrap();
    let rows: Vec<Value> = out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(rows.iter().map(|r| r["sandbox"].as_str().unwrap()).collect::<Vec<_>>(), ["rlimit", "wasm"]);
    for r in &rows {
        assert!(r["trivial_jobs_per_s"].as_f64().unwrap() > 0.0 && r["grade_jobs_per_s"].as_f64().unwrap() > 0.0, "{r}");
    }
}

/// Bash under rlimit (a real shell, real pytest) and under wasm (the emulated shell, real
/// pytest in WASI): Python's output and where tracebacks point read the same; pytest's header
/// names the interpreter.
#[test]
fn bash_python_and_pytest_observations_are_the_same_under_rlimit_and_wasm() {
    arl_plugins::link();
    let observe = |name: &str| -> Vec<String> {
        let config = SandboxConfig { name: name.into(), ..SandboxConfig::default() };
        let sandbox = (registry::get::<SandboxPlugin>(name).unwrap().build)(&config).unwrap_or_else(|e| panic!("{e}"));
        let env_config = EnvConfig { name: "tools".into(), ..EnvConfig::default() };
        let env = (registry::get::<EnvPlugin>("tools").unwrap().build)(&env_config, sandbox).unwrap();
        let task = &env.tasks(Split::Heldout).unwrap()[3];
        let function = task.data["function"].as_str().unwrap();
        let call = |name: &str, args: Value| format!("<tool_call>\n{}\n</tool_call>\n", json!({"name": name, "arguments": args}));
        let turns = [
            call("Bash", json!({"command": "pytest"})) + &call("Bash", json!({"command": "pytest -q -k nothing_matches"})),
            call("Write", json!({"file_path": "/repo/helper.py", "content": "def fail():\n    raise ValueError('boom')\n"}))
                + &call(
                    "Write",
                    json!({"file_path": "/repo/boom.py", "content": format!("from {function} import {function}\nimport helper\nprint('before')\nhelper.fail()\n")}),
                )
                + &call("Bash", json!({"command": "python boom.py"}))
                + &call("Bash", json!({"command": "python -c \"print(2 + 3)\""})),
        ];
        let mut session = env.reset(task).unwrap();
        let mut texts = Vec::new();
        for text in &turns {
            if let Step::Observe(results) = session.step(&parse_turn(text, &env.tools(), 4)).unwrap() {
                texts.extend(results.into_iter().map(|r| format!("{}: {:?}", r.name, r.outcome)));
            }
        }
        texts
    };
    let (rlimit, wasm) = (observe("rlimit"), observe("wasm"));
    assert_eq!((rlimit.len(), wasm.len()), (6, 6), "{rlimit:#?}");
    // The same: the writes, python's output, where the traceback points.
    for i in [2, 3, 5] {
        assert_eq!(rlimit[i], wasm[i]);
    }
    for text in [&rlimit[4], &wasm[4]] {
        assert!(text.contains(r#"File \"/repo/helper.py\", line 2"#) && text.contains("ValueError: boom"), "{text}");
    }
    // Both run real pytest (wasm: in the WASI CPython); the header names the interpreter
    // (docs/sandbox.md's table of the differences; tests/integration/bash_fidelity.rs has the rest).
    assert!(rlimit[0].contains("test session starts") && rlimit[0].contains("pytest-9.0.1"), "{}", rlimit[0]);
    assert!(rlimit[0].contains("platform linux") && rlimit[0].contains("1 failed"), "{}", rlimit[0]);
    assert!(wasm[0].contains("platform wasi -- Python 3.12.0, pytest-9.0.1") && wasm[0].contains("1 failed"), "{}", wasm[0]);
    for text in [&rlimit[1], &wasm[1]] {
        assert!(text.contains("1 deselected in ") && text.contains("Exit code 5"), "{text}");
    }
    // Real python shows the source line of every frame; the emulation's runner shows it only
    // for imported files (the script itself is compiled from a string).
    assert!(rlimit[4].contains("    helper.fail()") && !wasm[4].contains("    helper.fail()"), "{}", wasm[4]);
}

#[test]
fn run_smoke_under_the_wasm_sandbox_names_it() {
    let dir = arl_tests::scratch_dir("tools-smoke-wasm");
    let out = arl(&[
        "run",
        "--env",
        "tools",
        "--model",
        "tiny",
        "--sandbox",
        "wasm",
        "--smoke",
        "--smoke-n",
        "1",
        "--max-new-tokens",
        "4",
        "--max-turns",
        "2",
        "--out",
        dir.to_str().unwrap(),
    ])
    .unwrap();
    assert!(out.contains("sandbox=wasm") && out.contains("smoke: 1 held-out episode (sandbox wasm)"), "{out}");
    assert!(out.contains(r#"tool Bash {"command":"pytest"}: ok (===="#), "{out}");
    assert!(out.contains("pytest / python -m pytest with any pytest options (real pytest)"), "the prompt says pytest is real: {out}");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("smoke.json")).unwrap()).unwrap();
    assert_eq!(doc["sandbox"], "wasm");
    assert_real_pytest_output(&doc, "platform wasi");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `smoke.json` keeps each scripted call's whole observation: the `pytest` one is real
/// pytest's, run by the sandbox's interpreter (the task's public test passes; the smoke's edit
/// only added a comment).
fn assert_real_pytest_output(doc: &Value, platform: &str) {
    let calls = doc["scripted_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 8, "{calls:#?}");
    let pytest = calls.iter().find(|c| c["call"]["arguments"]["command"] == "pytest").unwrap();
    let output = pytest["output"].as_str().unwrap();
    assert_eq!(pytest["status"], "ok");
    assert!(output.contains("test session starts") && output.contains(&format!("{platform} -- Python 3.")), "{output}");
    assert!(output.contains("rootdir: /repo") && output.contains(" passed in "), "{output}");
}
