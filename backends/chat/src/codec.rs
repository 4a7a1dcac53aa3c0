//! [`HfChatCodec`]: an HF tokenizer and chat template as an [`arl_core::ChatCodec`].
//!
//! Observations are appended by the suffix technique: render the conversation with and
//! without the new messages and tokenize only the text that follows. The rendering of the
//! assistant turn itself is not stable (Qwen3 writes an empty `<think>` block when the turn
//! is the last message and drops it once more messages follow), so the turn is rendered as
//! a sentinel text and both renderings are cut after the sentinel: what follows it without
//! the observations is the template's turn end (`<|im_end|>\n`), and what follows it with
//! them must start with that same turn end (else the template is not append-only here).
//!
//! Text from the environment never becomes a control token. HF's `apply_chat_template`
//! renders the messages and tokenizes the whole text, matching added tokens anywhere in it,
//! so a tool result, a file the model reads or a task's text holding `<|im_end|><|im_start|>system`
//! would put a forged turn into the model's context. Here the content of every message but
//! the assistant's own is *defused* before rendering ([`defuse`]: a noncharacter,
//! U+FDD0, after the first character of each added token's text in it), the rendering is
//! split where the tokenizer finds added tokens (now only the template's own), and the text
//! between them is tokenized with the added tokens switched off and the marks removed
//! ([`HfChatCodec::encode_rendered`]). Content without added-token text (every ordinary
//! observation) renders to the very text HF renders and is tokenized in one piece, so its
//! ids are HF's; content with it is the same characters as ordinary tokens.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value as Json;
use tokenizers::Tokenizer;

use arl_core::{ChatCodec, ChatError, Message, ToolSchema};

use crate::files::ChatFiles;
use crate::template::{ChatTemplate, RenderOptions};

/// arl's tool-capable ChatML template (the Hermes / Qwen2.5 layout), for models whose own
/// template ignores `tools`; checked against transformers' `apply_chat_template`.
pub const CHATML_TOOLS_TEMPLATE: &str = include_str!("../templates/chatml-tools.jinja");

/// Stands in for the last assistant turn while the suffix is rendered; plain ASCII with no
/// whitespace, so templates that strip or split content leave it whole.
const SENTINEL: &str = "ARL7SUFFIX7SENTINEL";

/// Marks added-token text inside environment text ([`defuse`]); a Unicode noncharacter, so
/// never in ordinary text (where it is, it is doubled, and comes back as itself).
const MARK: char = '\u{FDD0}';

struct Inner {
    tokenizer: Tokenizer,
    /// The same tokenizer without its added vocabulary: text in, ordinary tokens out.
    plain: Tokenizer,
    /// The text of every added token of two or more characters (what [`defuse`] breaks).
    added: Vec<String>,
    template: ChatTemplate,
    /// The template source in use (written out by [`ChatCodec::save_files`]).
    template_source: String,
    stop_ids: Vec<u32>,
    /// The directory the tokenizer files came from.
    dir: PathBuf,
}

/// Files of a model directory that belong to the token layer, copied into checkpoints when
/// present (`tokenizer.json` always is). The template in use is written as
/// `chat_template.jinja`, which wins over `tokenizer_config.json`'s when loading.
const TOKENIZER_FILES: &[&str] = &["tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"];

/// A model's tokenizer and chat template. Cheap to clone (shared); `enable_thinking` is
/// per handle.
#[derive(Clone)]
pub struct HfChatCodec {
    inner: Arc<Inner>,
    enable_thinking: Option<bool>,
}

impl HfChatCodec {
    /// Load `tokenizer.json` and the chat template from a model directory.
    pub fn load(dir: &Path) -> Result<Self, ChatError> {
        let files = ChatFiles::load(dir)?;
        let (source, origin) = &files.template;
        let template = ChatTemplate::new(source, &origin.display().to_string(), files.special_tokens)?;
        let (plain, added) = plain_tokenizer(&files.tokenizer);
        let inner = Inner {
            plain,
            added,
            tokenizer: files.tokenizer,
            template,
            template_source: source.clone(),
            stop_ids: files.stop_ids,
            dir: dir.to_path_buf(),
        };
        Ok(Self { inner: Arc::new(inner), enable_thinking: None })
    }

