//! A sampled turn in OpenAI's reply shapes: one `chat.completion`, or a stream of
//! `chat.completion.chunk` events.

use serde_json::{Value, json};

use crate::session::Turn;

fn tool_calls(turn: &Turn, indexed: bool) -> Vec<Value> {
    turn.tool_calls
        .iter()
        .enumerate()
        .map(|(j, (id, call))| {
            let arguments = serde_json::to_string(&call.arguments).expect("a JSON object serializes");
            let mut v = json!({"id": id, "type": "function", "function": {"name": call.name, "arguments": arguments}});
            if indexed {
                v["index"] = json!(j);
            }
            v
        })
        .collect()
}

fn logprobs(turn: &Turn) -> Value {
    match &turn.logprobs {
        None => Value::Null,
        Some(tokens) => json!({
            "content": tokens
                .iter()
                .map(|(token, lp)| json!({"token": token, "logprob": lp, "bytes": token.as_bytes(), "top_logprobs": []}))
                .collect::<Vec<_>>(),
            "refusal": null,
        }),
    }
}

fn usage(turn: &Turn) -> Value {
    json!({
        "prompt_tokens": turn.prompt_tokens,
        "completion_tokens": turn.completion_tokens,
        "total_tokens": turn.prompt_tokens + turn.completion_tokens,
    })
}

fn content(turn: &Turn) -> Value {
    if turn.content.is_empty() && !turn.tool_calls.is_empty() { Value::Null } else { json!(turn.content) }
}

/// `POST /v1/chat/completions` without `stream`.
pub(crate) fn completion(turn: &Turn, model: &str, created: u64) -> Value {
    let mut message = json!({"role": "assistant", "content": content(turn), "refusal": null});
    if !turn.tool_calls.is_empty() {
        message["tool_calls"] = json!(tool_calls(turn, false));
    }
    json!({
        "id": turn.id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "message": message, "logprobs": logprobs(turn), "finish_reason": turn.finish_reason}],
        "usage": usage(turn),
    })
}

/// With `stream`: the role, the content (with its log-probs), the tool calls, the finish
/// reason, and with `stream_options.include_usage` a last chunk with the usage. The turn is
/// sampled whole before the first event.
pub(crate) fn chunks(turn: &Turn, model: &str, created: u64, include_usage: bool) -> Vec<Value> {
    let chunk = |delta: Value, logprobs: Value, finish: Value| {
        json!({
            "id": turn.id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "logprobs": logprobs, "finish_reason": finish}],
        })
    };
    let mut events = vec![chunk(json!({"role": "assistant", "content": ""}), Value::Null, Value::Null)];
    if !turn.content.is_empty() || turn.logprobs.is_some() {
        events.push(chunk(json!({"content": turn.content}), logprobs(turn), Value::Null));
    }
    if !turn.tool_calls.is_empty() {
        events.push(chunk(json!({"tool_calls": tool_calls(turn, true)}), Value::Null, Value::Null));
    }
    events.push(chunk(json!({}), Value::Null, json!(turn.finish_reason)));
    if include_usage {
        events.push(json!({
            "id": turn.id, "object": "chat.completion.chunk", "created": created, "model": model,
            "choices": [], "usage": usage(turn),
        }));
    }
    events
}
