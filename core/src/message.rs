//! Chat messages in the shape HF chat templates take (`role`, `content`, `tool_calls`,
//! `reasoning_content`), so conversations round-trip through JSON unchanged.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
    Tool,
}

/// One chat message. `tool_calls` are the assistant's calls in the OpenAI/HF shape.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Message {
    pub role: Role,
    #[serde(default)]
    pub content: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<MessageToolCall>,
}

/// `{"type": "function", "function": {"name": …, "arguments": {…}}}`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MessageToolCall {
    #[serde(rename = "type", default = "function_type")]
    pub kind: String,
    pub function: crate::tool::ToolCall,
}

fn function_type() -> String {
    "function".to_string()
}

impl Message {
    pub fn system(content: impl Into<String>) -> Self {
        Self::new(Role::System, content)
    }
    pub fn user(content: impl Into<String>) -> Self {
        Self::new(Role::User, content)
    }
    pub fn assistant(content: impl Into<String>) -> Self {
        Self::new(Role::Assistant, content)
    }
    pub fn tool(content: impl Into<String>) -> Self {
        Self::new(Role::Tool, content)
    }
    fn new(role: Role, content: impl Into<String>) -> Self {
        Self { role, content: content.into(), reasoning_content: None, tool_calls: Vec::new() }
    }
}
