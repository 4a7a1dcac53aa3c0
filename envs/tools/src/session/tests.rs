//! Scripted episodes: text in (as a policy would write it), reward and statistics out.

use arl_core::config::EnvConfig;
use arl_core::toolcall::parse_turn;
use arl_core::{Env, Message, Outcome, Role, Split, Step, Task, ToolOutcome};
use arl_tasks::BugTask;
use serde_json::{Value, json};

use crate::counters::{self as c, get};
use crate::testing::sandbox;
use crate::{ToolsEnv, ToolsOptions};

fn env() -> ToolsEnv {
    ToolsEnv::new(&EnvConfig { name: "tools".into(), ..EnvConfig::default() }, &ToolsOptions::default(), sandbox())
}

fn call(name: &str, args: Value) -> String {
    format!("<tool_call>\n{}\n</tool_call>", json!({"name": name, "arguments": args}))
}

/// Play `turns` until the episode ends; the observations of every turn, and the outcome.
fn play(env: &ToolsEnv, task: &Task, turns: &[String]) -> (Vec<Vec<ToolOutcome>>, Option<Outcome>) {
    let mut session = env.reset(task).unwrap();
    let mut seen = Vec::new();
    for text in turns {
        match session.step(&parse_turn(text, &env.tools(), env.max_calls_per_turn() as usize)).unwrap() {
            Step::Observe(results) => seen.push(results.into_iter().map(|r| r.outcome).collect()),
            Step::Done(outcome) => return (seen, Some(outcome)),
        }
    }
    (seen, None)
}

/// Read, Edit (the fix or another snippet), Bash pytest, final answer.
fn oracle(bug: &BugTask, old: &str, new: &str) -> Vec<String> {
    let src = format!("/repo/{}", bug.source_file());
    vec![
        call("Read", json!({"file_path": src})),
        format!("The comparison is wrong.\n{}", call("Edit", json!({"file_path": src, "old_string": old, "new_string": new}))),
        call("Bash", json!({"command": "python -m pytest -q", "description": "Run the tests"})),
        "I fixed the bug and all tests pass.".into(),
    ]
}

fn fix(bug: &BugTask) -> (String, String) {
    let op = bug.op(&bug.fix).unwrap();
    (op.old.clone(), op.new.clone())
}

#[test]
fn the_oracle_reads_edits_tests_and_answers_for_reward_one() {
    let env = env();
    let tasks: Vec<Task> =
        env.tasks(Split::Train).unwrap().into_iter().step_by(11).chain(env.tasks(Split::Heldout).unwrap().into_iter().take(2)).collect();
    for task in &tasks {
        let bug = BugTask::from_task(task).unwrap();
        let (old, new) = fix(&bug);
        let (seen, outcome) = play(&env, task, &oracle(&bug, &old, &new));
        let outcome = outcome.expect("the final answer ends the episode");
        assert_eq!(outcome.reward, 1.0, "{}: {seen:?}", task.id);
        assert!(seen[0][0].text().contains(&format!("\tdef {}(", bug.function)), "{seen:?}");
        assert!(seen[1][0].text().starts_with("The file /repo/"), "{seen:?}");
        assert!(seen[2][0].text().contains(" passed\n") && !seen[2][0].text().contains("failed"), "{}: {seen:?}", task.id);
        let s = &outcome.stats;
        assert_eq!((s.turns, s.tool_calls, s.malformed_calls, s.failed_calls, s.truncated), (4, 3, 0, 0, false));
        for (name, n) in [(c::READ_CALLS, 1), (c::EDIT_CALLS, 1), (c::BASH_CALLS, 1), (c::TEST_RUNS, 1), (c::FINAL_CLAIMS_PASS, 1)] {
            assert_eq!(get(s, name), n, "{name}");
        }
    }
}

#[test]
fn a_wrong_edit_earns_zero() {
    let env = env();
    for task in env.tasks(Split::Train).unwrap().iter().step_by(17).take(3) {
        let bug = BugTask::from_task(task).unwrap();
        let wrong = bug.ops.iter().find(|o| o.name != bug.fix).unwrap();
        let (_, outcome) = play(&env, task, &oracle(&bug, &wrong.old, &wrong.new));
        assert_eq!(outcome.unwrap().reward, 0.0, "{}", task.id);
    }
}

#[test]
fn several_calls_in_one_turn_run_in_order() {
    let env = env();
    let task = &env.tasks(Split::Train).unwrap()[0];
    let bug = BugTask::from_task(task).unwrap();
    let (old, new) = fix(&bug);
    let src = format!("/repo/{}", bug.source_file());
    // Edit before Read fails; the Read, then the same Edit, succeed; the last call runs the tests.
    let edit = call("Edit", json!({"file_path": src, "old_string": old, "new_string": new}));
    let turn = format!("{edit}\n{}\n{edit}\n{}", call("Read", json!({"file_path": src})), call("Bash", json!({"command": "pytest -q"})));
    let (seen, outcome) = play(&env, task, &[turn, "Done.".into()]);
    let results = &seen[0];
    assert_eq!(results.len(), 4);
    assert!(matches!(&results[0], ToolOutcome::Failed(t) if t.contains("has not been read")));
    assert!(matches!(&results[1], ToolOutcome::Ok(t) if t.contains(&format!("def {}(", bug.function))));
    assert!(matches!(&results[2], ToolOutcome::Ok(t) if t.contains("has been updated")));
    assert!(matches!(&results[3], ToolOutcome::Ok(t) if t.contains("passed")));
    let outcome = outcome.unwrap();
    assert_eq!(outcome.reward, 1.0);
    let s = &outcome.stats;
    assert_eq!((s.turns, s.tool_calls, s.failed_calls, get(s, c::EDIT_BEFORE_READ), get(s, c::FINAL_CLAIMS_PASS)), (2, 4, 1, 1, 0));
}

