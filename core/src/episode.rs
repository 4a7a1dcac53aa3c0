//! Episodes as the trainer consumes them: exactly the token ids the sampler produced,
//! which of them the policy generated, the sampler's log-probabilities, and the reward.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::Message;

/// Per-episode counters. The named fields are common to every gym; `counters` holds an
/// environment's own (e.g. `edit_before_read` for the tools gym).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct EpisodeStats {
    /// Assistant turns the env acted on.
    pub turns: u32,
    /// Tool calls dispatched, malformed ones included.
    pub tool_calls: u32,
    /// Tool calls found malformed, by the parser or by the tool set
    /// ([`crate::ToolOutcome::Malformed`]).
    pub malformed_calls: u32,
    /// Well-formed tool calls whose tool reported a failure ([`crate::ToolOutcome::Failed`]).
    pub failed_calls: u32,
    /// The episode ended on a budget (turns, tokens, a last turn cut at `max_new_tokens`),
    /// not with a final answer.
    pub truncated: bool,
    /// How the episode ended (set by the rollout).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish: Option<EpisodeFinish>,
    /// The env's own counters by name, bumped with [`EpisodeStats::bump`] (including
    /// [`SANDBOX_EXHAUSTED`], [`SANDBOX_FAILED`] and [`HARNESS_FAILED`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub counters: BTreeMap<String, u64>,
    /// The episode was lost to an infrastructure failure, not to anything the model did: a
    /// sandbox that could not start a job, a harness that missed its own deadline before the
    /// model's code ran, an env process that crashed or hung ([`EpisodeStats::infra_failure`]).
    /// The trainer drops it from its group's statistics and from the loss, the evaluation from
    /// its counts; both count it (`infra_failed`). The model's own code timing out, crashing
    /// or printing garbage is never this: that is the model's failure, graded as such.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub infra_failed: bool,
    /// Each component of a weighted reward, by name, as it scored (in [0, 1], before its
    /// weight); empty for an env with one reward. `Episode::reward` is their weighted sum.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub rewards: BTreeMap<String, f64>,
    /// Whether the answer was correct, where the env says so apart from the reward (a
    /// weighted reward with format credit: its correctness component scored 1). Unset: the
    /// episode is solved when its reward is ≥ 1 ([`Episode::solved`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub solved: Option<bool>,
}

/// Why an episode ended. The reasons other than `done` mark it truncated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EpisodeFinish {
    /// The env ended it: a final answer (or a submitted fix).
    Done,
    /// The last turn was cut at `sampling.max_new_tokens` or at the response budget.
    Length,
    /// `env.max_turns` turns and the env still wanted more.
    MaxTurns,
    /// Another full turn would not fit in `sampling.max_episode_tokens`.
    EpisodeBudget,
    /// `sampling.max_response_tokens` was spent before another turn.
    ResponseBudget,
    /// The first prompt was longer than `sampling.max_prompt_tokens`.
    PromptBudget,
    /// An agent program ([`crate::AgentEnv`]) ran past its env's time limit and was stopped.
    TimeLimit,
}

impl EpisodeFinish {
    /// The reason in snake_case, as serialized and reported in metrics.
    pub fn name(self) -> &'static str {
        match self {
            EpisodeFinish::Done => "done",
            EpisodeFinish::Length => "length",
            EpisodeFinish::MaxTurns => "max_turns",
            EpisodeFinish::EpisodeBudget => "episode_budget",
            EpisodeFinish::ResponseBudget => "response_budget",
            EpisodeFinish::PromptBudget => "prompt_budget",
            EpisodeFinish::TimeLimit => "time_limit",
        }
    }
}

/// The counter of jobs a sandbox could not start because the host ran short (disk, inodes,
/// memory, processes: [`crate::SandboxError::Exhausted`]). An episode whose grading job hit
/// it gets reward 0; the trainer sums it per step (`StepMetrics::sandbox_exhausted`).
pub const SANDBOX_EXHAUSTED: &str = "sandbox_exhausted";

/// The counter of jobs a sandbox could not start for any other reason
/// ([`crate::SandboxError::Setup`], [`crate::SandboxError::Io`]). Like
/// [`SANDBOX_EXHAUSTED`], an infrastructure failure ([`EpisodeStats::infra_failed`]).
pub const SANDBOX_FAILED: &str = "sandbox_failed";

/// The counter of grading jobs that timed out or died before the grader's own harness reached
/// the model's code (the host too loaded to start an interpreter in time): an infrastructure
/// failure ([`EpisodeStats::infra_failed`]).
pub const HARNESS_FAILED: &str = "harness_failed";

impl EpisodeStats {
    /// Add one to the counter named `counter` in [`EpisodeStats::counters`].
    pub fn bump(&mut self, counter: &str) {
        *self.counters.entry(counter.to_string()).or_default() += 1;
    }

