//! The Chat Completions request as clients send it, turned into arl's [`Message`]s and
//! [`ToolSchema`]s: what the chat template renders, and what a turn is matched by.
//!
//! Fields that change sampling (`temperature`, `top_p`, `seed`, penalties, `stop`, …) are read
//! and ignored: the policy samples at the run's temperature without truncation, so that its
//! recorded log-probs are those the trainer scores (SPEC: no top-k/top-p in training).

use arl_core::message::MessageToolCall;
use arl_core::{Message, Role, ToolCall, ToolSchema};
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::ApiError;

/// The fields of a `POST /v1/chat/completions` body the endpoint acts on.
#[derive(Debug, Deserialize)]
pub struct ChatRequest {
    pub model: String,
    pub messages: Vec<Value>,
    #[serde(default)]
    pub tools: Option<Vec<Value>>,
    #[serde(default)]
    pub stream: Option<bool>,
    #[serde(default)]
    pub stream_options: Option<Value>,
    #[serde(default)]
    pub logprobs: Option<bool>,
    #[serde(default)]
    pub top_logprobs: Option<u32>,
    #[serde(default)]
    pub max_tokens: Option<u64>,
    #[serde(default)]
    pub max_completion_tokens: Option<u64>,
    #[serde(default)]
    pub n: Option<u32>,
}

/// A request made ready for a session: the conversation as the template sees it.
#[derive(Debug)]
pub struct Completion {
    pub model: String,
    pub messages: Vec<Message>,
    pub tools: Vec<ToolSchema>,
    pub stream: bool,
    /// `stream_options.include_usage`.
    pub stream_usage: bool,
    pub logprobs: bool,
    pub max_tokens: Option<usize>,
}

/// Parse and check a body; every refusal names the field.
pub fn parse(body: &[u8]) -> Result<Completion, ApiError> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::invalid("invalid_json", format!("the request body is not valid JSON ({e}); send a JSON object")))?;
    let request: ChatRequest = serde_json::from_value(value)
        .map_err(|e| ApiError::invalid("invalid_request", format!("the request body is not a chat completion request: {e}")))?;
    if request.n.is_some_and(|n| n != 1) {
        return Err(
            ApiError::invalid("unsupported_n", "n must be 1: each request samples one turn of this session's episode").with_param("n")
        );
    }
    if request.top_logprobs.is_some_and(|k| k > 0) {
        return Err(ApiError::invalid(
            "unsupported_top_logprobs",
            "top_logprobs is not served: the sampler records only the sampled token's log-prob; use logprobs=true alone",
        )
        .with_param("top_logprobs"));
    }
    let messages = request
        .messages
        .iter()
        .enumerate()
        .map(|(i, m)| message(m).map_err(|e| at(e, format!("messages[{i}]"))))
        .collect::<Result<Vec<_>, _>>()?;
    match messages.last() {
        None => return Err(ApiError::invalid("empty_messages", "messages is empty; send at least one user message").with_param("messages")),
        Some(last) if last.role == Role::Assistant => {
            return Err(ApiError::invalid(
                "assistant_prefill",
                "the last message is an assistant turn; continuing a written assistant turn is not served, end with a user or tool message",
            )
            .with_param("messages"));
        }
        Some(_) => {}
    }
    let tools = request
        .tools
        .unwrap_or_default()
        .iter()
        .enumerate()
        .map(|(i, t)| tool(t).map_err(|e| at(e, format!("tools[{i}]"))))
        .collect::<Result<Vec<_>, _>>()?;
    let max_tokens = request.max_completion_tokens.or(request.max_tokens).map(|n| n.min(usize::MAX as u64) as usize);
    if max_tokens == Some(0) {
        return Err(ApiError::invalid("invalid_max_tokens", "max_tokens must be at least 1").with_param("max_tokens"));
    }
    let stream_usage = request.stream_options.as_ref().and_then(|o| o.get("include_usage")).and_then(Value::as_bool).unwrap_or(false);
    Ok(Completion {
        model: request.model,
        messages,
        tools,
        stream: request.stream.unwrap_or(false),
        stream_usage,
        logprobs: request.logprobs.unwrap_or(false),
        max_tokens,
    })
}

fn at(message: String, param: String) -> ApiError {
    ApiError::invalid("invalid_message", format!("{param}: {message}")).with_param(param)
}

