//! The trainer (arl-core `train`): the loop learns, the update overfits a fixed batch, and
//! one full `arl run` step works on the tiny preset with the real Qwen3 chat template.

use arl_core::chat::{ChatCodec, ChatError, Conversation};
use arl_core::config::{LossConfig, ZeroAdvantageMinibatch};
use arl_core::loss::Aggregation;
use arl_core::registry::{self, AdvantagePlugin, LossPlugin};
use arl_core::{AdvantageInput, AssistantTurn, Env, EnvError, EnvSession, EpisodeStats, Message, Outcome, Split, Step, Task, ToolSchema};
// Four one-turn tasks; 26 of the byte codec's 512 ids are lowercase letters, so a random model earns about 0.05.
use arl_core::testing::Letters;
use arl_optim::OptimConfig;
use arl_qwen3::QwenTrainer;
use arl_train::batch::{BatchOptions, Overlong, StepBatch, collect, kl_penalty};
use arl_train::rollout::{RolloutOptions, rollout};
use arl_train::update::{UpdateMetrics, UpdateOptions, policy_positions, recompute, recompute_logprobs, update, update_with_reference};

/// A byte-level codec for the 512-token test model: one id per byte, 511 ends a turn.
pub(crate) struct Bytes;

const STOP: u32 = 511;

fn bytes(s: &str) -> Vec<u32> {
    s.bytes().map(u32::from).collect()
}

impl ChatCodec for Bytes {
    fn prompt_ids(&self, messages: &[Message], _: &[ToolSchema]) -> Result<Vec<u32>, ChatError> {
        Ok(messages.iter().flat_map(|m| bytes(&format!("[{}]", m.content))).chain(bytes(">")).collect())
    }
    fn observation_ids(&self, _: &[Message], obs: &[Message], _: &[ToolSchema], stop: Option<u32>) -> Result<Vec<u32>, ChatError> {
        let mut ids = if stop.is_some() { vec![] } else { vec![STOP] };
        ids.extend(obs.iter().flat_map(|m| bytes(&format!("[{}]", m.content))).chain(bytes(">")));
        Ok(ids)
    }
    fn decode(&self, ids: &[u32]) -> Result<String, ChatError> {
        Ok(ids.iter().map(|&i| if i < 128 { char::from(i as u8) } else { '?' }).collect())
    }
    fn stop_ids(&self) -> &[u32] {
        &[STOP]
    }
    fn self_check(&self) -> Result<String, ChatError> {
        Ok("byte codec".into())
    }
}

pub(crate) fn trainer() -> QwenTrainer {
    QwenTrainer::load("tiny-vocab512", &arl_qwen3::cpu(), OptimConfig::default()).unwrap()
}

fn rollout_opts(seed: u64) -> RolloutOptions {
    RolloutOptions {
        max_turns: 1,
        max_calls_per_turn: 4,
        sampling: arl_core::policy::SamplingParams { max_new_tokens: 8, seed, ..Default::default() },
        gen_batch: None,
        gen_tokens: None,
        max_episode_tokens: 256,
        max_prompt_tokens: None,
        max_response_tokens: None,
    }
}

pub(crate) fn grpo() -> (Box<dyn arl_core::PolicyLoss>, Box<dyn arl_core::AdvantageFn>) {
    arl_plugins::link();
    let loss = (registry::get::<LossPlugin>("grpo").unwrap().build)(&LossConfig::default()).unwrap();
    let adv = (registry::get::<AdvantagePlugin>("grpo").unwrap().build)(&Default::default()).unwrap();
    (loss, adv)
}

#[test]
fn rl_alone_raises_the_reward_on_a_tiny_model() {
    let (loss, adv) = grpo();
    let env = Letters;
    let mut policy = trainer();
    let tasks = env.tasks(Split::Train).unwrap();
    let opts = UpdateOptions {
        epochs: 1,
        minibatches: 2,
        micro: None,
        micro_tokens: None,
        lr: 1e-2,
        aggregation: Aggregation::TokenMean,
        horizon: None,
        temperature: 1.0,
        zero_advantage_minibatch: ZeroAdvantageMinibatch::Skip,
    };
    let mut means = Vec::new();
    for step in 0..12u64 {
        let specs: Vec<(Task, usize)> = tasks.iter().enumerate().flat_map(|(g, t)| (0..8).map(move |_| (t.clone(), g))).collect();
        let (episodes, _) = rollout(&env, &Bytes, &mut policy, &specs, &rollout_opts(step), &mut |_, _| {}).unwrap();
        let rewards: Vec<f64> = episodes.iter().map(|e| e.reward).collect();
        let groups: Vec<usize> = episodes.iter().map(|e| e.group).collect();
        means.push(rewards.iter().sum::<f64>() / rewards.len() as f64);
        let advantages = adv.advantages(&AdvantageInput::new(&rewards, &groups)).unwrap();
        let m = update(&mut policy, loss.as_ref(), &episodes, &advantages, &opts).unwrap();
        assert!(m.logprob_gap_max < 1e-4, "sampler–trainer gap on one backend: {}", m.logprob_gap_max);
    }
    let first = means[..2].iter().sum::<f64>() / 2.0;
    let last = means[means.len() - 3..].iter().sum::<f64>() / 3.0;
    assert!(last > first + 0.25, "mean reward by step: {means:?}");
}

#[test]
fn the_update_overfits_a_fixed_batch() {
    let (loss, _) = grpo();
    let env = Letters;
    let mut policy = trainer();
    let specs: Vec<(Task, usize)> = env.tasks(Split::Train).unwrap().into_iter().take(2).flat_map(|t| [(t.clone(), 0), (t, 0)]).collect();
    let (episodes, _) = rollout(&env, &Bytes, &mut policy, &specs, &rollout_opts(7), &mut |_, _| {}).unwrap();
    let advantages = [1.0, -1.0, 1.0, -1.0];
    // Five PPO epochs over one old policy: the first is on-policy, later ones see ratios ≠ 1.
    // (Separate `update` calls would each recompute the old log-probabilities, and an
    // on-policy loss is −Σ Â·|o|/Σ|o| whatever the weights.)
    let opts = UpdateOptions { epochs: 5, micro: Some(2), lr: 3e-3, ..UpdateOptions::default() };
    let positive_logprob = |p: &QwenTrainer| -> f64 {
        let lp = recompute_logprobs(p, &episodes, 4, 1.0).unwrap();
        [0usize, 2].iter().map(|&i| policy_positions(&episodes[i]).iter().map(|&t| lp[i][t] as f64).sum::<f64>()).sum()
    };
    let before = positive_logprob(&policy);
    let m = update(&mut policy, loss.as_ref(), &episodes, &advantages, &opts).unwrap();
    let after = positive_logprob(&policy);
    assert!(after > before + 1.0, "logprob of positive-advantage tokens: {before} → {after}");
    let losses = &m.minibatch_losses;
    assert_eq!((losses.len(), m.optimizer_steps), (5, 5));
    eprintln!("losses by epoch: {losses:?}; positive-advantage logprob {before:.3} → {after:.3}");
    assert!(losses[1..].iter().all(|l| *l < losses[0] - 1e-3), "losses: {losses:?}");
}

