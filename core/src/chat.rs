//! The token layer's contract: a [`ChatCodec`] turns messages into the token ids a chat
//! template would produce, and a [`Conversation`] grows an episode token-in/token-out.
//!
//! Re-rendering a conversation through a chat template is not append-only (Qwen3 drops the
//! empty `<think>` block of earlier assistant turns, and the sampled turn stops at
//! `<|im_end|>` where the template writes `<|im_end|>\n`), so a rollout never re-renders its
//! history: the prompt is rendered once, each assistant turn is kept as the sampler's ids,
//! and each observation is appended as the ids of the template's own rendering of just that
//! suffix. The implementation (HF tokenizers + Jinja templates) lives in `backends/chat`.

use thiserror::Error;

use crate::{Episode, EpisodeStats, Message, ToolSchema};

/// A tokenizer, chat template or conversation that cannot be used.
#[derive(Debug, Error)]
pub enum ChatError {
    /// A tokenizer or template file is missing or unreadable.
    #[error("{what} {path}: {message}")]
    Load {
        /// Which file, in words (`tokenizer file`, `tokenizer config`, …).
        what: &'static str,
        /// The file's path.
        path: String,
        /// What is wrong with it.
        message: String,
    },
    /// The chat template does not parse.
    #[error("chat template {path} has a syntax error: {message}")]
    TemplateSyntax {
        /// Where the template came from (its file).
        path: String,
        /// The template engine's message, on one line.
        message: String,
    },
    /// The template called `raise_exception(...)`: it refuses this conversation.
    #[error("chat template refused the conversation: {0}")]
    TemplateRaised(String),
    /// Rendering failed for another reason (an unknown method, a type error, …).
    #[error("chat template failed to render: {0}")]
    Render(String),
    /// The tokenizer failed to encode or decode, or was handed ids it cannot use.
    #[error("tokenizer: {0}")]
    Tokenizer(String),
    /// The template's rendering is not stable where token-in/token-out needs it to be.
    #[error("chat template is not append-only here: {0}")]
    NotAppendOnly(String),
    /// The start-up self-check found incremental ids that differ from the template's.
    #[error("chat self-check failed: {0}")]
    SelfCheck(String),
}

/// Messages to token ids, the way one model's chat template renders them.
///
/// Object-safe: the trainer holds a `Box<dyn ChatCodec>`. Every `*_ids` method returns the
/// ids of the template's own text, tokenized without adding special tokens.
pub trait ChatCodec: Send + Sync {
    /// The first prompt: `messages` (system, user, …) with `tools`, ending with the
    /// generation prompt (`<|im_start|>assistant\n`, plus the empty think block when thinking
    /// is off).
    fn prompt_ids(&self, messages: &[Message], tools: &[ToolSchema]) -> Result<Vec<u32>, ChatError>;

    /// What follows a sampled assistant turn: the end of that turn the sampler did not write
    /// (`\n` after `<|im_end|>`; all of `<|im_end|>\n` when the turn was cut short, `stop`
    /// being `None`, or ended on another stop id), the observations (consecutive tool messages merge into one user
    /// turn, as the template does) and the next generation prompt. `history` is everything
    /// before the observations, its last message being the assistant turn (only its
    /// position matters: its text is never re-tokenized).
    fn observation_ids(
        &self,
        history: &[Message],
        observations: &[Message],
        tools: &[ToolSchema],
        stop: Option<u32>,
    ) -> Result<Vec<u32>, ChatError>;

    /// Ids to text, special tokens included.
    fn decode(&self, ids: &[u32]) -> Result<String, ChatError>;

    /// Ids to text for a saved transcript: [`ChatCodec::decode`], except that ordinary ids
    /// which only spell a control token (`<|im_start|>` written out by a tool's output) are
    /// marked so that no reader of the text takes them for one; only real control ids read
    /// as control tokens. The default is `decode`.
    fn decode_transcript(&self, ids: &[u32]) -> Result<String, ChatError> {
        self.decode(ids)
    }

    /// The ids that end an assistant turn (e.g. `<|im_end|>`, `<|endoftext|>` for Qwen3).
    fn stop_ids(&self) -> &[u32];