/// One wire message as arl's [`Message`]: `developer` is a system message, text parts join
/// with newlines, tool-call arguments (a JSON string on the wire) become their object.
pub fn message(value: &Value) -> Result<Message, String> {
    let role = match value.get("role").and_then(Value::as_str) {
        Some("system" | "developer") => Role::System,
        Some("user") => Role::User,
        Some("assistant") => Role::Assistant,
        Some("tool") => Role::Tool,
        Some(other) => return Err(format!("role {other:?} is not served (system, developer, user, assistant, tool)")),
        None => return Err("no \"role\" string".into()),
    };
    let mut m = Message { role, content: content(value.get("content"))?, reasoning_content: None, tool_calls: Vec::new() };
    if let Some(reasoning) = value.get("reasoning_content").and_then(Value::as_str) {
        m.reasoning_content = Some(reasoning.to_string());
    }
    match value.get("tool_calls") {
        None | Some(Value::Null) => {}
        Some(Value::Array(calls)) if role == Role::Assistant => {
            for (j, call) in calls.iter().enumerate() {
                m.tool_calls.push(tool_call(call).map_err(|e| format!("tool_calls[{j}]: {e}"))?);
            }
        }
        Some(_) => return Err("\"tool_calls\" must be an array, on an assistant message".into()),
    }
    Ok(m)
}

fn content(value: Option<&Value>) -> Result<String, String> {
    match value {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Array(parts)) => {
            let mut texts = Vec::with_capacity(parts.len());
            for (j, part) in parts.iter().enumerate() {
                match (part.get("type").and_then(Value::as_str), part.get("text").and_then(Value::as_str)) {
                    (Some("text"), Some(text)) => texts.push(text),
                    (kind, _) => return Err(format!("content[{j}] is a {:?} part; only text parts are served", kind.unwrap_or("untyped"))),
                }
            }
            Ok(texts.join("\n"))
        }
        Some(_) => Err("\"content\" must be a string, an array of text parts, or null".into()),
    }
}

fn tool_call(call: &Value) -> Result<MessageToolCall, String> {
    let function = call.get("function").ok_or("no \"function\" object")?;
    let name = function.get("name").and_then(Value::as_str).ok_or("no function \"name\" string")?;
    let arguments = match function.get("arguments") {
        Some(Value::String(text)) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(map)) => map,
            _ => return Err(format!("function.arguments {text:?} is not a JSON object as a string")),
        },
        Some(Value::Object(map)) => map.clone(),
        None | Some(Value::Null) => Map::new(),
        Some(_) => return Err("function.arguments must be a JSON string".into()),
    };
    Ok(MessageToolCall { kind: "function".into(), function: ToolCall { name: name.to_string(), arguments } })
}

/// `{"type": "function", "function": {"name", "description", "parameters"}}` as a [`ToolSchema`].
pub fn tool(value: &Value) -> Result<ToolSchema, String> {
    if let Some(kind) = value.get("type").and_then(Value::as_str).filter(|k| *k != "function") {
        return Err(format!("a {kind:?} tool is not served; only \"function\" tools"));
    }
    let f = value.get("function").ok_or("no \"function\" object")?;
    let name = f.get("name").and_then(Value::as_str).ok_or("no function \"name\" string")?;
    let description = f.get("description").and_then(Value::as_str).unwrap_or_default();
    let parameters = f.get("parameters").cloned().unwrap_or_else(|| serde_json::json!({"type": "object", "properties": {}}));
    Ok(ToolSchema { name: name.to_string(), description: description.to_string(), parameters })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn refusal(body: Value) -> String {
        parse(body.to_string().as_bytes()).unwrap_err().message
    }

    #[test]
    fn wire_messages_become_template_messages() {
        let body = json!({
            "model": "m",
            "messages": [
                {"role": "developer", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
                {"role": "user", "content": "q"},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"x\": 1}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "r"}
            ],
            "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
            "temperature": 0.2, "top_p": 0.5, "stream": true, "stream_options": {"include_usage": true}
        });
        let c = parse(body.to_string().as_bytes()).unwrap();
        assert_eq!(c.messages[0], Message::system("a\nb"));
        assert_eq!(c.messages[2].content, "");
        assert_eq!(c.messages[2].tool_calls[0].function.arguments, json!({"x": 1}).as_object().unwrap().clone());
        assert_eq!(c.messages[3], Message::tool("r"));
        assert_eq!(c.tools[0].name, "f");
        assert!(c.stream && c.stream_usage && !c.logprobs);
    }

    #[test]
    fn bad_requests_name_the_field() {
        assert!(parse(b"{not json").unwrap_err().message.contains("not valid JSON"));
        assert!(refusal(json!({"messages": []})).contains("missing field `model`"));
        assert!(refusal(json!({"model": "m", "messages": []})).contains("messages is empty"));
        assert!(refusal(json!({"model": "m", "messages": [{"role": "robot"}]})).starts_with("messages[0]: role \"robot\""));
        let bad_args = json!({"model": "m", "messages": [{"role": "user"}, {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{"}}]}, {"role": "tool", "content": "r"}]});
        assert!(refusal(bad_args).starts_with("messages[1]: tool_calls[0]: function.arguments"));
        assert!(refusal(json!({"model": "m", "n": 2, "messages": [{"role": "user"}]})).starts_with("n must be 1"));
        assert!(
            refusal(json!({"model": "m", "messages": [{"role": "user"}, {"role": "assistant", "content": "x"}]}))
                .contains("assistant turn")
        );
    }
}
