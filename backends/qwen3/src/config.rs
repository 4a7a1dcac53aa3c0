//! The architecture, read from a checkpoint's `config.json` (field names as HF writes them)
//! and `generation_config.json`. Unknown keys are ignored: these files belong to HF and carry
//! many fields that do not change the computation.

use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::ModelError;

/// Which HF family the checkpoint is; decides the defaults HF applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Family {
    /// `Qwen3ForCausalLM`: per-head q/k RMSNorm, explicit `head_dim`.
    Qwen3,
    /// `Qwen2ForCausalLM`: bias on q/k/v (hard-coded), none on o.
    Qwen2,
    /// `LlamaForCausalLM` (and Mistral without sliding window): `attention_bias` on q/k/v/o.
    Llama,
}

impl Family {
    pub const SUPPORTED: &'static str = "Qwen3ForCausalLM, Qwen2ForCausalLM, LlamaForCausalLM, MistralForCausalLM";

    fn from_architecture(arch: &str) -> Option<Self> {
        match arch {
            "Qwen3ForCausalLM" => Some(Self::Qwen3),
            "Qwen2ForCausalLM" => Some(Self::Qwen2),
            "LlamaForCausalLM" | "MistralForCausalLM" => Some(Self::Llama),
            _ => None,
        }
    }

    fn from_model_type(t: &str) -> Option<Self> {
        match t {
            "qwen3" => Some(Self::Qwen3),
            "qwen2" => Some(Self::Qwen2),
            "llama" | "mistral" => Some(Self::Llama),
            _ => None,
        }
    }

    pub fn architecture(self) -> &'static str {
        match self {
            Self::Qwen3 => "Qwen3ForCausalLM",
            Self::Qwen2 => "Qwen2ForCausalLM",
            Self::Llama => "LlamaForCausalLM",
        }
    }

    pub fn model_type(self) -> &'static str {
        match self {
            Self::Qwen3 => "qwen3",
            Self::Qwen2 => "qwen2",
            Self::Llama => "llama",
        }
    }
}

/// Everything the forward pass needs, resolved (HF defaults applied).
#[derive(Clone, Debug, PartialEq)]
pub struct ModelConfig {
    pub family: Family,
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub num_key_value_heads: usize,
    pub head_dim: usize,
    pub rms_norm_eps: f64,
    pub rope_theta: f64,
    pub tie_word_embeddings: bool,
    /// Bias on q/k/v.
    pub qkv_bias: bool,
    /// Bias on o_proj.
    pub o_bias: bool,
    /// Bias on gate/up/down (Llama `mlp_bias`).
    pub mlp_bias: bool,
    /// Per-head RMSNorm on q and k before rotary (Qwen3).
    pub qk_norm: bool,
    pub max_position_embeddings: usize,
    pub bos_token_id: Option<u32>,
    /// EOS ids from config.json and generation_config.json together.
    pub eos_token_ids: Vec<u32>,
    /// The checkpoint's stored dtype (`torch_dtype`/`dtype`), for information.
    pub stored_dtype: Option<String>,
}

/// config.json as written by transformers 4.51 (top-level `rope_theta`) or 5
/// (`rope_parameters`); only the fields we read.
#[derive(Debug, Deserialize)]
struct HfConfig {
    #[serde(default)]
    architectures: Vec<String>,
    #[serde(default)]
    model_type: Option<String>,
    vocab_size: usize,
    hidden_size: usize,
    intermediate_size: usize,
    num_hidden_layers: usize,
    num_attention_heads: usize,
    num_key_value_heads: Option<usize>,
    head_dim: Option<usize>,
    #[serde(default = "default_eps")]
    rms_norm_eps: f64,
    rope_theta: Option<f64>,
    rope_scaling: Option<Value>,
    rope_parameters: Option<Map<String, Value>>,
    tie_word_embeddings: Option<bool>,
    attention_bias: Option<bool>,
    mlp_bias: Option<bool>,
    hidden_act: Option<String>,
    use_sliding_window: Option<bool>,
    max_position_embeddings: Option<usize>,
    bos_token_id: Option<u32>,
    eos_token_id: Option<IdOrIds>,
    torch_dtype: Option<String>,
    dtype: Option<String>,
}