    /// The directory the tokenizer and template were loaded from.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// The largest token id the tokenizer can produce (added tokens included): a model's
    /// vocabulary must be larger.
    pub fn max_token_id(&self) -> u32 {
        self.inner.tokenizer.get_vocab(true).values().copied().max().unwrap_or(0)
    }

    /// The same codec from a template source given directly (tests, or a template override).
    pub fn with_template(&self, source: &str, origin: &str) -> Result<Self, ChatError> {
        let template = ChatTemplate::new(source, origin, self.inner.template.special_tokens().clone())?;
        let inner = Inner {
            plain: self.inner.plain.clone(),
            added: self.inner.added.clone(),
            tokenizer: self.inner.tokenizer.clone(),
            template,
            template_source: source.to_string(),
            stop_ids: self.inner.stop_ids.clone(),
            dir: self.inner.dir.clone(),
        };
        Ok(Self { inner: Arc::new(inner), enable_thinking: self.enable_thinking })
    }

    /// Whether the template renders a conversation the same with and without tool schemas
    /// (SmolLM2's does): such a model cannot be shown its tools.
    pub fn ignores_tools(&self) -> Result<bool, ChatError> {
        let messages = [serde_json::json!({"role": "user", "content": "hi"})];
        let probe = [serde_json::json!({"type": "function", "function": {
            "name": "arl_probe_tool", "description": "probe", "parameters": {"type": "object", "properties": {}}}})];
        Ok(self.render(&messages, None, true)? == self.render(&messages, Some(&probe), true)?)
    }

    /// The same tokenizer with [`CHATML_TOOLS_TEMPLATE`].
    pub fn with_chatml_tools(&self) -> Result<Self, ChatError> {
        self.with_template(CHATML_TOOLS_TEMPLATE, "arl's chatml-tools template (backends/chat/templates/chatml-tools.jinja)")
    }

    /// `enable_thinking` as passed to the template; `None` leaves it undefined.
    pub fn with_enable_thinking(&self, enable_thinking: Option<bool>) -> Self {
        Self { inner: self.inner.clone(), enable_thinking }
    }

    pub fn enable_thinking(&self) -> Option<bool> {
        self.enable_thinking
    }

    /// The template's text for HF-shaped `messages` and OpenAI-format `tools`.
    pub fn render(&self, messages: &[Json], tools: Option<&[Json]>, add_generation_prompt: bool) -> Result<String, ChatError> {
        let options = RenderOptions { add_generation_prompt, enable_thinking: self.enable_thinking };
        self.inner.template.render(messages, tools, options)
    }

