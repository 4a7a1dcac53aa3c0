//! `arl run --resume` after a real SIGKILL: the killed run, resumed from its step-2
//! checkpoint, reports the same step-3 metrics as a run that was never interrupted. The kill
//! is deterministic: the killed child's env blocks in step 3's rollout (its 9th episode), so
//! it is always killed after writing the step-2 checkpoint and before step 3 ends. A bf16 run
//! resumed after two steps continues in bf16 and takes the uninterrupted run's step 3, and so
//! does a LoRA run, from its adapter-only checkpoint. An async run killed with a group in
//! flight resumes without losing or repeating it.
//!
//! Each `arl` is a child process (`common::arl_child`).

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{BLOCK_VAR, arl_child};

/// Not a test of its own: the body of a child process (a no-op in a normal test run).
#[test]
fn child() {
    common::child();
}

fn out_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("arl-resume-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// Three steps on the tiny preset, a checkpoint after every step; `extra` flags last.
fn command(out: &Path, extra: &[&str]) -> Command {
    let mut args: Vec<String> = [
        "run",
        "--env",
        "test-letters",
        "--model",
        "tiny",
        "--steps",
        "3",
        "--prompts",
        "1",
        "--group-size",
        "4",
        "--max-new-tokens",
        "4",
        "--eval-n",
        "0",
        "--seed",
        "5",
        "--lr",
        "1e-3",
        "--set",
        "trainer.checkpoint_every=1",
        "--set",
        "trainer.checkpoint_interval_s=0",
        "--out",
    ]
    .map(String::from)
    .to_vec();
    args.push(out.display().to_string());
    args.extend(extra.iter().map(|s| s.to_string()));
    arl_child(&args)
}

fn run(out: &Path, extra: &[&str]) -> Output {
    command(out, extra).output().expect("arl runs")
}

fn steps(out: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(out.join("results.json")).expect("results.json");
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v["steps"].as_array().unwrap().clone()
}

/// The metrics that do not depend on the clock.
const DETERMINISTIC: &[&str] = &[
    "reward_mean",
    "pass_rate",
    "loss",
    "grad_norm",
    "logprob_gap_mean",
    "logprob_gap_max",
    "ratio_mean",
    "clip_frac_high",
    "clip_frac_low",
    "entropy",
    "policy_tokens",
    "lr",
    "episodes",
    "truncated_frac",
];

fn assert_same_metrics(a: &serde_json::Value, b: &serde_json::Value) {
    for key in DETERMINISTIC {
        let (x, y) = (&a[key], &b[key]);
        match (x.as_f64(), y.as_f64()) {
            (Some(x), Some(y)) => assert!((x - y).abs() <= 1e-7 * x.abs().max(1.0), "{key}: {x} vs {y}"),
            _ => assert_eq!(x, y, "{key}"),
        }
    }
}

/// Run B in `out` with `extra`, its env blocking at episode 8 (step 3's first, or the group in
/// flight during step 2), SIGKILLed once its step-2 checkpoint exists and while it is still
/// running (blocked, so the kill lands between that checkpoint and the end of step 3, every
/// time). Returns the checkpoint's `trainer_state.json`.
fn kill_after_step_2(out: &Path, extra: &[&str], blocked_in: &str) -> PathBuf {
    let mut child = command(out, extra).env(BLOCK_VAR, "8").stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    let marker = out.join("checkpoints/step-00002/trainer_state.json");
    let t0 = Instant::now();
    while !marker.exists() {
        assert!(t0.elapsed() < Duration::from_secs(300), "no step-2 checkpoint");
        if let Some(status) = child.try_wait().unwrap() {
            panic!("run B ended before the kill: {status}");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(200));
    assert!(child.try_wait().unwrap().is_none(), "run B must still be running ({blocked_in})");
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    marker
}

#[test]
fn resume_after_a_kill_reproduces_the_uninterrupted_next_step() {
    // Run A, uninterrupted, alongside run B, whose env blocks at the first episode of step 3
    // (prompts 1 × group 4 = 4 episodes a step), after its step-2 checkpoint is written.
    let a = out_dir("a");
    let run_a = command(&a, &[]).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let b = out_dir("b");
    kill_after_step_2(&b, &[], "blocked in step 3");
    assert!(!b.join("checkpoints/step-00003").exists() && !b.join("checkpoints/final").exists() && !b.join("results.json").exists());
    let done = run_a.wait_with_output().unwrap();
    assert!(done.status.success(), "{}", String::from_utf8_lossy(&done.stderr));
    let uninterrupted = steps(&a);
    assert_eq!(uninterrupted.len(), 3);
    // Not vacuous: the policy moved at every step.
    for s in &uninterrupted {
        assert!(s["grad_norm"].as_f64().unwrap() > 0.0, "{s}");
    }

    let resumed = run(&b, &["--resume"]);
    let log = String::from_utf8_lossy(&resumed.stdout);
    assert!(resumed.status.success(), "{log}\n{}", String::from_utf8_lossy(&resumed.stderr));
    assert!(log.contains("after step 2"), "{log}");
    let after = steps(&b);
    assert_eq!(after.len(), 3);
    for (x, y) in uninterrupted.iter().zip(&after) {
        assert_same_metrics(x, y);
    }
    let metrics_lines = std::fs::read_to_string(b.join("metrics.jsonl")).unwrap().lines().count();
    assert_eq!(metrics_lines, 3);
    assert!(b.join("checkpoints/final/optimizer.safetensors").exists());
    // The newest two step checkpoints are kept (trainer.keep_checkpoints), without optimizer state.
    assert!(!b.join("checkpoints/step-00001").exists());
    for older in ["step-00002", "step-00003"] {
        let dir = b.join("checkpoints").join(older);
        assert!(dir.join("model.safetensors").exists() && !dir.join("optimizer.safetensors").exists(), "{older}");
    }

    // A changed key that matters is refused, by name.
    let changed = run(&b, &["--resume", "--set", "trainer.lr=2e-3"]);
    let err = String::from_utf8_lossy(&changed.stderr);
    assert!(!changed.status.success() && err.contains("`trainer.lr`"), "{err}");
    let _ = std::fs::remove_dir_all(&a);
    let _ = std::fs::remove_dir_all(&b);
}

/// Async training (`trainer.max_steps_off_policy = 1`, one group in flight) killed mid-flight:
/// the rollout thread blocks in the group it started for step 3, after the trainer wrote the
/// step-2 checkpoint with that group in flight. The resumed run discards the group, counts it,
/// samples its task again under the step-2 weights, and its data positions follow on from the
/// checkpoint's with nothing skipped or taken twice, as in an uninterrupted run.
#[test]
fn an_async_run_killed_with_a_group_in_flight_resumes_without_losing_it() {
    let asynchronous = ["--set", "trainer.max_steps_off_policy=1", "--set", "loss.decoupled=true"];
    let a = out_dir("async-a");
    let run_a = command(&a, &asynchronous).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let b = out_dir("async-b");
    // Episodes 0–3 are step 1's group, 4–7 step 2's, 8– the group in flight during step 2.
    let marker = kill_after_step_2(&b, &asynchronous, "its rollout thread is blocked");
    let state: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&marker).unwrap()).unwrap();
    assert_eq!((state["tasks_used"].as_u64(), state["groups_in_flight"].as_u64()), (Some(2), Some(1)), "{state}");
    let done = run_a.wait_with_output().unwrap();
    assert!(done.status.success(), "{}", String::from_utf8_lossy(&done.stderr));

    let resumed = run(&b, &["--set", "trainer.max_steps_off_policy=1", "--set", "loss.decoupled=true", "--resume"]);
    let log = String::from_utf8_lossy(&resumed.stdout);
    assert!(resumed.status.success(), "{log}\n{}", String::from_utf8_lossy(&resumed.stderr));
    assert!(
        log.contains("after step 2") && log.contains("1 group in flight at the checkpoint discarded; their tasks are sampled again"),
        "{log}"
    );
    let (whole, after) = (steps(&a), steps(&b));
    assert_eq!((whole.len(), after.len()), (3, 3));
    let positions = |s: &[serde_json::Value]| -> Vec<(u64, u64)> {
        s.iter().map(|m| (m["off_policy"]["tasks_from"].as_u64().unwrap(), m["off_policy"]["tasks_to"].as_u64().unwrap())).collect()
    };
    assert_eq!(positions(&after), [(0, 1), (1, 2), (2, 3)], "contiguous: no task skipped or taken twice");
    assert_eq!(positions(&after), positions(&whole), "the same data as the uninterrupted run");
    assert_eq!(after[2]["off_policy"]["discarded_in_flight"], 1);
    assert_eq!(after[2]["episodes"], 4, "the discarded group's task was sampled again and trained");
    // Resampled under the step-2 weights, the group is fresh; uninterrupted, it was one step stale.
    assert_eq!(after[2]["off_policy"]["staleness"].as_object().unwrap().keys().collect::<Vec<_>>(), ["0"]);
    assert_eq!(whole[2]["off_policy"]["staleness"].as_object().unwrap().keys().collect::<Vec<_>>(), ["1"]);
    for (x, y) in whole.iter().zip(&after).take(2) {
        assert_same_metrics(x, y);
    }
    let _ = std::fs::remove_dir_all(&a);
    let _ = std::fs::remove_dir_all(&b);
}

