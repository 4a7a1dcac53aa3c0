//! Rollouts: many episodes decode together, turn by turn, with the KV-cache sampler.
//!
//! Token-in/token-out: each episode's prompt is rendered once; every assistant turn is kept
//! as the sampler's ids with their logprobs; observations are appended as the template's own
//! ids of that suffix ([`Conversation`]). Episodes finish at different turns and leave the
//! batch; at most `gen_batch` episodes and `gen_tokens` KV-cache tokens are decoded at once to
//! cap KV memory. Each turn hands the sampler the whole conversation so far; a sampler with a
//! prefix cache (arl-qwen3's) recognises the earlier turns and prefills only the new suffix
//! (`RolloutStats` counts both).

use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::TrainError;
use super::micro::MicroBatching;
use arl_core::chat::{ChatCodec, Conversation};
use arl_core::policy::{FinishReason, Generation, Policy, PolicyError, SamplingParams, ScoreParams, Scores};
use arl_core::toolcall::parse_turn;
use arl_core::{AgentEnv, AgentSampling, Env, EnvSession, Episode, EpisodeFinish, Message, Outcome, Step, Task};

/// How episodes are rolled out.
#[derive(Clone, Debug, PartialEq)]
pub struct RolloutOptions {
    pub max_turns: u32,
    pub max_calls_per_turn: u32,
    /// Per-turn sampling (`max_new_tokens` is per turn; `seed` is the base seed).
    pub sampling: SamplingParams,
    /// Episodes decoded at once; `None`: all live episodes.
    pub gen_batch: Option<usize>,
    /// KV-cache tokens decoded at once: episodes × (the longest prompt + a turn's new tokens);
    /// `None`: no cap ([`MicroBatching`]'s rule: in order, a longer episode alone).
    pub gen_tokens: Option<usize>,
    /// An episode that cannot fit another full turn in this many tokens ends (truncated).
    pub max_episode_tokens: usize,
    /// An episode whose first prompt is longer ends before its first turn (truncated,
    /// counter `prompt_over_budget`).
    pub max_prompt_tokens: Option<usize>,
    /// Policy tokens an episode may generate over all its turns; a turn is cut where the
    /// budget runs out, and the episode then ends (truncated).
    pub max_response_tokens: Option<usize>,
}

/// Counts of one rollout.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RolloutStats {
    pub episodes: usize,
    pub generated_tokens: usize,
    pub generate_seconds: f64,
    /// Of `seconds`, the time inside the env: starting episodes, tool calls (the sandbox's
    /// jobs included) and grading.
    #[serde(default)]
    pub env_seconds: f64,
    pub seconds: f64,
    /// Episodes ended by a token budget (a last turn cut by `max_new_tokens` included) or
    /// the turn limit rather than a final answer.
    pub truncated: usize,
    /// Prompt tokens handed to the sampler (every turn's whole conversation so far): what a
    /// sampler without a cache prefills.
    #[serde(default)]
    pub prompt_tokens: usize,
    /// Prompt tokens the sampler actually ran through the model (`Policy::prefill_tokens`; a
    /// policy that does not count them is taken to prefill every prompt token).
    #[serde(default)]
    pub prefill_tokens: usize,
}

struct Live {
    index: usize,
    session: Box<dyn EnvSession>,
    conv: Conversation,
    /// Policy tokens generated so far.
    generated: usize,
}

