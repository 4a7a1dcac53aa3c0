//! `tokenizer.json` and `tokenizer_config.json` from a GGUF's `tokenizer.ggml.*` metadata,
//! built as HF transformers' GGUF loader builds them (`integrations/gguf/
//! gguf_tokenizer_mapping.py`): a byte-level BPE over the file's vocabulary and merges,
//! tokens the file marks *control* added as special tokens and *user-defined* ones as plain
//! added tokens, and the pre-tokenizer split that `tokenizer.ggml.pre` names (GPT-2's
//! byte-level regex for names transformers does not map, `smollm` among them: llama.cpp
//! isolates digits there too, which changes nothing for SmolLM2, whose vocabulary merges no
//! digit with anything). Only byte-level BPE (`tokenizer.ggml.model = gpt2`, used by
//! Llama 3, Qwen and SmolLM) is built; a sentencepiece vocabulary is refused by name.

use std::collections::HashMap;

use serde_json::{Map, Value as Json, json};

use crate::GgufError;
use crate::file::{GgufFile, Value};

/// GGUF token types (`llama_token_type`).
const CONTROL: u64 = 3;
const USER_DEFINED: u64 = 4;

const LLAMA3_SPLIT: &str =
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// Qwen2's `PRETOKENIZE_REGEX` (transformers' `tokenization_qwen2.py`), also Qwen3's.
const QWEN2_SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// The split regex transformers uses for a `tokenizer.ggml.pre` name (`GGUF_PRE_TOKENIZER_SPLITS`);
/// `None`: GPT-2's byte-level regex.
fn pre_split(pre: &str) -> Option<&'static str> {
    match pre {
        "llama3" | "llama-v3" | "llama-bpe" | "falcon3" | "falcon-h1" | "pixtral" | "midm-2.0" | "lfm2" | "jina-v5-nano" | "dbrx"
        | "smaug-bpe" => Some(LLAMA3_SPLIT),
        "qwen2" | "deepseek-r1-qwen" | "kormo" | "f2llmv2" | "megrez" => Some(QWEN2_SPLIT),
        _ => None,
    }
}

/// GPT-2's `bytes_to_unicode`: every byte as a printable character.
fn byte_alphabet() -> [char; 256] {
    let mut printable: Vec<u32> = (u32::from('!')..=u32::from('~')).collect();
    printable.extend(u32::from('¡')..=u32::from('¬'));
    printable.extend(u32::from('®')..=u32::from('ÿ'));
    let mut table = ['\0'; 256];
    let mut extra = 0;
    for b in 0..256u32 {
        let c = if printable.contains(&b) {
            b
        } else {
            extra += 1;
            255 + extra
        };
        table[b as usize] = char::from_u32(c).expect("a valid char");
    }
    table
}

/// The tokenizer files, and the special tokens' strings for `tokenizer_config.json`.
pub struct TokenizerFiles {
    pub tokenizer_json: Json,
    pub tokenizer_config: Json,
}

fn strings<'a>(file: &'a GgufFile, key: &str) -> Result<Vec<&'a str>, GgufError> {
    let bad = |problem: &str| GgufError::Metadata { path: file.path.clone(), key: key.into(), problem: problem.into() };
    let items = file.get(key).ok_or_else(|| bad("is missing"))?.as_array().ok_or_else(|| bad("is not an array"))?;
    items.iter().map(|v| v.as_str().ok_or_else(|| bad("holds a non-string"))).collect()
}