/// The `difficulty` task sampler's draws after a SIGKILL and `--resume` are the uninterrupted
/// run's, step for step: its generator and every task's pass counts come back from the
/// checkpoint (a fresh generator would draw otherwise).
#[test]
fn a_difficulty_sampled_run_killed_and_resumed_draws_the_same_tasks() {
    let difficulty = ["--set", "trainer.task_sampler=\"difficulty\"", "--set", "trainer.steps=4"];
    let a = out_dir("difficulty-a");
    let run_a = command(&a, &difficulty).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let b = out_dir("difficulty-b");
    let marker = kill_after_step_2(&b, &difficulty, "blocked in step 3");
    let state: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&marker).unwrap()).unwrap();
    let recent = state["task_sampler"]["recent"].as_object().expect("the sampler's state is in the checkpoint");
    assert_eq!(recent.len(), 2, "two tasks drawn in two steps: {state}");
    let done = run_a.wait_with_output().unwrap();
    assert!(done.status.success(), "{}", String::from_utf8_lossy(&done.stderr));
    let mut again = difficulty.to_vec();
    again.push("--resume");
    let resumed = run(&b, &again);
    let log = String::from_utf8_lossy(&resumed.stdout);
    assert!(resumed.status.success() && log.contains("after step 2"), "{log}\n{}", String::from_utf8_lossy(&resumed.stderr));
    let (whole, after) = (steps(&a), steps(&b));
    assert_eq!((whole.len(), after.len()), (4, 4));
    let tasks = |s: &[serde_json::Value]| s.iter().map(|m| m["tasks"].clone()).collect::<Vec<_>>();
    assert_eq!(tasks(&after), tasks(&whole));
    assert!(whole.iter().all(|m| m["tasks"].as_array().unwrap().len() == 1), "one task a step");
    assert_eq!(whole[0]["pools"]["unseen"], 4);
    assert_eq!(whole[1]["pools"]["unseen"], 3);
    for (x, y) in whole.iter().zip(&after) {
        assert_same_metrics(x, y);
        assert_eq!(x["pools"], y["pools"]);
    }
    let _ = std::fs::remove_dir_all(&a);
    let _ = std::fs::remove_dir_all(&b);
}

