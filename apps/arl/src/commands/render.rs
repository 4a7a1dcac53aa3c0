//! `arl render`: a conversation through a model's chat template, as text and token ids —
//! what HF `apply_chat_template` gives, for checking templates by hand.

use std::io::Write;
use std::path::{Path, PathBuf};

use arl_chat::HfChatCodec;
use arl_qwen3::hub::Source;
use serde_json::{Value, json};

#[derive(Debug, clap::Args)]
pub struct Render {
    /// A directory with tokenizer.json and the chat template (tokenizer_config.json or
    /// chat_template.jinja), a GGUF source, a repo id (org/name) in the local Hugging Face
    /// cache, or a preset (its Qwen3 tokenizer): resolved as `arl run --model` is.
    #[arg(long)]
    pub model: String,
    /// A JSON array of messages in HF's shape (role, content, tool_calls, reasoning_content).
    #[arg(long)]
    pub messages: PathBuf,
    /// A JSON array of tool schemas in the OpenAI function format.
    #[arg(long)]
    pub tools: Option<PathBuf>,
    /// End with the assistant's generation prompt.
    #[arg(long)]
    pub add_generation_prompt: bool,
    /// Pass `enable_thinking` to the template (left undefined when absent).
    #[arg(long)]
    pub enable_thinking: Option<bool>,
}

impl Render {
    pub fn execute(self, out: &mut dyn Write) -> anyhow::Result<()> {
        let dir = match arl_qwen3::hub::resolve(&self.model)? {
            Source::Dir(dir) => dir,
            Source::Preset(name) => super::chat_codec::preset_tokenizer_dir(name)?,
        };
        let codec = HfChatCodec::load(&dir)?.with_enable_thinking(self.enable_thinking);
        let messages = read_array(&self.messages, "--messages")?;
        let tools = self.tools.as_deref().map(|p| read_array(p, "--tools")).transpose()?;
        let text = codec.render(&messages, tools.as_deref(), self.add_generation_prompt)?;
        let ids = codec.encode(&text)?;
        writeln!(out, "{}", serde_json::to_string(&json!({"text": text, "ids": ids}))?)?;
        Ok(())
    }
}

fn read_array(path: &Path, flag: &str) -> anyhow::Result<Vec<Value>> {
    let text = super::read_input(path, flag)?;
    match serde_json::from_str(&text).map_err(|e| crate::usage!("{flag} {}: not valid JSON: {e}", path.display()))? {
        Value::Array(items) => Ok(items),
        _ => Err(crate::usage!("{flag} {}: expected a JSON array", path.display())),
    }
}
