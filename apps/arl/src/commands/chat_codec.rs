//! Which tokenizer and chat template a run uses (`model.tokenizer`): the one given, else the
//! model directory's own, else — for a random-weights preset only — the Qwen3 tokenizer that
//! the presets document. A model directory without a tokenizer is an error, never a silent
//! swap to another model's tokenizer. The chat template is the model's own, else
//! `model.chat_template`, else — when the env has tools and the model's template ignores them
//! (SmolLM2's) — arl's tool-capable ChatML template.

use std::path::PathBuf;

use anyhow::Context;
use arl_chat::HfChatCodec;
use arl_core::ConfigError;
use arl_core::config::ModelConfig;
use arl_qwen3::hub::Source;

/// The Qwen3 tokenizer fetched by `scripts/setup/qwen3-tokenizer.sh`.
pub fn qwen3_tokenizer_dir() -> PathBuf {
    match std::env::var_os("ARL_QWEN3_TOKENIZER_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/arl/assets/qwen3-tokenizer"),
    }
}

/// The directory the codec of `model` loads from (see the module docs).
pub fn tokenizer_dir(model: &ModelConfig) -> anyhow::Result<PathBuf> {
    if let Some(dir) = &model.tokenizer {
        return Ok(PathBuf::from(dir));
    }
    let source = arl_qwen3::hub::resolve(&model.source).with_context(|| format!("loading model `{}`", model.source))?;
    match source {
        Source::Dir(dir) if dir.join("tokenizer.json").is_file() => Ok(dir),
        Source::Dir(dir) => Err(ConfigError::Invalid {
            key: "model.tokenizer".into(),
            message: format!(
                "the model directory {} has no tokenizer.json; pass the model's own tokenizer with --tokenizer DIR",
                dir.display()
            ),
        }
        .into()),
        Source::Preset(name) => preset_tokenizer_dir(name),
    }
}

/// The tokenizer of random-weights preset `name`: Qwen3's, from the setup script's cache.
pub fn preset_tokenizer_dir(name: &str) -> anyhow::Result<PathBuf> {
    let dir = qwen3_tokenizer_dir();
    if !dir.join("tokenizer.json").is_file() {
        anyhow::bail!(
            "preset `{name}` uses the Qwen3 tokenizer, which is not in {}: run scripts/setup/qwen3-tokenizer.sh \
             (or set model.tokenizer=DIR)",
            dir.display()
        );
    }
    Ok(dir)
}

/// The codec for `model`, with thinking off (the gyms grade the final source, not prose),
/// and a line for the console when arl chose the template.
pub fn load(model: &ModelConfig, env_has_tools: bool) -> anyhow::Result<(HfChatCodec, Option<String>)> {
    let dir = tokenizer_dir(model)?;
    let mut codec = HfChatCodec::load(&dir).with_context(|| format!("loading the tokenizer from {}", dir.display()))?;
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

/// Whether the run's conversations may carry tools: the env offers some, or its episodes are
/// run by an agent program that sends its own ([`arl_core::AgentEnv`]).
pub fn env_sends_tools(env: &dyn arl_core::Env) -> bool {
    !env.tools().is_empty() || env.agent().is_some()
}

/// The tokenizer's ids must all be ids of the model's vocabulary.
pub fn check_vocab(codec: &HfChatCodec, vocab_size: usize, model: &ModelConfig) -> Result<(), ConfigError> {
    let max = codec.max_token_id() as usize;
    if max >= vocab_size {
        return Err(ConfigError::Invalid {
            key: "model.tokenizer".into(),
            message: format!(
                "the tokenizer in {} has token ids up to {max}, but model `{}` has a vocabulary of {vocab_size}: they do not \
                 belong together; pass the model's own tokenizer with --tokenizer DIR",
                codec.dir().display(),
                model.source
            ),
        });
    }
    Ok(())
}
