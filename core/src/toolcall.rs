//! The tool-call parser for the Qwen/Hermes format, shared by every gym and the trainer.
//!
//! An assistant turn calls tools with blocks
//! `<tool_call>{"name": "<tool>", "arguments": {…}}</tool_call>` (whitespace around the JSON
//! is free). [`parse_tool_calls`] turns each block into a [`ParsedCall`]: a
//! [`ParsedCall::Call`] when the JSON parses, names a known tool and its arguments fit that
//! tool's JSON Schema ([`check_arguments`]); otherwise [`ParsedCall::Malformed`] with the
//! reason. An unclosed tag and every block past the per-turn cap are malformed too. A turn
//! without `<tool_call>` has no calls: it is a final answer.

mod schema;

pub use schema::check_arguments;

use serde_json::Value;

use crate::{AssistantTurn, ParsedCall, ToolCall, ToolSchema};

/// The tag that opens a tool-call block.
pub const OPEN: &str = "<tool_call>";
/// The tag that closes a tool-call block.
pub const CLOSE: &str = "</tool_call>";

/// Parse every `<tool_call>` block of `text`, in order. At most `max_calls` become calls;
/// later blocks are malformed ("over the cap"), so the model learns the limit.
pub fn parse_tool_calls(text: &str, tools: &[ToolSchema], max_calls: usize) -> Vec<ParsedCall> {
    let mut calls = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find(OPEN) {
        let after = &rest[start + OPEN.len()..];
        let Some(end) = after.find(CLOSE) else {
            calls.push(malformed(after, format!("unclosed {OPEN}: no {CLOSE} follows")));
            break;
        };
        let raw = &after[..end];
        rest = &after[end + CLOSE.len()..];
        if calls.len() >= max_calls {
            calls.push(malformed(raw, format!("more than {max_calls} tool calls in one turn")));
            continue;
        }
        calls.push(match parse_call(raw, tools) {
            Ok(call) => ParsedCall::Call(call),
            Err(reason) => malformed(raw, reason),
        });
    }
    calls
}

/// An [`AssistantTurn`] from its decoded text.
pub fn parse_turn(text: &str, tools: &[ToolSchema], max_calls: usize) -> AssistantTurn {
    AssistantTurn { text: text.to_string(), calls: parse_tool_calls(text, tools, max_calls) }
}

/// One block's JSON, checked against the tools.
pub fn parse_call(raw: &str, tools: &[ToolSchema]) -> Result<ToolCall, String> {
    let value: Value = serde_json::from_str(raw.trim()).map_err(|e| format!("not valid JSON: {e}"))?;
    let Value::Object(mut object) = value else {
        return Err("a tool call must be a JSON object {\"name\": …, \"arguments\": {…}}".into());
    };
    let name = match object.remove("name") {
        Some(Value::String(name)) => name,
        Some(_) => return Err("`name` must be a string".into()),
        None => return Err("missing `name`".into()),
    };
    let arguments = match object.remove("arguments") {
        Some(Value::Object(arguments)) => arguments,
        Some(_) => return Err("`arguments` must be a JSON object".into()),
        None => return Err("missing `arguments`".into()),
    };
    if let Some(key) = object.keys().next() {
        return Err(format!("unexpected key `{key}` (a call has only `name` and `arguments`)"));
    }
    let Some(tool) = tools.iter().find(|t| t.name == name) else {
        let known: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
        return Err(format!("unknown tool `{name}`; tools: {}", known.join(", ")));
    };
    check_arguments(&tool.parameters, &Value::Object(arguments.clone())).map_err(|e| format!("{name}: {e}"))?;
    Ok(ToolCall { name, arguments })
}

fn malformed(raw: &str, reason: String) -> ParsedCall {
    ParsedCall::Malformed { raw: raw.to_string(), reason }
}

#[cfg(test)]
mod tests {
    use schemars::JsonSchema;
    use serde::Deserialize;

    use super::*;