/// A bf16 run stopped after step 2 and resumed (`--steps 3 --resume`; the learning rate is
/// constant, so the step count may grow) takes the same step 3 as an uninterrupted bf16 run:
/// the weights and the AdamW moments come back in bf16, not f32.
#[test]
fn a_bf16_run_resumes_in_bf16() {
    let (a, b) = (out_dir("bf16-a"), out_dir("bf16-b"));
    let done = run(&a, &["--dtype", "bf16"]);
    assert!(done.status.success(), "{}", String::from_utf8_lossy(&done.stderr));
    let two = run(&b, &["--dtype", "bf16", "--set", "trainer.steps=2"]);
    assert!(two.status.success(), "{}", String::from_utf8_lossy(&two.stderr));
    let resumed = run(&b, &["--dtype", "bf16", "--resume"]);
    let log = String::from_utf8_lossy(&resumed.stdout);
    assert!(resumed.status.success() && log.contains("after step 2"), "{log}\n{}", String::from_utf8_lossy(&resumed.stderr));
    let (x, y) = (steps(&a), steps(&b));
    assert_eq!((x.len(), y.len()), (3, 3));
    assert!(x[2]["grad_norm"].as_f64().unwrap() > 0.0);
    for (x, y) in x.iter().zip(&y) {
        assert_same_metrics(x, y);
    }
    let _ = std::fs::remove_dir_all(&a);
    let _ = std::fs::remove_dir_all(&b);
}