fn default_eps() -> f64 {
    1e-6
}

/// An id or a list of ids, as `eos_token_id` is written.
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
pub enum IdOrIds {
    One(u32),
    Many(Vec<u32>),
}

impl IdOrIds {
    pub fn ids(&self) -> Vec<u32> {
        match self {
            Self::One(i) => vec![*i],
            Self::Many(v) => v.clone(),
        }
    }
}

/// The generation_config.json fields the sampler uses.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct GenerationConfig {
    pub eos_token_id: Option<IdOrIds>,
    pub temperature: Option<f64>,
    pub top_k: Option<usize>,
    pub top_p: Option<f64>,
}

impl ModelConfig {
    /// Read `dir/config.json` and, when present, `dir/generation_config.json`.
    pub fn from_dir(dir: &Path) -> Result<Self, ModelError> {
        let path = dir.join("config.json");
        let text = std::fs::read_to_string(&path).map_err(|e| ModelError::missing(&path, e))?;
        let mut cfg = Self::from_json(&text).map_err(|e| e.in_file(&path))?;
        let gen_path = dir.join("generation_config.json");
        if gen_path.exists() {
            let text = std::fs::read_to_string(&gen_path).map_err(|e| ModelError::missing(&gen_path, e))?;
            let gen_cfg: GenerationConfig = serde_json::from_str(&text)
                .map_err(|e| ModelError::Config { path: gen_path.display().to_string(), message: e.to_string() })?;
            if let Some(ids) = gen_cfg.eos_token_id {
                for id in ids.ids() {
                    if !cfg.eos_token_ids.contains(&id) {
                        cfg.eos_token_ids.push(id);
                    }
                }
            }
        }
        Ok(cfg)
    }

    /// Parse the text of a config.json.
    pub fn from_json(text: &str) -> Result<Self, ModelError> {
        let config_err = |message: String| ModelError::Config { path: "config.json".into(), message };
        let hf: HfConfig = serde_json::from_str(text).map_err(|e| config_err(e.to_string()))?;
        let family = hf
            .architectures
            .iter()
            .find_map(|a| Family::from_architecture(a))
            .or_else(|| hf.model_type.as_deref().and_then(Family::from_model_type))
            .ok_or_else(|| ModelError::UnsupportedArchitecture {
                found: if hf.architectures.is_empty() {
                    hf.model_type.clone().unwrap_or_else(|| "(none given)".into())
                } else {
                    hf.architectures.join(", ")
                },
            })?;
        if let Some(act) = hf.hidden_act.as_deref()
            && act != "silu"
        {
            return Err(config_err(format!("hidden_act `{act}` is not supported (only silu)")));
        }
        if hf.use_sliding_window == Some(true) {
            return Err(config_err("use_sliding_window = true is not supported".into()));
        }
        // Rotary: transformers 5 nests theta and the scaling type in `rope_parameters`.
        let mut rope_type = None;
        let mut theta = hf.rope_theta;
        if let Some(rp) = &hf.rope_parameters {
            theta = rp.get("rope_theta").and_then(Value::as_f64).or(theta);
            rope_type = rp.get("rope_type").and_then(Value::as_str).map(str::to_string);
        }
        if let Some(Value::Object(rs)) = &hf.rope_scaling {
            rope_type = rs.get("rope_type").or_else(|| rs.get("type")).and_then(Value::as_str).map(str::to_string);
        }
        if let Some(t) = rope_type
            && t != "default"
        {
            return Err(config_err(format!("rope scaling `{t}` is not supported (only plain RoPE)")));
        }
        let heads = hf.num_attention_heads;
        let kv_heads = hf.num_key_value_heads.unwrap_or(heads);
        if heads == 0 || kv_heads == 0 || !heads.is_multiple_of(kv_heads) {
            return Err(config_err(format!(
                "num_attention_heads ({heads}) must be a positive multiple of num_key_value_heads ({kv_heads})"
            )));
        }
        let head_dim = hf.head_dim.unwrap_or(hf.hidden_size / heads);
        if !head_dim.is_multiple_of(2) {
            return Err(config_err(format!("head_dim {head_dim} must be even for rotary embeddings")));
        }
        let attention_bias = hf.attention_bias.unwrap_or(false);
        let (qkv_bias, o_bias, qk_norm) = match family {
            Family::Qwen3 => (attention_bias, attention_bias, true),
            Family::Qwen2 => (true, false, false),
            Family::Llama => (attention_bias, attention_bias, false),
        };
        Ok(Self {
            family,
            vocab_size: hf.vocab_size,
            hidden_size: hf.hidden_size,
            intermediate_size: hf.intermediate_size,
            num_hidden_layers: hf.num_hidden_layers,
            num_attention_heads: heads,
            num_key_value_heads: kv_heads,
            head_dim,
            rms_norm_eps: hf.rms_norm_eps,
            rope_theta: theta.unwrap_or(10_000.0),
            tie_word_embeddings: hf.tie_word_embeddings.unwrap_or(false),
            qkv_bias,
            o_bias,
            mlp_bias: family == Family::Llama && hf.mlp_bias.unwrap_or(false),
            qk_norm,
            max_position_embeddings: hf.max_position_embeddings.unwrap_or(32_768),
            bos_token_id: hf.bos_token_id,
            eos_token_ids: hf.eos_token_id.map(|e| e.ids()).unwrap_or_default(),
            stored_dtype: hf.dtype.or(hf.torch_dtype),
        })
    }