    /// Apply one of the task's edits.
    #[derive(Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct EditArgs {
        /// Name of the edit.
        op: String,
    }

    #[derive(Deserialize, JsonSchema)]
    #[allow(dead_code)]
    struct ReadArgs {
        file_path: String,
        offset: Option<u32>,
        limit: Option<u32>,
    }

    #[derive(Deserialize, JsonSchema)]
    #[allow(dead_code)]
    struct Empty {}

    fn tools() -> Vec<ToolSchema> {
        vec![
            ToolSchema::from_type::<EditArgs>("edit", "apply an edit"),
            ToolSchema::from_type::<ReadArgs>("Read", "read a file"),
            ToolSchema::from_type::<Empty>("submit", "submit"),
        ]
    }

    fn parse(text: &str) -> Vec<ParsedCall> {
        parse_tool_calls(text, &tools(), 2)
    }

    fn reason(text: &str) -> String {
        match parse(text).as_slice() {
            [ParsedCall::Malformed { reason, .. }] => reason.clone(),
            other => panic!("expected one malformed call for {text:?}, got {other:?}"),
        }
    }

    fn call(name: &str, args: Value) -> ParsedCall {
        ParsedCall::Call(ToolCall { name: name.into(), arguments: args.as_object().unwrap().clone() })
    }

    #[test]
    fn a_turn_without_tool_call_is_a_final_answer() {
        assert!(parse("The bug is fixed.").is_empty());
        assert!(parse("").is_empty());
        assert!(parse("I would call </tool_call> but won't").is_empty());
    }

    #[test]
    fn well_formed_calls_parse_in_order() {
        let text = "Let me look.\n<tool_call>\n{\"name\": \"Read\", \"arguments\": {\"file_path\": \"/a.py\", \"limit\": 5}}\n</tool_call>\n<tool_call>{\"name\": \"submit\", \"arguments\": {}}</tool_call>";
        assert_eq!(
            parse(text),
            vec![call("Read", serde_json::json!({"file_path": "/a.py", "limit": 5})), call("submit", serde_json::json!({}))]
        );
        assert_eq!(parse("<tool_call>{\"name\":\"Read\",\"arguments\":{\"file_path\":\"x\",\"offset\":null}}</tool_call>").len(), 1);
        assert!(matches!(
            parse("<tool_call>{\"name\":\"Read\",\"arguments\":{\"file_path\":\"x\",\"offset\":null}}</tool_call>")[0],
            ParsedCall::Call(_)
        ));
    }

    #[test]
    fn malformed_shapes_each_name_their_problem() {
        let cases: &[(&str, &str)] = &[
            ("<tool_call>{\"name\": \"edit\", \"arguments\": {\"op\": \"A\"}</tool_call>", "not valid JSON"),
            ("<tool_call>not json at all</tool_call>", "not valid JSON"),
            ("<tool_call></tool_call>", "not valid JSON"),
            ("<tool_call>{'name': 'edit', 'arguments': {'op': 'A'}}</tool_call>", "not valid JSON"),
            ("<tool_call>{\"name\": \"edit\", \"arguments\": {\"op\": \"A\"}} trailing</tool_call>", "not valid JSON"),
            ("<tool_call>[\"edit\", {\"op\": \"A\"}]</tool_call>", "JSON object"),
            ("<tool_call>\"edit\"</tool_call>", "JSON object"),
            ("<tool_call>{\"arguments\": {\"op\": \"A\"}}</tool_call>", "missing `name`"),
            ("<tool_call>{\"name\": 3, \"arguments\": {}}</tool_call>", "`name` must be a string"),
            ("<tool_call>{\"name\": \"edit\"}</tool_call>", "missing `arguments`"),
            ("<tool_call>{\"name\": \"edit\", \"arguments\": \"{\\\"op\\\": \\\"A\\\"}\"}</tool_call>", "must be a JSON object"),
            ("<tool_call>{\"name\": \"edit\", \"arguments\": [\"A\"]}</tool_call>", "must be a JSON object"),
            ("<tool_call>{\"name\": \"edit\", \"arguments\": {\"op\": \"A\"}, \"id\": 1}</tool_call>", "unexpected key `id`"),
            ("<tool_call>{\"name\": \"Edit\", \"arguments\": {\"op\": \"A\"}}</tool_call>", "unknown tool `Edit`"),
            ("<tool_call>{\"name\": \"bash\", \"arguments\": {}}</tool_call>", "unknown tool `bash`; tools: edit, Read, submit"),
            ("<tool_call>{\"name\": \"edit\", \"arguments\": {}}</tool_call>", "missing required argument `op`"),
            ("<tool_call>{\"name\": \"edit\", \"arguments\": {\"op\": 1}}</tool_call>", "`op` must be string"),
            ("<tool_call>{\"name\": \"edit\", \"arguments\": {\"op\": null}}</tool_call>", "`op` must be string"),
            ("<tool_call>{\"name\": \"edit\", \"arguments\": {\"op\": \"A\", \"why\": \"x\"}}</tool_call>", "unexpected argument `why`"),
            (
                "<tool_call>{\"name\": \"Read\", \"arguments\": {\"file_path\": \"a\", \"extra\": 1}}</tool_call>",
                "unexpected argument `extra`",
            ),
            (
                "<tool_call>{\"name\": \"Read\", \"arguments\": {\"file_path\": \"a\", \"limit\": -1}}</tool_call>",
                "`limit` must be at least 0",
            ),
            (
                "<tool_call>{\"name\": \"Read\", \"arguments\": {\"file_path\": \"a\", \"limit\": 1.5}}</tool_call>",
                "`limit` must be integer",
            ),
            (
                "<tool_call>{\"name\": \"Read\", \"arguments\": {\"file_path\": \"a\", \"limit\": \"5\"}}</tool_call>",
                "`limit` must be integer",
            ),
            ("<tool_call>{\"name\": \"Read\", \"arguments\": {\"file_path\": [\"a\"]}}</tool_call>", "`file_path` must be string"),
            ("<tool_call>{\"name\": \"submit\", \"arguments\": {\"now\": true}}</tool_call>", "unexpected argument `now`"),
            ("<tool_call>{\"name\": \"edit\", \"arguments\": {\"op\": \"A\"}}", "unclosed <tool_call>"),
            ("<tool_call>", "unclosed <tool_call>"),
        ];
        for (text, want) in cases {
            let got = reason(text);
            assert!(got.contains(want), "{text}\n  reason: {got}\n  wanted: {want}");
        }
    }

    #[test]
    fn calls_past_the_cap_are_malformed_but_earlier_ones_stand() {
        let one = "<tool_call>{\"name\": \"submit\", \"arguments\": {}}</tool_call>";
        let got = parse(&one.repeat(4));
        assert_eq!(got.len(), 4);
        assert!(matches!(got[0], ParsedCall::Call(_)) && matches!(got[1], ParsedCall::Call(_)));
        for extra in &got[2..] {
            assert!(matches!(extra, ParsedCall::Malformed { reason, .. } if reason.contains("more than 2")));
        }
    }

    #[test]
    fn a_malformed_block_does_not_swallow_the_next_one() {
        let text = "<tool_call>{oops}</tool_call> and <tool_call>{\"name\": \"submit\", \"arguments\": {}}</tool_call>";
        let got = parse(text);
        assert!(matches!(&got[0], ParsedCall::Malformed { raw, .. } if raw == "{oops}"));
        assert_eq!(got[1], call("submit", serde_json::json!({})));
        // An unclosed block after a good one: the good one stands.
        let got = parse(&format!("{}<tool_call>{{\"name\"", &text[text.find(" and ").unwrap() + 5..]));
        assert!(matches!(got[0], ParsedCall::Call(_)) && matches!(got[1], ParsedCall::Malformed { .. }));
    }

    #[test]
    fn nested_open_tags_are_malformed() {
        let got = parse("<tool_call><tool_call>{\"name\": \"submit\", \"arguments\": {}}</tool_call>");
        assert!(matches!(&got[..], [ParsedCall::Malformed { .. }]));
    }

    #[test]
    fn parse_turn_keeps_the_text() {
        let turn = parse_turn("done", &tools(), 4);
        assert_eq!((turn.text.as_str(), turn.calls.len()), ("done", 0));
    }
}
