//! SFT data: a JSONL file of conversations, one per line, in the OpenAI/HF chat shape:
//!
//! ```json
//! {"messages": [{"role": "system", "content": "…"}, {"role": "user", "content": "…"},
//!               {"role": "assistant", "content": "…", "weight": 1}], "tools": [ … ]}
//! ```
//!
//! `tools` (optional) holds OpenAI function schemas (`{"type": "function", "function":
//! {…}}`, or the bare `{"name", "description", "parameters"}`). An assistant message may carry
//! `tool_calls` (arguments as an object or as a JSON string) and `reasoning_content`, and a
//! `"weight"` of 0 (context only) or 1 (trained; the default), as OpenAI's fine-tuning format.
//! `name` and `tool_call_id` on tool messages are accepted and ignored (the templates arl
//! renders do not print them). Anything else wrong is refused with its line number and what
//! is wrong, before any model loads.
//!
//! A conversation is rendered token-in/token-out, as a rollout grows an episode
//! ([`Conversation`]): the messages before the first assistant turn are the prompt (rendered
//! once, with the generation prompt); each assistant turn is appended as the ids the model
//! would write ([`ChatCodec::assistant_ids`]: its text through the stop token); what follows
//! it up to the next assistant turn (tool results, a user message) is appended as the
//! template's own ids of that suffix. Two assistant turns in a row are separated by the
//! template's own boundary (an empty observation: the end of the first turn and the next
//! generation prompt, `<|im_end|>\n<|im_start|>assistant\n` in ChatML), never trained, as the
//! template renders such a conversation; a template that renders the first of them otherwise
//! once the second follows (Qwen3's drops its empty think block) refuses the line, as it
//! refuses any conversation it would re-render. So SFT trains exactly the token layout an `arl run`
//! rollout samples, and its loss falls on the tokens the policy writes there.

use std::path::Path;

use serde_json::{Map, Value};

use arl_core::chat::{ChatCodec, ChatError, Conversation};
use arl_core::config::TrainOn;
use arl_core::message::MessageToolCall;
use arl_core::tool::ToolCall;
use arl_core::{Message, Role, ToolSchema};

/// One conversation of the file.
#[derive(Clone, Debug, PartialEq)]
pub struct SftExample {
    /// 1-based line number in its file.
    pub line: usize,
    pub messages: Vec<Message>,
    /// Per message: whether its tokens carry the loss (assistant messages with weight 1).
    pub trained: Vec<bool>,
    pub tools: Vec<ToolSchema>,
}

/// A rendered conversation: its token ids and which of them carry the loss.
#[derive(Clone, Debug, PartialEq)]
pub struct SftSequence {
    /// 1-based line number in its file.
    pub line: usize,
    pub ids: Vec<u32>,
    /// `mask[t]`: token `t` is a target (never `t = 0`, which has no context).
    pub mask: Vec<bool>,
}

impl SftSequence {
    /// Positions that carry the loss.
    pub fn positions(&self) -> Vec<usize> {
        self.mask.iter().enumerate().skip(1).filter(|(_, m)| **m).map(|(t, _)| t).collect()
    }

    pub fn target_tokens(&self) -> usize {
        self.mask.iter().skip(1).filter(|m| **m).count()
    }
}

/// Why SFT data cannot be used: the file, the line, and what is wrong.
#[derive(Debug, thiserror::Error)]
pub enum SftDataError {
    #[error("SFT data {path}: {message}")]
    File { path: String, message: String },
    #[error("SFT data {path}, line {line}: {message}")]
    Line { path: String, line: usize, message: String },
}

/// Read every conversation of a JSONL file (blank lines are skipped).
pub fn read_jsonl(path: &Path) -> Result<Vec<SftExample>, SftDataError> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| SftDataError::File { path: shown.clone(), message: e.to_string() })?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let example = parse_line(line, i + 1).map_err(|message| SftDataError::Line { path: shown.clone(), line: i + 1, message })?;
        out.push(example);
    }
    if out.is_empty() {
        return Err(SftDataError::File { path: shown, message: "holds no conversations (one JSON object per line)".into() });
    }
    Ok(out)
}