/// Roll out one episode per `(task, group)`; episodes come back in the same order.
pub fn rollout(
    env: &dyn Env,
    codec: &dyn ChatCodec,
    policy: &mut dyn Policy,
    specs: &[(Task, usize)],
    opts: &RolloutOptions,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<(Vec<Episode>, RolloutStats), TrainError> {
    if let Some(agent) = env.agent() {
        return agent_rollout(agent, codec, policy, specs, opts, progress);
    }
    let start = Instant::now();
    let tools = env.tools();
    let mut stats = RolloutStats { episodes: specs.len(), ..Default::default() };
    let mut done: Vec<Option<Episode>> = (0..specs.len()).map(|_| None).collect();
    let mut live = Vec::with_capacity(specs.len());
    let finish = |l: Live, mut outcome: Outcome, why: EpisodeFinish, done: &mut Vec<Option<Episode>>| {
        let (task, group) = &specs[l.index];
        outcome.stats.finish = Some(why);
        done[l.index] = Some(l.conv.into_episode(task.id.clone(), *group, outcome.reward, outcome.stats));
    };
    progress(0, specs.len());
    let response_budget = opts.max_response_tokens.unwrap_or(usize::MAX);
    for (index, (task, _)) in specs.iter().enumerate() {
        let session = timed(&mut stats.env_seconds, || env.reset_seeded(task, episode_seed(opts.sampling.seed, index)))?;
        let conv = Conversation::start(codec, session.messages().to_vec(), tools.clone())?;
        let mut l = Live { index, session, conv, generated: 0 };
        if opts.max_prompt_tokens.is_some_and(|max| l.conv.ids.len() > max) {
            let mut outcome = timed(&mut stats.env_seconds, || l.session.finish())?;
            outcome.stats.truncated = true;
            outcome.stats.bump("prompt_over_budget");
            stats.truncated += 1;
            finish(l, outcome, EpisodeFinish::PromptBudget, &mut done);
            continue;
        }
        live.push(l);
    }
    let total = specs.len();
    for turn in 0..opts.max_turns {
        // Episodes that cannot fit another full turn, or have spent their response budget,
        // end here.
        let (fits, over): (Vec<Live>, Vec<Live>) = live
            .into_iter()
            .partition(|l| l.conv.ids.len() + opts.sampling.max_new_tokens <= opts.max_episode_tokens && l.generated < response_budget);
        for mut l in over {
            let mut outcome = timed(&mut stats.env_seconds, || l.session.finish())?;
            outcome.stats.truncated = true;
            stats.truncated += 1;
            let why = if l.generated >= response_budget { EpisodeFinish::ResponseBudget } else { EpisodeFinish::EpisodeBudget };
            finish(l, outcome, why, &mut done);
        }
        live = fits;
        if live.is_empty() {
            break;
        }
        let order: Vec<usize> = (0..live.len()).collect();
        let chunks =
            MicroBatching::new(opts.gen_batch, opts.gen_tokens).split(&order, |i| live[i].conv.ids.len() + opts.sampling.max_new_tokens);
        let mut samples = Vec::with_capacity(live.len());
        for (c, rows) in chunks.iter().enumerate() {
            let batch = &live[rows[0]..=rows[rows.len() - 1]];
            let prompts: Vec<Vec<u32>> = batch.iter().map(|l| l.conv.ids.clone()).collect();
            let room = batch.iter().map(|l| response_budget - l.generated).max().unwrap_or(0);
            let params = SamplingParams {
                seed: mix(opts.sampling.seed, turn as u64, c as u64),
                stop_ids: Some(codec.stop_ids().to_vec()),
                max_new_tokens: opts.sampling.max_new_tokens.min(room),
                ..opts.sampling.clone()
            };
            let t = Instant::now();
            let given: usize = prompts.iter().map(Vec::len).sum();
            let before = policy.prefill_tokens();
            let generated = policy.generate(&prompts, &params)?;
            stats.generate_seconds += t.elapsed().as_secs_f64();
            stats.prompt_tokens += given;
            stats.prefill_tokens += match (before, policy.prefill_tokens()) {
                (Some(a), Some(b)) => (b - a) as usize,
                _ => given,
            };
            // Rows with less budget left than the batch's are cut where theirs runs out.
            for (l, mut g) in batch.iter().zip(generated) {
                let room = response_budget - l.generated;
                if g.ids.len() > room {
                    g.ids.truncate(room);
                    g.sampler_logprobs.truncate(room);
                    g.finish = FinishReason::Length;
                }
                samples.push(g);
            }
        }
        let last_turn = turn + 1 == opts.max_turns;
        let mut next = Vec::with_capacity(live.len());
        for (mut l, sample) in live.into_iter().zip(samples) {
            stats.generated_tokens += sample.ids.len();
            l.generated += sample.ids.len();
            let text = l.conv.push_assistant(codec, &sample.ids, &sample.sampler_logprobs)?;
            let parsed = parse_turn(&text, &tools, opts.max_calls_per_turn as usize);
            match timed(&mut stats.env_seconds, || l.session.step(&parsed))? {
                Step::Done(mut outcome) => {
                    // A last turn cut by a token budget is not a final answer (DAPO's overlong).
                    let cut = sample.finish == FinishReason::Length;
                    outcome.stats.truncated |= cut;
                    if outcome.stats.truncated {
                        stats.truncated += 1;
                    }
                    finish(l, outcome, if cut { EpisodeFinish::Length } else { EpisodeFinish::Done }, &mut done);
                }
                Step::Observe(_) if last_turn => {
                    let mut outcome = timed(&mut stats.env_seconds, || l.session.finish())?;
                    outcome.stats.truncated = true;
                    stats.truncated += 1;
                    finish(l, outcome, EpisodeFinish::MaxTurns, &mut done);
                }
                Step::Observe(results) => {
                    let observations = results.iter().map(|r| Message::tool(r.outcome.text())).collect();
                    l.conv.push_observations(codec, observations)?;
                    next.push(l);
                }
            }
        }
        live = next;
        progress(total - live.len(), total);
    }
    for l in live {
        // Only reachable with max_turns = 0.
        let mut l = l;
        let outcome = timed(&mut stats.env_seconds, || l.session.finish())?;
        finish(l, outcome, EpisodeFinish::MaxTurns, &mut done);
    }
    stats.seconds = start.elapsed().as_secs_f64();
    let episodes = done.into_iter().map(|e| e.expect("every episode finished")).collect();
    Ok((episodes, stats))
}

/// Episodes an agent program runs ([`AgentEnv`]): the env is lent the policy, whose
/// generation time and tokens are counted here.
fn agent_rollout(
    agent: &dyn AgentEnv,
    codec: &dyn ChatCodec,
    policy: &mut dyn Policy,
    specs: &[(Task, usize)],
    opts: &RolloutOptions,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<(Vec<Episode>, RolloutStats), TrainError> {
    let start = Instant::now();
    let sampling = AgentSampling {
        temperature: opts.sampling.temperature,
        max_new_tokens: opts.sampling.max_new_tokens,
        max_turns: opts.max_turns,
        max_calls_per_turn: opts.max_calls_per_turn,
        max_episode_tokens: opts.max_episode_tokens,
        seed: opts.sampling.seed,
    };
    let mut timed = TimedPolicy { inner: policy, seconds: 0.0, prompt_tokens: 0 };
    let episodes = agent.run_episodes(specs, &mut timed, codec, &sampling, progress)?;
    if episodes.len() != specs.len() {
        return Err(TrainError::Env(arl_core::EnvError::Other(format!(
            "the env's agent returned {} episodes for {} tasks",
            episodes.len(),
            specs.len()
        ))));
    }
    let seconds = start.elapsed().as_secs_f64();
    let stats = RolloutStats {
        episodes: episodes.len(),
        generated_tokens: episodes.iter().map(Episode::policy_tokens).sum(),
        generate_seconds: timed.seconds,
        env_seconds: seconds - timed.seconds,
        seconds,
        truncated: episodes.iter().filter(|e| e.stats.truncated).count(),
        prompt_tokens: timed.prompt_tokens,
        prefill_tokens: timed.prompt_tokens,
    };
    Ok((episodes, stats))
}

/// A policy whose generation time and prompt tokens are counted.
struct TimedPolicy<'a> {
    inner: &'a mut dyn Policy,
    seconds: f64,
    prompt_tokens: usize,
}

impl Policy for TimedPolicy<'_> {
    fn generate(&mut self, prompts: &[Vec<u32>], params: &SamplingParams) -> Result<Vec<Generation>, PolicyError> {
        self.prompt_tokens += prompts.iter().map(Vec::len).sum::<usize>();
        timed(&mut self.seconds, || self.inner.generate(prompts, params))
    }

    fn score(&self, sequences: &[Vec<u32>], positions: Option<&[Vec<usize>]>, params: ScoreParams) -> Result<Scores, PolicyError> {
        self.inner.score(sequences, positions, params)
    }
}

