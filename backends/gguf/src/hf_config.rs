//! The architecture as HF's `config.json` and `generation_config.json`, from llama.cpp's
//! metadata keys (`<arch>.block_count`, `<arch>.attention.head_count`, …) and the tensor
//! table (vocabulary size, biases, tied embeddings).

use serde_json::{Value as Json, json};

use crate::GgufError;
use crate::file::GgufFile;

/// The GGUF architectures arl's model code implements, and their HF names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arch {
    Llama,
    Qwen2,
    Qwen3,
}

impl Arch {
    pub const SUPPORTED: &'static str = "llama, qwen2, qwen3";

    pub fn from_gguf(name: &str) -> Option<Self> {
        match name {
            "llama" => Some(Self::Llama),
            "qwen2" => Some(Self::Qwen2),
            "qwen3" => Some(Self::Qwen3),
            _ => None,
        }
    }

    pub fn gguf_name(self) -> &'static str {
        match self {
            Self::Llama => "llama",
            Self::Qwen2 => "qwen2",
            Self::Qwen3 => "qwen3",
        }
    }

    fn hf(self) -> (&'static str, &'static str) {
        match self {
            Self::Llama => ("LlamaForCausalLM", "llama"),
            Self::Qwen2 => ("Qwen2ForCausalLM", "qwen2"),
            Self::Qwen3 => ("Qwen3ForCausalLM", "qwen3"),
        }
    }
}

/// What the conversion needs to know of the shape, besides the JSON it writes.
#[derive(Clone, Debug, PartialEq)]
pub struct Shape {
    pub arch: Arch,
    pub n_heads: usize,
    pub n_kv_heads: usize,
    pub head_dim: usize,
    pub tied: bool,
}

