//! Async off-policy training (`trainer.max_steps_off_policy`) on the tiny model: the
//! staleness bound holds, k = 0 trains only groups of the current weights, a snapshot keeps
//! its weights while the trainer steps (also on another device, `model.rollout_device`), and a
//! resumed run neither loses nor repeats a group.
//!
//! The checks do not trust the trainer's own bookkeeping: a recording wrapper around the
//! trainer counts the optimizer steps (the weights' true version), tags every sequence its
//! snapshots sample with the version they were taken at, and logs every sequence the update
//! scores, so the staleness of each trained episode is measured from the outside.

use std::path::Path;
use std::sync::{Arc, Mutex};

use arl_core::policy::{Generation, OptimStep, Policy, PolicyError, SamplingParams, ScoreParams, Scores, TrainablePolicy};
use arl_core::{AssistantTurn, Env, EnvError, EnvSession, EpisodeStats, Message, Outcome, RunConfig, Split, Step, Task, ToolSchema};
use arl_qwen3::QwenTrainer;
use arl_train::trainer::{Parts, RunMeta, plural, train};
use burn::Dispatch;
use burn::tensor::Tensor;

use super::trainer::{Bytes, grpo, trainer};

/// Where a sequence was sampled or scored: the optimizer steps the weights had taken, and
/// the snapshot's index (for a scored sequence: the index of the newest snapshot so far).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Version {
    steps: u32,
    snapshot: u32,
}

type Log = Arc<Mutex<Vec<(Vec<u32>, Version)>>>;

/// QwenTrainer, recording: optimizer steps, snapshots, what the snapshots sample, what the
/// update scores.
struct Recording {
    inner: QwenTrainer,
    steps: u32,
    snapshots: std::cell::Cell<u32>,
    sampled: Log,
    scored: Log,
}

impl Recording {
    fn new() -> Self {
        Self::with(trainer())
    }

    fn with(inner: QwenTrainer) -> Self {
        Self { inner, steps: 0, snapshots: Default::default(), sampled: Log::default(), scored: Log::default() }
    }

    fn now(&self) -> Version {
        Version { steps: self.steps, snapshot: self.snapshots.get().saturating_sub(1) }
    }
}

struct Snapshot {
    inner: Box<dyn Policy + Send>,
    version: Version,
    sampled: Log,
}

impl Policy for Snapshot {
    fn generate(&mut self, prompts: &[Vec<u32>], params: &SamplingParams) -> Result<Vec<Generation>, PolicyError> {
        let out = self.inner.generate(prompts, params)?;
        let mut log = self.sampled.lock().unwrap();
        for (p, g) in prompts.iter().zip(&out) {
            log.push(([p.as_slice(), &g.ids].concat(), self.version));
        }
        Ok(out)
    }
    fn score(&self, s: &[Vec<u32>], p: Option<&[Vec<usize>]>, params: ScoreParams) -> Result<Scores, PolicyError> {
        self.inner.score(s, p, params)
    }
}

impl Policy for Recording {
    fn generate(&mut self, prompts: &[Vec<u32>], params: &SamplingParams) -> Result<Vec<Generation>, PolicyError> {
        self.inner.generate(prompts, params)
    }
    /// With one minibatch and one epoch the update scores every episode of a step exactly
    /// once: the rows that train in its gradient pass, the others (zero advantage, no policy
    /// token) here, without gradients.
    fn score(&self, s: &[Vec<u32>], p: Option<&[Vec<usize>]>, params: ScoreParams) -> Result<Scores, PolicyError> {
        self.scored.lock().unwrap().extend(s.iter().map(|seq| (seq.clone(), self.now())));
        self.inner.score(s, p, params)
    }
}

impl TrainablePolicy for Recording {
    fn device(&self) -> burn::DispatchDevice {
        self.inner.device()
    }
    /// The rows that train, scored once (see `score`).
    fn score_with_grad(&self, s: &[Vec<u32>], p: Option<&[Vec<usize>]>, params: ScoreParams) -> Result<Scores, PolicyError> {
        self.scored.lock().unwrap().extend(s.iter().map(|seq| (seq.clone(), self.now())));
        self.inner.score_with_grad(s, p, params)
    }
    fn backward(&mut self, loss: Tensor<Dispatch, 1>) -> Result<(), PolicyError> {
        self.inner.backward(loss)
    }
    fn step(&mut self, lr: f64) -> Result<OptimStep, PolicyError> {
        let out = self.inner.step(lr)?;
        if !out.non_finite {
            self.steps += 1;
        }
        Ok(out)
    }
    fn discard_gradients(&mut self) {
        self.inner.discard_gradients()
    }
    fn save(&self, dir: &Path) -> Result<(), PolicyError> {
        self.inner.save(dir)
    }
    fn save_state(&self, dir: &Path) -> Result<(), PolicyError> {
        self.inner.save_state(dir)
    }
    fn load_state(&mut self, dir: &Path) -> Result<(), PolicyError> {
        self.inner.load_state(dir)
    }
    fn snapshot(&self) -> Result<Box<dyn Policy + Send>, PolicyError> {
        let version = Version { steps: self.steps, snapshot: self.snapshots.get() };
        self.snapshots.set(version.snapshot + 1);
        Ok(Box::new(Snapshot { inner: self.inner.snapshot()?, version, sampled: self.sampled.clone() }))
    }
}