/// One line: `{"messages": [...], "tools"?: [...]}`; the error says what is wrong.
pub fn parse_line(line: &str, number: usize) -> Result<SftExample, String> {
    let doc: Value = serde_json::from_str(line).map_err(|e| format!("not JSON ({e})"))?;
    let Value::Object(doc) = doc else {
        return Err(format!("not a conversation: expected an object with a \"messages\" array, found {}", kind(&doc)));
    };
    let messages = match doc.get("messages") {
        Some(Value::Array(m)) => m,
        Some(other) => return Err(format!("not a conversation: \"messages\" must be an array, found {}", kind(other))),
        None => {
            let keys: Vec<&str> = doc.keys().map(String::as_str).collect();
            return Err(format!("not a conversation: no \"messages\" array (keys: {})", keys.join(", ")));
        }
    };
    if messages.is_empty() {
        return Err("not a conversation: \"messages\" is empty".into());
    }
    let tools = match doc.get("tools") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(t)) => {
            t.iter().enumerate().map(|(i, t)| tool(t).map_err(|e| format!("tools[{i}]: {e}"))).collect::<Result<_, _>>()?
        }
        Some(other) => return Err(format!("\"tools\" must be an array of function schemas, found {}", kind(other))),
    };
    let mut parsed = Vec::new();
    let mut trained = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        let (message, weight) = message(m).map_err(|e| format!("message {}: {e}", i + 1))?;
        trained.push(message.role == Role::Assistant && weight);
        parsed.push(message);
    }
    match parsed.iter().position(|m| m.role == Role::Assistant) {
        None => return Err("no assistant message: nothing to learn from this conversation".into()),
        Some(0) => return Err("the first message is the assistant's: a conversation needs a system or user message before it".into()),
        Some(_) => {}
    }
    Ok(SftExample { line: number, messages: parsed, trained, tools })
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A message and its weight (true: trained).
fn message(v: &Value) -> Result<(Message, bool), String> {
    let Value::Object(m) = v else { return Err(format!("expected an object, found {}", kind(v))) };
    for key in m.keys() {
        if !["role", "content", "reasoning_content", "tool_calls", "weight", "name", "tool_call_id"].contains(&key.as_str()) {
            return Err(format!(
                "unknown key \"{key}\" (a message has role, content, and optionally reasoning_content, tool_calls, weight)"
            ));
        }
    }
    let role = match m.get("role").and_then(Value::as_str) {
        Some("system") => Role::System,
        Some("user") => Role::User,
        Some("assistant") => Role::Assistant,
        Some("tool") => Role::Tool,
        Some(other) => return Err(format!("role \"{other}\" is not system, user, assistant or tool")),
        None => return Err("no \"role\" (system, user, assistant or tool)".into()),
    };
    let content = match m.get("content") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => return Err(format!("\"content\" must be a string, found {}", kind(other))),
    };
    let reasoning_content = match m.get("reasoning_content") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(other) => return Err(format!("\"reasoning_content\" must be a string, found {}", kind(other))),
    };
    let tool_calls = match m.get("tool_calls") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(calls)) if role == Role::Assistant => {
            calls.iter().enumerate().map(|(i, c)| tool_call(c).map_err(|e| format!("tool_calls[{i}]: {e}"))).collect::<Result<_, _>>()?
        }
        Some(Value::Array(_)) => return Err("only assistant messages have tool_calls".into()),
        Some(other) => return Err(format!("\"tool_calls\" must be an array, found {}", kind(other))),
    };
    let weight = match m.get("weight") {
        None => true,
        Some(_) if role != Role::Assistant => return Err("\"weight\" is only for assistant messages (the others are never trained)".into()),
        Some(w) if w.as_f64() == Some(1.0) => true,
        Some(w) if w.as_f64() == Some(0.0) => false,
        Some(w) => return Err(format!("\"weight\" must be 0 or 1, found {w}")),
    };
    Ok((Message { role, content, reasoning_content, tool_calls }, weight))
}

fn tool_call(v: &Value) -> Result<MessageToolCall, String> {
    let function = v.get("function").unwrap_or(v);
    let name = function.get("name").and_then(Value::as_str).ok_or("no function \"name\"")?;
    let arguments = match function.get("arguments") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(a)) => a.clone(),
        Some(Value::String(s)) => match serde_json::from_str::<Value>(s) {
            Ok(Value::Object(a)) => a,
            _ => return Err(format!("\"arguments\" is a string but not a JSON object: {s:?}")),
        },
        Some(other) => return Err(format!("\"arguments\" must be an object, found {}", kind(other))),
    };
    Ok(MessageToolCall { kind: "function".into(), function: ToolCall { name: name.to_string(), arguments } })
}

fn tool(v: &Value) -> Result<ToolSchema, String> {
    let f = v.get("function").unwrap_or(v);
    let name = f.get("name").and_then(Value::as_str).ok_or("no function \"name\"")?;
    let description = f.get("description").and_then(Value::as_str).unwrap_or_default();
    let parameters = f.get("parameters").cloned().unwrap_or_else(|| serde_json::json!({"type": "object", "properties": {}}));
    Ok(ToolSchema { name: name.to_string(), description: description.to_string(), parameters })
}