/// `(config.json, generation_config.json, shape)`.
pub fn hf_config(file: &GgufFile) -> Result<(Json, Json, Shape), GgufError> {
    let meta_err = |key: &str, problem: &str| GgufError::Metadata { path: file.path.clone(), key: key.into(), problem: problem.into() };
    let arch_name = file
        .get("general.architecture")
        .and_then(|v| v.as_str())
        .ok_or_else(|| meta_err("general.architecture", "is missing (not a model file?)"))?;
    let arch = Arch::from_gguf(arch_name).ok_or_else(|| GgufError::Unsupported {
        path: file.path.clone(),
        what: format!("architecture `{arch_name}`"),
        supported: Arch::SUPPORTED.into(),
    })?;
    let key = |k: &str| format!("{arch_name}.{k}");
    let uint = |k: &str| -> Result<usize, GgufError> {
        let full = key(k);
        let v = file.get(&full).ok_or_else(|| meta_err(&full, "is missing"))?;
        v.as_u64().map(|n| n as usize).ok_or_else(|| meta_err(&full, &format!("is {v:?}, not an unsigned integer")))
    };
    let float = |k: &str| -> Result<Option<f64>, GgufError> {
        let full = key(k);
        match file.get(&full) {
            None => Ok(None),
            Some(v) => v.as_f64().map(Some).ok_or_else(|| meta_err(&full, &format!("is {v:?}, not a number"))),
        }
    };
    for scaling in ["rope.scaling.type", "rope.scaling.factor"] {
        if let Some(v) = file.get(&key(scaling)) {
            let none = v.as_str() == Some("none") || v.as_str() == Some("") || (scaling.ends_with("factor") && v.as_f64() == Some(1.0));
            if !none {
                return Err(GgufError::Unsupported {
                    path: file.path.clone(),
                    what: format!("rope scaling ({} = {v:?})", key(scaling)),
                    supported: "plain RoPE".into(),
                });
            }
        }
    }
    if file.tensor("rope_freqs.weight").is_some() {
        return Err(GgufError::Unsupported {
            path: file.path.clone(),
            what: "rope scaling (a rope_freqs.weight tensor, as Llama 3.1+ files have)".into(),
            supported: "plain RoPE".into(),
        });
    }

    let hidden = uint("embedding_length")?;
    let n_layers = uint("block_count")?;
    let n_heads = uint("attention.head_count")?;
    let n_kv_heads = match file.get(&key("attention.head_count_kv")) {
        None => n_heads,
        Some(_) => uint("attention.head_count_kv")?,
    };
    let head_dim = match file.get(&key("attention.key_length")) {
        Some(_) => uint("attention.key_length")?,
        None if n_heads > 0 && hidden % n_heads == 0 => hidden / n_heads,
        None => return Err(meta_err(&key("attention.key_length"), "is missing and the hidden size is not a multiple of the heads")),
    };
    if n_heads == 0 || n_kv_heads == 0 || n_heads % n_kv_heads != 0 || head_dim % 2 != 0 {
        return Err(meta_err(&key("attention.head_count"), &format!("{n_heads} heads / {n_kv_heads} KV heads of {head_dim} do not fit")));
    }
    let embed = file
        .tensor("token_embd.weight")
        .ok_or_else(|| GgufError::Tensor { path: file.path.clone(), message: "has no token_embd.weight tensor".into() })?;
    let shape = embed.hf_shape();
    if shape.len() != 2 || shape[1] != hidden {
        return Err(GgufError::Tensor {
            path: file.path.clone(),
            message: format!("token_embd.weight is {shape:?}, expected [vocab, {hidden}]"),
        });
    }
    let vocab = shape[0];
    let tied = file.tensor("output.weight").is_none();
    let has = |name: &str| file.tensor(name).is_some();
    let attention_bias = has("blk.0.attn_q.bias");
    let mlp_bias = has("blk.0.ffn_gate.bias");
    let (architecture, model_type) = arch.hf();
    let rms_eps = float("attention.layer_norm_rms_epsilon")?.unwrap_or(1e-6);
    let rope_theta = float("rope.freq_base")?.unwrap_or(10_000.0);
    let context = uint("context_length").unwrap_or(4096);
    let bos = file.get("tokenizer.ggml.bos_token_id").and_then(|v| v.as_u64());
    let eos = file.get("tokenizer.ggml.eos_token_id").and_then(|v| v.as_u64());
    let pad = file.get("tokenizer.ggml.padding_token_id").and_then(|v| v.as_u64());

    let mut config = json!({
        "architectures": [architecture],
        "model_type": model_type,
        "vocab_size": vocab,
        "hidden_size": hidden,
        "intermediate_size": uint("feed_forward_length")?,
        "num_hidden_layers": n_layers,
        "num_attention_heads": n_heads,
        "num_key_value_heads": n_kv_heads,
        "head_dim": head_dim,
        "hidden_act": "silu",
        "rms_norm_eps": rms_eps,
        "rope_theta": rope_theta,
        "rope_scaling": null,
        "max_position_embeddings": context,
        "tie_word_embeddings": tied,
        "bos_token_id": bos,
        "eos_token_id": eos,
        "pad_token_id": pad,
        "torch_dtype": "float32",
    });
    let map = config.as_object_mut().expect("an object");
    match arch {
        Arch::Llama => {
            map.insert("attention_bias".into(), attention_bias.into());
            map.insert("mlp_bias".into(), mlp_bias.into());
        }
        Arch::Qwen2 | Arch::Qwen3 => {
            map.insert("use_sliding_window".into(), false.into());
            map.insert("sliding_window".into(), Json::Null);
            map.insert("max_window_layers".into(), n_layers.into());
            if arch == Arch::Qwen3 {
                map.insert("attention_bias".into(), attention_bias.into());
            }
        }
    }
    let generation = json!({ "bos_token_id": bos, "eos_token_id": eos, "pad_token_id": pad });
    Ok((config, generation, Shape { arch, n_heads, n_kv_heads, head_dim, tied }))
}