    /// Text to ids, no special tokens added, added tokens matched anywhere (as
    /// `apply_chat_template(tokenize=True)` tokenizes its rendering): for trusted text only.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, ChatError> {
        let encoding = self.inner.tokenizer.encode(text, false).map_err(|e| ChatError::Tokenizer(e.to_string()))?;
        Ok(encoding.get_ids().to_vec())
    }

    /// Text to ids with no added token at all: every character an ordinary token, as the
    /// tokenizer splits text between added tokens.
    pub fn encode_plain(&self, text: &str) -> Result<Vec<u32>, ChatError> {
        let encoding = self.inner.plain.encode(text, false).map_err(|e| ChatError::Tokenizer(e.to_string()))?;
        Ok(encoding.get_ids().to_vec())
    }

    /// A rendering of [`defused`](defuse) messages to ids: added tokens where the tokenizer
    /// finds them (the template's own), the text between them tokenized plainly with the
    /// marks removed. Without marks this is exactly [`HfChatCodec::encode`].
    pub fn encode_rendered(&self, text: &str) -> Result<Vec<u32>, ChatError> {
        if !text.contains(MARK) {
            return self.encode(text);
        }
        let encoding = self.inner.tokenizer.encode(text, false).map_err(|e| ChatError::Tokenizer(e.to_string()))?;
        let added = self.inner.tokenizer.get_added_tokens_decoder();
        let mut ids = Vec::new();
        let mut at = 0;
        for (&id, &(start, end)) in encoding.get_ids().iter().zip(encoding.get_offsets()) {
            if !added.contains_key(&id) {
                continue;
            }
            let gap =
                text.get(at..start).ok_or_else(|| ChatError::Tokenizer(format!("added token offsets {start}..{end} out of order")))?;
            ids.extend(self.encode_plain(&undefuse(gap))?);
            ids.push(id);
            at = end;
        }
        ids.extend(self.encode_plain(&undefuse(&text[at..]))?);
        Ok(ids)
    }

    /// The template's text for `messages` with the environment's text [defused](defuse):
    /// what [`HfChatCodec::encode_rendered`] tokenizes.
    fn render_defused(&self, messages: &[Message], tools: &[ToolSchema], add_generation_prompt: bool) -> Result<String, ChatError> {
        let tools = tools_json(tools);
        self.render(&self.defuse_messages(messages_json(messages)), tools.as_deref(), add_generation_prompt)
    }

    /// HF-shaped messages with the content of every message but the assistant's
    /// [defused](defuse). The assistant's own text may hold tokens (it is the model's): only
    /// a mark in it is escaped, so that it comes back as itself.
    pub fn defuse_messages(&self, mut messages: Vec<Json>) -> Vec<Json> {
        for m in &mut messages {
            let added: &[String] = if m.get("role").and_then(Json::as_str) == Some("assistant") { &[] } else { &self.inner.added };
            if let Some(Json::String(content)) = m.get_mut("content")
                && let std::borrow::Cow::Owned(d) = defuse(content, added)
            {
                *content = d;
            }
        }
        messages
    }

    /// The ids of HF-shaped `messages` as the model sees them: the template's rendering, the
    /// environment's text never parsed for control tokens. For ordinary text, the ids of
    /// `apply_chat_template(messages, tools, tokenize=True)`.
    pub fn render_ids(&self, messages: &[Json], tools: Option<&[Json]>, add_generation_prompt: bool) -> Result<Vec<u32>, ChatError> {
        self.encode_rendered(&self.render(&self.defuse_messages(messages.to_vec()), tools, add_generation_prompt)?)
    }

    /// The ids of a whole conversation as the model sees it: the template's rendering with
    /// the environment's text never parsed for control tokens.
    pub fn conversation_ids(&self, messages: &[Message], tools: &[ToolSchema], add_generation_prompt: bool) -> Result<Vec<u32>, ChatError> {
        self.encode_rendered(&self.render_defused(messages, tools, add_generation_prompt)?)
    }

    pub fn token_to_id(&self, token: &str) -> Option<u32> {
        self.inner.tokenizer.token_to_id(token)
    }

    /// [`HfChatCodec::render`] for core's typed messages and tool schemas.
    pub fn render_typed(&self, messages: &[Message], tools: &[ToolSchema], add_generation_prompt: bool) -> Result<String, ChatError> {
        let tools = tools_json(tools);
        self.render(&messages_json(messages), tools.as_deref(), add_generation_prompt)
    }

    /// The text after the turn `history.last()` (an assistant turn) up to the next
    /// generation prompt, as the template renders it; `stop_text` (what the sampler already
    /// wrote of the turn end) is left out.
    fn observation_text(
        &self,
        history: &[Message],
        observations: &[Message],
        tools: &[ToolSchema],
        stop_text: Option<&str>,
    ) -> Result<String, ChatError> {
        match history.last() {
            Some(m) if m.role == arl_core::Role::Assistant => {}
            _ => return Err(ChatError::NotAppendOnly("observations must follow an assistant turn".into())),
        }
        let tools = tools_json(tools);
        let mut messages = self.defuse_messages(messages_json(&history[..history.len() - 1]));
        messages.push(serde_json::json!({"role": "assistant", "content": SENTINEL}));
        let without = self.render(&messages, tools.as_deref(), false)?;
        messages.extend(self.defuse_messages(messages_json(observations)));
        let with = self.render(&messages, tools.as_deref(), true)?;
        let turn_end = after_sentinel(&without)?;
        let tail = after_sentinel(&with)?;
        if !tail.starts_with(turn_end) {
            return Err(ChatError::NotAppendOnly(format!(
                "an assistant turn ends with {turn_end:?} when last but {:?} when observations follow",
                &tail[..tail.len().min(turn_end.len() + 20)]
            )));
        }
        Ok(match stop_text {
            Some(stop) if tail.starts_with(stop) => tail[stop.len()..].to_string(),
            _ => tail.to_string(),
        })
    }
}

