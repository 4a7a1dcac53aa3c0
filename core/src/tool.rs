//! Tools: the schemas a model is shown, parsed calls, and what a call came to.
//!
//! A call the parser cannot make sense of (bad JSON, unknown tool, arguments that do not
//! fit the schema) is *malformed*; a well-formed call the tool rejects (an Edit whose
//! `old_string` is absent) is *failed*; the two are counted separately in statistics.

use std::collections::{BTreeMap, BTreeSet};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::{EpisodeStats, Sandbox, Task};

/// A tool as the chat template expects it: the OpenAI function format.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ToolSchema {
    /// The name calls use (`"name"` in a `<tool_call>` block).
    pub name: String,
    /// What the tool does, as the model reads it.
    pub description: String,
    /// JSON Schema of the arguments object.
    pub parameters: Value,
}

impl ToolSchema {
    /// Build from a Rust argument type with schemars (the type's doc comments become
    /// descriptions). The `$schema` and `title` keys schemars adds are dropped: templates
    /// print the schema verbatim and models never saw them.
    pub fn from_type<T: JsonSchema>(name: &str, description: &str) -> Self {
        let mut parameters = serde_json::to_value(schemars::schema_for!(T)).expect("schema is JSON");
        if let Value::Object(map) = &mut parameters {
            map.remove("$schema");
            map.remove("title");
        }
        Self { name: name.to_string(), description: description.to_string(), parameters }
    }

    /// `{"type": "function", "function": {"name", "description", "parameters"}}`, keys in
    /// that order (templates serialize with insertion order, as HF does).
    pub fn to_openai(&self) -> Value {
        json!({
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            }
        })
    }
}

/// A well-formed call: a tool name and its arguments object.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ToolCall {
    /// One of the offered tools' [`ToolSchema::name`].
    pub name: String,
    /// The arguments, valid against the tool's [`ToolSchema::parameters`].
    pub arguments: Map<String, Value>,
}

/// One `<tool_call>` block of an assistant turn, as parsed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum ParsedCall {
    /// A call to run.
    Call(ToolCall),
    /// A block that is not a usable call (bad JSON, unknown tool, arguments that do not fit,
    /// over the per-turn cap, an unclosed tag); it is answered, never run.
    Malformed {
        /// The block's text between the tags (the rest of the turn for an unclosed tag).
        raw: String,
        /// Why it is malformed; the model is shown it.
        reason: String,
    },
}

/// What a call came to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "status", content = "text", rename_all = "lowercase")]
pub enum ToolOutcome {
    /// The tool ran; its output.
    Ok(String),
    /// A well-formed call the tool rejected; the error the model is shown.
    Failed(String),
    /// A call that does not make sense (see the module docs); the reason the model is shown.
    Malformed(String),
}

impl ToolOutcome {
    /// The observation text the model sees.
    pub fn text(&self) -> &str {
        match self {
            ToolOutcome::Ok(t) | ToolOutcome::Failed(t) | ToolOutcome::Malformed(t) => t,
        }
    }
}

/// A call's outcome, tagged with the tool's name (`"?"` when the name was unreadable).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    /// The called tool's name, or `"?"`.
    pub name: String,
    /// What the call came to.
    pub outcome: ToolOutcome,
}

/// The in-memory files of one episode, and which of them the model has read.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Workspace {
    /// File contents by path (relative to the repository's root).
    pub files: BTreeMap<String, String>,
    /// Paths of the files the model has read, so a gym can tell an edit made without
    /// reading the file first.
    pub read: BTreeSet<String>,
    /// A shell's working directory, kept across calls (`None`: the repository's root).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
}

/// What a tool may touch while it runs.
pub struct ToolContext<'a> {
    /// The episode's task.
    pub task: &'a Task,
    /// The episode's files, which tools read and change.
    pub workspace: &'a mut Workspace,
    /// Where a tool runs code.
    pub sandbox: &'a dyn Sandbox,
    /// The episode's statistics, for the tool's own counters.
    pub stats: &'a mut EpisodeStats,
}

/// A set of tools: their schemas, and the dispatch of a well-formed call.
pub trait ToolSet: Send + Sync {
    /// The tools offered to the model, in the order the prompt lists them.
    fn schemas(&self) -> Vec<ToolSchema>;
    /// Run one well-formed call against the episode's context. Problems are outcomes
    /// ([`ToolOutcome::Failed`], [`ToolOutcome::Malformed`]), never errors.
    fn call(&self, ctx: &mut ToolContext<'_>, call: &ToolCall) -> ToolOutcome;
}

/// Run one parsed call of a turn through `tools` and count it in `ctx.stats`: every call in
/// `tool_calls`, a malformed one (the parser's verdict or the tool set's) in `malformed_calls`,
/// a failed one in `failed_calls`. A malformed call reaches no tool.
pub fn dispatch(tools: &dyn ToolSet, ctx: &mut ToolContext<'_>, parsed: &ParsedCall) -> ToolResult {
    ctx.stats.tool_calls += 1;
    let result = match parsed {
        ParsedCall::Malformed { reason, .. } => {
            ToolResult { name: "?".into(), outcome: ToolOutcome::Malformed(format!("malformed tool call: {reason}")) }
        }
        ParsedCall::Call(call) => ToolResult { name: call.name.clone(), outcome: tools.call(ctx, call) },
    };
    match result.outcome {
        ToolOutcome::Malformed(_) => ctx.stats.malformed_calls += 1,
        ToolOutcome::Failed(_) => ctx.stats.failed_calls += 1,
        ToolOutcome::Ok(_) => {}
    }
    result
}
