//! The `process` env: the bundled Python env (examples/process-env/sum_env.py) over the JSON-lines
//! protocol, one `arl run` step on it, and env processes that misbehave — each costs only the
//! episode in progress, with a line naming what happened, and the next episode runs.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arl_core::{AssistantTurn, Env, ParsedCall, Split, Step, ToolCall, ToolOutcome};
use arl_env_process::{ENV_PROCESS_ERRORS, ProcessEnv, ProcessOptions};
use arl_tests::{arl, arl_status, scratch_dir};
use serde_json::json;

fn example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/process-env/sum_env.py")
}

fn python_env(command: String, timeout_s: f64) -> ProcessEnv {
    ProcessEnv::start(&ProcessOptions { command, timeout_s, settings: json!({"max_operand": 4, "heldout_tasks": 5}) }, 7).unwrap()
}

fn call(name: &str, args: serde_json::Value) -> ParsedCall {
    ParsedCall::Call(ToolCall { name: name.into(), arguments: args.as_object().unwrap().clone() })
}

fn turn(text: &str, calls: Vec<ParsedCall>) -> AssistantTurn {
    AssistantTurn { text: text.into(), calls }
}

#[test]
fn the_python_example_speaks_the_protocol() {
    let env = python_env(format!("python3 {}", example().display()), 10.0);
    let (train, held) = (env.tasks(Split::Train).unwrap(), env.tasks(Split::Heldout).unwrap());
    assert_eq!((train.len(), held.len()), (20, 5), "settings reach the env in hello");
    assert_eq!(env.tools()[0].name, "add");
    let task = &held[0];
    let (a, b) = (task.data["a"].as_i64().unwrap(), task.data["b"].as_i64().unwrap());
    let mut s = env.reset(task).unwrap();
    assert_eq!(s.messages().last().unwrap().content, format!("What is {a} + {b}?"));
    let malformed = ParsedCall::Malformed { raw: "{".into(), reason: "not JSON".into() };
    let Step::Observe(results) = s.step(&turn("", vec![call("add", json!({"a": a, "b": b})), malformed, call("mul", json!({}))])).unwrap()
    else {
        panic!("tool calls are observed")
    };
    assert_eq!(results[0].outcome, ToolOutcome::Ok((a + b).to_string()));
    assert!(matches!(results[1].outcome, ToolOutcome::Malformed(_)));
    assert!(matches!(&results[2].outcome, ToolOutcome::Failed(t) if t.contains("no tool 'mul'")));
    let Step::Done(outcome) = s.step(&turn(&format!("{}", a + b), vec![])).unwrap() else { panic!("a final answer ends it") };
    assert_eq!(outcome.reward, 1.0);
    assert_eq!((outcome.stats.turns, outcome.stats.tool_calls, outcome.stats.malformed_calls, outcome.stats.failed_calls), (2, 3, 1, 1));
    let mut wrong = env.reset(task).unwrap();
    let Step::Done(o) = wrong.step(&turn(&format!("{}", a + b + 1), vec![])).unwrap() else { panic!() };
    assert_eq!(o.reward, 0.0);
    let mut cut = env.reset(task).unwrap();
    assert_eq!(cut.finish().unwrap().reward, 0.0);
}

#[test]
fn arl_run_trains_a_step_on_the_python_env() {
    let root = scratch_dir("process-run");
    let out = root.join("run");
    let command = format!("env.options.command={:?}", format!("python3 {}", example().display()));
    let args = ["run", "--env", "process", "--set", &command, "--model", "tiny", "--steps", "1", "--prompts", "2", "--group-size", "2"];
    let more = ["--eval-n", "1", "--set", "sampling.max_new_tokens=8", "--set", "output.checkpoints=false", "--out", out.to_str().unwrap()];
    let log = arl(&args.iter().chain(&more).copied().collect::<Vec<_>>()).unwrap();
    let results: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    assert_eq!(results["steps"].as_array().unwrap().len(), 1, "{log}");
    assert_eq!(results["before"]["summary"]["tasks"], 16, "{log}");
    std::fs::remove_dir_all(&root).unwrap();
}