/// 64 one-turn tasks with distinct prompts; the reward is the fraction of lowercase letters
/// in the reply, broken by its bytes (random replies almost surely differ, so every group
/// has variance).
struct Many;

impl Env for Many {
    fn tasks(&self, split: Split) -> Result<Vec<Task>, EnvError> {
        Ok((0..64).map(|i| Task { id: format!("t{i:02}"), family: "letters".into(), split, data: serde_json::json!(i) }).collect())
    }
    fn tools(&self) -> Vec<ToolSchema> {
        vec![]
    }
    fn reset(&self, task: &Task) -> Result<Box<dyn EnvSession>, EnvError> {
        Ok(Box::new(Letters(vec![Message::user(format!("task {}", task.id))])))
    }
}

struct Letters(Vec<Message>);

impl EnvSession for Letters {
    fn messages(&self) -> &[Message] {
        &self.0
    }
    fn step(&mut self, turn: &AssistantTurn) -> Result<Step, EnvError> {
        let n = turn.text.chars().count().max(1) as f64;
        // Plus a tie-break from the reply's bytes: two replies without a lowercase letter (a
        // third of 8-token random replies) still differ, so no step has a zero-variance group
        // and every step moves the weights (the stale groups' gap test relies on it).
        let tie = (turn.text.bytes().map(u64::from).sum::<u64>() % 997) as f64 * 1e-6;
        let reward = turn.text.chars().filter(|c| c.is_ascii_lowercase()).count() as f64 / n + tie;
        Ok(Step::Done(Outcome { reward, stats: EpisodeStats { turns: 1, ..Default::default() } }))
    }
    fn finish(&mut self) -> Result<Outcome, EnvError> {
        Ok(Outcome { reward: 0.0, stats: EpisodeStats::default() })
    }
}

/// The task a sequence's prompt names (`[task tNN]>` in the byte codec).
fn task_of(ids: &[u32]) -> String {
    let text: String = ids.iter().take_while(|&&i| i != u32::from(b'>')).map(|&i| char::from(i as u8)).collect();
    text.trim_start_matches("[task ").trim_end_matches(']').to_string()
}

fn config(steps: u32, bound: u32, in_flight: u32) -> RunConfig {
    let mut c = RunConfig::default();
    c.trainer.steps = steps;
    c.trainer.prompts = 2;
    c.trainer.group_size = 2;
    c.trainer.minibatches = 1;
    c.trainer.lr = 1e-2;
    c.trainer.max_steps_off_policy = Some(bound);
    c.trainer.groups_in_flight = Some(in_flight);
    c.loss.decoupled = true;
    c.eval.n = 0;
    c.sampling.max_new_tokens = Some(8);
    c.env.max_turns = 1;
    c
}

fn run(policy: &mut Recording, config: &RunConfig, dir: &Path) -> (Vec<serde_json::Value>, Vec<String>) {
    let (loss, adv) = grpo();
    let mut lines = Vec::new();
    let parts = Parts { env: &Many, codec: &Bytes, policy, loss: loss.as_ref(), advantage: adv.as_ref(), reference: None };
    train(parts, config, RunMeta::default(), dir, &mut |l| lines.push(l.to_string()), &mut |_, _, _| {}).unwrap();
    let metrics = std::fs::read_to_string(dir.join("metrics.jsonl")).unwrap();
    (metrics.lines().map(|l| serde_json::from_str(l).unwrap()).collect(), lines)
}

/// Per trained sequence: (the version when the update scored it, the versions of the
/// snapshots that sampled it).
fn measured(policy: &Recording) -> Vec<(Version, Vec<Version>)> {
    let sampled = policy.sampled.lock().unwrap();
    let scored = policy.scored.lock().unwrap();
    scored
        .iter()
        .map(|(seq, at)| {
            let by: Vec<Version> = sampled.iter().filter(|(s, _)| s == seq).map(|(_, v)| *v).collect();
            assert!(!by.is_empty(), "a trained sequence no snapshot sampled: {seq:?}");
            (*at, by)
        })
        .collect()
}