    /// A job the sandbox could not start: an infrastructure failure, counted as
    /// [`SANDBOX_EXHAUSTED`] when the host ran short, else [`SANDBOX_FAILED`].
    pub fn sandbox_error(&mut self, e: &crate::SandboxError) {
        self.infra_failure(if matches!(e, crate::SandboxError::Exhausted(_)) { SANDBOX_EXHAUSTED } else { SANDBOX_FAILED });
    }

    /// Mark the episode lost to an infrastructure failure, counting why (`counter`, e.g.
    /// [`SANDBOX_EXHAUSTED`]).
    pub fn infra_failure(&mut self, counter: &str) {
        self.bump(counter);
        self.infra_failed = true;
    }
}

/// A finished episode, token-exact.
///
/// Invariants: `ids`, `policy_mask`, `sampler_logprobs` and `turn_ids` have equal length;
/// `sampler_logprobs[t]` is the log-probability of `ids[t]` under the distribution it was
/// sampled from where `policy_mask[t]`, and 0 elsewhere; `turn_ids[t]` is the assistant turn
/// (0-based) that produced token t, or -1 for prompt and observation tokens.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Episode {
    /// The [`crate::Task::id`] the episode was played on.
    pub task_id: String,
    /// Episodes of one task in one step share a group (for group-relative advantages).
    pub group: usize,
    /// Every token id of the episode: prompt, sampled turns, observations.
    pub ids: Vec<u32>,
    /// Per id: true where the policy sampled it (the tokens the loss trains).
    pub policy_mask: Vec<bool>,
    /// Per id: the sampler's log-probability where `policy_mask`, else 0.
    pub sampler_logprobs: Vec<f32>,
    /// Per id: the assistant turn (0-based) that produced it, or -1.
    pub turn_ids: Vec<i32>,
    /// The env's grade ([`crate::Outcome::reward`]), unshaped: the trainer's reward shaping
    /// (overlong, KL in the reward) feeds the advantages without changing it.
    pub reward: f64,
    /// What happened in the episode, as the env and the rollout counted it.
    pub stats: EpisodeStats,
    /// The conversation as messages, for transcripts (never re-tokenized).
    pub messages: Vec<Message>,
    /// More token streams of this episode, trained with its advantage: an agent program that
    /// re-sent a changed history ([`crate::AgentEnv`]) sampled turns in contexts that do not
    /// extend one another, each branch but the last (which is `ids`) here, in order, each
    /// holding the policy tokens only it sampled. Empty for an episode the rollout drove.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub branches: Vec<TokenStream>,
}

/// One token stream with the length invariants of [`Episode`]'s own.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TokenStream {
    /// As [`Episode::ids`].
    pub ids: Vec<u32>,
    /// As [`Episode::policy_mask`].
    pub policy_mask: Vec<bool>,
    /// As [`Episode::sampler_logprobs`].
    pub sampler_logprobs: Vec<f32>,
    /// As [`Episode::turn_ids`].
    pub turn_ids: Vec<i32>,
}

impl Episode {
    /// Whether the episode counts as solved for pass rates: the env's word
    /// ([`EpisodeStats::solved`]) where it gives one, else reward ≥ 1. Format credit in a
    /// weighted reward never makes a wrong answer solved.
    pub fn solved(&self) -> bool {
        self.stats.solved.unwrap_or(self.reward >= 1.0)
    }

    /// Check the length invariants (of every branch too); returns a description of the first
    /// violation.
    pub fn check(&self) -> Result<(), String> {
        let main = [(self.ids.len(), self.policy_mask.len(), self.sampler_logprobs.len(), self.turn_ids.len())];
        let branches = self.branches.iter().map(|b| (b.ids.len(), b.policy_mask.len(), b.sampler_logprobs.len(), b.turn_ids.len()));
        for (k, (n, mask, logprobs, turns)) in main.into_iter().chain(branches).enumerate() {
            for (what, len) in [("policy_mask", mask), ("sampler_logprobs", logprobs), ("turn_ids", turns)] {
                if len != n {
                    let which = if k == 0 { String::new() } else { format!(" (branch {})", k - 1) };
                    return Err(format!("episode {}{which}: {what} has {len} entries, ids has {n}", self.task_id));
                }
            }
        }
        Ok(())
    }

    /// Each of [`Episode::branches`] as an episode of its own (its stream, with this
    /// episode's task, group, reward and statistics), to train beside this one.
    pub fn branch_episodes(&self) -> impl Iterator<Item = Episode> + '_ {
        self.branches.iter().map(|b| Episode {
            ids: b.ids.clone(),
            policy_mask: b.policy_mask.clone(),
            sampler_logprobs: b.sampler_logprobs.clone(),
            turn_ids: b.turn_ids.clone(),
            branches: Vec::new(),
            messages: Vec::new(),
            ..self.clone_head()
        })
    }

    /// This episode without its token streams and messages.
    fn clone_head(&self) -> Episode {
        Episode { task_id: self.task_id.clone(), group: self.group, reward: self.reward, stats: self.stats.clone(), ..Episode::default() }
    }

    /// Number of policy (generated) tokens.
    pub fn policy_tokens(&self) -> usize {
        self.policy_mask.iter().filter(|m| **m).count()
    }
}