#[test]
fn conversations_from_rollouts_keep_the_sampler_ids() {
    let env = Letters;
    let mut policy = trainer();
    let task = env.tasks(Split::Train).unwrap().remove(0);
    let (episodes, stats) = rollout(&env, &Bytes, &mut policy, &[(task.clone(), 0)], &rollout_opts(3), &mut |_, _| {}).unwrap();
    let ep = &episodes[0];
    ep.check().unwrap();
    let prompt = Conversation::start(&Bytes, env.reset(&task).unwrap().messages().to_vec(), vec![]).unwrap().ids;
    assert_eq!(&ep.ids[..prompt.len()], &prompt[..]);
    assert_eq!(ep.policy_tokens(), stats.generated_tokens);
    // The sampler's logprobs equal the trainer's recomputation (one backend, f32).
    let lp = recompute_logprobs(&policy, &episodes, 1, 1.0).unwrap();
    for t in policy_positions(ep) {
        assert!((lp[0][t] - ep.sampler_logprobs[t]).abs() < 1e-4, "t={t}: {} vs {}", lp[0][t], ep.sampler_logprobs[t]);
    }
}

#[test]
fn one_full_run_step_on_the_tiny_preset_with_the_qwen3_template() {
    let dir = std::env::temp_dir().join(format!("arl-run-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let args = [
        "run",
        "--env",
        "sum",
        "--model",
        "tiny",
        "--steps",
        "1",
        "--prompts",
        "2",
        "--group-size",
        "2",
        "--max-new-tokens",
        "4",
        "--eval-n",
        "1",
        "--set",
        "env.options.heldout_tasks=2",
        "--out",
        dir.to_str().unwrap(),
    ];
    let out = arl_tests::arl(&args).unwrap();
    assert!(out.contains("\nchat self-check passed: "), "{out}");
    assert_eq!(out.matches("is a preset with random weights: it cannot learn").count(), 1, "said once: {out}");
    let step_line = out.lines().find(|l| l.starts_with("step 1/1  reward ")).unwrap_or_else(|| panic!("{out}"));
    for label in ["  loss ", "  grad_norm ", "  lr 2.00e-5", "  entropy ", "  response_len 4.0", "  elapsed ", "  eta "] {
        assert!(step_line.contains(label), "{label:?} in {step_line}");
    }
    // A random model's four-token replies never sum correctly: every group's rewards are equal.
    assert!(out.contains("no gradient this step: all 2 groups had equal rewards"), "{out}");
    let results: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.join("results.json")).unwrap()).unwrap();
    assert_eq!(results["steps"].as_array().unwrap().len(), 1);
    assert_eq!(results["before"]["summary"]["tasks"], 2);
    assert!(results["difference"]["ci"]["lo"].is_number());
    let step = &results["steps"][0];
    assert!(step["entropy"].as_f64().unwrap() > 0.0 && step["peak_rss_mb"].as_f64().unwrap() > 0.0, "{step}");
    // No token reached the loss (all advantages 0): the ratio is unknown, not 1 or 0.
    assert!(step["ratio_mean"].is_null(), "{step}");
    assert_eq!(step["finish"]["length"], 4, "{step}");
    assert_eq!(step["response_tokens_max"], 4, "{step}");
    let meta = &results["meta"];
    assert_eq!(meta["tokenizer"].as_str().map(std::path::PathBuf::from), Some(arl_tests::qwen3_tokenizer_dir().canonicalize().unwrap()));
    assert!(meta["model_dir"].is_null() && meta["model_snapshot"].is_null(), "a preset has no directory: {meta}");
    // 40 hex digits, with `-dirty` when built from a tree with uncommitted changes.
    let commit = meta["git_commit"].as_str().unwrap_or_default();
    let hash = commit.strip_suffix("-dirty").unwrap_or(commit);
    assert!(hash.len() == 40 && hash.chars().all(|c| c.is_ascii_hexdigit()), "the build's commit: {meta}");
    let episodes = results["before"]["episodes"].as_array().unwrap();
    assert_eq!(episodes.len(), 2);
    assert_eq!((episodes[0]["response_tokens"].as_u64(), episodes[0]["finish"].as_str()), (Some(4), Some("length")));
    assert_eq!(results["after"]["tool_stats"]["turns"], 2, "{}", results["after"]);
    // The run took less than `trainer.checkpoint_interval_s` (300 s): no step checkpoint, the final one.
    assert!(!dir.join("checkpoints/step-00001").exists(), "a step checkpoint within the interval");
    // The checkpoint carries the tokenizer and template it was trained with.
    let final_dir = dir.join("checkpoints/final");
    for f in ["config.json", "tokenizer.json", "tokenizer_config.json", "chat_template.jinja"] {
        assert!(final_dir.join(f).is_file(), "{f} in the checkpoint");
    }
    let model = arl_core::config::ModelConfig { source: final_dir.display().to_string(), ..Default::default() };
    assert_eq!(arl::commands::tokenizer_dir(&model).unwrap(), final_dir, "a checkpoint loads its own tokenizer");
    assert!(dir.join("metrics.jsonl").exists() && dir.join("run.log").exists() && dir.join("run.json").exists());
    // The folder is this run's now: a second run is refused and changes nothing ...
    let log = std::fs::read_to_string(dir.join("run.log")).unwrap();
    let err = arl_tests::arl(&args).unwrap_err();
    assert!(err.contains("pass --resume to continue it, --overwrite to replace it"), "{err}");
    assert_eq!(std::fs::read_to_string(dir.join("run.log")).unwrap(), log);
    // ... unless asked to overwrite it; then the old checkpoints go.
    std::fs::create_dir_all(dir.join("checkpoints/step-00099")).unwrap();
    let mut again = args.to_vec();
    again.push("--overwrite");
    let out = arl_tests::arl(&again).unwrap();
    assert!(out.contains("overwrote the previous run's run.json, config.toml, run.log, metrics.jsonl, results.json, checkpoints"), "{out}");
    assert!(!dir.join("checkpoints/step-00099").exists());
    // And the checkpoint evaluates with `arl eval`, its tokenizer and all.
    let eval = arl_tests::arl(&[
        "eval",
        "--env",
        "sum",
        "--model",
        final_dir.to_str().unwrap(),
        "--eval-n",
        "1",
        "--max-new-tokens",
        "4",
        "--set",
        "env.options.heldout_tasks=2",
    ])
    .unwrap();
    let e: serde_json::Value = serde_json::from_str(&eval).unwrap();
    assert_eq!(e["summary"]["tasks"], 2);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `eval.temperature` is the held-out episodes' temperature: an evaluation with training's
/// `sampling.temperature = 0.3` and `eval.temperature = 1.7` samples exactly what one at
/// `sampling.temperature = 1.7` does, and not what one at 0.3 does.
#[test]
fn the_evaluation_samples_at_eval_temperature() {
    let eval = |sets: &[&str]| -> serde_json::Value {
        let mut args = vec!["eval", "--env", "sum", "--model", "tiny", "--eval-n", "2", "--max-new-tokens", "6"];
        args.extend(["--set", "env.options.heldout_tasks=2"]);
        for s in sets {
            args.extend(["--set", s]);
        }
        let e: serde_json::Value = serde_json::from_str(&arl_tests::arl(&args).unwrap()).unwrap();
        e["transcripts"].clone()
    };
    let split = eval(&["sampling.temperature=0.3", "eval.temperature=1.7"]);
    assert_eq!(split, eval(&["sampling.temperature=1.7"]));
    assert_ne!(split, eval(&["sampling.temperature=0.3"]));
    let err = arl_tests::arl(&["eval", "--env", "sum", "--model", "tiny", "--set", "eval.temperature=0"]).unwrap_err();
    assert!(err.contains("config key `eval.temperature`: 0 is out of range; valid: > 0"), "{err}");
}