    /// The ids of a written assistant turn (`assistant`, with its tool calls and reasoning)
    /// after `history`, as a model trained on this template would sample them: the turn's
    /// text after the generation prompt, through the stop id. Supervised fine-tuning appends
    /// these where a rollout appends sampled ids. A codec that cannot render turns says so.
    fn assistant_ids(&self, history: &[Message], tools: &[ToolSchema], assistant: &Message) -> Result<Vec<u32>, ChatError> {
        let _ = (history, tools, assistant);
        Err(ChatError::Render("this codec cannot render written assistant turns (needed for supervised fine-tuning)".into()))
    }

    /// The start-up check the trainer runs before any rollout: on a reference conversation,
    /// the ids a [`Conversation`] grows must equal the template's own rendering. Returns a
    /// one-line summary; on failure, the first differing tokens.
    fn self_check(&self) -> Result<String, ChatError>;

    /// Write the files this codec was loaded from (tokenizer, chat template, special tokens)
    /// into `dir`, so that a checkpoint written there loads with its own tokenizer. A codec
    /// that was not loaded from files (a test's) has nothing to write.
    fn save_files(&self, dir: &std::path::Path) -> Result<(), ChatError> {
        let _ = dir;
        Ok(())
    }
}

/// One episode's token stream, grown token-in/token-out.
///
/// `ids`, `policy_mask`, `sampler_logprobs` and `turn_ids` always have equal length and
/// fill an [`Episode`] directly. `messages` mirrors the stream as text for transcripts; it
/// is only ever passed to the codec as context, never re-tokenized.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Conversation {
    /// Every token id so far: prompt, sampled turns, observations.
    pub ids: Vec<u32>,
    /// Per id: true where the policy sampled it.
    pub policy_mask: Vec<bool>,
    /// Per id: the sampler's log-probability where the policy sampled it, else 0.
    pub sampler_logprobs: Vec<f32>,
    /// Per id: the assistant turn (0-based) that produced it, or -1 for prompt and
    /// observation tokens.
    pub turn_ids: Vec<i32>,
    /// The conversation as messages (assistant turns as decoded text), for transcripts.
    pub messages: Vec<Message>,
    /// The tool schemas the prompt was rendered with; every later rendering uses them too.
    pub tools: Vec<ToolSchema>,
    /// Assistant turns appended so far.
    pub turns: i32,
    /// The stop id the last assistant turn ended with, if it stopped.
    last_stop: Option<u32>,
}

impl Conversation {
    /// Render the opening messages once, with the generation prompt.
    pub fn start(codec: &dyn ChatCodec, messages: Vec<Message>, tools: Vec<ToolSchema>) -> Result<Self, ChatError> {
        let ids = codec.prompt_ids(&messages, &tools)?;
        let mut conv = Self { messages, tools, ..Self::default() };
        conv.extend_env(&ids);
        Ok(conv)
    }

    /// Append a sampled assistant turn exactly as sampled (`logprobs[t]` of `ids[t]`).
    /// Returns its text (decoded, the stop id left out) for the environment to parse.
    pub fn push_assistant(&mut self, codec: &dyn ChatCodec, ids: &[u32], logprobs: &[f32]) -> Result<String, ChatError> {
        if ids.len() != logprobs.len() {
            return Err(ChatError::Tokenizer(format!("assistant turn has {} ids but {} logprobs", ids.len(), logprobs.len())));
        }
        self.last_stop = ids.last().copied().filter(|id| codec.stop_ids().contains(id));
        let body = if self.last_stop.is_some() { &ids[..ids.len() - 1] } else { ids };
        let text = codec.decode(body)?;
        self.ids.extend_from_slice(ids);
        self.policy_mask.extend(std::iter::repeat_n(true, ids.len()));
        self.sampler_logprobs.extend_from_slice(logprobs);
        self.turn_ids.extend(std::iter::repeat_n(self.turns, ids.len()));
        self.turns += 1;
        self.messages.push(Message::assistant(text.clone()));
        Ok(text)
    }

