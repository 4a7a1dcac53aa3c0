//! Environments: a task bank and multi-turn episodes over it. Text in, text out — an
//! environment never sees a token id or a tensor.

use serde::{Deserialize, Serialize};

use crate::{
    ChatCodec, EnvError, Episode, EpisodeStats, Message, OracleNoise, OracleTurn, ParsedCall, Policy, Split, Task, ToolResult, ToolSchema,
};

/// A gym: its tasks, the tools it offers, and a way to start episodes.
pub trait Env: Send + Sync {
    /// The tasks of a split, in a fixed order (deterministic for a given config).
    fn tasks(&self, split: Split) -> Result<Vec<Task>, EnvError>;
    /// Tool schemas shown to the model (empty for an environment without tools).
    fn tools(&self) -> Vec<ToolSchema>;
    /// Start an episode on `task`.
    fn reset(&self, task: &Task) -> Result<Box<dyn EnvSession>, EnvError>;
    /// Start an episode on `task` that draws what it randomizes per episode (a menu's order, a
    /// start state) from `seed`. The rollout engine starts every episode this way, with a seed
    /// of its own derived from the run's seed, so the episodes of one group differ while a run
    /// stays reproducible and a resumed one identical. The default ignores the seed: an
    /// episode is [`Env::reset`]'s.
    fn reset_seeded(&self, task: &Task, seed: u64) -> Result<Box<dyn EnvSession>, EnvError> {
        let _ = seed;
        self.reset(task)
    }
    /// New tokens per assistant turn when the config leaves `sampling.max_new_tokens` unset.
    fn default_max_new_tokens(&self) -> u32 {
        64
    }
    /// An expert's scripted turns on `task` with this much `noise` (deterministic in
    /// `seed`), played back through [`Env::reset`]'s session by `arl tasks --transcripts`.
    /// `None`: this env has no oracle (the default).
    fn oracle(&self, task: &Task, noise: &OracleNoise, seed: u64) -> Result<Option<Vec<OracleTurn>>, EnvError> {
        let _ = (task, noise, seed);
        Ok(None)
    }
    /// An env whose episodes an agent program of its own runs ([`AgentEnv`]); `None` (the
    /// default): the rollout engine drives every episode turn by turn through [`Env::reset`].
    fn agent(&self) -> Option<&dyn AgentEnv> {
        None
    }
}

/// How the rollout engine has an [`AgentEnv`] sample: the run's per-turn and per-episode
/// limits, as it applies them to the episodes it drives itself.
#[derive(Clone, Debug, PartialEq)]
pub struct AgentSampling {
    /// The run's sampling temperature (no top-k/top-p: training samples untruncated).
    pub temperature: f64,
    /// New tokens per assistant turn at most.
    pub max_new_tokens: usize,
    /// Assistant turns per episode at most.
    pub max_turns: u32,
    /// `<tool_call>` blocks per turn that count as calls.
    pub max_calls_per_turn: u32,
    /// Tokens in an episode's stream at most, prompt included.
    pub max_episode_tokens: usize,
    /// Seeds the episodes' turns (deterministic for the same requests).
    pub seed: u64,
}

/// An env whose episodes an agent program runs: an existing harness that asks for each
/// turn itself, over an OpenAI-compatible API (`harness`). The rollout engine lends it the
/// policy and the chat codec for one batch of episodes and takes back graded episodes whose
/// policy tokens are exactly the ids the policy sampled (the env hands both to arl-endpoint,
/// which records them; the env itself still reads only text).
pub trait AgentEnv: Send + Sync {
    /// One episode per `(task, group)`, in order. `progress(done, total)` as episodes end.
    /// A program that fails to run is an episode marked as an infrastructure failure
    /// ([`EpisodeStats::infra_failure`]), not an error; an error is for a broken setup (e.g.
    /// every episode's program failed to start).
    fn run_episodes(
        &self,
        specs: &[(Task, usize)],
        policy: &mut dyn Policy,
        codec: &dyn ChatCodec,
        sampling: &AgentSampling,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<Vec<Episode>, EnvError>;
}

/// One live episode. The rollout engine calls [`EnvSession::step`] once per sampled
/// assistant turn, and [`EnvSession::finish`] when the turn budget runs out first.
pub trait EnvSession: Send {
    /// The opening messages (system and user) the episode starts from.
    fn messages(&self) -> &[Message];
    /// Act on one assistant turn: run its tool calls (observations follow), or, when the
    /// turn has no call, treat it as the final answer (the episode is done).
    fn step(&mut self, turn: &AssistantTurn) -> Result<Step, EnvError>;
    /// Grade the episode as it stands (the turn budget is exhausted).
    fn finish(&mut self) -> Result<Outcome, EnvError>;
}

/// One sampled assistant turn: its decoded text and the calls parsed from it.
/// No calls means a final answer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AssistantTurn {
    /// The turn's text as decoded, without the stop token.
    pub text: String,
    /// Its `<tool_call>` blocks in order, well-formed or not
    /// ([`crate::toolcall::parse_tool_calls`]).
    pub calls: Vec<ParsedCall>,
}

/// What an episode does after an assistant turn ([`EnvSession::step`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Step {
    /// Tool results, one per call in order; they become the next user turn.
    Observe(Vec<ToolResult>),
    /// The episode is over, graded.
    Done(Outcome),
}

/// The end of an episode.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    /// The env's grade of the episode, which becomes [`crate::Episode::reward`].
    pub reward: f64,
    /// What the env counted during the episode (turns, tool calls, its own counters).
    pub stats: EpisodeStats,
}