/// Even tasks always earn 0 (a zero-variance group); odd ones a reward that differs between
/// any two different replies (almost surely).
struct HalfFlat;

impl Env for HalfFlat {
    fn tasks(&self, split: Split) -> Result<Vec<Task>, EnvError> {
        Letters.tasks(split)
    }
    fn tools(&self) -> Vec<ToolSchema> {
        vec![]
    }
    fn reset(&self, task: &Task) -> Result<Box<dyn EnvSession>, EnvError> {
        // Even tasks are flat: l0, l4, … all 0, l2, l6, … all solved.
        let n = task.data.as_u64().unwrap();
        let flat = n.is_multiple_of(2).then_some(if n.is_multiple_of(4) { 0.0 } else { 1.0 });
        Ok(Box::new(Scripted { messages: vec![Message::user("go")], flat }))
    }
}

struct Scripted {
    messages: Vec<Message>,
    /// The one reward of a flat task's episodes.
    flat: Option<f64>,
}

impl EnvSession for Scripted {
    fn messages(&self) -> &[Message] {
        &self.messages
    }
    fn step(&mut self, turn: &AssistantTurn) -> Result<Step, EnvError> {
        let sum: u64 = turn.text.chars().map(|c| c as u64).sum();
        let reward = self.flat.unwrap_or((sum % 997) as f64 / 997.0);
        Ok(Step::Done(Outcome { reward, stats: EpisodeStats { turns: 1, ..Default::default() } }))
    }
    fn finish(&mut self) -> Result<Outcome, EnvError> {
        Ok(Outcome { reward: 0.0, stats: EpisodeStats::default() })
    }
}

fn batch_opts() -> BatchOptions {
    BatchOptions { prompts: 2, group_size: 3, max_sampling_attempts: 1, skip_zero_variance: false, mask_truncated: false, overlong: None }
}

/// Collect one step's batch on `env`, handing out tasks 0, 1, 2, … in order.
fn collect_with(env: &dyn Env, opts: &BatchOptions, ropts: &RolloutOptions) -> (StepBatch, Vec<String>) {
    let (_, adv) = grpo();
    let tasks = env.tasks(Split::Train).unwrap();
    let mut handed = Vec::new();
    let mut cursor = 0;
    let mut next = |n: usize| {
        let out: Vec<Task> = (0..n).map(|j| tasks[(cursor + j) % tasks.len()].clone()).collect();
        cursor += n;
        handed.extend(out.iter().map(|t| t.id.clone()));
        out
    };
    let b = collect(env, &Bytes, &mut trainer(), adv.as_ref(), &mut next, ropts, opts, None, &mut |_, _| {}).unwrap();
    (b, handed)
}

fn groups_of(episodes: &[arl_core::Episode]) -> Vec<String> {
    let mut ids: Vec<String> = episodes.iter().map(|e| e.task_id.clone()).collect();
    ids.dedup();
    ids
}

#[test]
fn dynamic_sampling_resamples_until_enough_groups_have_variance() {
    // Round 1: l0 (flat) and l1; round 2 asks for one more: l2 (flat); round 3: l3.
    let opts = BatchOptions { max_sampling_attempts: 5, ..batch_opts() };
    let (b, handed) = collect_with(&HalfFlat, &opts, &rollout_opts(11));
    assert_eq!(handed, ["l0", "l1", "l2", "l3"]);
    assert_eq!((b.stats.attempts, b.stats.groups_sampled, b.stats.groups_zero_variance, b.stats.groups_kept), (3, 4, 2, 2));
    // l2's episodes were all solved: an identical non-zero reward, counted apart.
    assert_eq!(b.stats.groups_identical_nonzero, 1);
    assert_eq!(groups_of(&b.train), ["l1", "l3"]);
    assert_eq!(b.sampled.len(), 12);
    assert!(b.advantages.iter().any(|a| *a != 0.0));
    // Out of attempts: whatever has variance is kept.
    let (b, _) = collect_with(&HalfFlat, &BatchOptions { max_sampling_attempts: 2, ..batch_opts() }, &rollout_opts(11));
    assert_eq!((b.stats.attempts, b.stats.groups_kept), (2, 1));
    assert_eq!(groups_of(&b.train), ["l1"]);
}

#[test]
fn zero_variance_groups_are_kept_or_skipped_as_configured() {
    let (b, _) = collect_with(&HalfFlat, &batch_opts(), &rollout_opts(11));
    assert_eq!((b.stats.attempts, b.stats.groups_zero_variance, b.stats.groups_kept, b.train.len()), (1, 1, 2, 6));
    assert_eq!(b.stats.groups_identical_nonzero, 0, "l0's equal rewards are 0");
    let (b, _) = collect_with(&HalfFlat, &BatchOptions { skip_zero_variance: true, ..batch_opts() }, &rollout_opts(11));
    assert_eq!((b.stats.attempts, b.stats.groups_kept), (1, 1));
    assert_eq!(groups_of(&b.train), ["l1"]);
    assert_eq!(b.train.len(), b.advantages.len());
}

#[test]
fn budgets_cut_turns_prompts_and_mask_truncated_episodes() {
    // A response budget of 5 cuts the 8-token turn; the kept tokens keep their logprobs.
    let ropts = RolloutOptions { max_response_tokens: Some(5), ..rollout_opts(5) };
    let (b, _) = collect_with(&Letters, &batch_opts(), &ropts);
    let lp = recompute_logprobs(&trainer(), &b.sampled, 6, 1.0).unwrap();
    for (e, row) in b.sampled.iter().zip(&lp) {
        assert!(e.policy_tokens() <= 5, "{}", e.policy_tokens());
        assert!(e.stats.truncated || *e.ids.last().unwrap() == STOP);
        for t in policy_positions(e) {
            assert!((row[t] - e.sampler_logprobs[t]).abs() < 1e-4);
        }
    }
    // Masking leaves exactly the truncated episodes out of the loss.
    let truncated = b.sampled.iter().filter(|e| e.stats.truncated).count();
    assert!(truncated > 0);
    let (m, _) = collect_with(&Letters, &BatchOptions { mask_truncated: true, ..batch_opts() }, &ropts);
    assert_eq!((m.stats.masked_truncated, m.train.len()), (truncated, 6 - truncated));
    assert!(m.train.iter().all(|e| !e.stats.truncated));
    // A prompt over its budget ends the episode before any turn.
    let (p, _) = collect_with(&Letters, &batch_opts(), &RolloutOptions { max_prompt_tokens: Some(4), ..rollout_opts(5) });
    assert!(p.sampled.iter().all(|e| e.policy_tokens() == 0 && e.stats.truncated && e.stats.counters["prompt_over_budget"] == 1));
}

#[test]
fn overlong_shaping_lowers_the_reward_driving_advantages() {
    // L_max 8, L_cache 4, factor 0.5: a reply cut at 8 tokens gets −0.5, one of 6 gets −0.25.
    let o = Overlong { max_tokens: 8, buffer: 4, factor: 0.5 };
    let (b, _) = collect_with(&Letters, &BatchOptions { overlong: Some(o), ..batch_opts() }, &rollout_opts(9));
    let raw = b.sampled.iter().map(|e| e.reward).sum::<f64>() / 6.0;
    let penalty = b.sampled.iter().map(|e| o.penalty(e.policy_tokens())).sum::<f64>() / 6.0;
    assert!(penalty < 0.0);
    assert!((b.stats.overlong_penalty_mean - penalty).abs() < 1e-12);
    assert!((b.stats.shaped_reward_mean - (raw + penalty)).abs() < 1e-12);
}