fn sum(steps: &[serde_json::Value], key: &str) -> u64 {
    steps.iter().map(|s| s["off_policy"][key].as_u64().unwrap()).sum()
}

#[test]
fn max_steps_off_policy_0_never_trains_a_group_sampled_under_older_weights() {
    // Twice a step's groups in flight: the first round samples two steps' worth with the
    // first weights, so the second step finds stale groups and must drop them.
    let mut policy = Recording::new();
    let dir = arl_tests::scratch_dir("async-k0");
    let (steps, _) = run(&mut policy, &config(4, 0, 4), &dir);
    assert_eq!(policy.snapshots.get(), 1 + 4, "the first weights, then one publication per step");
    let trained = measured(&policy);
    assert_eq!(trained.len(), 4 * 2 * 2, "every step trains prompts × group_size episodes");
    for (at, by) in &trained {
        // The very weights: no optimizer step between sampling and training.
        assert!(by.iter().all(|v| v == at), "trained at {at:?}, sampled at {by:?}");
    }
    assert!(sum(&steps, "dropped_stale_groups") >= 2, "the run must have met stale groups: {steps:?}");
    for s in &steps {
        let a = &s["off_policy"];
        assert_eq!(a["staleness"].as_object().unwrap().keys().collect::<Vec<_>>(), ["0"], "{a}");
        // Every group taken is trained or dropped: the data position moves by exactly that.
        let taken = a["tasks_to"].as_u64().unwrap() - a["tasks_from"].as_u64().unwrap();
        assert_eq!(taken, 2 + a["dropped_stale_groups"].as_u64().unwrap(), "{a}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_staleness_bound_is_never_exceeded_and_stale_groups_do_train() {
    staleness_bound_holds(Recording::new(), "async-k1");
}

/// `model.rollout_device`: the trainer on libtorch's CPU device, its snapshots sampling on
/// burn-flex (the two devices a CPU-only machine has; with two GPUs it would be `cuda:0` and `cuda:1`).
#[cfg(feature = "tch")]
#[test]
fn the_staleness_bound_holds_with_sampling_on_another_device() {
    let (train, rollout) = tch_and_flex();
    let mut inner = QwenTrainer::load("tiny-vocab512", &train, Default::default()).unwrap();
    inner.set_rollout_device(Some(rollout));
    staleness_bound_holds(Recording::with(inner), "async-k1-rollout-device");
}

/// Libtorch's CPU device (to train on) and burn-flex's (to sample on).
#[cfg(feature = "tch")]
fn tch_and_flex() -> (burn::DispatchDevice, burn::DispatchDevice) {
    (arl_qwen3::device::device_from_args("tch", 0, "f32").expect("libtorch's CPU device"), arl_qwen3::cpu())
}

fn staleness_bound_holds(mut policy: Recording, name: &str) {
    // Three steps' worth in flight with k = 1: groups arrive up to three steps old.
    let dir = arl_tests::scratch_dir(name);
    let mut c = config(5, 1, 6);
    c.trainer.weight_sync = arl_core::config::WeightSync::Background;
    let (steps, lines) = run(&mut policy, &c, &dir);
    assert!(lines.iter().any(|l| l.starts_with("async sampling: groups up to 1 step old train, 6 in flight")), "{lines:#?}");
    assert_eq!(policy.snapshots.get(), 1 + 5, "the first weights, then one publication per step");
    let trained = measured(&policy);
    assert_eq!(trained.len(), 5 * 2 * 2);
    let mut stale = 0;
    for (at, by) in &trained {
        // Snapshot k holds the weights after k steps, so its index is its version.
        let oldest = by.iter().map(|v| v.snapshot).min().unwrap();
        assert!(at.snapshot - oldest <= 1, "trained at {at:?}, sampled at {by:?}");
        assert!(by.iter().all(|v| at.steps - v.steps <= 1), "at most one optimizer step between: {at:?} {by:?}");
        stale += (at.snapshot - oldest == 1) as usize;
    }
    assert!(stale > 0, "some episodes trained one step stale");
    assert!(sum(&steps, "dropped_stale_groups") > 0, "older groups were dropped");
    let mut reported_stale = 0;
    for s in &steps {
        let a = &s["off_policy"];
        for (k, v) in a["staleness"].as_object().unwrap() {
            assert!(k.parse::<u32>().unwrap() <= 1, "{a}");
            if k == "1" {
                reported_stale += v["groups"].as_u64().unwrap();
                // A stale group's trainer recomputation differs from its sampler's log-probs.
                assert!(v["logprob_gap_mean"].as_f64().unwrap() > 1e-4, "{v}");
            } else {
                assert!(v["logprob_gap_mean"].as_f64().unwrap() < 1e-3, "on-policy groups agree: {v}");
            }
            assert!(v["behaviour_ratio_mean"].as_f64().unwrap() > 0.0, "{v}");
        }
        assert!(a["groups_in_flight"].as_u64().unwrap() <= 6, "{a}");
        assert!(a["train_wait_s"].as_f64().unwrap() >= 0.0 && a["rollout_wait_s"].as_f64().unwrap() >= 0.0, "{a}");
    }
    assert_eq!(reported_stale as usize * 2, stale, "the trainer's histogram agrees with the measured staleness");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// What the docs of `trainer.max_steps_off_policy` say (#48): K counts trainer steps (each of
/// `minibatches` optimizer steps); with the default `groups_in_flight` (= `prompts`) a step
/// takes every group started before it, so however large K is no group trains more than one
/// trainer step stale and none is dropped; and the start-up note says that IcePop filters
/// tokens on policy drift rather than correcting for it.
#[test]
fn with_the_default_groups_in_flight_no_group_trains_more_than_one_step_stale() {
    let mut policy = Recording::new();
    let dir = arl_tests::scratch_dir("async-default-in-flight");
    let mut c = config(4, 3, 2);
    (c.trainer.groups_in_flight, c.trainer.minibatches, c.loss.decoupled) = (None, 2, false);
    let (steps, lines) = run(&mut policy, &c, &dir);
    let note = lines.iter().find(|l| l.starts_with("async sampling:")).unwrap();
    assert!(note.starts_with("async sampling: groups up to 3 steps old train, 2 in flight"), "{note}");
    assert!(note.ends_with("(set loss.decoupled=true or loss.tis to weight tokens by pi_old/pi_behave; loss.icepop only filters out tokens whose policy drift pi_old/pi_behave leaves its band)"), "{note}");
    // Every scoring of a sequence (two minibatches: the second's rows are also scored without
    // gradients) is at most one snapshot, i.e. one trainer step, after the weights that sampled it.
    for (at, by) in &measured(&policy) {
        let oldest = by.iter().map(|v| v.snapshot).min().unwrap();
        assert!(at.snapshot - oldest <= 1, "scored at {at:?}, sampled at {by:?}");
    }
    assert_eq!(sum(&steps, "dropped_stale_groups"), 0);
    for s in &steps {
        let a = &s["off_policy"];
        assert!(a["staleness"].as_object().unwrap().keys().all(|k| k == "0" || k == "1"), "{a}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_snapshot_keeps_its_weights_while_the_trainer_steps() {
    snapshot_keeps_its_weights(trainer(), true);
}

/// Snapshots on the rollout device, in both directions between libtorch and burn-flex: a
/// copy on the other backend (its sums run in another order, so it scores within float
/// noise of the trainer, not bit for bit) that keeps its weights while the trainer steps.
#[cfg(feature = "tch")]
#[test]
fn a_snapshot_on_the_rollout_device_is_a_copy_there() {
    let (tch, flex) = tch_and_flex();
    for (train, rollout) in [(tch.clone(), flex.clone()), (flex, tch)] {
        let mut policy = QwenTrainer::load("tiny-vocab512", &train, Default::default()).unwrap();
        policy.set_rollout_device(Some(rollout));
        snapshot_keeps_its_weights(policy, false);
    }
}

/// `same_device`: the snapshot shares the trainer's device, so it scores bit for bit as it.
fn snapshot_keeps_its_weights(mut policy: QwenTrainer, same_device: bool) {
    let seq = vec![(0..24).map(|i| (i * 7 % 500) as u32).collect::<Vec<u32>>()];
    let lp = |p: &dyn Policy| -> Vec<f32> { p.score(&seq, None, ScoreParams::default()).unwrap().logprobs.into_data().to_vec().unwrap() };
    let snapshot = policy.snapshot().unwrap();
    let before = lp(snapshot.as_ref());
    let own = lp(&policy);
    if same_device {
        assert_eq!(before, own, "a snapshot scores as the weights it was taken from");
    } else {
        let worst = before.iter().zip(&own).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
        assert!(worst > 0.0 && worst < 1e-4, "a copy on the other backend scores within float noise: max |Δ| {worst}");
    }
    let scores = policy.score_with_grad(&seq, None, ScoreParams::default()).unwrap();
    policy.backward(scores.logprobs.sum().neg()).unwrap();
    policy.step(1e-2).unwrap();
    let trained = lp(&policy);
    assert_ne!(trained, own, "the step moved the trainer's weights");
    assert_eq!(lp(snapshot.as_ref()), before, "the snapshot did not move with them");
    // It samples on another thread.
    let mut moved = snapshot;
    let gens =
        std::thread::spawn(move || moved.generate(&[vec![1, 2, 3]], &SamplingParams { max_new_tokens: 4, ..Default::default() }).unwrap())
            .join()
            .unwrap();
    assert_eq!(gens[0].ids.len(), 4);
}

#[test]
fn a_resumed_async_run_trains_every_task_of_an_uninterrupted_one_once() {
    // k = 1 with one step's worth in flight: nothing is ever two steps stale, so nothing is
    // dropped and both runs train exactly the first 6 × 2 tasks of the order, whatever the
    // timing. A run stopped after step 3 leaves groups in flight; its resume must sample
    // their tasks again (not skip them) and train no task twice.
    let uninterrupted = {
        let mut policy = Recording::new();
        let dir = arl_tests::scratch_dir("async-whole");
        run(&mut policy, &config(6, 1, 2), &dir);
        std::fs::remove_dir_all(&dir).unwrap();
        policy.scored.lock().unwrap().clone()
    };
    let dir = arl_tests::scratch_dir("async-resume");
    let mut first = Recording::new();
    run(&mut first, &config(3, 1, 2), &dir);
    let state: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("checkpoints/final/trainer_state.json")).unwrap()).unwrap();
    let in_flight = state["groups_in_flight"].as_u64().unwrap();
    assert!(in_flight > 0, "the rollout thread had started the next step's groups: {state}");
    assert_eq!(state["tasks_used"], 6, "only the groups taken count in the data position");
    let mut resumed = Recording::new();
    let mut c = config(6, 1, 2);
    c.trainer.resume = true;
    let (steps, lines) = run(&mut resumed, &c, &dir);
    let said = format!("{} in flight at the checkpoint discarded; their tasks are sampled again", plural(in_flight as usize, "group"));
    assert!(lines.contains(&said), "{said:?} in {lines:#?}");
    assert_eq!(steps.len(), 6);
    assert_eq!(steps[3]["off_policy"]["discarded_in_flight"].as_u64(), Some(in_flight));
    assert_eq!(steps[3]["off_policy"]["tasks_from"], 6);
    let tasks = |log: &[(Vec<u32>, Version)]| {
        let mut t: Vec<String> = log.iter().map(|(s, _)| task_of(s)).collect();
        t.sort();
        t
    };
    let both: Vec<(Vec<u32>, Version)> =
        first.scored.lock().unwrap().iter().chain(resumed.scored.lock().unwrap().iter()).cloned().collect();
    let (whole, parts) = (tasks(&uninterrupted), tasks(&both));
    assert_eq!(whole.len(), 6 * 2 * 2);
    assert_eq!(parts, whole, "the same tasks, each as often");
    let mut distinct = whole.clone();
    distinct.dedup();
    assert_eq!(distinct.len(), 12, "each task trained by one group: {whole:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The same seed samples the same first batch with or without async training (the rollout
/// thread's first round uses lockstep's first-step seed), so the two runs' learning curves
/// start from the same data and differ only by the schedule.
#[test]
fn an_async_runs_first_step_trains_the_batch_lockstep_trains() {
    let first_step = |bound: Option<u32>, name: &str| {
        let mut policy = Recording::new();
        let dir = arl_tests::scratch_dir(name);
        let mut c = config(1, 0, 2);
        c.trainer.max_steps_off_policy = bound;
        c.trainer.groups_in_flight = bound.map(|_| 2);
        let (steps, _) = run(&mut policy, &c, &dir);
        std::fs::remove_dir_all(&dir).unwrap();
        let scored: Vec<Vec<u32>> = policy.scored.lock().unwrap().iter().map(|(s, _)| s.clone()).collect();
        (scored, steps[0]["reward_mean"].as_f64().unwrap())
    };
    let (lockstep, reward) = first_step(None, "async-same-lockstep");
    assert_eq!(lockstep.len(), 4, "prompts × group_size episodes scored once");
    for bound in [0, 1] {
        let (sampled, r) = first_step(Some(bound), &format!("async-same-k{bound}"));
        assert_eq!(sampled, lockstep, "k = {bound}: the first step's episodes");
        assert_eq!(r, reward, "k = {bound}");
    }
}
