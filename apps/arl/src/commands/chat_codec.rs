//! Which tokenizer and chat template a run uses (`model.tokenizer`).

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

/// The codec for `model`, with thinking off (the gyms grade the final source, not prose).
pub fn load(model: &ModelConfig) -> anyhow::Result<HfChatCodec> {
    let dir = match &model.tokenizer {
        Some(dir) => PathBuf::from(dir),
        None => match arl_chat::resolve_model_dir(&model.source) {
            Ok(dir) if Path::new(&dir).join("tokenizer.json").exists() => dir,
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
    let codec = HfChatCodec::load(&dir).with_context(|| format!("loading tokenizer from {}", dir.display()))?;
    Ok(codec.with_enable_thinking(Some(false)))
}