/// Two tasks × two episodes of `Letters`, sampled by the tiny trainer at `seed`.
fn four_episodes(seed: u64) -> Vec<arl_core::Episode> {
    let env = Letters;
    let specs: Vec<(Task, usize)> = env.tasks(Split::Train).unwrap().into_iter().take(2).flat_map(|t| [(t.clone(), 0), (t, 0)]).collect();
    rollout(&env, &Bytes, &mut trainer(), &specs, &rollout_opts(seed), &mut |_, _| {}).unwrap().0
}

/// Two updates of the same episodes from the same weights agree: grad norm, loss and the
/// log-probabilities after (within `lp_tol`).
fn assert_same_update(a: &(UpdateMetrics, Vec<Vec<f32>>), b: &(UpdateMetrics, Vec<Vec<f32>>), lp_tol: f32) {
    let ((ma, lp_a), (mb, lp_b)) = (a, b);
    assert!(ma.grad_norm_mean > 0.0);
    assert!((ma.grad_norm_mean - mb.grad_norm_mean).abs() < 1e-5 * ma.grad_norm_mean, "{ma:?} vs {mb:?}");
    assert!((ma.loss_value - mb.loss_value).abs() < 1e-6, "{} vs {}", ma.loss_value, mb.loss_value);
    for (x, y) in lp_a.iter().flatten().zip(lp_b.iter().flatten()) {
        assert!((x - y).abs() < lp_tol, "{x} vs {y}");
    }
}

#[test]
fn gradient_checkpointing_gives_the_same_update() {
    let (loss, _) = grpo();
    let episodes = four_episodes(4);
    let opts = UpdateOptions {
        epochs: 1,
        minibatches: 1,
        micro: Some(2),
        micro_tokens: None,
        lr: 1e-2,
        aggregation: Aggregation::TokenMean,
        horizon: None,
        temperature: 1.0,
        zero_advantage_minibatch: ZeroAdvantageMinibatch::Skip,
    };
    let run = |checkpointing: bool| {
        let mut p =
            QwenTrainer::load_with("tiny-vocab512", &arl_qwen3::cpu(), OptimConfig::default(), arl_qwen3::DType::F32, checkpointing)
                .unwrap();
        let m = update(&mut p, loss.as_ref(), &episodes, &[1.0, -1.0, 0.5, -0.5], &opts).unwrap();
        (m, recompute_logprobs(&p, &episodes, 4, 1.0).unwrap())
    };
    assert_same_update(&run(false), &run(true), 1e-5);
}

/// bf16 weights with gradient checkpointing: the copy of the weights that samples, scores
/// without gradients and hands out snapshots keeps each weight's dtype (it used to be rebuilt
/// in f32), so the run samples, scores and updates exactly as without checkpointing — the
/// same episodes, sampler–trainer gap, second-minibatch ratios, loss and step.
#[test]
fn gradient_checkpointing_in_bf16_samples_scores_and_updates_as_without_it() {
    let (loss, _) = grpo();
    let env = Letters;
    let specs: Vec<(Task, usize)> = env.tasks(Split::Train).unwrap().into_iter().take(2).flat_map(|t| [(t.clone(), 0), (t, 0)]).collect();
    let opts = UpdateOptions { minibatches: 2, micro: Some(2), lr: 1e-2, ..UpdateOptions::default() };
    let run = |checkpointing: bool| {
        let mut p =
            QwenTrainer::load_with("tiny-vocab512", &arl_qwen3::cpu(), OptimConfig::default(), arl_qwen3::DType::Bf16, checkpointing)
                .unwrap();
        let (episodes, _) = rollout(&env, &Bytes, &mut p, &specs, &rollout_opts(4), &mut |_, _| {}).unwrap();
        let before = recompute_logprobs(&p, &episodes, 4, 1.0).unwrap();
        let m = update(&mut p, loss.as_ref(), &episodes, &[1.0, -1.0, 0.5, -0.5], &opts).unwrap();
        let after = recompute_logprobs(&p, &episodes, 4, 1.0).unwrap();
        (episodes, before, m, after)
    };
    let ((eps_a, before_a, m_a, after_a), (eps_b, before_b, m_b, after_b)) = (run(false), run(true));
    for (a, b) in eps_a.iter().zip(&eps_b) {
        assert_eq!((&a.ids, &a.sampler_logprobs), (&b.ids, &b.sampler_logprobs), "the sampler computes in bf16 either way");
    }
    assert_eq!(before_a, before_b, "the no-grad scorer computes in bf16 either way");
    eprintln!(
        "bf16 gap without checkpointing: mean {:.2e} max {:.2e}; with: mean {:.2e} max {:.2e}",
        m_a.logprob_gap_mean, m_a.logprob_gap_max, m_b.logprob_gap_mean, m_b.logprob_gap_max
    );
    assert_eq!((m_a.logprob_gap_mean, m_a.logprob_gap_max), (m_b.logprob_gap_mean, m_b.logprob_gap_max));
    assert_eq!(m_a.episode_gaps, m_b.episode_gaps);
    let (second_a, second_b) = (&m_a.minibatch_metrics[1], &m_b.minibatch_metrics[1]);
    assert_eq!((second_a.ratio_min, second_a.ratio_max), (second_b.ratio_min, second_b.ratio_max), "{second_a:?} vs {second_b:?}");
    assert_same_update(&(m_a, after_a), &(m_b, after_b), 1e-5);
}

/// `trainer.zero_advantage_minibatch`: a minibatch whose rows all have zero advantage takes no
/// optimizer step with `skip` (the default: the weights are exactly those of the first
/// minibatch's step), and one on a zero gradient with `step`, as torch and verl take it —
/// AdamW's momentum from the first minibatch moves the weights on in the same direction.
#[test]
fn a_zero_advantage_minibatch_steps_only_when_asked() {
    let (loss, _) = grpo();
    let episodes = four_episodes(4);
    let advantages = [1.0, -1.0, 0.0, 0.0];
    // An update of the first `rows` episodes in `minibatches`; the log-probabilities of all four after.
    let run = |rows: usize, minibatches: u32, zero_advantage_minibatch: ZeroAdvantageMinibatch| {
        let mut p = trainer();
        let opts = UpdateOptions { minibatches, lr: 1e-2, zero_advantage_minibatch, ..UpdateOptions::default() };
        let m = update(&mut p, loss.as_ref(), &episodes[..rows], &advantages[..rows], &opts).unwrap();
        (m, recompute_logprobs(&p, &episodes, 4, 1.0).unwrap())
    };
    let (skip, step) = (run(4, 2, ZeroAdvantageMinibatch::Skip), run(4, 2, ZeroAdvantageMinibatch::Step));
    let first_alone = run(2, 1, ZeroAdvantageMinibatch::Skip);
    assert_eq!((skip.0.skipped_rows, step.0.skipped_rows), (2, 2));
    assert_eq!(skip.0.minibatch_losses, step.0.minibatch_losses);
    assert_eq!((skip.0.optimizer_steps, step.0.optimizer_steps), (1, 2));
    assert_eq!(step.0.grad_norm_max, skip.0.grad_norm_max);
    assert_eq!(step.0.grad_norm_mean, skip.0.grad_norm_max / 2.0, "the second step's gradient norm is 0");
    assert_eq!(skip.1, first_alone.1, "`skip`: the first minibatch's step and nothing else");
    // The positive-advantage episode's log-probability rises further under `step`.
    let positive = |lp: &[Vec<f32>]| policy_positions(&episodes[0]).iter().map(|&t| lp[0][t] as f64).sum::<f64>();
    let (before, after_skip, after_step) =
        (positive(&recompute_logprobs(&trainer(), &episodes, 4, 1.0).unwrap()), positive(&skip.1), positive(&step.1));
    eprintln!("positive-advantage log-probability: {before:.4} → skip {after_skip:.4}, step {after_step:.4}");
    assert!(after_skip > before && after_step > after_skip + 1e-3, "{before} → skip {after_skip}, step {after_step}");
}

