//! `arl run --resume` after a real SIGKILL: the killed run, resumed from its step-2
//! checkpoint, reports the same step-3 metrics as a run that was never interrupted.
//!
//! Each `arl` is a child process: this test binary re-executed to run only [`child`], which
//! calls `arl_cli::run` with the arguments in `ARL_RESUME_CHILD_ARGS`. (Not
//! `CARGO_BIN_EXE_arl`: in a target directory shared by several worktrees that path is
//! rebuilt by whichever tree built last; this test binary is this tree's own.)

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const ARGS_VAR: &str = "ARL_RESUME_CHILD_ARGS";

/// An env where a random model's episodes differ in reward (the fraction of lowercase ASCII
/// letters in the reply), so every step has advantages, gradients and optimizer moments to
/// get right. Registered in this test binary only.
mod letters {
    use std::sync::Arc;

    use arl_core::config::EnvConfig;
    use arl_core::{
        AssistantTurn, Env, EnvError, EnvSession, EpisodeStats, Message, Outcome, PluginError, Sandbox, Split, Step, Task, ToolSchema,
    };

    struct Letters;

    impl Env for Letters {
        fn tasks(&self, split: Split) -> Result<Vec<Task>, EnvError> {
            Ok((0..4).map(|i| Task { id: format!("l{i}"), family: "letters".into(), split, data: serde_json::json!(i) }).collect())
        }
        fn tools(&self) -> Vec<ToolSchema> {
            vec![]
        }
        fn reset(&self, task: &Task) -> Result<Box<dyn EnvSession>, EnvError> {
            Ok(Box::new(Session(vec![Message::user(format!("say letters {}", task.id))])))
        }
    }

    struct Session(Vec<Message>);

    impl EnvSession for Session {
        fn messages(&self) -> &[Message] {
            &self.0
        }
        fn step(&mut self, turn: &AssistantTurn) -> Result<Step, EnvError> {
            Ok(Step::Done(grade(&turn.text)))
        }
        fn finish(&mut self) -> Result<Outcome, EnvError> {
            Ok(grade(""))
        }
    }

    fn grade(text: &str) -> Outcome {
        let n = text.chars().count().max(1) as f64;
        let reward = text.chars().filter(|c| c.is_ascii_lowercase()).count() as f64 / n;
        Outcome { reward, stats: EpisodeStats { turns: 1, ..Default::default() } }
    }

    fn letters_env(_: &EnvConfig, _: Arc<dyn Sandbox>) -> Result<Box<dyn Env>, PluginError> {
        Ok(Box::new(Letters))
    }

    arl_core::register!(EnvPlugin { name: "test-letters", about: "test stand-in", build: letters_env });
}

/// Not a test of its own: the body of a child process (a no-op in a normal test run).
#[test]
fn child() {
    let Ok(args) = std::env::var(ARGS_VAR) else { return };
    arl_plugins::link();
    let args: Vec<String> = serde_json::from_str(&args).unwrap();
    let mut stdout = std::io::stdout();
    if let Err(err) = arl_cli::run(std::iter::once("arl".to_string()).chain(args), &mut stdout) {
        arl_cli::report(&err);
        std::process::exit(1);
    }
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
        "--out",
    ]
    .map(String::from)
    .to_vec();
    args.push(out.display().to_string());
    args.extend(extra.iter().map(|s| s.to_string()));
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args(["--exact", "child", "--nocapture", "--test-threads", "1", "-q"])
        .env(ARGS_VAR, serde_json::to_string(&args).unwrap())
        .stdin(Stdio::null());
    c
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

#[test]
fn resume_after_a_kill_reproduces_the_uninterrupted_next_step() {
    // Run A, uninterrupted, alongside run B, which is SIGKILLed as soon as its step-2
    // checkpoint is in place.
    let a = out_dir("a");
    let run_a = command(&a, &[]).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let b = out_dir("b");
    let mut child = command(&b, &[]).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    let marker = b.join("checkpoints/step-00002/trainer_state.json");
    let t0 = Instant::now();
    while !marker.exists() {
        assert!(t0.elapsed() < Duration::from_secs(300), "no step-2 checkpoint");
        if let Some(status) = child.try_wait().unwrap() {
            panic!("run B ended before the kill: {status}");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let done = run_a.wait_with_output().unwrap();
    assert!(done.status.success(), "{}", String::from_utf8_lossy(&done.stderr));
    let uninterrupted = steps(&a);
    assert_eq!(uninterrupted.len(), 3);
    // Not vacuous: the policy moved at every step.
    for s in &uninterrupted {
        assert!(s["grad_norm"].as_f64().unwrap() > 0.0, "{s}");
    }
    // (Should the child ever outrun the poll, the resume starts from its newest checkpoint.)
    let killed_after_step_2 = !b.join("checkpoints/step-00003").exists();
    assert!(!b.join("results.json").exists() || !killed_after_step_2);

    let resumed = run(&b, &["--resume"]);
    let log = String::from_utf8_lossy(&resumed.stdout);
    assert!(resumed.status.success(), "{log}\n{}", String::from_utf8_lossy(&resumed.stderr));
    assert!(log.contains("after step 2") || !killed_after_step_2, "{log}");
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

#[test]
fn resume_without_a_checkpoint_says_so() {
    let dir = out_dir("none");
    let out = run(&dir, &["--resume"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("no checkpoint in"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