    /// Append observations (tool messages, or a user message) and the next generation
    /// prompt, as the template's own ids of that suffix.
    pub fn push_observations(&mut self, codec: &dyn ChatCodec, observations: Vec<Message>) -> Result<(), ChatError> {
        let ids = codec.observation_ids(&self.messages, &observations, &self.tools, self.last_stop)?;
        self.extend_env(&ids);
        self.messages.extend(observations);
        Ok(())
    }

    /// Prompt and observation tokens: not the policy's, no logprob, turn -1.
    fn extend_env(&mut self, ids: &[u32]) {
        self.ids.extend_from_slice(ids);
        self.policy_mask.extend(std::iter::repeat_n(false, ids.len()));
        self.sampler_logprobs.extend(std::iter::repeat_n(0.0, ids.len()));
        self.turn_ids.extend(std::iter::repeat_n(-1, ids.len()));
    }

    /// The finished episode.
    pub fn into_episode(self, task_id: String, group: usize, reward: f64, stats: EpisodeStats) -> Episode {
        Episode {
            task_id,
            group,
            ids: self.ids,
            policy_mask: self.policy_mask,
            sampler_logprobs: self.sampler_logprobs,
            turn_ids: self.turn_ids,
            reward,
            stats,
            messages: self.messages,
            branches: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A codec over a toy template: one id per character, `|` (id 124) as the stop.
    struct Chars;

    impl ChatCodec for Chars {
        fn prompt_ids(&self, messages: &[Message], _tools: &[ToolSchema]) -> Result<Vec<u32>, ChatError> {
            Ok(messages.iter().flat_map(|m| format!("[{}]>", m.content).chars().map(|c| c as u32).collect::<Vec<_>>()).collect())
        }
        fn observation_ids(&self, _h: &[Message], obs: &[Message], _t: &[ToolSchema], stop: Option<u32>) -> Result<Vec<u32>, ChatError> {
            let head = if stop.is_some() { "\n" } else { "|\n" };
            let text = format!("{head}{}>", obs.iter().map(|m| format!("[{}]", m.content)).collect::<String>());
            Ok(text.chars().map(|c| c as u32).collect())
        }
        fn decode(&self, ids: &[u32]) -> Result<String, ChatError> {
            Ok(ids.iter().map(|&i| char::from_u32(i).unwrap()).collect())
        }
        fn stop_ids(&self) -> &[u32] {
            &[124]
        }
        fn self_check(&self) -> Result<String, ChatError> {
            Ok("toy codec".into())
        }
    }

    fn ids(s: &str) -> Vec<u32> {
        s.chars().map(|c| c as u32).collect()
    }

    #[test]
    fn mask_turn_ids_and_logprobs_line_up() {
        let mut conv = Conversation::start(&Chars, vec![Message::user("q")], vec![]).unwrap();
        let t0 = ids("ab|");
        assert_eq!(conv.push_assistant(&Chars, &t0, &[-0.1, -0.2, -0.3]).unwrap(), "ab");
        conv.push_observations(&Chars, vec![Message::tool("r")]).unwrap();
        let t1 = ids("c");
        conv.push_assistant(&Chars, &t1, &[-0.5]).unwrap();
        conv.push_observations(&Chars, vec![Message::tool("s")]).unwrap();
        let ep = conv.into_episode("t".into(), 0, 1.0, EpisodeStats::default());
        ep.check().unwrap();
        assert_eq!(String::from_iter(ep.ids.iter().map(|&i| char::from_u32(i).unwrap())), "[q]>ab|\n[r]>c|\n[s]>");
        assert_eq!(ep.policy_tokens(), 4);
        let turns: Vec<i32> = ep.turn_ids.clone();
        assert_eq!(&turns[4..7], &[0, 0, 0]);
        assert_eq!(turns[7], -1);
        assert_eq!(turns[12], 1);
        assert_eq!(ep.sampler_logprobs[12], -0.5);
        assert_eq!(ep.messages.len(), 5);
    }

    #[test]
    fn logprob_count_must_match() {
        let mut conv = Conversation::start(&Chars, vec![Message::user("q")], vec![]).unwrap();
        assert!(conv.push_assistant(&Chars, &ids("ab"), &[0.0]).is_err());
    }
}