/// `micro_tokens` (the default bound on an update's memory) only splits the work: one row
/// per micro-batch gives the update of one micro-batch for the whole batch, and the first
/// minibatch stays exactly on-policy.
#[test]
fn a_token_budget_splits_the_update_without_changing_it() {
    let (loss, _) = grpo();
    let episodes = four_episodes(5);
    let shortest = episodes.iter().map(|e| e.ids.len()).min().unwrap();
    let run = |micro_tokens: Option<usize>| {
        let mut p = trainer();
        let opts = UpdateOptions { micro_tokens, lr: 1e-2, ..UpdateOptions::default() };
        let m = update(&mut p, loss.as_ref(), &episodes, &[1.0, -1.0, 0.5, -0.5], &opts).unwrap();
        (m, recompute_logprobs(&p, &episodes, 4, 1.0).unwrap())
    };
    let (whole, split) = (run(None), run(Some(shortest)));
    // One episode per micro-batch scores its 8 reply tokens through the LM head as an 8-row
    // product, which burn-flex computes with its small-row kernel (the whole batch's 32 rows go
    // to gemm): the gradients agree to float rounding (grad norm to 1e-5 relative), but AdamW's
    // first step is about lr·sign(g), so a near-zero gradient entry whose rounding differs moves
    // its weight by up to 2·lr, and the log-probabilities after differ by more than the
    // gradients do (1.45e-5 seen).
    assert_same_update(&whole, &split, 1e-4);
    let first = &split.0.minibatch_metrics[0];
    assert_eq!((first.ratio_min, first.ratio_max), (1.0, 1.0), "{first:?}");
}

#[test]
fn a_bf16_policy_samples_and_takes_finite_update_steps() {
    let (loss, _) = grpo();
    let env = Letters;
    let mut p = QwenTrainer::load_with("tiny-vocab512", &arl_qwen3::cpu(), OptimConfig::default(), arl_qwen3::DType::Bf16, false).unwrap();
    let specs: Vec<(Task, usize)> = env.tasks(Split::Train).unwrap().into_iter().take(2).flat_map(|t| [(t.clone(), 0), (t, 0)]).collect();
    let (episodes, _) = rollout(&env, &Bytes, &mut p, &specs, &rollout_opts(4), &mut |_, _| {}).unwrap();
    let before = recompute_logprobs(&p, &episodes, 4, 1.0).unwrap();
    let opts = UpdateOptions {
        epochs: 1,
        minibatches: 1,
        micro: None,
        micro_tokens: None,
        lr: 1e-2,
        aggregation: Aggregation::TokenMean,
        horizon: None,
        temperature: 1.0,
        zero_advantage_minibatch: ZeroAdvantageMinibatch::Skip,
    };
    let m = update(&mut p, loss.as_ref(), &episodes, &[1.0, -1.0, 1.0, -1.0], &opts).unwrap();
    // Sampler and scorer both compute in bf16 from the same weights.
    assert!(m.logprob_gap_max < 5e-2, "bf16 sampler–trainer gap {}", m.logprob_gap_max);
    assert!(m.grad_norm_mean.is_finite() && m.grad_norm_mean > 0.0 && m.loss_value.is_finite(), "{m:?}");
    let after = recompute_logprobs(&p, &episodes, 4, 1.0).unwrap();
    assert_ne!(before, after, "the bf16 step moved the weights");
}

/// `loss.kl_coef > 0` with a frozen reference: the KL to it is 0 before the first update,
/// the term changes the update, and the KL grows once the policy moves.
#[test]
fn a_reference_policy_adds_a_kl_term_that_starts_at_zero() {
    arl_plugins::link();
    let build =
        |kl_coef: f64| (registry::get::<LossPlugin>("grpo").unwrap().build)(&LossConfig { kl_coef, ..LossConfig::default() }).unwrap();
    let (plain, with_kl) = (build(0.0), build(1.0));
    let env = Letters;
    let reference = arl_qwen3::QwenPolicy::load("tiny-vocab512", &arl_qwen3::cpu()).unwrap();
    let specs: Vec<(Task, usize)> = env.tasks(Split::Train).unwrap().into_iter().take(2).flat_map(|t| [(t.clone(), 0), (t, 0)]).collect();
    let mut a = trainer();
    let (episodes, _) = rollout(&env, &Bytes, &mut a, &specs, &rollout_opts(11), &mut |_, _| {}).unwrap();
    let advantages = [1.0, -1.0, 1.0, -1.0];
    // Two minibatches: the second one sees a policy that already moved away from the reference.
    let opts = UpdateOptions {
        epochs: 1,
        minibatches: 2,
        micro: None,
        micro_tokens: None,
        lr: 5e-2,
        aggregation: Aggregation::TokenMean,
        horizon: None,
        temperature: 1.0,
        zero_advantage_minibatch: ZeroAdvantageMinibatch::Skip,
    };
    let mut b = trainer();
    let ma = update_with_reference(&mut a, None, plain.as_ref(), &episodes, &advantages, &opts).unwrap();
    let mb = update_with_reference(&mut b, Some(&reference), with_kl.as_ref(), &episodes, &advantages, &opts).unwrap();
    assert_eq!(ma.ref_kl, None);
    assert_eq!(mb.ref_kl, Some(0.0), "the reference is the initial policy");
    assert!(mb.entropy.unwrap() > 0.0);
    let (la, lb) = (recompute_logprobs(&a, &episodes, 4, 1.0).unwrap(), recompute_logprobs(&b, &episodes, 4, 1.0).unwrap());
    let diff: f32 = la.iter().flatten().zip(lb.iter().flatten()).map(|(x, y)| (x - y).abs()).sum();
    assert!(diff > 1e-4, "the KL term did not change the update ({diff})");
    let again = update_with_reference(&mut b, Some(&reference), with_kl.as_ref(), &episodes, &advantages, &opts).unwrap();
    assert!(again.ref_kl.unwrap() > 0.0, "{:?}", again.ref_kl);
}

/// An entropy bonus gets its entropy (with gradients) from the update.
#[test]
fn an_entropy_bonus_runs_in_the_update() {
    arl_plugins::link();
    let loss = (registry::get::<LossPlugin>("grpo").unwrap().build)(&LossConfig { entropy_coef: 0.01, ..LossConfig::default() }).unwrap();
    let env = Letters;
    let mut policy = trainer();
    let specs: Vec<(Task, usize)> = env.tasks(Split::Train).unwrap().into_iter().take(1).flat_map(|t| [(t.clone(), 0), (t, 0)]).collect();
    let (episodes, _) = rollout(&env, &Bytes, &mut policy, &specs, &rollout_opts(5), &mut |_, _| {}).unwrap();
    let opts = UpdateOptions {
        epochs: 1,
        minibatches: 1,
        micro: None,
        micro_tokens: None,
        lr: 1e-3,
        aggregation: Aggregation::TokenMean,
        horizon: None,
        temperature: 1.0,
        zero_advantage_minibatch: ZeroAdvantageMinibatch::Skip,
    };
    let m = update(&mut policy, loss.as_ref(), &episodes, &[1.0, -1.0], &opts).unwrap();
    assert!(m.loss.entropy.unwrap() > 0.0 && m.optimizer_steps == 1, "{m:?}");
}