/// `f()`, its wall time added to `seconds`.
fn timed<T>(seconds: &mut f64, f: impl FnOnce() -> T) -> T {
    let t = Instant::now();
    let out = f();
    *seconds += t.elapsed().as_secs_f64();
    out
}

/// The seed of the `index`-th episode's [`Env::reset_seeded`]: distinct per episode (a turn
/// no rollout reaches keeps it apart from the sampler's streams), fixed by the run's seed.
fn episode_seed(seed: u64, index: usize) -> u64 {
    mix(seed, u64::MAX, index as u64)
}

/// A distinct seed per (turn, chunk), so chunks never share random streams.
fn mix(seed: u64, turn: u64, chunk: u64) -> u64 {
    let mut z = seed ^ turn.wrapping_mul(0xd1b5_4a32_d192_ed03) ^ chunk.wrapping_mul(0x8cb9_2ba7_2f3d_8dd7);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arl_core::chat::ChatError;
    use arl_core::policy::{Generation, PolicyError, ScoreParams, Scores};
    use arl_core::{EnvError, EpisodeStats, Split, ToolSchema};

    /// One-turn episodes whose prompt is `task.data` tokens long; records the seed of every
    /// episode it starts.
    #[derive(Default)]
    struct Lengths(std::sync::Mutex<Vec<u64>>);

    impl Env for Lengths {
        fn tasks(&self, _: Split) -> Result<Vec<Task>, EnvError> {
            Ok(vec![])
        }
        fn tools(&self) -> Vec<ToolSchema> {
            vec![]
        }
        fn reset(&self, task: &Task) -> Result<Box<dyn EnvSession>, EnvError> {
            Ok(Box::new(Session(vec![Message::user(task.data.to_string())])))
        }
        fn reset_seeded(&self, task: &Task, seed: u64) -> Result<Box<dyn EnvSession>, EnvError> {
            self.0.lock().unwrap().push(seed);
            self.reset(task)
        }
    }

    fn one_turn(sampling: SamplingParams, gen_batch: Option<usize>, gen_tokens: Option<usize>) -> RolloutOptions {
        RolloutOptions {
            max_turns: 1,
            max_calls_per_turn: 1,
            sampling,
            gen_batch,
            gen_tokens,
            max_episode_tokens: 4096,
            max_prompt_tokens: None,
            max_response_tokens: None,
        }
    }

    struct Session(Vec<Message>);

    impl EnvSession for Session {
        fn messages(&self) -> &[Message] {
            &self.0
        }
        fn step(&mut self, _: &arl_core::AssistantTurn) -> Result<Step, EnvError> {
            Ok(Step::Done(Outcome { reward: 1.0, stats: EpisodeStats { turns: 1, ..Default::default() } }))
        }
        fn finish(&mut self) -> Result<Outcome, EnvError> {
            Ok(Outcome { reward: 0.0, stats: EpisodeStats::default() })
        }
    }

    /// The prompt's length is the number in its message; decoding writes nothing.
    struct Codec;

    impl ChatCodec for Codec {
        fn prompt_ids(&self, messages: &[Message], _: &[ToolSchema]) -> Result<Vec<u32>, ChatError> {
            Ok(vec![1; messages[0].content.parse::<usize>().unwrap()])
        }
        fn observation_ids(&self, _: &[Message], _: &[Message], _: &[ToolSchema], _: Option<u32>) -> Result<Vec<u32>, ChatError> {
            Ok(vec![])
        }
        fn decode(&self, _: &[u32]) -> Result<String, ChatError> {
            Ok(String::new())
        }
        fn stop_ids(&self) -> &[u32] {
            &[0]
        }
        fn self_check(&self) -> Result<String, ChatError> {
            Ok("lengths".into())
        }
    }

    /// Records the prompt lengths of every `generate` call; each row stops at once.
    #[derive(Default)]
    struct Recorder(Vec<Vec<usize>>);

    impl Policy for Recorder {
        fn generate(&mut self, prompts: &[Vec<u32>], _: &SamplingParams) -> Result<Vec<Generation>, PolicyError> {
            self.0.push(prompts.iter().map(Vec::len).collect());
            Ok(prompts.iter().map(|_| Generation { ids: vec![0], sampler_logprobs: vec![-0.5], finish: FinishReason::Stop }).collect())
        }
        fn score(&self, _: &[Vec<u32>], _: Option<&[Vec<usize>]>, _: ScoreParams) -> Result<Scores, PolicyError> {
            unreachable!("a rollout does not score")
        }
    }

    fn decoded(gen_batch: Option<usize>, gen_tokens: Option<usize>) -> Vec<Vec<usize>> {
        let specs: Vec<(Task, usize)> = [100usize, 100, 300, 50, 50, 50, 900, 10]
            .iter()
            .enumerate()
            .map(|(i, &n)| (Task { id: format!("t{i}"), family: "f".into(), split: Split::Train, data: serde_json::json!(n) }, i))
            .collect();
        let opts = one_turn(SamplingParams { max_new_tokens: 100, ..Default::default() }, gen_batch, gen_tokens);
        let mut policy = Recorder::default();
        let (episodes, _) = rollout(&Lengths::default(), &Codec, &mut policy, &specs, &opts, &mut |_, _| {}).unwrap();
        assert_eq!(episodes.iter().map(|e| e.task_id.as_str()).collect::<Vec<_>>(), ["t0", "t1", "t2", "t3", "t4", "t5", "t6", "t7"]);
        policy.0
    }

    fn episode_seeds(sampling_seed: u64) -> Vec<u64> {
        let task = Task { id: "t".into(), family: "f".into(), split: Split::Train, data: serde_json::json!(10) };
        let specs = vec![(task.clone(), 0), (task.clone(), 0), (task.clone(), 1), (task, 1)];
        let opts = one_turn(SamplingParams { max_new_tokens: 4, seed: sampling_seed, ..Default::default() }, None, None);
        let env = Lengths::default();
        rollout(&env, &Codec, &mut Recorder::default(), &specs, &opts, &mut |_, _| {}).unwrap();
        env.0.into_inner().unwrap()
    }

    /// Every episode of a task, within a group too, starts from a seed of its own; the same
    /// rollout again starts from the same seeds, another sampling seed from others.
    #[test]
    fn each_episode_starts_from_its_own_seed_fixed_by_the_runs() {
        let seeds = episode_seeds(7);
        assert_eq!(seeds.len(), 4);
        assert_eq!(seeds.iter().collect::<std::collections::BTreeSet<_>>().len(), 4, "{seeds:?}");
        assert_eq!(episode_seeds(7), seeds);
        assert!(episode_seeds(8).iter().all(|s| !seeds.contains(s)));
    }

    /// `gen_tokens` caps the KV cache a decode call holds: episodes × (the longest prompt + a
    /// turn's new tokens), in order, a longer episode alone; `gen_batch` caps the episodes.
    #[test]
    fn a_decode_call_holds_at_most_gen_batch_episodes_and_gen_tokens_tokens() {
        let all = vec![vec![100, 100, 300, 50, 50, 50, 900, 10]];
        assert_eq!(decoded(None, None), all);
        assert_eq!(decoded(Some(3), None), [vec![100, 100, 300], vec![50, 50, 50], vec![900, 10]]);
        // 800 tokens: two rows of 200, then 400 would hold three of 400; 1000 alone passes it.
        assert_eq!(decoded(None, Some(800)), [vec![100, 100], vec![300, 50], vec![50, 50], vec![900], vec![10]]);
        assert_eq!(decoded(Some(2), Some(100_000)), [vec![100, 100], vec![300, 50], vec![50, 50], vec![900, 10]]);
    }
}
