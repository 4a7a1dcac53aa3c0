//! The trainer (arl-core `train`): the loop learns, the update overfits a fixed batch, and
//! one full `arl run` step works on the tiny preset with the real Qwen3 chat template.

use arl_core::chat::{ChatCodec, ChatError, Conversation};
use arl_core::config::LossConfig;
use arl_core::loss::Aggregation;
use arl_core::registry::{self, AdvantagePlugin, LossPlugin};
use arl_core::train::rollout::{RolloutOptions, rollout};
use arl_core::train::update::{UpdateOptions, policy_positions, recompute_logprobs, update, update_with_reference};
use arl_core::{
    AdvantageInput, AssistantTurn, Env, EnvError, EnvSession, EpisodeStats, Message, Outcome, Split, Step, Task,
    ToolSchema,
};
use arl_optim::OptimConfig;
use arl_qwen3::QwenTrainer;

/// A byte-level codec for the 512-token test model: one id per byte, 511 ends a turn.
struct Bytes;

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

/// One turn; the reward is the fraction of reply bytes that are lowercase letters
/// (26 of 512 ids, so a random model earns about 0.05).
struct Letters;

impl Env for Letters {
    fn tasks(&self, split: Split) -> Result<Vec<Task>, EnvError> {
        Ok((0..4).map(|i| Task { id: format!("l{i}"), family: "letters".into(), split, data: serde_json::json!(i) }).collect())
    }
    fn tools(&self) -> Vec<ToolSchema> {
        vec![]
    }
    fn reset(&self, task: &Task) -> Result<Box<dyn EnvSession>, EnvError> {
        Ok(Box::new(LettersSession(vec![Message::user(format!("say letters {}", task.id))])))
    }
}

struct LettersSession(Vec<Message>);

impl EnvSession for LettersSession {
    fn messages(&self) -> &[Message] {
        &self.0
    }
    fn step(&mut self, turn: &AssistantTurn) -> Result<Step, EnvError> {
        Ok(Step::Done(self.grade(&turn.text)))
    }
    fn finish(&mut self) -> Result<Outcome, EnvError> {
        Ok(self.grade(""))
    }
}

impl LettersSession {
    fn grade(&self, text: &str) -> Outcome {
        let n = text.chars().count().max(1) as f64;
        let reward = text.chars().filter(|c| c.is_ascii_lowercase()).count() as f64 / n;
        Outcome { reward, stats: EpisodeStats { turns: 1, ..Default::default() } }
    }
}

fn trainer() -> QwenTrainer {
    QwenTrainer::load("tiny-vocab512", &arl_qwen3::cpu(), OptimConfig::default()).unwrap()
}

fn rollout_opts(seed: u64) -> RolloutOptions {
    RolloutOptions {
        max_turns: 1,
        max_calls_per_turn: 4,
        sampling: arl_core::policy::SamplingParams { max_new_tokens: 8, seed, ..Default::default() },
        gen_batch: None,
        max_episode_tokens: 256,
    }
}