/// `loss.kl_placement = "reward"`: the reference's KL comes off each episode's reward before
/// advantages — about 0 against the policy itself, below 0 against a policy that moved.
#[test]
fn kl_in_the_reward_lowers_the_shaped_reward_by_the_reference_kl() {
    let (loss, adv) = grpo();
    let env = Letters;
    let tasks = env.tasks(Split::Train).unwrap();
    let mut moved = trainer();
    let specs: Vec<(Task, usize)> = tasks.iter().take(2).flat_map(|t| [(t.clone(), 0), (t.clone(), 0)]).collect();
    let (episodes, _) = rollout(&env, &Bytes, &mut moved, &specs, &rollout_opts(21), &mut |_, _| {}).unwrap();
    let opts = UpdateOptions {
        epochs: 1,
        minibatches: 1,
        micro: None,
        micro_tokens: None,
        lr: 5e-2,
        aggregation: Aggregation::TokenMean,
        horizon: None,
        temperature: 1.0,
        zero_advantage_minibatch: ZeroAdvantageMinibatch::Skip,
    };
    update(&mut moved, loss.as_ref(), &episodes, &[1.0, -1.0, 1.0, -1.0], &opts).unwrap();
    let unmoved = trainer();
    let run = |reference: &QwenTrainer| {
        let terms = |eps: &[arl_core::Episode]| -> Result<Vec<f64>, arl_train::TrainError> {
            Ok(kl_penalty(eps, &recompute_logprobs(reference, eps, 6, 1.0)?, 0.1, arl_core::config::KlEstimator::K3))
        };
        let mut cursor = 0;
        let mut next = |n: usize| {
            let out: Vec<Task> = (0..n).map(|j| tasks[(cursor + j) % tasks.len()].clone()).collect();
            cursor += n;
            out
        };
        collect(&env, &Bytes, &mut trainer(), adv.as_ref(), &mut next, &rollout_opts(5), &batch_opts(), Some(&terms), &mut |_, _| {})
            .unwrap()
    };
    let same = run(&unmoved);
    assert!(same.stats.extra_reward_mean.abs() < 1e-6, "{:?}", same.stats);
    let b = run(&moved);
    let raw = b.sampled.iter().map(|e| e.reward).sum::<f64>() / b.sampled.len() as f64;
    assert!(b.stats.extra_reward_mean < -1e-4, "{:?}", b.stats);
    assert!((b.stats.shaped_reward_mean - (raw + b.stats.extra_reward_mean)).abs() < 1e-12);
}

/// GRPO's loss for its first `finite` calls, then the same loss times NaN.
struct TurnsNan {
    inner: Box<dyn arl_core::PolicyLoss>,
    calls: std::sync::atomic::AtomicUsize,
    finite: usize,
}

impl arl_core::PolicyLoss for TurnsNan {
    fn token_loss(&self, input: &arl_core::LossInput) -> Result<arl_core::TokenLoss, arl_core::LossError> {
        let mut out = self.inner.token_loss(input)?;
        if self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst) >= self.finite {
            out.loss = out.loss.mul_scalar(f32::NAN);
        }
        Ok(out)
    }
    fn default_aggregation(&self) -> Aggregation {
        self.inner.default_aggregation()
    }
}

#[test]
fn non_finite_steps_are_skipped_counted_and_stop_the_run_with_the_last_good_checkpoint() {
    use arl_train::trainer::{MAX_NON_FINITE_STEPS, Parts, RunMeta, train};
    let (inner, adv) = grpo();
    // One minibatch, one micro-batch: one loss call per step. Step 1 is finite, then NaN.
    let loss = TurnsNan { inner, calls: Default::default(), finite: 1 };
    let mut config = arl_core::RunConfig::default();
    config.trainer.steps = 8;
    config.trainer.prompts = 2;
    config.trainer.group_size = 4;
    config.trainer.minibatches = 1;
    config.trainer.lr = 1e-2;
    config.trainer.micro = None;
    config.trainer.checkpoint_every = 1;
    config.trainer.checkpoint_interval_s = 0.0;
    config.trainer.max_sampling_attempts = 1;
    config.trainer.skip_zero_variance = false;
    config.output.checkpoints = true;
    config.eval.n = 0;
    config.sampling.max_new_tokens = Some(8);
    config.env.max_turns = 1;
    let dir = arl_tests::scratch_dir("non-finite");
    let mut policy = trainer();
    let mut lines = Vec::new();
    let parts = Parts { env: &Letters, codec: &Bytes, policy: &mut policy, loss: &loss, advantage: adv.as_ref(), reference: None };
    let err = train(parts, &config, RunMeta::default(), &dir, &mut |l| lines.push(l.to_string()), &mut |_, _, _| {}).unwrap_err();
    let last = 1 + MAX_NON_FINITE_STEPS;
    let good = dir.join("checkpoints/step-00001");
    assert_eq!(
        err.to_string(),
        format!(
            "stopped at step {last}: {MAX_NON_FINITE_STEPS} steps in a row had a NaN or infinite loss or gradient; the last good \
             checkpoint is {}; lower trainer.lr or check the loss settings",
            good.display()
        )
    );
    let said: Vec<&String> = lines.iter().filter(|l| l.contains("non-finite loss or gradient; skipped 1 of 1 optimizer steps")).collect();
    assert_eq!(said.len(), MAX_NON_FINITE_STEPS as usize, "{lines:#?}");
    // Counted in the metrics, with no NaN written anywhere.
    let metrics = std::fs::read_to_string(dir.join("metrics.jsonl")).unwrap();
    let steps: Vec<serde_json::Value> = metrics.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(steps.len(), last as usize);
    assert_eq!(steps[0]["non_finite_updates"], 0);
    assert!(steps[0]["grad_norm"].as_f64().unwrap() > 0.0, "step 1 trained");
    for s in &steps[1..] {
        assert_eq!(s["non_finite_updates"], 1, "{s}");
        assert!(s["loss"].as_f64().is_some_and(f64::is_finite) && s["ratio_mean"].is_null(), "{s}");
    }
    // The skipped steps changed no weight: the policy is the step-1 checkpoint, all finite;
    // no checkpoint was written for them.
    let saved = arl_qwen3::load(good.to_str().unwrap(), &arl_qwen3::cpu()).unwrap().hf_tensors();
    let now = policy.model().hf_tensors();
    assert_eq!(saved.len(), now.len());
    for ((name, _, a), (_, _, b)) in saved.iter().zip(&now) {
        assert!(a.iter().all(|x| x.is_finite()), "{name} is finite");
        assert_eq!(a, b, "{name} unchanged since step 1");
    }
    let written: Vec<String> =
        std::fs::read_dir(dir.join("checkpoints")).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert_eq!(written, ["step-00001"]);
}

fn sampled_at(temperature: f64, seed: u64) -> RolloutOptions {
    let mut o = rollout_opts(seed);
    o.sampling.temperature = temperature;
    o
}