/// Render one conversation token-in/token-out (see the module docs). With `TrainOn::All`
/// every token after the first is a target; with `Assistant`, the trained assistant turns.
pub fn render(codec: &dyn ChatCodec, example: &SftExample, train_on: TrainOn) -> Result<SftSequence, ChatError> {
    let m = &example.messages;
    let first = m.iter().position(|x| x.role == Role::Assistant).expect("parse_line checked");
    let mut conv = Conversation::start(codec, m[..first].to_vec(), example.tools.clone())?;
    let mut mask = vec![false; conv.ids.len()];
    let mut structured: Vec<Message> = m[..first].to_vec();
    let mut i = first;
    while i < m.len() {
        if m[i].role == Role::Assistant {
            if i > first && m[i - 1].role == Role::Assistant {
                // Two assistant turns in a row: the template's boundary between them (the end
                // of the first turn and the next generation prompt, an empty observation),
                // never trained, as the template renders such a conversation.
                let before = conv.ids.len();
                conv.push_observations(codec, Vec::new())?;
                mask.extend(std::iter::repeat_n(false, conv.ids.len() - before));
            }
            let ids = codec.assistant_ids(&structured, &example.tools, &m[i])?;
            conv.push_assistant(codec, &ids, &vec![0.0; ids.len()])?;
            mask.extend(std::iter::repeat_n(example.trained[i], ids.len()));
            structured.push(m[i].clone());
            i += 1;
            continue;
        }
        let end = m[i..].iter().position(|x| x.role == Role::Assistant).map_or(m.len(), |k| i + k);
        if end == m.len() {
            // Messages after the last assistant turn would only be context for nothing.
            break;
        }
        let before = conv.ids.len();
        conv.push_observations(codec, m[i..end].to_vec())?;
        mask.extend(std::iter::repeat_n(false, conv.ids.len() - before));
        structured.extend(m[i..end].iter().cloned());
        i = end;
    }
    if train_on == TrainOn::All {
        mask = (0..conv.ids.len()).map(|t| t > 0).collect();
    }
    if let Some(first) = mask.first_mut() {
        *first = false;
    }
    Ok(SftSequence { line: example.line, ids: conv.ids, mask })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(line: &str) -> String {
        parse_line(line, 7).unwrap_err()
    }

    #[test]
    fn a_line_that_is_not_a_conversation_says_what_is_wrong() {
        let cases = [
            ("[1, 2]", "not a conversation: expected an object with a \"messages\" array, found an array"),
            ("{\"prompt\": \"hi\", \"completion\": \"yo\"}", "not a conversation: no \"messages\" array (keys: prompt, completion)"),
            ("{\"messages\": \"hi\"}", "not a conversation: \"messages\" must be an array, found a string"),
            ("{\"messages\": []}", "not a conversation: \"messages\" is empty"),
            ("{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}]}", "no assistant message: nothing to learn from this conversation"),
            (
                "{\"messages\": [{\"role\": \"assistant\", \"content\": \"a\"}]}",
                "the first message is the assistant's: a conversation needs a system or user message before it",
            ),
            ("{\"messages\": [{\"role\": \"bot\", \"content\": \"a\"}]}", "message 1: role \"bot\" is not system, user, assistant or tool"),
            ("{\"messages\": [{\"content\": \"a\"}]}", "message 1: no \"role\" (system, user, assistant or tool)"),
            ("{\"messages\": [{\"role\": \"user\", \"content\": [1]}]}", "message 1: \"content\" must be a string, found an array"),
            (
                "{\"messages\": [{\"role\": \"user\", \"content\": \"q\", \"weight\": 1}]}",
                "message 1: \"weight\" is only for assistant messages (the others are never trained)",
            ),
            (
                "{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}, {\"role\": \"assistant\", \"content\": \"a\", \"weight\": 0.5}]}",
                "message 2: \"weight\" must be 0 or 1, found 0.5",
            ),
            (
                "{\"messages\": [{\"role\": \"user\", \"content\": \"q\", \"mood\": \"ok\"}]}",
                "message 1: unknown key \"mood\" (a message has role, content, and optionally reasoning_content, tool_calls, weight)",
            ),
            (
                "{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}, {\"role\": \"assistant\", \"tool_calls\": [{\"function\": {\"name\": \"f\", \"arguments\": \"{nope\"}}]}]}",
                "message 2: tool_calls[0]: \"arguments\" is a string but not a JSON object: \"{nope\"",
            ),
            ("{\"messages\": [{\"role\": \"user\"}], \"tools\": {}}", "\"tools\" must be an array of function schemas, found an object"),
        ];
        for (line, want) in cases {
            assert_eq!(err(line), want, "{line}");
        }
        assert!(err("{\"messages\": [").starts_with("not JSON ("));
    }

    #[test]
    fn weights_tool_calls_and_tools_are_read() {
        let line = r#"{"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "q"},
            {"role": "assistant", "content": "", "weight": 0, "tool_calls": [{"type": "function", "function": {"name": "Read", "arguments": "{\"file_path\": \"a.py\"}"}}]},
            {"role": "tool", "content": "x = 1", "tool_call_id": "c1"}, {"role": "assistant", "content": "done"}],
            "tools": [{"type": "function", "function": {"name": "Read", "description": "Read a file.", "parameters": {"type": "object"}}}]}"#;
        let ex = parse_line(&line.replace('\n', " "), 3).unwrap();
        assert_eq!(ex.trained, [false, false, false, false, true]);
        assert_eq!(ex.messages[2].tool_calls[0].function.arguments["file_path"], "a.py");
        assert_eq!(ex.tools[0].name, "Read");
        assert_eq!(ex.line, 3);
    }

    /// One id per character; `|` (124) ends an assistant turn. The assistant's turn is its
    /// content, the observation suffix `\n<tool text>>`.
    struct Chars;

    impl ChatCodec for Chars {
        fn prompt_ids(&self, messages: &[Message], _: &[ToolSchema]) -> Result<Vec<u32>, ChatError> {
            Ok(messages
                .iter()
                .flat_map(|m| format!("[{}]", m.content).chars().map(|c| c as u32).collect::<Vec<_>>())
                .chain(['>' as u32])
                .collect())
        }
        fn observation_ids(&self, _: &[Message], obs: &[Message], _: &[ToolSchema], _: Option<u32>) -> Result<Vec<u32>, ChatError> {
            Ok(format!("\n{}>", obs.iter().map(|m| format!("[{}]", m.content)).collect::<String>()).chars().map(|c| c as u32).collect())
        }
        fn decode(&self, ids: &[u32]) -> Result<String, ChatError> {
            Ok(ids.iter().map(|&i| char::from_u32(i).unwrap()).collect())
        }
        fn stop_ids(&self) -> &[u32] {
            &[124]
        }
        fn assistant_ids(&self, _: &[Message], _: &[ToolSchema], a: &Message) -> Result<Vec<u32>, ChatError> {
            Ok(format!("{}|", a.content).chars().map(|c| c as u32).collect())
        }
        fn self_check(&self) -> Result<String, ChatError> {
            Ok("chars".into())
        }
    }

    fn text(seq: &SftSequence, targets: bool) -> String {
        seq.ids.iter().zip(&seq.mask).map(|(&i, &m)| if m == targets { char::from_u32(i).unwrap() } else { '.' }).collect()
    }

    #[test]
    fn only_trained_assistant_turns_carry_the_loss() {
        let line = r#"{"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "ab", "weight": 0},
            {"role": "tool", "content": "r"}, {"role": "assistant", "content": "cd"}, {"role": "user", "content": "bye"}]}"#;
        let ex = parse_line(&line.replace('\n', " "), 1).unwrap();
        let seq = render(&Chars, &ex, TrainOn::Assistant).unwrap();
        assert_eq!(text(&seq, false), "[q]>ab|\n[r]>...");
        assert_eq!(text(&seq, true), "............cd|", "the trailing user message is dropped");
        assert_eq!(seq.positions(), [12, 13, 14]);
        let all = render(&Chars, &ex, TrainOn::All).unwrap();
        assert_eq!(all.target_tokens(), all.ids.len() - 1);
        assert!(!all.mask[0]);
    }

    /// Two assistant messages in a row: the template's boundary (an empty observation, `\n>`
    /// here) separates them and carries no loss — never `ab|cd|`, which neither the template
    /// nor a rollout produces.
    #[test]
    fn consecutive_assistant_turns_are_separated_by_the_templates_boundary() {
        let line = r#"{"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "ab"},
            {"role": "assistant", "content": "cd", "weight": 0}, {"role": "assistant", "content": "ef"}]}"#;
        let ex = parse_line(&line.replace('\n', " "), 1).unwrap();
        let seq = render(&Chars, &ex, TrainOn::Assistant).unwrap();
        assert_eq!(text(&seq, false), "[q]>...\n>cd|\n>...");
        assert_eq!(text(&seq, true), "....ab|.......ef|");
    }
}
