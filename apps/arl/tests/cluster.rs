//! `--launcher procs`: the same tiny run rolled out in-process and by three worker processes,
//! one of which dies (SIGKILL, by the `ARL_FAULT` hook, never by timing) while it holds a
//! round, trains on bit-identical episodes: the same rewards, losses and gradient norms at
//! every step and the same final weights, with the lost round issued again; so does a procs
//! run whose trainer is killed after a checkpoint and resumed with new workers. With LoRA the
//! workers load the published adapter alone and the runs agree as well.
//!
//! Each `arl` is a child process (`common::arl_child`); the trainer's workers are started the
//! same way (`arl::set_self_command`).

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use sha2::{Digest, Sha256};

mod common;
use common::arl_child;

/// Not a test of its own: the body of a child process (a no-op in a normal test run).
#[test]
fn child() {
    common::child();
}

fn out_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("arl-cluster-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// Four steps of four tasks × four episodes on the tiny preset, one group per round; `extra`
/// flags last.
fn run(out: &Path, extra: &[&str], fault: Option<&str>) -> Output {
    command(out, extra, fault).output().expect("arl runs")
}

fn command(out: &Path, extra: &[&str], fault: Option<&str>) -> Command {
    let mut args: Vec<String> = [
        "run",
        "--env",
        "test-letters",
        "--model",
        "tiny",
        "--steps",
        "4",
        "--prompts",
        "4",
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
        "cluster.round_groups=1",
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
    let mut c = arl_child(&args);
    c.env("RAYON_NUM_THREADS", "1");
    match fault {
        Some(f) => c.env("ARL_FAULT", f),
        None => c.env_remove("ARL_FAULT"),
    };
    c
}

fn steps(out: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(out.join("metrics.jsonl")).expect("metrics.jsonl");
    text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn sha256(path: &Path) -> String {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// The metrics that do not depend on the clock: equal as JSON values, so bit for bit.
const DETERMINISTIC: &[&str] =
    &["reward_mean", "pass_rate", "loss", "grad_norm", "logprob_gap_mean", "logprob_gap_max", "entropy", "policy_tokens", "tasks"];

fn check(out: &Output) {
    assert!(out.status.success(), "{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
}

#[test]
fn procs_workers_with_one_killed_train_exactly_as_the_local_run() {
    let local = out_dir("local");
    check(&run(&local, &[], None));
    let procs = out_dir("procs");
    let lease = ["--launcher", "procs", "--rollout-workers", "3", "--set", "cluster.lease_timeout_s=2"];
    check(&run(&procs, &lease, Some("die-holding-round:5")));

    let (a, b) = (steps(&local), steps(&procs));
    assert_eq!(a.len(), 4);
    assert_eq!(b.len(), 4);
    for (x, y) in a.iter().zip(&b) {
        for key in DETERMINISTIC {
            assert_eq!(x[key], y[key], "step {}: {key}", x["step"]);
        }
        assert_eq!((x["rounds_retried"].as_u64(), x["workers_lost"].as_u64()), (Some(0), Some(0)), "in-process: no faults");
    }
    // Not vacuous: the policy moved at every step.
    assert!(a.iter().all(|s| s["grad_norm"].as_f64().unwrap() > 0.0));
    let retried: u64 = b.iter().map(|s| s["rounds_retried"].as_u64().unwrap()).sum();
    let lost: u64 = b.iter().map(|s| s["workers_lost"].as_u64().unwrap()).sum();
    assert!(retried >= 1 && lost >= 1, "retried {retried}, lost {lost}");
    // Round 5 is step 2's second round (4 rounds a step).
    assert!(b[1]["rounds_retried"].as_u64().unwrap() >= 1, "{}", b[1]);
    let weights = |dir: &Path| sha256(&dir.join("checkpoints/final/model.safetensors"));
    assert_eq!(weights(&local), weights(&procs));
    let logs: String = (0..3).map(|w| std::fs::read_to_string(procs.join(format!("dist/logs/w{w}.log"))).unwrap_or_default()).collect();
    assert!(logs.contains("dying while holding round 5"), "{logs}");
    // The trainer ended the run: the workers saw STOP, and only the last weights remain.
    assert!(procs.join("dist/STOP").exists());
    assert!(!procs.join("dist/weights/v0").exists() && procs.join("dist/weights/v3").exists());

    // The trainer killed (SIGKILL; its workers die with it) while step 3 waits for a round a
    // worker holds for ever, after its step-2 checkpoint: `--resume` with new workers
    // continues from there, as the local run did.
    let killed = out_dir("killed");
    let workers = ["--launcher", "procs", "--rollout-workers", "2"];
    let mut trainer = command(&killed, &workers, Some("hang-holding-round:9")).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    let marker = killed.join("checkpoints/step-00002/trainer_state.json");
    let t0 = std::time::Instant::now();
    while !marker.exists() {
        assert!(t0.elapsed().as_secs() < 300, "no step-2 checkpoint");
        assert!(trainer.try_wait().unwrap().is_none(), "the trainer ended before the kill");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert!(trainer.try_wait().unwrap().is_none(), "the trainer must be waiting for round 9");
    trainer.kill().unwrap();
    trainer.wait().unwrap();
    assert!(!killed.join("checkpoints/step-00003").exists());
    let resumed = run(&killed, &[&workers[..], &["--resume"]].concat(), None);
    check(&resumed);
    assert!(String::from_utf8_lossy(&resumed.stdout).contains("after step 2"));
    let c = steps(&killed);
    assert_eq!(c.len(), 4);
    for (x, y) in a.iter().zip(&c) {
        for key in DETERMINISTIC {
            match (x[key].as_f64(), y[key].as_f64()) {
                // Steps 1 and 2 come back from the checkpoint's JSON, whose parser may round
                // the last bit; steps 3 and 4 were computed after the resume.
                (Some(p), Some(q)) if x["step"].as_u64() <= Some(2) => {
                    assert!((p - q).abs() <= 1e-12 * p.abs(), "step {}: {key}", x["step"])
                }
                _ => assert_eq!(x[key], y[key], "step {}: {key}", x["step"]),
            }
        }
    }
    assert_eq!(weights(&local), weights(&killed));
    for dir in [&local, &procs, &killed] {
        let _ = std::fs::remove_dir_all(dir);
    }
}

#[test]
fn pinned_off_policy_workers_with_one_killed_train_exactly_as_the_local_run() {
    let pinned = ["--set", "trainer.max_steps_off_policy=1", "--set", "trainer.weight_sync=\"pinned\""];
    let local = out_dir("pinned-local");
    let out = run(&local, &pinned, None);
    check(&out);
    assert!(String::from_utf8_lossy(&out.stdout).contains("pinned off-policy sampling"), "{}", String::from_utf8_lossy(&out.stdout));
    let procs = out_dir("pinned-procs");
    let workers = ["--launcher", "procs", "--rollout-workers", "3", "--set", "cluster.lease_timeout_s=2"];
    check(&run(&procs, &[&pinned[..], &workers[..]].concat(), Some("die-holding-round:5")));
    let (a, b) = (steps(&local), steps(&procs));
    assert_eq!((a.len(), b.len()), (4, 4));
    for (x, y) in a.iter().zip(&b) {
        for key in DETERMINISTIC {
            assert_eq!(x[key], y[key], "step {}: {key}", x["step"]);
        }
        assert!(x["grad_norm"].as_f64().unwrap() > 0.0, "{x}");
    }
    // Rounds 0–7 (steps 1 and 2) are issued at the start; round 5 is step 2's second.
    assert!(b[1]["rounds_retried"].as_u64().unwrap() >= 1, "{}", b[1]);
    let weights = |dir: &Path| sha256(&dir.join("checkpoints/final/model.safetensors"));
    assert_eq!(weights(&local), weights(&procs));

    // Not lockstep: step 1 is the same run (the initial weights sample it either way), step 2
    // was sampled by the initial weights, not by step 1's.
    let lockstep = out_dir("pinned-lockstep");
    check(&run(&lockstep, &[], None));
    let c = steps(&lockstep);
    assert_eq!(a[0]["loss"], c[0]["loss"]);
    assert_eq!(a[1]["tasks"], c[1]["tasks"], "the same tasks at the same data position");
    assert_ne!(
        a[1]["policy_tokens"].to_string() + &a[1]["loss"].to_string(),
        c[1]["policy_tokens"].to_string() + &c[1]["loss"].to_string()
    );
    for dir in [&local, &procs, &lockstep] {
        let _ = std::fs::remove_dir_all(dir);
    }
}

#[test]
fn lora_workers_load_the_published_adapter_and_train_as_the_local_run() {
    let lora = ["--lora", "--set", "trainer.steps=2"];
    let local = out_dir("lora-local");
    check(&run(&local, &lora, None));
    let procs = out_dir("lora-procs");
    check(&run(&procs, &[&lora[..], &["--launcher", "procs", "--rollout-workers", "2"]].concat(), None));
    let (a, b) = (steps(&local), steps(&procs));
    assert_eq!((a.len(), b.len()), (2, 2));
    for (x, y) in a.iter().zip(&b) {
        for key in DETERMINISTIC {
            assert_eq!(x[key], y[key], "step {}: {key}", x["step"]);
        }
        assert!(x["grad_norm"].as_f64().unwrap() > 0.0, "{x}");
    }
    let adapter = |dir: &Path| sha256(&dir.join("checkpoints/final/adapter_model.safetensors"));
    assert_eq!(adapter(&local), adapter(&procs));
    // What the workers loaded: the adapter alone (the base is model.source's).
    let published = procs.join("dist/weights/v1");
    assert!(published.join("adapter_model.safetensors").exists() && !published.join("model.safetensors").exists());
    let _ = std::fs::remove_dir_all(&local);
    let _ = std::fs::remove_dir_all(&procs);
}

#[test]
fn a_round_size_that_does_not_divide_prompts_is_refused_in_one_line() {
    let out = out_dir("bad-round");
    let done = run(&out, &["--set", "cluster.round_groups=3"], None);
    let err = String::from_utf8_lossy(&done.stderr);
    assert_eq!(done.status.code(), Some(2), "{err}");
    assert!(err.contains("cluster.round_groups") && err.contains("a divisor of trainer.prompts = 4 (1, 2, 4)"), "{err}");
    assert!(!out.join("run.json").exists());
    let async_procs =
        run(&out, &["--set", "cluster.round_groups=1", "--launcher", "procs", "--set", "trainer.max_steps_off_policy=1"], None);
    let err = String::from_utf8_lossy(&async_procs.stderr);
    assert_eq!(async_procs.status.code(), Some(2), "{err}");
    assert!(err.contains("cluster.launcher") && err.contains("lockstep"), "{err}");

    // A worker pointed at a folder with no run of workers, or at another arl version's run.
    std::fs::create_dir_all(out.join("dist")).unwrap();
    std::fs::write(out.join("config.toml"), "[env]\nname = \"test-letters\"\n").unwrap();
    let worker = |out: &Path| arl_child(&["worker".into(), out.display().to_string()]).output().unwrap();
    let none = worker(&out);
    let err = String::from_utf8_lossy(&none.stderr);
    assert_eq!(none.status.code(), Some(2), "{err}");
    assert!(err.contains("index.json: no such file") && err.contains("--launcher procs"), "{err}");
    let index = r#"{"protocol": 1, "arl_version": "0.0.1-other", "incarnation": "x", "rounds": []}"#;
    std::fs::write(out.join("dist/index.json"), index).unwrap();
    let other = worker(&out);
    let err = String::from_utf8_lossy(&other.stderr);
    assert_eq!(other.status.code(), Some(2), "{err}");
    assert!(err.contains("is a run of arl 0.0.1-other") && err.lines().count() == 1, "{err}");
    let _ = std::fs::remove_dir_all(&out);
}

/// A stand-in for a Slurm command in `dir`: appends its arguments to `calls` and prints `stdout`
/// (shell words).
fn stand_in(dir: &Path, name: &str, stdout: &str) {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\ncd '{}'\necho \"{name} $*\" >> calls\necho {stdout}\n", dir.display())).unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
}

#[test]
fn slurm_submits_two_jobs_and_refuses_bad_input_in_one_line() {
    let out = out_dir("slurm");
    let bin = out_dir("slurm-bin");
    std::fs::create_dir_all(&bin).unwrap();
    let slurm = ["--launcher", "slurm", "--rollout-workers", "3", "--set", "cluster.slurm.require_shared_fs=false"];
    let refused = |c: &mut Command, needle: &str| {
        let done = c.output().unwrap();
        let err = String::from_utf8_lossy(&done.stderr).to_string();
        assert_eq!(done.status.code(), Some(2), "{err}");
        assert!(err.contains(needle) && err.trim().lines().count() == 1, "{needle}: {err}");
    };
    // No sbatch on PATH; a timing-dependent schedule; a folder only this node sees.
    refused(command(&out, &slurm, None).env("PATH", &bin), "`sbatch` is not on PATH");
    // Job ids 4242, 4243, … in submission order.
    stand_in(&bin, "sbatch", "$((4241 + $(grep -c ^sbatch calls)))");
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    refused(&mut command(&out, &[&slurm[..], &["--set", "trainer.max_steps_off_policy=1"]].concat(), None), "lockstep");
    let shm = PathBuf::from(format!("/dev/shm/arl-cluster-slurm-{}", std::process::id()));
    refused(command(&shm, &slurm[..4], None).env("PATH", &path), "is on tmpfs");
    let spaced = PathBuf::from(format!("{} with space", out.display()));
    refused(command(&spaced, &slurm, None).env("PATH", &path), "has white space in its path");
    refused(&mut command(&out, &["--dry-run"], None), "--dry-run goes with --launcher slurm");
    assert!(!out.exists() && !shm.exists() && !spaced.exists());

    // --dry-run prints both scripts and writes nothing.
    let dry = run(&out, &[&slurm[..], &["--dry-run"]].concat(), None);
    check(&dry);
    let text = String::from_utf8_lossy(&dry.stdout);
    assert!(text.contains("#SBATCH --array=0-2") && text.contains("#SBATCH --requeue") && text.contains("--slurm-job"), "{text}");
    assert!(!out.exists());

    // Submitted through stand-ins: the trainer, then the array that starts once it has.
    let done = command(&out, &slurm, None).env("PATH", &path).output().unwrap();
    check(&done);
    let calls = std::fs::read_to_string(bin.join("calls")).unwrap();
    let slurm_dir = out.join("slurm");
    assert_eq!(
        calls,
        format!(
            "sbatch --parsable {}\nsbatch --parsable --dependency=after:4242 {}\n",
            slurm_dir.join("trainer.sbatch").display(),
            slurm_dir.join("workers.sbatch").display()
        )
    );
    let jobs: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(slurm_dir.join("jobs.json")).unwrap()).unwrap();
    assert_eq!(jobs, serde_json::json!({"trainer": "4242", "workers": "4243"}));
    // The trainer job's config: this run's, launcher and all; the folder is not claimed yet.
    let job_config = std::fs::read_to_string(slurm_dir.join("run.toml")).unwrap();
    assert!(job_config.contains("launcher = \"slurm\"") && job_config.contains("round_groups = 1"), "{job_config}");
    assert!(!out.join("run.json").exists());

    // Its trainer still queued (squeue lists it): neither a new start nor a resume.
    stand_in(&bin, "squeue", "4242");
    refused(command(&out, &[&slurm[..], &["--overwrite"]].concat(), None).env("PATH", &path), "is still running (trainer job 4242)");
    // `arl cluster stop`: STOP for the workers, scancel of both jobs.
    std::fs::create_dir_all(out.join("dist")).unwrap();
    stand_in(&bin, "scancel", "");
    let stop = arl_child(&["cluster".into(), "stop".into(), out.display().to_string()]).env("PATH", &path).output().unwrap();
    check(&stop);
    assert!(out.join("dist/STOP").exists());
    assert!(std::fs::read_to_string(bin.join("calls")).unwrap().ends_with("scancel 4242 4243\n"));
    let _ = std::fs::remove_dir_all(&out);
    let _ = std::fs::remove_dir_all(&bin);
}

#[test]
fn a_worker_whose_trainer_stopped_beating_exits_after_its_idle_timeout() {
    let out = out_dir("idle");
    std::fs::create_dir_all(out.join("dist")).unwrap();
    let config = "[env]\nname = \"test-letters\"\n[model]\nsource = \"tiny\"\n[cluster]\nworker_idle_timeout_s = 1.0\n";
    std::fs::write(out.join("config.toml"), config).unwrap();
    let index = serde_json::json!({"protocol": arl_train::dist::PROTOCOL, "arl_version": env!("CARGO_PKG_VERSION"),
        "incarnation": "dead", "rounds": []});
    std::fs::write(out.join("dist/index.json"), index.to_string()).unwrap();
    // A trainer that beat seven times and died (no STOP).
    std::fs::write(out.join("dist/trainer.json"), r#"{"incarnation": "dead", "beat": 7}"#).unwrap();
    let t0 = std::time::Instant::now();
    let mut worker =
        arl_child(&["worker".into(), out.display().to_string()]).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    while worker.try_wait().unwrap().is_none() {
        if t0.elapsed().as_secs() > 60 {
            worker.kill().unwrap();
            panic!("the worker did not exit after its trainer stopped beating");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let done = worker.wait_with_output().unwrap();
    let log = String::from_utf8_lossy(&done.stdout);
    assert!(done.status.success(), "{log}{}", String::from_utf8_lossy(&done.stderr));
    assert!(log.contains("has not moved for 1 s (cluster.worker_idle_timeout_s)"), "{log}");
    assert!(t0.elapsed().as_secs_f64() > 1.0);
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn a_slurm_trainer_whose_worker_array_left_the_queue_stops_in_one_line() {
    let out = out_dir("slurm-gone");
    let bin = out_dir("slurm-gone-bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::create_dir_all(out.join("slurm")).unwrap();
    std::fs::write(out.join("slurm/jobs.json"), r#"{"trainer": "76", "workers": "77"}"#).unwrap();
    // squeue lists no task of array 77.
    stand_in(&bin, "squeue", "");
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let job = ["--launcher", "slurm", "--slurm-job", "--set", "cluster.lease_timeout_s=0.5"];
    let mut trainer = command(&out, &job, None).env("PATH", &path).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let t0 = std::time::Instant::now();
    while trainer.try_wait().unwrap().is_none() {
        if t0.elapsed().as_secs() > 120 {
            trainer.kill().unwrap();
            panic!("the trainer still waits for workers that are gone");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let done = trainer.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&done.stderr);
    assert_eq!(done.status.code(), Some(1), "{err}");
    assert!(err.lines().any(|l| l.starts_with("error: ") && l.contains("worker job array 77 has no task left in the queue")), "{err}");
    assert!(std::fs::read_to_string(bin.join("calls")).unwrap().contains("squeue -h -o %i -j 77"));
    let _ = std::fs::remove_dir_all(&out);
    let _ = std::fs::remove_dir_all(&bin);
}

/// `arl cluster fs-check DIR` as task `task` of a two-task Slurm step (the variables srun sets).
fn fs_check_task(dir: &Path, task: u32, timeout_s: &str) -> std::process::Child {
    let args = ["cluster", "fs-check", &dir.display().to_string(), "--timeout-s", timeout_s].map(String::from);
    arl_child(&args)
        .env("SLURM_NTASKS", "2")
        .env("SLURM_PROCID", task.to_string())
        .env("SLURM_JOB_ID", "77")
        .env("SLURM_STEP_ID", "0")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn fs_check_tasks_of_a_slurm_step_find_each_other_or_say_the_folder_is_not_shared() {
    let shared = out_dir("fs-check");
    std::fs::create_dir_all(&shared).unwrap();
    let (a, b) = (fs_check_task(&shared, 0, "60"), fs_check_task(&shared, 1, "60"));
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    check(&a);
    check(&b);
    let said = String::from_utf8_lossy(&a.stdout);
    assert!(said.contains("2 Slurm tasks on 1 node") && said.contains("exactly one won") && said.contains("all on one node"), "{said}");
    assert!(!shared.join(".arl-fs-check-77.0").exists(), "task 0 cleans up");

    // Two folders stand for a folder each node sees on its own disk: each task waits in vain.
    let (one, two) = (out_dir("fs-check-one"), out_dir("fs-check-two"));
    let (a, b) = (fs_check_task(&one, 0, "1"), fs_check_task(&two, 1, "1"));
    for (out, other) in [(a.wait_with_output().unwrap(), 1), (b.wait_with_output().unwrap(), 0)] {
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains(&format!("did not see the file of task(s) {other}")) && err.contains("not shared"), "{err}");
    }
    for dir in [&shared, &one, &two] {
        let _ = std::fs::remove_dir_all(dir);
    }
}
