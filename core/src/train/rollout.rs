//! Rollouts: many episodes decode together, turn by turn, with the KV-cache sampler.
//!
//! Token-in/token-out: each episode's prompt is rendered once; every assistant turn is kept
//! as the sampler's ids with their logprobs; observations are appended as the template's own
//! ids of that suffix ([`Conversation`]). Episodes finish at different turns and leave the
//! batch; at most `gen_batch` episodes are decoded at once to cap KV memory. Each turn hands
//! the sampler the whole conversation so far; a sampler with a prefix cache (arl-qwen3's)
//! recognises the earlier turns and prefills only the new suffix (`RolloutStats` counts
//! both).

use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::TrainError;
use crate::chat::{ChatCodec, Conversation};
use crate::policy::{FinishReason, Policy, SamplingParams};
use crate::toolcall::parse_turn;
use crate::{Env, EnvSession, Episode, EpisodeFinish, Message, Outcome, Step, Task};

/// How episodes are rolled out.
#[derive(Clone, Debug, PartialEq)]
pub struct RolloutOptions {
    pub max_turns: u32,
    pub max_calls_per_turn: u32,
    /// Per-turn sampling (`max_new_tokens` is per turn; `seed` is the base seed).
    pub sampling: SamplingParams,
    /// Episodes decoded at once; `None`: all live episodes.
    pub gen_batch: Option<usize>,
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
        let session = timed(&mut stats.env_seconds, || env.reset(task))?;
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
        let chunk = opts.gen_batch.unwrap_or(live.len()).max(1);
        let mut samples = Vec::with_capacity(live.len());
        for (c, batch) in live.chunks(chunk).enumerate() {
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

/// `f()`, its wall time added to `seconds`.
fn timed<T>(seconds: &mut f64, f: impl FnOnce() -> T) -> T {
    let t = Instant::now();
    let out = f();
    *seconds += t.elapsed().as_secs_f64();
    out
}

/// A distinct seed per (turn, chunk), so chunks never share random streams.
fn mix(seed: u64, turn: u64, chunk: u64) -> u64 {
    let mut z = seed ^ turn.wrapping_mul(0xd1b5_4a32_d192_ed03) ^ chunk.wrapping_mul(0x8cb9_2ba7_2f3d_8dd7);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z ^ (z >> 31)
}