/// GRPO with LoRA (rank 4 on every linear layer of the frozen base) trains, checkpoints only
/// the adapter and its optimizer state, and a run stopped after step 2 and resumed takes the
/// uninterrupted run's step 3.
#[test]
fn a_lora_run_trains_and_resumes_from_its_adapter() {
    let (a, b) = (out_dir("lora-a"), out_dir("lora-b"));
    let lora = ["--lora", "--set", "lora.rank=4", "--set", "trainer.lr=1e-2"];
    let done = run(&a, &lora);
    let log = String::from_utf8_lossy(&done.stdout);
    assert!(done.status.success(), "{}", String::from_utf8_lossy(&done.stderr));
    assert!(log.contains("LoRA: rank 4, alpha 16 on q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj"), "{log}");
    let mut two = lora.to_vec();
    two.extend(["--set", "trainer.steps=2"]);
    let stopped = run(&b, &two);
    assert!(stopped.status.success(), "{}", String::from_utf8_lossy(&stopped.stderr));
    let mut again = lora.to_vec();
    again.push("--resume");
    let resumed = run(&b, &again);
    let log = String::from_utf8_lossy(&resumed.stdout);
    assert!(resumed.status.success() && log.contains("after step 2"), "{log}\n{}", String::from_utf8_lossy(&resumed.stderr));
    let (x, y) = (steps(&a), steps(&b));
    assert_eq!((x.len(), y.len()), (3, 3));
    for s in &x {
        assert!(s["grad_norm"].as_f64().unwrap() > 0.0, "the adapters get gradients: {s}");
    }
    for (x, y) in x.iter().zip(&y) {
        assert_same_metrics(x, y);
    }
    let fin = b.join("checkpoints/final");
    assert!(fin.join("adapter_model.safetensors").is_file() && fin.join("optimizer.safetensors").is_file());
    assert!(!fin.join("model.safetensors").exists(), "no base weights in a LoRA checkpoint");
    let (adapter, optimizer) = (fin.join("adapter_model.safetensors"), fin.join("optimizer.safetensors"));
    let size = |p: &Path| std::fs::metadata(p).unwrap().len();
    // The tiny preset's base is ~9.8M parameters (39 MB in f32); its rank-4 adapters 35k.
    assert!(size(&adapter) < 200_000 && size(&optimizer) < 400_000, "{} {}", size(&adapter), size(&optimizer));
    // The policy moved between the step-2 checkpoint and the end.
    assert_ne!(std::fs::read(&adapter).unwrap(), std::fs::read(b.join("checkpoints/step-00002/adapter_model.safetensors")).unwrap());
    let _ = std::fs::remove_dir_all(&a);
    let _ = std::fs::remove_dir_all(&b);
}

