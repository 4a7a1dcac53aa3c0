//! The start-up self-check: grow a reference conversation token-in/token-out (four tool
//! schemas; observations of one and of two tool results) and compare its ids with the
//! template's own rendering of the same conversation.
//!
//! "The same conversation" needs care, because the template is not append-only:
//! - With thinking on and non-empty reasoning in every turn, Qwen3 keeps every turn's
//!   `<think>` block, so one rendering of the whole conversation (assistant turns carrying
//!   the reasoning and calls the sampler produced) must equal the incremental ids exactly,
//!   up to the `\n` the template writes after the final `<|im_end|>`.
//! - With thinking off, the generation prompt writes an empty `<think>` block that the
//!   template drops from every non-last turn, so no single rendering matches. Then, after
//!   each observation, the incremental ids from the last assistant turn on (its sampled ids,
//!   the turn end, the observations and the next generation prompt) must equal the tail of
//!   the template's rendering of the conversation so far, and the prompt its head.
//!
//! The sampler is simulated by the template itself: a turn's sampled text is the template's
//! rendering of that assistant message after the generation prompt, cut at the stop token.

use arl_core::message::MessageToolCall;
use arl_core::tool::ToolCall;
use arl_core::{ChatCodec, ChatError, Conversation, Message, ToolSchema};
use schemars::JsonSchema;
use serde_json::{Value as Json, json};

use crate::codec::HfChatCodec;

/// Run both scenarios; Ok(a one-line summary) or the first differing tokens.
pub fn self_check(codec: &HfChatCodec) -> Result<String, ChatError> {
    let reference = Reference::new();
    let thinking = check_thinking(&codec.with_enable_thinking(None), &reference)?;
    let plain = check_plain(&codec.with_enable_thinking(Some(false)), &reference)?;
    Ok(format!(
        "chat self-check passed: {} tools, {} assistant turns, observations of 1 and 2 tool results; \
         {thinking} ids equal the template's rendering with thinking on, {plain} ids checked with thinking off",
        reference.tools.len(),
        reference.turns.len()
    ))
}

/// Thinking on: the incremental ids must equal one rendering of the whole conversation.
fn check_thinking(codec: &HfChatCodec, r: &Reference) -> Result<usize, ChatError> {
    let run = grow(codec, r, true, |_, _, _| Ok(()))?;
    let full = codec.encode(&codec.render_typed(&run.structured, &r.tools, false)?)?;
    let ours = &run.conversation.ids;
    let n = ours.len().min(full.len());
    if let Some(i) = (0..n).find(|&i| ours[i] != full[i]).or((full.len() < ours.len()).then_some(n)) {
        return Err(diff(codec, "thinking on, whole conversation", ours, &full, i, 0));
    }
    let rest = codec.decode(&full[ours.len()..])?;
    if !rest.trim().is_empty() {
        return Err(ChatError::SelfCheck(format!("thinking on: the template's rendering continues after the last turn with {rest:?}")));
    }
    Ok(ours.len())
}

/// Thinking off: after each observation, the last turn onwards must be the tail of a fresh
/// rendering, and the prompt its head.
fn check_plain(codec: &HfChatCodec, r: &Reference) -> Result<usize, ChatError> {
    // The opening messages without the generation prompt (whose think block re-renders drop).
    let head_len = codec.encode(&codec.render_typed(&r.opening, &r.tools, false)?)?.len();
    let run = grow(codec, r, false, |codec, conv, structured| {
        let full = codec.encode(&codec.render_typed(structured, &r.tools, true)?)?;
        compare_tail(codec, "thinking off, after an observation", &conv.ids, conv_last_turn_start(conv), &full)?;
        let head = &full[..head_len.min(full.len())];
        if let Some(i) = (0..head.len()).find(|&i| head[i] != conv.ids[i]) {
            return Err(diff(codec, "thinking off, the prompt", &conv.ids, &full, i, 0));
        }
        Ok(())
    })?;
    let conv = &run.conversation;
    let full = codec.encode(&codec.render_typed(&run.structured, &r.tools, false)?)?;
    let trailing = trailing_whitespace(codec, &full)?;
    compare_tail(codec, "thinking off, the final turn", &conv.ids, conv_last_turn_start(conv), &full[..full.len() - trailing])?;
    Ok(conv.ids.len())
}

fn conv_last_turn_start(conv: &Conversation) -> usize {
    let last = conv.turns - 1;
    conv.turn_ids.iter().position(|&t| t == last).expect("a turn was pushed")
}

/// How many ids at the end of `ids` decode to whitespace only.
fn trailing_whitespace(codec: &HfChatCodec, ids: &[u32]) -> Result<usize, ChatError> {
    let mut n = 0;
    while n < ids.len() && codec.decode(&ids[ids.len() - n - 1..ids.len() - n])?.trim().is_empty() {
        n += 1;
    }
    Ok(n)
}

/// `ours[from..]` must be the tail of `full`.
fn compare_tail(codec: &HfChatCodec, what: &str, ours: &[u32], from: usize, full: &[u32]) -> Result<(), ChatError> {
    let seg = &ours[from..];
    if seg.len() > full.len() {
        return Err(diff(codec, what, ours, full, from, 0));
    }
    let offset = full.len() - seg.len();
    match (0..seg.len()).find(|&i| seg[i] != full[offset + i]) {
        Some(i) => Err(diff(codec, what, ours, &full[offset..], from + i, from)),
        None => Ok(()),
    }
}

