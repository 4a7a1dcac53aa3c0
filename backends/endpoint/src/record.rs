//! A session's token record: branches of segments, each segment the ids of some messages.
//!
//! A branch grows as [`arl_core::Conversation`] grows an episode: the first prompt rendered
//! once (`Prompt`), each sampled turn as the sampler's ids and log-probs (`Sampled`), the
//! observations after it as the template's own suffix ids (`Observations`). A request is
//! matched segment by segment against the current branch ([`Branch::matched`]); when it only
//! adds observations after the last sampled turn, the branch grows in place. Otherwise it
//! forks: the matched segments are copied into a new branch (their sampled ids become context
//! there: they train once, in the branch that sampled them) and the rest is rendered through
//! the template: observations as suffix ids, an assistant turn the harness wrote as the
//! template's ids of it (`Written`, context), or, when nothing matched, the whole request as
//! one prompt.

use arl_core::{ChatCodec, ChatError, Episode, EpisodeStats, Message, Role, TokenStream, ToolSchema};
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Prompt,
    Sampled,
    Written,
    Observations,
}

/// The ids of some consecutive messages.
#[derive(Clone, Debug)]
pub(crate) struct Segment {
    pub kind: Kind,
    /// The messages as the client sends them back (a sampled turn: as it was returned).
    pub messages: Vec<Message>,
    pub ids: Vec<u32>,
    /// `Sampled` only: one per id.
    pub sampler_logprobs: Vec<f32>,
    /// `Sampled`/`Written`: the stop id the turn ended with, if it stopped.
    pub stop: Option<u32>,
}

impl Segment {
    fn ends_turn(&self) -> bool {
        matches!(self.kind, Kind::Sampled | Kind::Written)
    }
}

/// One token stream of a session.
#[derive(Clone, Debug, Default)]
pub(crate) struct Branch {
    pub tools: Vec<ToolSchema>,
    pub segments: Vec<Segment>,
    /// Leading segments copied from the branch this one forked from.
    pub shared: usize,
}

impl Branch {
    pub fn ids(&self) -> Vec<u32> {
        self.segments.iter().flat_map(|s| s.ids.iter().copied()).collect()
    }

    pub fn messages(&self) -> Vec<Message> {
        self.segments.iter().flat_map(|s| s.messages.iter().cloned()).collect()
    }

    /// How many leading segments `messages` (with `tools`) repeats exactly, and how many
    /// messages those cover.
    pub fn matched(&self, messages: &[Message], tools: &[ToolSchema]) -> (usize, usize) {
        if self.tools != tools {
            return (0, 0);
        }
        let (mut segments, mut covered) = (0, 0);
        for s in &self.segments {
            if !messages[covered..].starts_with(&s.messages) {
                break;
            }
            segments += 1;
            covered += s.messages.len();
        }
        (segments, covered)
    }

    /// The branch that answers `messages`, and whether it is a fork. `Ok` leaves `self` as it
    /// was; the caller keeps the result only once the turn is sampled.
    pub fn extend(&self, codec: &dyn ChatCodec, messages: &[Message], tools: &[ToolSchema]) -> Result<(Branch, bool), ChatError> {
        let (mut keep, mut covered) = self.matched(messages, tools);
        let rest = &messages[covered..];
        let grows = keep == self.segments.len()
            && self.segments.last().is_some_and(|s| s.kind == Kind::Sampled)
            && !rest.is_empty()
            && rest.iter().all(|m| m.role != Role::Assistant);
        if grows {
            let mut next = self.clone();
            next.push_observations(codec, rest.to_vec())?;
            return Ok((next, false));
        }
        let fork = !self.segments.is_empty();
        // A kept prefix must end where the next message can follow: after a turn when the
        // rest opens with an observation (a prefix ending on a generation prompt takes an
        // assistant turn, or nothing: a retried request).
        while keep > 0 && !self.segments[keep - 1].ends_turn() && messages.get(covered).is_some_and(|m| m.role != Role::Assistant) {
            keep -= 1;
            covered -= self.segments[keep].messages.len();
        }
        if keep == 0 {
            let ids = codec.prompt_ids(messages, tools)?;
            let prompt = Segment { kind: Kind::Prompt, messages: messages.to_vec(), ids, sampler_logprobs: Vec::new(), stop: None };
            return Ok((Branch { tools: tools.to_vec(), segments: vec![prompt], shared: 0 }, fork));
        }
        let mut next = Branch { tools: tools.to_vec(), segments: self.segments[..keep].to_vec(), shared: keep };
        let mut i = covered;
        while i < messages.len() {
            if messages[i].role == Role::Assistant {
                if next.segments.last().is_some_and(Segment::ends_turn) {
                    next.push_observations(codec, Vec::new())?; // two turns in a row: the template's boundary
                }
                next.push_written(codec, messages[i].clone())?;
                i += 1;
            } else {
                let end = messages[i..].iter().position(|m| m.role == Role::Assistant).map_or(messages.len(), |k| i + k);
                next.push_observations(codec, messages[i..end].to_vec())?;
                i = end;
            }
        }
        Ok((next, fork))
    }