/// Run `out` with `extra`, its env blocking after `episodes` episodes, SIGKILLed once `marker`
/// (a file under `out`) exists and holds `holding`, while the run is still blocked.
fn kill_once(out: &Path, extra: &[&str], episodes: usize, marker: &str, holding: &str) {
    let mut child = command(out, extra).env(BLOCK_VAR, episodes.to_string()).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let marker = out.join(marker);
    let t0 = Instant::now();
    while !std::fs::read_to_string(&marker).is_ok_and(|t| t.contains(holding)) {
        assert!(t0.elapsed() < Duration::from_secs(300), "no {} holding {holding}", marker.display());
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
            panic!("the run ended before the kill: {status}: {err}");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(200));
    assert!(child.try_wait().unwrap().is_none(), "the run must still be running (blocked in an evaluation)");
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
}

fn results(out: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).expect("results.json")).unwrap()
}

/// A run killed during an evaluation keeps the splits it finished: killed in the evaluation
/// before training (after `heldout`, blocked in `heldout_instances`), it resumes from
/// `step-00000` and evaluates only the second split; killed in the evaluation after training
/// (blocked in `heldout_instances` again), it resumes from `final` and evaluates only that
/// split. The results equal an uninterrupted run's, evaluations and steps alike.
#[test]
fn a_run_killed_during_an_evaluation_keeps_the_splits_it_finished() {
    // 4 tasks per split, 1 episode each: the evaluation before is episodes 0–7 (heldout first),
    // training 3 steps × 4 episodes, the evaluation after 4 + 4.
    let eval = ["--set", "eval.n=1"];
    let a = out_dir("eval-a");
    let run_a = command(&a, &eval).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let b = out_dir("eval-b");
    kill_once(&b, &eval, 4, "checkpoints/step-00000/trainer_state.json", "\"before\"");
    let state: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(b.join("checkpoints/step-00000/trainer_state.json")).unwrap()).unwrap();
    assert!(state["before"].is_object() && state.get("before_instances").is_none(), "{state}");
    assert!(!b.join("checkpoints/step-00001").exists());

    // Resumed, it evaluates heldout_instances (4 episodes), trains (12) and evaluates heldout
    // after (4), then blocks in heldout_instances after.
    let resume = ["--set", "eval.n=1", "--resume"];
    kill_once(&b, &resume, 20, "checkpoints/final/trainer_state.json", "\"after\"");
    let state: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(b.join("checkpoints/final/trainer_state.json")).unwrap()).unwrap();
    assert!(state["after"].is_object() && state.get("after_instances").is_none() && state["step"] == 3, "{state}");
    assert!(!b.join("results.json").exists());

    let resumed = run(&b, &resume);
    let log = String::from_utf8_lossy(&resumed.stdout);
    assert!(resumed.status.success(), "{log}\n{}", String::from_utf8_lossy(&resumed.stderr));
    assert!(log.contains("eval after, heldout: pass@1") && log.contains("(from the checkpoint)"), "{log}");
    assert_eq!(log.matches("eval after, heldout_instances: 1 episode per task").count(), 1, "{log}");

    let done = run_a.wait_with_output().unwrap();
    assert!(done.status.success(), "{}", String::from_utf8_lossy(&done.stderr));
    let (x, y) = (results(&a), results(&b));
    for key in ["before", "after"] {
        assert!(x[key]["episodes"].as_array().is_some_and(|e| e.len() == 4), "{key}: {}", x[key]);
        assert_eq!(x[key], y[key], "{key}");
        assert_eq!(x["heldout_instances"][key], y["heldout_instances"][key], "heldout_instances {key}");
    }
    let (sx, sy) = (x["steps"].as_array().unwrap(), y["steps"].as_array().unwrap());
    assert_eq!(sx.len(), 3);
    for (p, q) in sx.iter().zip(sy) {
        assert_same_metrics(p, q);
    }
    let _ = std::fs::remove_dir_all(&a);
    let _ = std::fs::remove_dir_all(&b);
}

#[test]
fn resume_without_a_checkpoint_says_so() {
    let dir = out_dir("none");
    let out = run(&dir, &["--resume"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("no checkpoint in"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