    /// The config.json arl writes: the transformers-5 layout (`rope_parameters`), f32.
    pub fn to_hf_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("architectures".into(), serde_json::json!([self.family.architecture()]));
        m.insert("model_type".into(), self.family.model_type().into());
        m.insert("vocab_size".into(), self.vocab_size.into());
        m.insert("hidden_size".into(), self.hidden_size.into());
        m.insert("intermediate_size".into(), self.intermediate_size.into());
        m.insert("num_hidden_layers".into(), self.num_hidden_layers.into());
        m.insert("num_attention_heads".into(), self.num_attention_heads.into());
        m.insert("num_key_value_heads".into(), self.num_key_value_heads.into());
        m.insert("head_dim".into(), self.head_dim.into());
        m.insert("hidden_act".into(), "silu".into());
        m.insert("rms_norm_eps".into(), self.rms_norm_eps.into());
        m.insert("rope_theta".into(), self.rope_theta.into());
        m.insert("rope_parameters".into(), serde_json::json!({"rope_type": "default", "rope_theta": self.rope_theta}));
        m.insert("tie_word_embeddings".into(), self.tie_word_embeddings.into());
        match self.family {
            Family::Qwen3 | Family::Llama => {
                m.insert("attention_bias".into(), self.qkv_bias.into());
            }
            Family::Qwen2 => {
                m.insert("use_sliding_window".into(), false.into());
            }
        }
        if self.family == Family::Llama {
            m.insert("mlp_bias".into(), self.mlp_bias.into());
        }
        m.insert("max_position_embeddings".into(), self.max_position_embeddings.into());
        if let Some(b) = self.bos_token_id {
            m.insert("bos_token_id".into(), b.into());
        }
        match self.eos_token_ids.as_slice() {
            [] => {}
            [one] => {
                m.insert("eos_token_id".into(), (*one).into());
            }
            many => {
                m.insert("eos_token_id".into(), many.to_vec().into());
            }
        }
        m.insert("dtype".into(), "float32".into());
        m.insert("torch_dtype".into(), "float32".into());
        Value::Object(m)
    }

    pub fn num_kv_groups(&self) -> usize {
        self.num_attention_heads / self.num_key_value_heads
    }

    /// Parameter count (unique tensors; a tied head counted once).
    pub fn num_params(&self) -> usize {
        let (h, i, hd) = (self.hidden_size, self.intermediate_size, self.head_dim);
        let (q, kv) = (self.num_attention_heads * hd, self.num_key_value_heads * hd);
        let mut layer = h * q + 2 * h * kv + q * h + 3 * h * i + 2 * h;
        if self.qkv_bias {
            layer += q + 2 * kv;
        }
        if self.o_bias {
            layer += h;
        }
        if self.mlp_bias {
            layer += 2 * i + h;
        }
        if self.qk_norm {
            layer += 2 * hd;
        }
        let head = if self.tie_word_embeddings { 0 } else { self.vocab_size * h };
        self.vocab_size * h + self.num_hidden_layers * layer + h + head
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Qwen3-0.6B's config.json as shipped (SPEC.md §1.1).
    pub const QWEN3_0_6B: &str = r#"{
      "architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
      "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu",
      "hidden_size": 1024, "initializer_range": 0.02, "intermediate_size": 3072,
      "max_position_embeddings": 40960, "max_window_layers": 28, "model_type": "qwen3",
      "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 8,
      "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 1000000, "sliding_window": null,
      "tie_word_embeddings": true, "torch_dtype": "bfloat16", "transformers_version": "4.51.0",
      "use_cache": true, "use_sliding_window": false, "vocab_size": 151936
    }"#;

    #[test]
    fn qwen3_0_6b_config_parses_with_the_real_values() {
        let c = ModelConfig::from_json(QWEN3_0_6B).unwrap();
        assert_eq!(c.family, Family::Qwen3);
        assert_eq!((c.hidden_size, c.intermediate_size, c.num_hidden_layers), (1024, 3072, 28));
        assert_eq!((c.num_attention_heads, c.num_key_value_heads, c.head_dim), (16, 8, 128));
        assert_eq!(c.rope_theta, 1e6);
        assert_eq!(c.rms_norm_eps, 1e-6);
        assert!(c.tie_word_embeddings && c.qk_norm && !c.qkv_bias && !c.o_bias);
        assert_eq!(c.eos_token_ids, vec![151645]);
        assert_eq!(c.num_params(), 596_049_920, "SPEC.md §1.1 unique parameter count");
    }

    #[test]
    fn rope_parameters_layout_gives_theta() {
        let text = QWEN3_0_6B.replace(r#""rope_theta": 1000000"#, r#""rope_parameters": {"rope_type": "default", "rope_theta": 5000.0}"#);
        assert_eq!(ModelConfig::from_json(&text).unwrap().rope_theta, 5000.0);
    }

    #[test]
    fn saved_config_parses_back_to_the_same_config() {
        let c = ModelConfig::from_json(QWEN3_0_6B).unwrap();
        let again = ModelConfig::from_json(&c.to_hf_json().to_string()).unwrap();
        assert_eq!(ModelConfig { stored_dtype: None, ..c }, ModelConfig { stored_dtype: None, ..again });
    }

    #[test]
    fn unsupported_architecture_is_named() {
        let text = QWEN3_0_6B.replace("Qwen3ForCausalLM", "GPT2LMHeadModel").replace(r#""qwen3""#, r#""gpt2""#);
        let err = ModelConfig::from_json(&text).unwrap_err().to_string();
        assert!(err.contains("GPT2LMHeadModel") && err.contains("Qwen3ForCausalLM"), "{err}");
    }

    #[test]
    fn rope_scaling_other_than_default_is_refused() {
        let text = QWEN3_0_6B.replace(r#""rope_scaling": null"#, r#""rope_scaling": {"rope_type": "llama3", "factor": 8.0}"#);
        let err = ModelConfig::from_json(&text).unwrap_err().to_string();
        assert!(err.contains("llama3"), "{err}");
    }
}