/// Mean and max |sampler logprob − trainer recomputation| of a T-sampled batch, through the
/// update (which scores at `UpdateOptions::temperature`).
fn update_gap(temperature: f64) -> (f64, f64, Vec<arl_core::Episode>) {
    let (loss, _) = grpo();
    let env = Letters;
    let mut p = trainer();
    let specs: Vec<(Task, usize)> = env.tasks(Split::Train).unwrap().into_iter().flat_map(|t| [(t.clone(), 0), (t, 0)]).collect();
    let (episodes, _) = rollout(&env, &Bytes, &mut p, &specs, &sampled_at(temperature, 13), &mut |_, _| {}).unwrap();
    let opts = UpdateOptions { temperature, lr: 1e-3, ..UpdateOptions::default() };
    let advantages: Vec<f64> = (0..episodes.len()).map(|i| if i % 2 == 0 { 1.0 } else { -1.0 }).collect();
    let m = update(&mut p, loss.as_ref(), &episodes, &advantages, &opts).unwrap();
    assert!(m.policy_tokens >= 40, "{}", m.policy_tokens);
    (m.logprob_gap_mean, m.logprob_gap_max, episodes)
}

/// `sampling.temperature = 0.7`: the trainer scores at 0.7, so the sampler–trainer gap stays
/// at the T = 1 level (f32, one backend) instead of the temperature's whole effect.
#[test]
fn the_sampler_trainer_gap_at_t_0_7_is_at_the_t_1_level() {
    let (mean_1, max_1, _) = update_gap(1.0);
    let (mean_07, max_07, episodes) = update_gap(0.7);
    // What scoring at T = 1 (the trainer before temperatures) gives on the same samples.
    let at_1 = recompute_logprobs(&trainer(), &episodes, 8, 1.0).unwrap();
    let (mut sum, mut n) = (0.0f64, 0usize);
    for (e, row) in episodes.iter().zip(&at_1) {
        for t in policy_positions(e) {
            sum += (e.sampler_logprobs[t] - row[t]).abs() as f64;
            n += 1;
        }
    }
    let untempered = sum / n as f64;
    eprintln!(
        "sampler–trainer gap: T=1 mean {mean_1:.2e} max {max_1:.2e}; T=0.7 mean {mean_07:.2e} max {max_07:.2e}; \
         T=0.7 scored at 1: mean {untempered:.2e}"
    );
    assert!(mean_1 < 1e-5 && max_1 < 1e-4, "T = 1: mean {mean_1}, max {max_1}");
    assert!(mean_07 < 1e-5 && max_07 < 1e-4, "T = 0.7: mean {mean_07}, max {max_07}");
    assert!(mean_07 < 10.0 * mean_1.max(1e-7), "T = 0.7 gap {mean_07} is not at the T = 1 level {mean_1}");
    assert!(untempered > 1e-2, "scoring at 1 should show the temperature's effect: {untempered}");
}

/// The old log-probabilities are scored in the gradient pass's own micro-batches, so the
/// first minibatch of every step is exactly on-policy: ratio 1 on every token, nothing
/// clipped — with minibatch and micro-batch boundaries that do not line up, a zero-advantage
/// row left out of backward, unequal lengths and T ≠ 1.
#[test]
fn the_first_minibatch_of_every_step_has_ratio_exactly_one() {
    let (loss, _) = grpo();
    let env = Letters;
    let mut p = trainer();
    let tasks = env.tasks(Split::Train).unwrap();
    for step in 0..3u64 {
        let specs: Vec<(Task, usize)> = tasks.iter().take(3).flat_map(|t| [(t.clone(), 0), (t.clone(), 0)]).collect();
        let mut ropts = sampled_at(0.8, 40 + step);
        ropts.sampling.max_new_tokens = 6 + step as usize;
        let (episodes, _) = rollout(&env, &Bytes, &mut p, &specs, &ropts, &mut |_, _| {}).unwrap();
        assert_eq!(episodes.len(), 6);
        // 6 rows, 2 minibatches of 3, micro-batches of 2: [0,1] [2] | [3,4] [5]; row 1 skipped.
        let advantages = [1.0, 0.0, -1.0, 0.5, -0.5, 1.0];
        let opts = UpdateOptions { minibatches: 2, micro: Some(2), lr: 1e-2, temperature: 0.8, ..UpdateOptions::default() };
        let m = update(&mut p, loss.as_ref(), &episodes, &advantages, &opts).unwrap();
        assert_eq!(m.minibatch_metrics.len(), 2);
        assert_eq!(m.skipped_rows, 1);
        let first = &m.minibatch_metrics[0];
        assert!(first.tokens > 0.0);
        assert_eq!((first.ratio_min, first.ratio_max, first.ratio_mean), (1.0, 1.0, 1.0), "step {step}: {first:?}");
        assert_eq!((first.clip_frac_high, first.clip_frac_low, first.approx_kl), (0.0, 0.0, 0.0), "step {step}: {first:?}");
        // The second minibatch sees the policy after the first step: ratios move.
        assert!(m.minibatch_metrics[1].ratio_max > 1.0 || m.minibatch_metrics[1].ratio_min < 1.0, "{m:?}");
    }
}

/// The first minibatch's rows are scored once, by their own gradient pass, yet the metrics of
/// the policy before the update (entropy, sampler–trainer gap, KL to the reference, per
/// episode) still cover every episode and equal one no-grad scoring of them all: with one or
/// more minibatches, two epochs, a zero-advantage row, micro-batches that do not line up, and
/// a first micro-batch whose loss is NaN (the rest of that minibatch is then scored apart).
#[test]
fn the_metrics_before_the_update_cover_every_episode() {
    let (grpo_loss, _) = grpo();
    let env = Letters;
    let specs: Vec<(Task, usize)> = env.tasks(Split::Train).unwrap().into_iter().take(3).flat_map(|t| [(t.clone(), 0), (t, 0)]).collect();
    let (episodes, _) = rollout(&env, &Bytes, &mut trainer(), &specs, &sampled_at(0.8, 21), &mut |_, _| {}).unwrap();
    let advantages = [1.0, 0.0, -1.0, 0.5, -0.5, 1.0];
    let mut reference = trainer();
    let moved = UpdateOptions { lr: 5e-2, temperature: 0.8, ..UpdateOptions::default() };
    update(&mut reference, grpo_loss.as_ref(), &episodes, &[1.0, -1.0, 1.0, -1.0, 1.0, -1.0], &moved).unwrap();
    // What the metrics must be: every episode scored once, without gradients, before the update.
    let before = recompute(&trainer(), &episodes, 6, arl_core::policy::ScoreParams::at(0.8).with_entropy(true)).unwrap();
    let ref_lp = recompute_logprobs(&reference, &episodes, 6, 0.8).unwrap();
    let (mut gap_sum, mut gap_max, mut kl_sum, mut n) = (0.0f64, 0.0f64, 0.0f64, 0usize);
    let mut per_episode = Vec::new();
    for (i, e) in episodes.iter().enumerate() {
        let (mut sum, mut k) = (0.0f64, 0usize);
        for t in policy_positions(e) {
            let gap = (e.sampler_logprobs[t] - before.logprobs[i][t]).abs() as f64;
            let l = (before.logprobs[i][t] - ref_lp[i][t]) as f64;
            (gap_sum, gap_max, kl_sum, sum, k, n) =
                (gap_sum + gap, gap_max.max(gap), kl_sum + (-l).exp() - 1.0 + l, sum + gap, k + 1, n + 1);
        }
        per_episode.push((sum, k));
    }
    assert!(n >= 20 && kl_sum / n as f64 > 1e-4, "{n} tokens, KL {}", kl_sum / n as f64);
    for (epochs, minibatches, micro, nan_first) in
        [(1, 1, None, false), (1, 2, Some(2), false), (2, 2, Some(2), false), (1, 3, Some(1), false), (1, 1, Some(2), true)]
    {
        let nan = TurnsNan { inner: grpo().0, calls: Default::default(), finite: 0 };
        let loss: &dyn arl_core::PolicyLoss = if nan_first { &nan } else { grpo_loss.as_ref() };
        let opts = UpdateOptions { epochs, minibatches, micro, lr: 1e-2, temperature: 0.8, ..UpdateOptions::default() };
        let m = update_with_reference(&mut trainer(), Some(&reference), loss, &episodes, &advantages, &opts).unwrap();
        let what = format!("epochs {epochs}, minibatches {minibatches}, micro {micro:?}, NaN {nan_first}: {m:?}");
        assert_eq!((m.non_finite_steps > 0, m.policy_tokens, m.episode_gaps.len()), (nan_first, n, episodes.len()), "{what}");
        assert!((m.entropy.unwrap() - before.entropy_mean.unwrap()).abs() < 1e-5, "{what}");
        assert!((m.logprob_gap_mean - gap_sum / n as f64).abs() < 1e-6 && (m.logprob_gap_max - gap_max).abs() < 1e-5, "{what}");
        assert!((m.ref_kl.unwrap() - kl_sum / n as f64).abs() < 1e-6, "{what}");
        for (got, (sum, k)) in m.episode_gaps.iter().zip(&per_episode) {
            assert!(got.tokens == *k && (got.abs_gap_sum - sum).abs() < 1e-5 && (got.ratio_sum - *k as f64).abs() < 1e-3, "{what}");
        }
    }
}