/// A Python env that answers hello, tasks and reset like the example, and misbehaves on the
/// first `step` as `mode` says (later steps, after the restart, behave).
fn misbehaving(dir: &Path, mode: &str) -> String {
    let script = dir.join(format!("{mode}.py"));
    let flag = dir.join(format!("{mode}.done"));
    std::fs::write(
        &script,
        format!(
            r#"import json, os, sys, time
FLAG = {flag:?}
for line in sys.stdin:
    req = json.loads(line)
    m, out = req["method"], {{}}
    if m == "hello": out = {{"protocol": 1}}
    elif m == "tasks": out = {{"tasks": [{{"id": "t1"}}, {{"id": "t2"}}]}}
    elif m == "reset": out = {{"messages": [{{"role": "user", "content": "hi"}}]}}
    elif m == "step":
        if not os.path.exists(FLAG):
            open(FLAG, "w").close()
            print("about to {mode}", file=sys.stderr, flush=True)
            if "{mode}" == "crash": sys.exit(3)
            if "{mode}" == "hang": time.sleep(60)
            if "{mode}" == "garbage": print("this is not json", flush=True); continue
            if "{mode}" == "wrong-id": print(json.dumps({{"id": req["id"] + 7, "done": True, "reward": 1}}), flush=True); continue
            if "{mode}" == "error": print(json.dumps({{"id": req["id"], "error": "KeyError: 'episode'"}}), flush=True); continue
            if "{mode}" == "bad-reward": print(json.dumps({{"id": req["id"], "done": True, "reward": "high"}}), flush=True); continue
        out = {{"done": True, "reward": 1.0}}
    out["id"] = req["id"]
    print(json.dumps(out), flush=True)
"#
        ),
    )
    .unwrap();
    format!("python3 {}", script.display())
}

#[test]
fn a_misbehaving_env_process_costs_one_episode_never_the_run() {
    let dir = scratch_dir("process-bad");
    let cases = [
        ("crash", "the process exited (exit status: 3); stderr: about to crash"),
        ("hang", "no answer within 1 s (env.options.timeout_s); stderr: about to hang"),
        ("garbage", "answered with a line that is not JSON: this is not json"),
        ("wrong-id", "answered request"),
        ("error", "reported an error: KeyError: 'episode'"),
        ("bad-reward", "want {\"done\": true, \"reward\": …}: invalid type: string \"high\""),
    ];
    for (mode, says) in cases {
        let env = Arc::new(python_env(misbehaving(&dir, mode), 1.0));
        let task = env.tasks(Split::Train).unwrap().remove(0);
        let t0 = std::time::Instant::now();
        let mut first = env.reset(&task).unwrap();
        let Step::Done(lost) = first.step(&turn("x", vec![])).unwrap() else { panic!("{mode}: the episode ends") };
        assert!(t0.elapsed().as_secs_f64() < 10.0, "{mode}: no hang");
        assert_eq!(lost.reward, 0.0, "{mode}");
        assert_eq!(lost.stats.counters.get(ENV_PROCESS_ERRORS), Some(&1), "{mode}");
        assert!(lost.stats.infra_failed, "{mode}: an infrastructure failure, left out of the loss");
        let line = env.last_failure().unwrap();
        assert!(line.contains(says) && line.lines().count() == 1, "{mode}: {line} (want {says})");
        // The next episode runs on a fresh process, set up by hello again.
        let mut next = env.reset(&task).unwrap();
        let Step::Done(ok) = next.step(&turn("x", vec![])).unwrap() else { panic!() };
        assert_eq!(ok.reward, 1.0, "{mode}: the restarted process serves the next episode");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_process_that_fails_at_start_is_one_line_exit_2() {
    let dir = scratch_dir("process-start");
    let out = dir.join("run");
    let quiet = dir.join("quiet.py");
    std::fs::write(&quiet, "import sys\nprint('starting up', file=sys.stderr)\nsys.exit(1)\n").unwrap();
    let old = dir.join("old.py");
    std::fs::write(
        &old,
        "import json,sys\nfor l in sys.stdin:\n    r=json.loads(l); print(json.dumps({'id': r['id'], 'protocol': 0}), flush=True)\n",
    )
    .unwrap();
    let cases = [
        (String::new(), "env.options.command is required".to_string()),
        (
            format!("env.options.command={:?}", format!("python3 {}", quiet.display())),
            "`hello`: the process exited (exit status: 1); stderr: starting up".into(),
        ),
        (format!("env.options.command={:?}", format!("python3 {}", old.display())), "speaks protocol 0; arl speaks 1".into()),
    ];
    for (set, says) in cases {
        let mut args = vec!["run", "--env", "process", "--model", "tiny", "--out", out.to_str().unwrap()];
        if !set.is_empty() {
            args.extend(["--set", &set]);
        }
        let (code, result) = arl_status(&args);
        let err = result.expect_err("must fail");
        assert_eq!(code, 2, "{err}");
        assert!(err.contains(&says), "{err} (want {says})");
        assert_eq!(err.lines().count(), 1, "{err}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