fn grpo() -> (Box<dyn arl_core::PolicyLoss>, Box<dyn arl_core::AdvantageFn>) {
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
    let opts = UpdateOptions { epochs: 1, minibatches: 2, micro: None, lr: 1e-2, aggregation: Aggregation::TokenMean, horizon: None };
    let mut means = Vec::new();
    for step in 0..12u64 {
        let specs: Vec<(Task, usize)> = tasks.iter().enumerate().flat_map(|(g, t)| (0..8).map(move |_| (t.clone(), g))).collect();
        let (episodes, _) = rollout(&env, &Bytes, &mut policy, &specs, &rollout_opts(step), &mut |_, _| {}).unwrap();
        let rewards: Vec<f64> = episodes.iter().map(|e| e.reward).collect();
        let groups: Vec<usize> = episodes.iter().map(|e| e.group).collect();
        means.push(rewards.iter().sum::<f64>() / rewards.len() as f64);
        let advantages = adv.advantages(&AdvantageInput { rewards: &rewards, group_ids: &groups }).unwrap();
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
    let opts = UpdateOptions { epochs: 1, minibatches: 1, micro: Some(2), lr: 1e-2, aggregation: Aggregation::TokenMean, horizon: None };
    let positive_logprob = |p: &QwenTrainer| -> f64 {
        let lp = recompute_logprobs(p, &episodes, 4).unwrap();
        [0usize, 2].iter().map(|&i| policy_positions(&episodes[i]).iter().map(|&t| lp[i][t] as f64).sum::<f64>()).sum()
    };
    let mut losses = Vec::new();
    let before = positive_logprob(&policy);
    for _ in 0..5 {
        // On-policy for the first update only: later ones see ratios ≠ 1, as PPO epochs do.
        losses.push(update(&mut policy, loss.as_ref(), &episodes, &advantages, &opts).unwrap().loss_value);
    }
    let after = positive_logprob(&policy);
    assert!(after > before + 1.0, "logprob of positive-advantage tokens: {before} → {after}");
    assert!(losses.last().unwrap() < losses.first().unwrap(), "losses: {losses:?}");
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
    let lp = recompute_logprobs(&policy, &episodes, 1).unwrap();
    for t in policy_positions(ep) {
        assert!((lp[0][t] - ep.sampler_logprobs[t]).abs() < 1e-4, "t={t}: {} vs {}", lp[0][t], ep.sampler_logprobs[t]);
    }
}

#[test]
fn one_full_run_step_on_the_tiny_preset_with_the_qwen3_template() {
    let dir = std::env::temp_dir().join(format!("arl-run-test-{}", std::process::id()));
    let out = arl_tests::arl(&[
        "run", "--env", "sum", "--model", "tiny", "--steps", "1", "--prompts", "2", "--group-size", "2",
        "--max-new-tokens", "4", "--eval-n", "1", "--set", "env.options.heldout_tasks=2", "--out", dir.to_str().unwrap(),
    ])
    .unwrap();
    assert!(out.contains("chat self-check:"), "{out}");
    assert!(out.contains("step   1"), "{out}");
    let results: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.join("results.json")).unwrap()).unwrap();
    assert_eq!(results["steps"].as_array().unwrap().len(), 1);
    assert_eq!(results["before"]["summary"]["tasks"], 2);
    assert!(results["difference"]["ci"]["lo"].is_number());
    let step = &results["steps"][0];
    assert!(step["entropy"].as_f64().unwrap() > 0.0 && step["peak_rss_mb"].as_f64().unwrap() > 0.0, "{step}");
    assert!(dir.join("checkpoints/final/config.json").exists());
    assert!(dir.join("metrics.jsonl").exists() && dir.join("run.log").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `loss.kl_coef > 0` with a frozen reference: the KL to it is 0 before the first update,
/// the term changes the update, and the KL grows once the policy moves.
#[test]
fn a_reference_policy_adds_a_kl_term_that_starts_at_zero() {
    arl_plugins::link();
    let build = |kl_coef: f64| {
        (registry::get::<LossPlugin>("grpo").unwrap().build)(&LossConfig { kl_coef, ..LossConfig::default() }).unwrap()
    };
    let (plain, with_kl) = (build(0.0), build(1.0));
    let env = Letters;
    let reference = arl_qwen3::QwenPolicy::load("tiny-vocab512", &arl_qwen3::cpu()).unwrap();
    let specs: Vec<(Task, usize)> = env.tasks(Split::Train).unwrap().into_iter().take(2).flat_map(|t| [(t.clone(), 0), (t, 0)]).collect();
    let mut a = trainer();
    let (episodes, _) = rollout(&env, &Bytes, &mut a, &specs, &rollout_opts(11), &mut |_, _| {}).unwrap();
    let advantages = [1.0, -1.0, 1.0, -1.0];
    // Two minibatches: the second one sees a policy that already moved away from the reference.
    let opts = UpdateOptions { epochs: 1, minibatches: 2, micro: None, lr: 5e-2, aggregation: Aggregation::TokenMean, horizon: None };
    let mut b = trainer();
    let ma = update_with_reference(&mut a, None, plain.as_ref(), &episodes, &advantages, &opts).unwrap();
    let mb = update_with_reference(&mut b, Some(&reference), with_kl.as_ref(), &episodes, &advantages, &opts).unwrap();
    assert_eq!(ma.ref_kl, None);
    assert_eq!(mb.ref_kl, Some(0.0), "the reference is the initial policy");
    assert!(mb.entropy.unwrap() > 0.0);
    let (la, lb) = (recompute_logprobs(&a, &episodes, 4).unwrap(), recompute_logprobs(&b, &episodes, 4).unwrap());
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
    let opts = UpdateOptions { epochs: 1, minibatches: 1, micro: None, lr: 1e-3, aggregation: Aggregation::TokenMean, horizon: None };
    let m = update(&mut policy, loss.as_ref(), &episodes, &[1.0, -1.0], &opts).unwrap();
    assert!(m.loss.entropy.unwrap() > 0.0 && m.optimizer_steps == 1, "{m:?}");
}