/// `constant-horizon` divides by N·H with H the given horizon, whatever the prompt lengths:
/// on-policy, the clipped loss of token t is −Â, so the loss is −Σ_i Â_i·|o_i| / (N·H).
#[test]
fn constant_horizon_divides_by_the_given_horizon() {
    let (loss, _) = grpo();
    let env = Letters;
    let mut p = trainer();
    let specs: Vec<(Task, usize)> = env.tasks(Split::Train).unwrap().into_iter().take(2).flat_map(|t| [(t.clone(), 0), (t, 0)]).collect();
    let (episodes, _) = rollout(&env, &Bytes, &mut p, &specs, &rollout_opts(8), &mut |_, _| {}).unwrap();
    let advantages = [1.0, -0.5, 0.25, -1.0];
    let h = 48.0;
    let opts = UpdateOptions { aggregation: Aggregation::ConstantHorizon, horizon: Some(h), lr: 0.0, ..UpdateOptions::default() };
    let m = update(&mut p, loss.as_ref(), &episodes, &advantages, &opts).unwrap();
    let sum: f64 = episodes.iter().zip(advantages).map(|(e, a)| -a * policy_positions(e).len() as f64).sum();
    let want = sum / (4.0 * h);
    assert!((m.loss_value - want).abs() < 1e-6, "loss {} vs −ΣÂ|o|/(N·H) {want}", m.loss_value);
    // No horizon: refused, not guessed from the padded (prompt-including) width.
    let none = UpdateOptions { horizon: None, ..opts };
    let err = update(&mut p, loss.as_ref(), &episodes, &advantages, &none).unwrap_err().to_string();
    assert!(err.contains("constant-horizon aggregation needs a horizon"), "{err}");
}

/// `arl run`'s H: `loss.horizon`, else the response budget — for `--algo drgrpo`, `--algo
/// dppo` and the DPPO losses' own constant-horizon aggregation.
#[test]
fn the_trainer_takes_h_from_the_response_budget() {
    arl_plugins::link();
    use arl_train::trainer::{response_budget, rollout_options, update_options};
    let check = |toml: &str, want_agg: Aggregation, want_h: f64| {
        let config = arl_core::RunConfig::from_toml_str(toml).unwrap();
        let loss = (registry::get::<LossPlugin>(&config.loss.name).unwrap().build)(&config.loss).unwrap();
        let ropts = rollout_options(&config, &Letters, 0);
        let opts = update_options(&config, loss.as_ref(), &ropts);
        assert_eq!((opts.aggregation, opts.horizon), (want_agg, Some(want_h)), "{toml}");
        assert_eq!(opts.temperature, config.sampling.temperature);
        response_budget(&ropts)
    };
    // max_turns 6 × max_new_tokens 16.
    let budget = check("algo = \"drgrpo\"\n[sampling]\nmax_new_tokens = 16", Aggregation::ConstantHorizon, 96.0);
    assert_eq!(budget, 96);
    check("algo = \"dppo\"\n[sampling]\nmax_response_tokens = 300\ntemperature = 0.6", Aggregation::ConstantHorizon, 300.0);
    check("[loss]\nname = \"dppo-kl\"\n[sampling]\nmax_response_tokens = 200", Aggregation::ConstantHorizon, 200.0);
    check("algo = \"drgrpo\"\n[loss]\nhorizon = 64.0", Aggregation::ConstantHorizon, 64.0);
    // The default run: one token-mean normalizer per minibatch (the seed recipe).
    check("", Aggregation::TokenMean, (6 * 64) as f64);
    check("algo = \"grpo\"", Aggregation::SeqMeanTokenMean, (6 * 64) as f64);
}

/// A bf16 trainer restored from its checkpoint continues in bf16 (weights and AdamW moments)
/// and takes exactly the step the uninterrupted trainer takes.
#[test]
fn a_bf16_trainer_resumes_in_bf16() {
    use arl_core::policy::TrainablePolicy;
    let (loss, _) = grpo();
    let env = Letters;
    let bf16 =
        || QwenTrainer::load_with("tiny-vocab512", &arl_qwen3::cpu(), OptimConfig::default(), arl_qwen3::DType::Bf16, false).unwrap();
    let mut p = bf16();
    let specs: Vec<(Task, usize)> = env.tasks(Split::Train).unwrap().into_iter().take(2).flat_map(|t| [(t.clone(), 0), (t, 0)]).collect();
    let (episodes, _) = rollout(&env, &Bytes, &mut p, &specs, &rollout_opts(6), &mut |_, _| {}).unwrap();
    let advantages = [1.0, -1.0, 0.5, -0.5];
    let opts = UpdateOptions { lr: 1e-2, ..UpdateOptions::default() };
    update(&mut p, loss.as_ref(), &episodes, &advantages, &opts).unwrap();
    let dir = arl_tests::scratch_dir("bf16-resume");
    p.save_state(&dir).unwrap();
    let straight = update(&mut p, loss.as_ref(), &episodes, &advantages, &opts).unwrap();
    let mut q = bf16();
    q.load_state(&dir).unwrap();
    assert_eq!(q.model().dtype(), burn::tensor::DType::BF16, "the resumed weights are bf16");
    let resumed = update(&mut q, loss.as_ref(), &episodes, &advantages, &opts).unwrap();
    assert!(straight.grad_norm_mean > 0.0);
    assert_eq!((resumed.loss_value, resumed.grad_norm_mean), (straight.loss_value, straight.grad_norm_mean));
    assert_eq!(recompute_logprobs(&q, &episodes, 4, 1.0).unwrap(), recompute_logprobs(&p, &episodes, 4, 1.0).unwrap());
    std::fs::remove_dir_all(&dir).unwrap();
}