/// A readable account of the first difference: index, a few ids from there on each side,
/// their text, and the text just before.
fn diff(codec: &HfChatCodec, what: &str, ours: &[u32], theirs: &[u32], at: usize, theirs_start: usize) -> ChatError {
    const WINDOW: usize = 8;
    let text = |ids: &[u32]| codec.decode(ids).unwrap_or_else(|e| format!("<{e}>"));
    let window = |ids: &[u32], i: usize| ids[i.min(ids.len())..(i + WINDOW).min(ids.len())].to_vec();
    let mine = window(ours, at);
    let j = at - theirs_start;
    let other = window(theirs, j);
    let before = &ours[at.saturating_sub(WINDOW)..at];
    ChatError::SelfCheck(format!(
        "{what}: first difference at token {at}: incremental {mine:?} {:?} vs template {other:?} {:?} (after {:?})",
        text(&mine),
        text(&other),
        text(before)
    ))
}

/// The result of growing the reference conversation.
struct Run {
    conversation: Conversation,
    /// The same conversation as structured messages (reasoning, tool calls).
    structured: Vec<Message>,
}

fn grow(
    codec: &HfChatCodec,
    r: &Reference,
    reasoning: bool,
    after_observation: impl Fn(&HfChatCodec, &Conversation, &[Message]) -> Result<(), ChatError>,
) -> Result<Run, ChatError> {
    let mut structured = r.opening.clone();
    let mut conversation = Conversation::start(codec, r.opening.clone(), r.tools.clone())?;
    for turn in &r.turns {
        let assistant = turn.message(reasoning);
        let ids = sampled_ids(codec, &structured, &r.tools, &assistant)?;
        conversation.push_assistant(codec, &ids, &vec![0.0; ids.len()])?;
        structured.push(assistant);
        if !turn.observations.is_empty() {
            conversation.push_observations(codec, turn.observations.clone())?;
            structured.extend(turn.observations.iter().cloned());
            after_observation(codec, &conversation, &structured)?;
        }
    }
    Ok(Run { conversation, structured })
}

/// What a model trained on this template samples for `assistant` after `history`
/// ([`HfChatCodec::assistant_turn_ids`]), its errors reported as the self-check's.
fn sampled_ids(codec: &HfChatCodec, history: &[Message], tools: &[ToolSchema], assistant: &Message) -> Result<Vec<u32>, ChatError> {
    codec.assistant_turn_ids(history, tools, assistant).map_err(|e| match e {
        ChatError::NotAppendOnly(m) => ChatError::SelfCheck(m),
        other => other,
    })
}

/// The reference conversation: a coding task with Read, Edit, Write and Bash; one call
/// answered by one result, two calls answered by two, then a final answer.
struct Reference {
    opening: Vec<Message>,
    tools: Vec<ToolSchema>,
    turns: Vec<Turn>,
}

struct Turn {
    reasoning: &'static str,
    content: &'static str,
    calls: Vec<(&'static str, Json)>,
    observations: Vec<Message>,
}

impl Turn {
    fn message(&self, reasoning: bool) -> Message {
        let mut m = Message::assistant(self.content);
        m.reasoning_content = reasoning.then(|| self.reasoning.to_string());
        m.tool_calls = self
            .calls
            .iter()
            .map(|(name, args)| MessageToolCall {
                kind: "function".into(),
                function: ToolCall { name: name.to_string(), arguments: args.as_object().expect("object").clone() },
            })
            .collect();
        m
    }
}

/// Arguments of the reference tools (their doc comments become schema descriptions).
#[allow(dead_code)]
#[derive(JsonSchema)]
struct ReadArgs {
    /// Path of the file to read, relative to the repository root.
    file_path: String,
}

#[allow(dead_code)]
#[derive(JsonSchema)]
struct EditArgs {
    file_path: String,
    /// Exact text to replace; must occur once.
    old_string: String,
    new_string: String,
}

#[allow(dead_code)]
#[derive(JsonSchema)]
struct WriteArgs {
    file_path: String,
    content: String,
}

#[allow(dead_code)]
#[derive(JsonSchema)]
struct BashArgs {
    command: String,
    /// Seconds before the command is killed.
    timeout: Option<u32>,
}

impl Reference {
    fn new() -> Self {
        let tools = vec![
            ToolSchema::from_type::<ReadArgs>("Read", "Read a file."),
            ToolSchema::from_type::<EditArgs>("Edit", "Replace text in a file."),
            ToolSchema::from_type::<WriteArgs>("Write", "Write a whole file."),
            ToolSchema::from_type::<BashArgs>("Bash", "Run a shell command."),
        ];
        let opening = vec![
            Message::system("You are a careful coding agent. Use the tools."),
            Message::user("The tests of calc.py fail: `add(2, 3)` returns -1. Fix it — ünïcödé welcome."),
        ];
        let turns = vec![
            Turn {
                reasoning: "The report is about add; read calc.py first.",
                content: "",
                calls: vec![("Read", json!({"file_path": "calc.py"}))],
                observations: vec![Message::tool("def add(a, b):\n    return a - b\n")],
            },
            Turn {
                reasoning: "add subtracts. Fix it, then run the tests.",
                content: "",
                calls: vec![
                    ("Edit", json!({"file_path": "calc.py", "old_string": "return a - b", "new_string": "return a + b"})),
                    ("Bash", json!({"command": "python -m pytest -q", "timeout": 60})),
                ],
                observations: vec![Message::tool("The file calc.py has been updated."), Message::tool("3 passed in 0.01s")],
            },
            Turn {
                reasoning: "The tests pass.",
                content: "Fixed: `add` now returns a + b, and the tests pass «ok».",
                calls: vec![],
                observations: vec![],
            },
        ];
        Self { opening, tools, turns }
    }
}