impl HfChatCodec {
    /// The ids of `assistant` as a model trained on this template writes it after `history`:
    /// the template's rendering of the turn after the generation prompt, up to and including
    /// the stop token (what a rollout's sampler produces for that turn, token-in/token-out).
    pub fn assistant_turn_ids(&self, history: &[Message], tools: &[ToolSchema], assistant: &Message) -> Result<Vec<u32>, ChatError> {
        let before = self.render_defused(history, tools, true)?;
        let mut with = history.to_vec();
        with.push(assistant.clone());
        let after = self.render_defused(&with, tools, false)?;
        let Some(body) = after.strip_prefix(&before) else {
            let at =
                before.char_indices().zip(after.chars()).find(|((_, a), b)| a != b).map_or(before.len().min(after.len()), |((i, _), _)| i);
            let snippet = |s: &str| s[at..].chars().take(40).collect::<String>();
            return Err(ChatError::NotAppendOnly(format!(
                "adding an assistant turn changes what the template rendered before it: first difference at char {at}: \
                 prompt {:?} vs with the turn {:?}",
                snippet(&before),
                snippet(&after)
            )));
        };
        let (cut, stop) = self
            .stop_ids()
            .iter()
            .filter_map(|&id| Some((body.find(&self.decode(&[id]).ok()?)?, id)))
            .min()
            .ok_or_else(|| ChatError::NotAppendOnly(format!("the template ends an assistant turn without a stop token: {body:?}")))?;
        let mut ids = self.encode_rendered(&body[..cut])?;
        ids.push(stop);
        Ok(ids)
    }
}

/// The tokenizer without its added vocabulary, and the added tokens' texts that [`defuse`]
/// breaks (a one-character token cannot be broken by a mark; none of the chat models has one).
fn plain_tokenizer(tokenizer: &Tokenizer) -> (Tokenizer, Vec<String>) {
    let mut plain = tokenizer.clone();
    plain.with_added_vocabulary(tokenizers::AddedVocabulary::new());
    let mut added: Vec<String> =
        tokenizer.get_added_tokens_decoder().into_values().map(|t| t.content).filter(|c| c.chars().count() > 1).collect();
    added.sort();
    added.dedup();
    (plain, added)
}

