//! Which tokenizer and chat template a run uses (`model.tokenizer`, `model.chat_template`).

use std::path::{Path, PathBuf};

use anyhow::Context;
use arl_chat::HfChatCodec;
use arl_core::config::ModelConfig;

/// The Qwen3 tokenizer fetched by `scripts/setup/qwen3-tokenizer.sh`.
pub fn qwen3_tokenizer_dir() -> PathBuf {
    match std::env::var_os("ARL_QWEN3_TOKENIZER_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/arl/assets/qwen3-tokenizer"),
    }
}

/// The codec for `model`, with thinking off (the gyms grade the final source, not prose),
/// and a line for the console when arl chose the template. `env_has_tools`: a model whose own
/// template ignores tools then gets arl's tool-capable ChatML template instead.
pub fn load(model: &ModelConfig, env_has_tools: bool) -> anyhow::Result<(HfChatCodec, Option<String>)> {
    let dir = match &model.tokenizer {
        Some(dir) => PathBuf::from(dir),
        None => match arl_chat::resolve_model_dir(&model.source) {
            Ok(dir) if Path::new(&dir).join("tokenizer.json").exists() => dir,
            Err(e) if arl_gguf::known::is_gguf_source(&model.source) => return Err(e.into()),
            _ => {
                let dir = qwen3_tokenizer_dir();
                if !dir.join("tokenizer.json").exists() {
                    anyhow::bail!(
                        "no tokenizer for model `{}`: run scripts/setup/qwen3-tokenizer.sh (fetches the Qwen3 tokenizer \
                         into {}) or set model.tokenizer=DIR",
                        model.source,
                        dir.display()
                    );
                }
                dir
            }
        },
    };
    let mut codec = HfChatCodec::load(&dir).with_context(|| format!("loading tokenizer from {}", dir.display()))?;
    let mut notice = None;
    if let Some(file) = &model.chat_template {
        let source = std::fs::read_to_string(file).with_context(|| format!("reading model.chat_template {file}"))?;
        codec = codec.with_template(&source, file)?;
    } else if env_has_tools && codec.ignores_tools()? {
        codec = codec.with_chatml_tools()?;
        notice = Some(format!(
            "chat template: {}'s own template ignores tools, so arl's tool-capable ChatML template is used \
             (Hermes layout; set model.chat_template=FILE to choose another)",
            model.source
        ));
    }
    Ok((codec.with_enable_thinking(Some(false)), notice))
}