pub fn tokenizer_files(file: &GgufFile) -> Result<TokenizerFiles, GgufError> {
    let model = file.get("tokenizer.ggml.model").and_then(Value::as_str).ok_or_else(|| GgufError::Metadata {
        path: file.path.clone(),
        key: "tokenizer.ggml.model".into(),
        problem: "is missing: the file has no tokenizer".into(),
    })?;
    if model != "gpt2" {
        return Err(GgufError::Unsupported {
            path: file.path.clone(),
            what: format!("tokenizer model `{model}` (tokenizer.ggml.model)"),
            supported: "gpt2 (byte-level BPE: Llama 3, Qwen2/3, SmolLM)".into(),
        });
    }
    let tokens = strings(file, "tokenizer.ggml.tokens")?;
    let merges = strings(file, "tokenizer.ggml.merges")?;
    let types: Vec<u64> = match file.get("tokenizer.ggml.token_type").and_then(Value::as_array) {
        Some(items) => items.iter().map(|v| v.as_u64().unwrap_or(1)).collect(),
        None => vec![1; tokens.len()],
    };
    let alphabet = byte_alphabet();
    let in_alphabet = |t: &str| t.chars().all(|c| alphabet.contains(&c));
    let spelled = |t: &str| -> String { if in_alphabet(t) { t.to_string() } else { t.bytes().map(|b| alphabet[b as usize]).collect() } };

    let mut vocab = Map::new();
    let mut raw_to_id: HashMap<&str, usize> = HashMap::new();
    for (id, &t) in tokens.iter().enumerate() {
        // Later duplicates win, as in a Python dict built in order.
        vocab.insert(spelled(t), id.into());
        raw_to_id.insert(t, id);
    }
    let merges: Vec<Json> = merges
        .iter()
        .map(|m| {
            let (a, b) = m.split_once(' ').unwrap_or((m, ""));
            json!([a, b])
        })
        .collect();

    let mut added = Vec::new();
    for (id, (&t, &ty)) in tokens.iter().zip(types.iter()).enumerate() {
        if ty == CONTROL && in_alphabet(t) {
            added.push(added_token(id, t, true));
        }
    }
    for (id, (&t, &ty)) in tokens.iter().zip(types.iter()).enumerate() {
        if ty == USER_DEFINED && vocab.contains_key(t) && raw_to_id.get(t) == Some(&id) {
            added.push(added_token(id, t, false));
        }
    }

    let byte_level = |add_prefix_space: bool, use_regex: bool| json!({"type": "ByteLevel", "add_prefix_space": add_prefix_space, "trim_offsets": true, "use_regex": use_regex});
    let pre = file.get("tokenizer.ggml.pre").and_then(Value::as_str).unwrap_or("default");
    let pre_tokenizer = match pre_split(pre) {
        None => byte_level(false, true),
        Some(regex) => json!({
            "type": "Sequence",
            "pretokenizers": [
                {"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated", "invert": false},
                byte_level(false, false),
            ]
        }),
    };
    let token_at = |key: &str| file.get(key).and_then(Value::as_u64).and_then(|id| tokens.get(id as usize)).map(|t| t.to_string());
    let add_bos = file.get("tokenizer.ggml.add_bos_token").and_then(Value::as_bool).unwrap_or(false);
    let add_eos = file.get("tokenizer.ggml.add_eos_token").and_then(Value::as_bool).unwrap_or(false);
    let bos = token_at("tokenizer.ggml.bos_token_id");
    let eos = token_at("tokenizer.ggml.eos_token_id");
    let post_processor = post_processor(file, add_bos.then_some(bos.as_deref()).flatten(), add_eos.then_some(eos.as_deref()).flatten());

    let tokenizer_json = json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": added,
        "normalizer": null,
        "pre_tokenizer": pre_tokenizer,
        "post_processor": post_processor,
        "decoder": byte_level(true, true),
        "model": {
            "type": "BPE",
            "dropout": null,
            "unk_token": null,
            "continuing_subword_prefix": "",
            "end_of_word_suffix": "",
            "fuse_unk": false,
            "byte_fallback": false,
            "ignore_merges": false,
            "vocab": vocab,
            "merges": merges,
        }
    });

    let mut config = Map::new();
    config.insert("tokenizer_class".into(), "PreTrainedTokenizerFast".into());
    config.insert("add_bos_token".into(), add_bos.into());
    config.insert("add_eos_token".into(), add_eos.into());
    for (name, key) in [
        ("bos_token", "tokenizer.ggml.bos_token_id"),
        ("eos_token", "tokenizer.ggml.eos_token_id"),
        ("unk_token", "tokenizer.ggml.unknown_token_id"),
        ("pad_token", "tokenizer.ggml.padding_token_id"),
    ] {
        config.insert(name.into(), token_at(key).map(Json::String).unwrap_or(Json::Null));
    }
    if let Some(template) = file.get("tokenizer.chat_template").and_then(Value::as_str) {
        config.insert("chat_template".into(), template.into());
    }
    config.insert("clean_up_tokenization_spaces".into(), false.into());
    Ok(TokenizerFiles { tokenizer_json, tokenizer_config: Json::Object(config) })
}

fn added_token(id: usize, content: &str, special: bool) -> Json {
    json!({
        "id": id, "content": content, "single_word": false, "lstrip": false, "rstrip": false,
        "normalized": false, "special": special,
    })
}

/// BOS/EOS added around every encoding when the file asks for them (Llama 3's BOS).
fn post_processor(file: &GgufFile, bos: Option<&str>, eos: Option<&str>) -> Json {
    let id_of =
        |t: &str| -> u64 { strings(file, "tokenizer.ggml.tokens").ok().and_then(|ts| ts.iter().position(|x| *x == t)).unwrap_or(0) as u64 };
    let mut single = Vec::new();
    let mut pair = Vec::new();
    let mut special = Map::new();
    if let Some(b) = bos {
        single.push(json!({"SpecialToken": {"id": b, "type_id": 0}}));
        pair.push(json!({"SpecialToken": {"id": b, "type_id": 0}}));
        special.insert(b.into(), json!({"id": b, "ids": [id_of(b)], "tokens": [b]}));
    }
    single.push(json!({"Sequence": {"id": "A", "type_id": 0}}));
    pair.push(json!({"Sequence": {"id": "A", "type_id": 0}}));
    if let Some(e) = eos {
        single.push(json!({"SpecialToken": {"id": e, "type_id": 0}}));
        pair.push(json!({"SpecialToken": {"id": e, "type_id": 0}}));
        special.insert(e.into(), json!({"id": e, "ids": [id_of(e)], "tokens": [e]}));
    }
    if let Some(b) = bos {
        pair.push(json!({"SpecialToken": {"id": b, "type_id": 1}}));
    }
    pair.push(json!({"Sequence": {"id": "B", "type_id": 1}}));
    if let Some(e) = eos {
        pair.push(json!({"SpecialToken": {"id": e, "type_id": 1}}));
    }
    json!({"type": "TemplateProcessing", "single": single, "pair": pair, "special_tokens": special})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_byte_alphabet_is_gpt2s() {
        let a = byte_alphabet();
        assert_eq!(a[b' ' as usize], 'Ġ');
        assert_eq!(a[b'\n' as usize], 'Ċ');
        assert_eq!(a[b'A' as usize], 'A');
        assert_eq!(a[0xff], 'ÿ');
        let mut sorted = a.to_vec();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), 256);
    }
}