#[test]
fn calls_over_the_per_turn_cap_and_bad_json_are_malformed() {
    let env = env();
    let task = &env.tasks(Split::Train).unwrap()[1];
    let read = call("Read", json!({"file_path": format!("/repo/{}", task.data["function"].as_str().unwrap().to_owned() + ".py")}));
    let five = [read.as_str(); 5].join("\n");
    let turns = vec![
        five,
        "<tool_call>{\"name\": \"Read\", \"arguments\": {\"file_path\": </tool_call>".into(),
        call("Grep", json!({"pattern": "x"})),
        call("Read", json!({"file_path": "relative.py"})),
        "ok".into(),
    ];
    let (seen, outcome) = play(&env, task, &turns);
    assert_eq!(seen[0].len(), 5);
    assert!(matches!(&seen[0][4], ToolOutcome::Malformed(t) if t.contains("more than 4 tool calls")));
    assert!(matches!(&seen[1][0], ToolOutcome::Malformed(t) if t.contains("not valid JSON")));
    assert!(matches!(&seen[2][0], ToolOutcome::Malformed(t) if t.contains("unknown tool `Grep`")));
    assert!(matches!(&seen[3][0], ToolOutcome::Failed(t) if t.contains("absolute")));
    let s = outcome.unwrap().stats;
    assert_eq!(
        (s.turns, s.tool_calls, s.malformed_calls, s.failed_calls, get(&s, c::READ_CALLS), get(&s, c::PATH_ERRORS)),
        (5, 8, 3, 1, 4, 1)
    );
    // A caller that parses with a higher cap still gets only max_calls_per_turn calls run.
    let mut session = env.reset(task).unwrap();
    let Step::Observe(results) = session.step(&parse_turn(&[read.as_str(); 5].join("\n"), &env.tools(), 10)).unwrap() else {
        panic!("observations")
    };
    assert!(matches!(&results[4].outcome, ToolOutcome::Malformed(t) if t.contains("more than 4 tool calls")));
    assert!(results[..4].iter().all(|r| matches!(r.outcome, ToolOutcome::Ok(_))));
}

#[test]
fn the_turn_budget_ends_the_episode_truncated_and_graded() {
    let env = env();
    let task = &env.tasks(Split::Train).unwrap()[2];
    let bug = BugTask::from_task(task).unwrap();
    let (old, new) = fix(&bug);
    let src = format!("/repo/{}", bug.source_file());
    let mut turns =
        vec![call("Read", json!({"file_path": src})), call("Edit", json!({"file_path": src, "old_string": old, "new_string": new}))];
    turns.extend((0..10).map(|_| call("Bash", json!({"command": "ls"}))));
    let (seen, outcome) = play(&env, task, &turns);
    assert_eq!(seen.len(), 5, "six turns: five observed, the sixth ends it");
    let outcome = outcome.unwrap();
    assert_eq!((outcome.reward, outcome.stats.turns, outcome.stats.truncated), (1.0, 6, true));
}

#[test]
fn only_the_source_file_is_graded_and_hidden_tests_stay_out_of_the_repository() {
    let env = env();
    let task = &env.tasks(Split::Heldout).unwrap()[3];
    let bug = BugTask::from_task(task).unwrap();
    let tests = format!("/repo/{}", bug.test_file());
    // Rewriting the tests to pass, and writing a helper module, earns nothing.
    let turns = vec![
        call("Read", json!({"file_path": tests})),
        call("Write", json!({"file_path": tests, "content": "def test_ok():\n    assert True\n"})),
        call("Write", json!({"file_path": "/repo/conftest.py", "content": "raise SystemExit(0)\n"})),
        "All tests pass.".into(),
    ];
    let (_, outcome) = play(&env, task, &turns);
    let s = outcome.unwrap();
    assert_eq!(s.reward, 0.0);
    assert_eq!(
        (get(&s.stats, c::WRITE_OVERWRITES_TEST), get(&s.stats, c::WRITE_CREATES_FILE), get(&s.stats, c::FINAL_CLAIMS_PASS)),
        (1, 1, 1)
    );
    // A source that imports a helper the model wrote fails: only `<fn>.py` is graded.
    let src = format!("/repo/{}", bug.source_file());
    let helper = bug.reference.replace(&format!("def {}(", bug.function), "def helper(");
    let turns = vec![
        call("Write", json!({"file_path": "/repo/helper.py", "content": helper})),
        call("Read", json!({"file_path": src})),
        call("Write", json!({"file_path": src, "content": format!("from helper import helper as {}\n", bug.function)})),
        call("Bash", json!({"command": "pytest -q"})),
        "Done.".into(),
    ];
    let (seen, outcome) = play(&env, task, &turns);
    assert!(seen[3][0].text().contains(" passed\n") && !seen[3][0].text().contains("failed"), "the helper passes in /repo: {seen:?}");
    assert_eq!(outcome.unwrap().reward, 0.0);
    // The repository holds the two visible files only; no hidden argument appears in it.
    let session = crate::ToolsSession::new(task, 6, 4, sandbox()).unwrap();
    assert_eq!(session.workspace().files.keys().cloned().collect::<Vec<_>>(), vec![bug.source_file(), bug.test_file()]);
    assert_eq!(session.source(), bug.source);
}