    fn push_observations(&mut self, codec: &dyn ChatCodec, observations: Vec<Message>) -> Result<(), ChatError> {
        let stop = self.segments.last().and_then(|s| s.stop);
        let ids = codec.observation_ids(&self.messages(), &observations, &self.tools, stop)?;
        self.segments.push(Segment { kind: Kind::Observations, messages: observations, ids, sampler_logprobs: Vec::new(), stop: None });
        Ok(())
    }

    fn push_written(&mut self, codec: &dyn ChatCodec, assistant: Message) -> Result<(), ChatError> {
        let ids = codec.assistant_ids(&self.messages(), &self.tools, &assistant)?;
        let stop = ids.last().copied().filter(|id| codec.stop_ids().contains(id));
        self.segments.push(Segment { kind: Kind::Written, messages: vec![assistant], ids, sampler_logprobs: Vec::new(), stop });
        Ok(())
    }

    /// Append a sampled turn exactly as sampled, recorded as the message it was returned as.
    pub fn push_sampled(&mut self, codec: &dyn ChatCodec, returned: Message, ids: Vec<u32>, sampler_logprobs: Vec<f32>) {
        let stop = ids.last().copied().filter(|id| codec.stop_ids().contains(id));
        self.segments.push(Segment { kind: Kind::Sampled, messages: vec![returned], ids, sampler_logprobs, stop });
    }

    /// The branch as the trainer reads it.
    pub fn record(&self) -> RecordedBranch {
        let mut r = RecordedBranch { tools: self.tools.clone(), messages: self.messages(), ..RecordedBranch::default() };
        let mut turn = 0;
        for (k, s) in self.segments.iter().enumerate() {
            let policy = s.kind == Kind::Sampled && k >= self.shared;
            let stream = &mut r.stream;
            stream.ids.extend_from_slice(&s.ids);
            stream.policy_mask.extend(std::iter::repeat_n(policy, s.ids.len()));
            if policy {
                stream.sampler_logprobs.extend_from_slice(&s.sampler_logprobs);
                stream.turn_ids.extend(std::iter::repeat_n(turn, s.ids.len()));
                turn += 1;
            } else {
                stream.sampler_logprobs.extend(std::iter::repeat_n(0.0, s.ids.len()));
                stream.turn_ids.extend(std::iter::repeat_n(-1, s.ids.len()));
            }
        }
        r
    }
}

/// One branch: its token stream (`ids`, `policy_mask`, `sampler_logprobs` and `turn_ids` of
/// equal length, as an [`Episode`] holds them; policy tokens are exactly the sampler's ids) and
/// the conversation it renders.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RecordedBranch {
    #[serde(flatten)]
    pub stream: TokenStream,
    /// The conversation the stream renders, as the client sent it.
    pub messages: Vec<Message>,
    pub tools: Vec<ToolSchema>,
}

impl RecordedBranch {
    pub fn into_episode(self, task_id: String, group: usize, reward: f64, stats: EpisodeStats) -> Episode {
        Episode {
            task_id,
            group,
            ids: self.stream.ids,
            policy_mask: self.stream.policy_mask,
            sampler_logprobs: self.stream.sampler_logprobs,
            turn_ids: self.stream.turn_ids,
            reward,
            stats,
            messages: self.messages,
            branches: Vec::new(),
        }
    }
}

/// What a session's requests came to.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionStats {
    /// Chat completions answered.
    pub requests: u64,
    /// Requests that did not extend the recorded turns (`harness_forks`).
    pub harness_forks: u64,
    /// Well-formed tool calls returned as `tool_calls`.
    pub tool_calls: u64,
    /// `<tool_call>` blocks that did not parse; their turns were returned as plain text.
    pub malformed_calls: u64,
    pub generated_tokens: u64,
    /// Requests refused (bad input, budgets).
    pub refused: u64,
}

/// A session's recording: every branch in the order it was started (one unless the harness
/// forked), and its counters.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionRecord {
    pub branches: Vec<RecordedBranch>,
    pub stats: SessionStats,
}
