//! One session: its branches, its budgets, and one chat completion sampled into it.

use arl_core::message::MessageToolCall;
use arl_core::toolcall::{CLOSE, OPEN, parse_tool_calls};
use arl_core::{FinishReason, Message, ParsedCall, Role, SamplingParams, ToolCall};

use crate::ApiError;
use crate::api::Completion;
use crate::record::{Branch, SessionRecord, SessionStats};
use crate::server::{Engine, SessionConfig};

pub(crate) struct Session {
    pub id: String,
    pub config: SessionConfig,
    /// Branches the harness forked away from, in order.
    finished: Vec<Branch>,
    current: Option<Branch>,
    pub stats: SessionStats,
    /// Turns sampled so far (every branch).
    turns: u64,
}

/// A sampled turn as the client gets it.
pub(crate) struct Turn {
    pub id: String,
    pub content: String,
    pub tool_calls: Vec<(String, ToolCall)>,
    /// `stop`, `length` or `tool_calls`.
    pub finish_reason: &'static str,
    pub prompt_tokens: usize,
    pub completion_tokens: usize,
    /// Each returned token's text and sampler log-prob, when asked for.
    pub logprobs: Option<Vec<(String, f32)>>,
}

impl Session {
    pub fn new(id: String, config: SessionConfig) -> Self {
        Self { id, config, finished: Vec::new(), current: None, stats: SessionStats::default(), turns: 0 }
    }

    /// The recording so far: every branch, the current one last.
    pub fn record(&self) -> SessionRecord {
        SessionRecord { branches: self.finished.iter().chain(&self.current).map(Branch::record).collect(), stats: self.stats.clone() }
    }

    /// Sample the assistant turn that answers `c`, and record it.
    pub fn complete(&mut self, c: &Completion, engine: &Engine) -> Result<Turn, ApiError> {
        let codec = engine.codec.as_ref();
        let base = self.current.clone().unwrap_or_default();
        let (mut next, fork) = base.extend(codec, &c.messages, &c.tools).map_err(|e| {
            ApiError::invalid(
                "template_error",
                format!("the chat template cannot render these messages ({e}); send a conversation the model's template accepts"),
            )
        })?;
        if self.turns >= self.config.max_turns as u64 {
            return Err(ApiError::invalid(
                "turn_budget_exceeded",
                format!("session `{}` has sampled its {} turns; the episode is over, end it", self.id, self.config.max_turns),
            ));
        }
        let prompt = next.ids();
        let room = self.config.max_episode_tokens.saturating_sub(prompt.len());
        if room == 0 {
            return Err(ApiError::invalid(
                "context_length_exceeded",
                format!(
                    "session `{}` needs {} tokens for this request, over its budget of {}; the episode is over its token budget, end it",
                    self.id,
                    prompt.len(),
                    self.config.max_episode_tokens
                ),
            )
            .with_param("messages"));
        }
        let params = SamplingParams {
            temperature: engine.config.temperature,
            top_k: None,
            top_p: None,
            max_new_tokens: engine.config.max_new_tokens.min(room).min(c.max_tokens.unwrap_or(usize::MAX)),
            seed: mix(self.config.seed, self.turns),
            stop_ids: Some(codec.stop_ids().to_vec()),
        };
        let generation = {
            let mut policy = engine.policy.lock().unwrap_or_else(|p| p.into_inner());
            policy.generate(std::slice::from_ref(&prompt), &params).map_err(|e| ApiError::server(format!("sampling failed: {e}")))?
        };
        let Some(g) = generation.into_iter().next() else {
            return Err(ApiError::server("the policy returned no generation for one prompt"));
        };
        let stopped = g.finish == FinishReason::Stop && g.ids.last().is_some_and(|id| codec.stop_ids().contains(id));
        let body = if stopped { &g.ids[..g.ids.len() - 1] } else { &g.ids[..] };
        let decode = |ids: &[u32]| codec.decode(ids).map_err(|e| ApiError::server(format!("decoding the sampled ids failed: {e}")));
        let text = decode(body)?;
        let parsed = parse_tool_calls(&text, &c.tools, engine.config.max_calls_per_turn);
        let malformed = parsed.iter().filter(|p| matches!(p, ParsedCall::Malformed { .. })).count();
        let n = self.turns;
        let (content, calls) = if parsed.is_empty() || malformed > 0 {
            (text, Vec::new())
        } else {
            let calls = parsed
                .into_iter()
                .enumerate()
                .filter_map(|(j, p)| match p {
                    ParsedCall::Call(call) => Some((format!("call_{n}_{j}"), call)),
                    ParsedCall::Malformed { .. } => None,
                })
                .collect();
            (outside_calls(&text), calls)
        };
        let logprobs = match c.logprobs {
            true => Some(
                body.iter().zip(&g.sampler_logprobs).map(|(&id, &lp)| Ok((decode(&[id])?, lp))).collect::<Result<Vec<_>, ApiError>>()?,
            ),
            false => None,
        };
        let returned = Message {
            role: Role::Assistant,
            content: content.clone(),
            reasoning_content: None,
            tool_calls: calls.iter().map(|(_, call)| MessageToolCall { kind: "function".into(), function: call.clone() }).collect(),
        };
        let completion_tokens = g.ids.len();
        next.push_sampled(codec, returned, g.ids, g.sampler_logprobs);
        if fork {
            self.stats.harness_forks += 1;
            self.finished.extend(self.current.take());
        }
        self.current = Some(next);
        self.turns += 1;
        self.stats.requests += 1;
        self.stats.tool_calls += calls.len() as u64;
        self.stats.malformed_calls += malformed as u64;
        self.stats.generated_tokens += completion_tokens as u64;
        let finish_reason = match (g.finish, calls.is_empty()) {
            (FinishReason::Length, _) => "length",
            (FinishReason::Stop, false) => "tool_calls",
            (FinishReason::Stop, true) => "stop",
        };
        Ok(Turn {
            id: format!("chatcmpl-{}-{n}", self.id),
            content,
            tool_calls: calls,
            finish_reason,
            prompt_tokens: prompt.len(),
            completion_tokens,
            logprobs,
        })
    }
}

/// The text of a turn outside its `<tool_call>` blocks, trimmed: the `content` returned beside
/// `tool_calls` (the blocks themselves are the calls).
fn outside_calls(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find(OPEN) {
        out.push_str(&rest[..start]);
        match rest[start..].find(CLOSE) {
            Some(end) => rest = &rest[start + end + CLOSE.len()..],
            None => rest = "",
        }
    }
    out.push_str(rest);
    out.trim().to_string()
}

/// One seed per sampled turn of a session.
fn mix(seed: u64, turn: u64) -> u64 {
    let mut z = seed ^ turn.wrapping_add(1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_beside_calls_is_the_text_outside_them() {
        assert_eq!(outside_calls("Let me look.\n<tool_call>\n{}\n</tool_call>\n"), "Let me look.");
        assert_eq!(outside_calls("<tool_call>{}</tool_call><tool_call>{}</tool_call>"), "");
        assert_eq!(outside_calls("a <tool_call>{}</tool_call> b"), "a  b");
    }
}