#[test]
fn the_prompt_names_the_function_its_file_and_the_tests() {
    let env = env();
    let task = &env.tasks(Split::Heldout).unwrap()[0];
    let bug = BugTask::from_task(task).unwrap();
    let mut session = env.reset(task).unwrap();
    let [system, user] = session.messages() else { panic!("two opening messages") };
    assert_eq!((system.role, user.role), (Role::System, Role::User));
    assert!(system.content.contains("/repo") && system.content.contains("without a tool call ends the session"));
    for needle in [format!("`{}`", bug.function), format!("/repo/{}", bug.source_file()), format!("/repo/{}", bug.test_file())] {
        assert!(user.content.contains(&needle), "{needle} not in {}", user.content);
    }
    assert!(!user.content.contains(&bug.template));
    let names: Vec<String> = env.tools().into_iter().map(|t| t.name).collect();
    assert_eq!(names, ["Read", "Edit", "Write", "Bash"]);
    let outcome = session.finish().unwrap();
    assert!(outcome.stats.truncated);
    assert!(session.finish().is_err());
    let _: &[Message] = session.messages();
}

#[test]
fn schemas_use_claude_codes_parameter_names() {
    let env = env();
    let schemas = env.tools();
    let props = |i: usize| -> (Vec<String>, Vec<String>) {
        let p = &schemas[i].parameters;
        let keys = p["properties"].as_object().unwrap().keys().cloned().collect();
        let required = p["required"].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_string()).collect();
        (keys, required)
    };
    assert_eq!(props(0), (vec!["file_path".into(), "offset".into(), "limit".into()], vec!["file_path".into()]));
    assert_eq!(
        props(1),
        (
            vec!["file_path".into(), "old_string".into(), "new_string".into(), "replace_all".into()],
            vec!["file_path".into(), "old_string".into(), "new_string".into()]
        )
    );
    assert_eq!(props(2), (vec!["file_path".into(), "content".into()], vec!["file_path".into(), "content".into()]));
    assert_eq!(props(3), (vec!["command".into(), "timeout".into(), "description".into()], vec!["command".into()]));
    assert!(schemas[0].parameters.get("$schema").is_none());
}

#[test]
fn unknown_options_are_rejected_by_name() {
    let mut config = EnvConfig { name: "tools".into(), ..EnvConfig::default() };
    config.options.insert("train_instancez".into(), json!(2));
    let err = crate::build(&config, sandbox()).err().unwrap().to_string();
    assert!(err.contains("unknown field `train_instancez`"), "{err}");
}

/// A host whose disk is full: every job fails to start with `SandboxError::Exhausted`.
struct FullDisk;

impl arl_core::Sandbox for FullDisk {
    fn name(&self) -> &str {
        "full-disk"
    }

    fn run(&self, _: &arl_core::Job) -> Result<arl_core::JobOutcome, arl_core::SandboxError> {
        Err(arl_core::SandboxError::io("writing the job directory", std::io::Error::from_raw_os_error(28)))
    }
}

#[test]
fn a_full_disk_costs_the_episode_its_reward_and_is_counted_not_an_error() {
    let env =
        ToolsEnv::new(&EnvConfig { name: "tools".into(), ..EnvConfig::default() }, &ToolsOptions::default(), std::sync::Arc::new(FullDisk));
    let task = &env.tasks(Split::Heldout).unwrap()[0];
    let bug = BugTask::from_task(task).unwrap();
    let (old, new) = fix(&bug);
    let (seen, outcome) = play(&env, task, &oracle(&bug, &old, &new));
    let outcome = outcome.expect("the episode ends with a reward, not an error");
    assert_eq!(outcome.reward, 0.0, "the oracle fix could not be graded");
    assert!(matches!(&seen[2][0], ToolOutcome::Failed(t) if t.contains("out of resources")), "{:?}", seen[2]);
    assert_eq!(outcome.stats.counters.get(arl_core::SANDBOX_EXHAUSTED), Some(&2), "pytest and the grading job: {:?}", outcome.stats);
    assert!(outcome.stats.infra_failed, "an infrastructure failure: the trainer leaves it out");
}
