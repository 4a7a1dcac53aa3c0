//! What a model directory holds for the token layer: `tokenizer.json`, the chat template
//! (`chat_template.jinja`, else `tokenizer_config.json`'s `chat_template`), the special
//! tokens, and the ids that end a turn (`eos_token`, plus `generation_config.json`'s
//! `eos_token_id` when present).

use std::path::{Path, PathBuf};

use serde_json::{Map, Value as Json};
use tokenizers::Tokenizer;

use arl_core::ChatError;

/// The token-layer files of one model directory, loaded.
pub struct ChatFiles {
    pub tokenizer: Tokenizer,
    /// The template source and the file it came from.
    pub template: (String, PathBuf),
    /// `bos_token`, `eos_token`, `unk_token`, `pad_token` (strings) and
    /// `additional_special_tokens`, as HF passes them to templates.
    pub special_tokens: Map<String, Json>,
    pub stop_ids: Vec<u32>,
}

impl ChatFiles {
    pub fn load(dir: &Path) -> Result<Self, ChatError> {
        let tokenizer_path = dir.join("tokenizer.json");
        if !tokenizer_path.is_file() {
            return Err(missing("tokenizer file", &tokenizer_path, "not found (a model directory needs tokenizer.json)"));
        }
        let tokenizer = Tokenizer::from_file(&tokenizer_path).map_err(|e| ChatError::Load {
            what: "tokenizer file",
            path: tokenizer_path.display().to_string(),
            message: format!("cannot be parsed: {e}"),
        })?;
        let config_path = dir.join("tokenizer_config.json");
        let config = if config_path.is_file() { read_json(&config_path)? } else { Map::new() };
        let template = template_source(dir, &config_path, &config)?;
        let special_tokens = special_tokens(&config);

        let mut stop_ids = Vec::new();
        if let Some(eos) = special_tokens.get("eos_token").and_then(Json::as_str) {
            stop_ids.extend(tokenizer.token_to_id(eos));
        }
        let generation_path = dir.join("generation_config.json");
        if generation_path.is_file() {
            match read_json(&generation_path)?.get("eos_token_id") {
                Some(Json::Number(n)) => stop_ids.extend(n.as_u64().map(|n| n as u32)),
                Some(Json::Array(ids)) => stop_ids.extend(ids.iter().filter_map(Json::as_u64).map(|n| n as u32)),
                _ => {}
            }
        }
        let mut seen = Vec::new();
        stop_ids.retain(|id| {
            !seen.contains(id) && {
                seen.push(*id);
                true
            }
        });
        if stop_ids.is_empty() {
            return Err(missing(
                "tokenizer config",
                &config_path,
                "names no eos_token that the tokenizer knows, so assistant turns cannot end",
            ));
        }
        Ok(Self { tokenizer, template, special_tokens, stop_ids })
    }
}

fn missing(what: &'static str, path: &Path, message: &str) -> ChatError {
    ChatError::Load { what, path: path.display().to_string(), message: message.to_string() }
}

fn read_json(path: &Path) -> Result<Map<String, Json>, ChatError> {
    let text = std::fs::read_to_string(path).map_err(|e| missing("file", path, &format!("cannot be read: {e}")))?;
    match serde_json::from_str(&text) {
        Ok(Json::Object(map)) => Ok(map),
        Ok(_) => Err(missing("file", path, "is not a JSON object")),
        Err(e) => Err(missing("file", path, &format!("is not valid JSON: {e}"))),
    }
}

/// `chat_template.jinja` wins over `tokenizer_config.json` (as in transformers); a list of
/// named templates picks `default`.
fn template_source(dir: &Path, config_path: &Path, config: &Map<String, Json>) -> Result<(String, PathBuf), ChatError> {
    let jinja = dir.join("chat_template.jinja");
    if jinja.is_file() {
        let text = std::fs::read_to_string(&jinja).map_err(|e| missing("chat template", &jinja, &format!("cannot be read: {e}")))?;
        return Ok((text, jinja));
    }
    let found = match config.get("chat_template") {
        Some(Json::String(s)) => Some(s.clone()),
        Some(Json::Array(named)) => named
            .iter()
            .find(|t| t.get("name").and_then(Json::as_str) == Some("default"))
            .and_then(|t| t.get("template")?.as_str().map(str::to_string)),
        _ => None,
    };
    match found {
        Some(text) => Ok((text, config_path.to_path_buf())),
        None => Err(missing("chat template", &jinja, &format!("not found, and {} has no `chat_template`", config_path.display()))),
    }
}

/// HF's `special_tokens_map`: each token as its string (`{"content": …}` objects unwrapped),
/// absent when null.
fn special_tokens(config: &Map<String, Json>) -> Map<String, Json> {
    let mut out = Map::new();
    for key in ["bos_token", "eos_token", "unk_token", "pad_token"] {
        let token = match config.get(key) {
            Some(Json::String(s)) => Some(s.clone()),
            Some(Json::Object(o)) => o.get("content").and_then(Json::as_str).map(str::to_string),
            _ => None,
        };
        if let Some(t) = token {
            out.insert(key.to_string(), Json::String(t));
        }
    }
    if let Some(Json::Array(extra)) = config.get("additional_special_tokens") {
        out.insert("additional_special_tokens".into(), Json::Array(extra.clone()));
    }
    out
}