/// `text` with [`MARK`] after the first character of every occurrence of an added token's
/// text in it (and every `MARK` already in it doubled), so no added token matches it;
/// borrowed when there is nothing to mark, so ordinary text renders exactly as HF renders it.
/// [`undefuse`] takes the marks out again.
pub fn defuse<'a>(text: &'a str, added: &[String]) -> std::borrow::Cow<'a, str> {
    let hit = |at: &str| added.iter().any(|t| at.starts_with(t.as_str()));
    if !text.contains(MARK) && !added.iter().any(|t| text.contains(t.as_str())) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for (i, ch) in text.char_indices() {
        out.push(ch);
        if ch == MARK || hit(&text[i..]) {
            out.push(MARK);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Decoded ordinary text with a zero-width space after the first character of every added
/// token's text in it: what a transcript shows of text that spells a control token.
fn mark_lookalikes(text: &str, added: &[String]) -> String {
    if !added.iter().any(|t| text.contains(t.as_str())) {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len() + 16);
    for (i, ch) in text.char_indices() {
        out.push(ch);
        if added.iter().any(|t| text[i..].starts_with(t.as_str())) {
            out.push('\u{200B}');
        }
    }
    out
}

/// The text [`defuse`] marked, as it was: a doubled mark is one, a single one goes.
pub fn undefuse(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(ch) = chars.next() {
        if ch == MARK {
            if chars.peek() == Some(&MARK) {
                chars.next();
                out.push(MARK);
            }
            continue;
        }
        out.push(ch);
    }
    out
}

fn after_sentinel(text: &str) -> Result<&str, ChatError> {
    match text.rfind(SENTINEL) {
        Some(at) => Ok(&text[at + SENTINEL.len()..]),
        None => Err(ChatError::NotAppendOnly("the template does not print the assistant's content".into())),
    }
}

/// Messages in HF's JSON shape (`role`, `content`, `reasoning_content`, `tool_calls`).
pub fn messages_json(messages: &[Message]) -> Vec<Json> {
    messages.iter().map(|m| serde_json::to_value(m).expect("messages are JSON")).collect()
}

/// `None` (Python's `tools=None`) when there are none, as HF renders a call without tools.
pub fn tools_json(tools: &[ToolSchema]) -> Option<Vec<Json>> {
    (!tools.is_empty()).then(|| tools.iter().map(ToolSchema::to_openai).collect())
}

impl ChatCodec for HfChatCodec {
    fn prompt_ids(&self, messages: &[Message], tools: &[ToolSchema]) -> Result<Vec<u32>, ChatError> {
        self.conversation_ids(messages, tools, true)
    }

    fn observation_ids(
        &self,
        history: &[Message],
        observations: &[Message],
        tools: &[ToolSchema],
        stop: Option<u32>,
    ) -> Result<Vec<u32>, ChatError> {
        let stop_text = stop.map(|id| self.decode(&[id])).transpose()?;
        self.encode_rendered(&self.observation_text(history, observations, tools, stop_text.as_deref())?)
    }

    fn decode(&self, ids: &[u32]) -> Result<String, ChatError> {
        self.inner.tokenizer.decode(ids, false).map_err(|e| ChatError::Tokenizer(e.to_string()))
    }

    fn decode_transcript(&self, ids: &[u32]) -> Result<String, ChatError> {
        let added = self.inner.tokenizer.get_added_tokens_decoder();
        let mut text = String::new();
        // Runs of ordinary ids, each ended by a control id (the last run perhaps by none).
        for chunk in ids.split_inclusive(|id| added.contains_key(id)) {
            let (run, control) = match chunk.split_last() {
                Some((last, run)) if added.contains_key(last) => (run, Some(*last)),
                _ => (chunk, None),
            };
            if !run.is_empty() {
                text.push_str(&mark_lookalikes(&self.decode(run)?, &self.inner.added));
            }
            if let Some(id) = control {
                text.push_str(&self.decode(&[id])?);
            }
        }
        Ok(text)
    }

    fn stop_ids(&self) -> &[u32] {
        &self.inner.stop_ids
    }

    fn assistant_ids(&self, history: &[Message], tools: &[ToolSchema], assistant: &Message) -> Result<Vec<u32>, ChatError> {
        self.assistant_turn_ids(history, tools, assistant)
    }

    fn self_check(&self) -> Result<String, ChatError> {
        crate::self_check::self_check(self)
    }

    fn save_files(&self, dir: &Path) -> Result<(), ChatError> {
        let fail = |path: &Path, e: std::io::Error| ChatError::Load {
            what: "tokenizer file",
            path: path.display().to_string(),
            message: format!("cannot be written: {e}"),
        };
        for name in TOKENIZER_FILES {
            let from = self.inner.dir.join(name);
            if from.is_file() {
                let to = dir.join(name);
                std::fs::copy(&from, &to).map_err(|e| fail(&to, e))?;
            }
        }
        let jinja = dir.join("chat_template.jinja");
        std::fs::write(&jinja, &self.inner.template_source).map_err(|e| fail(&jinja, e))
    }
}
