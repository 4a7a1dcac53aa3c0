//! Chat messages in the shape HF chat templates take (`role`, `content`, `tool_calls`,
//! `reasoning_content`), so conversations round-trip through JSON unchanged.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Who a message is from (`"role"` in JSON, lowercase).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Instructions that set up the conversation.
    System,
    /// The user's request (in a gym, the task's prompt).
    User,
    /// The model's turn (in a rollout, the text the policy generated).
    Assistant,
    /// A tool's result, answering an assistant's tool call.
    Tool,
}

/// One chat message. `tool_calls` are the assistant's calls in the OpenAI/HF shape.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Message {
    /// Who it is from.
    pub role: Role,
    /// The message text (empty when absent from the JSON).
    #[serde(default)]
    pub content: String,
    /// An assistant's reasoning, kept apart from `content` for templates that render it
    /// (Qwen3's `<think>` block); `None`: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
    /// The tool calls an assistant message makes; empty for other roles.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<MessageToolCall>,
}

/// `{"type": "function", "function": {"name": …, "arguments": {…}}}`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MessageToolCall {
    /// `"type"` in JSON; always `"function"` (the default when absent).
    #[serde(rename = "type", default = "function_type")]
    pub kind: String,
    /// The function called, with its arguments.
    pub function: crate::tool::ToolCall,
}

fn function_type() -> String {
    "function".to_string()
}

impl Message {
    /// A system message with this text.
    pub fn system(content: impl Into<String>) -> Self {
        Self::new(Role::System, content)
    }
    /// A user message with this text.
    pub fn user(content: impl Into<String>) -> Self {
        Self::new(Role::User, content)
    }
    /// An assistant message with this text, no reasoning and no tool calls.
    pub fn assistant(content: impl Into<String>) -> Self {
        Self::new(Role::Assistant, content)
    }
    /// A tool-result message with this text.
    pub fn tool(content: impl Into<String>) -> Self {
        Self::new(Role::Tool, content)
    }
    fn new(role: Role, content: impl Into<String>) -> Self {
        Self { role, content: content.into(), reasoning_content: None, tool_calls: Vec::new() }
    }
}
