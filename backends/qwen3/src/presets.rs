//! Built-in model shapes with seeded random weights, for tests, benches and runs without a
//! downloaded checkpoint. The tiny presets use Qwen3's vocabulary size and EOS ids, so token
//! ids from a Qwen3 tokenizer are valid for them.

use crate::config::{Family, ModelConfig};

pub struct Preset {
    pub name: &'static str,
    pub about: &'static str,
    pub seed: u64,
    pub init_std: f32,
    config: fn() -> ModelConfig,
}

impl Preset {
    pub fn config(&self) -> ModelConfig {
        (self.config)()
    }
}

const QWEN3_VOCAB: usize = 151_936;
const QWEN3_EOS: [u32; 2] = [151_645, 151_643];

#[allow(clippy::too_many_arguments)]
fn qwen3(vocab: usize, hidden: usize, inter: usize, layers: usize, heads: usize, kv: usize, head_dim: usize, tied: bool) -> ModelConfig {
    ModelConfig {
        family: Family::Qwen3,
        vocab_size: vocab,
        hidden_size: hidden,
        intermediate_size: inter,
        num_hidden_layers: layers,
        num_attention_heads: heads,
        num_key_value_heads: kv,
        head_dim,
        rms_norm_eps: 1e-6,
        rope_theta: 1e6,
        tie_word_embeddings: tied,
        qkv_bias: false,
        o_bias: false,
        mlp_bias: false,
        qk_norm: true,
        max_position_embeddings: 40_960,
        bos_token_id: Some(151_643),
        eos_token_ids: QWEN3_EOS.to_vec(),
        stored_dtype: None,
    }
}

/// SmolLM2-135M's architecture (`LlamaForCausalLM`, its config.json).
fn smollm2_135m_shape() -> ModelConfig {
    ModelConfig {
        family: Family::Llama,
        vocab_size: 49_152,
        hidden_size: 576,
        intermediate_size: 1536,
        num_hidden_layers: 30,
        num_attention_heads: 9,
        num_key_value_heads: 3,
        head_dim: 64,
        rms_norm_eps: 1e-5,
        rope_theta: 1e5,
        tie_word_embeddings: true,
        qkv_bias: false,
        o_bias: false,
        mlp_bias: false,
        qk_norm: false,
        max_position_embeddings: 8192,
        bos_token_id: Some(1),
        eos_token_ids: vec![2],
        stored_dtype: None,
    }
}

pub const PRESETS: &[Preset] = &[
    Preset {
        name: "tiny",
        about: "Qwen3 shape, 2 layers, hidden 64, 4 heads / 2 KV heads of 32, Qwen3 vocab, tied (~9.8M params)",
        seed: 0,
        init_std: 0.02,
        config: || qwen3(QWEN3_VOCAB, 64, 192, 2, 4, 2, 32, true),
    },
    Preset {
        name: "tiny-vocab512",
        about: "like tiny with a 512-token vocabulary (EOS 511): fast tests",
        seed: 1,
        init_std: 0.02,
        config: || ModelConfig { eos_token_ids: vec![511], bos_token_id: None, ..qwen3(512, 64, 192, 2, 4, 2, 32, true) },
    },
    Preset {
        name: "small",
        about: "Qwen3 shape, 4 layers, hidden 256, 8 heads / 4 KV heads of 64, Qwen3 vocab, tied (~42M params)",
        seed: 2,
        init_std: 0.02,
        config: || qwen3(QWEN3_VOCAB, 256, 768, 4, 8, 4, 64, true),
    },
    Preset {
        name: "qwen3-0.6b",
        about: "Qwen3-0.6B's exact shape (SPEC.md §1.1) with random weights (596M params)",
        seed: 3,
        init_std: 0.02,
        config: || qwen3(QWEN3_VOCAB, 1024, 3072, 28, 16, 8, 128, true),
    },
    Preset {
        name: "llama-135m",
        about: "SmolLM2-135M's shape (Llama, 30 layers, hidden 576, 9 heads / 3 KV heads of 64, vocab 49,152, tied) with random weights",
        seed: 4,
        init_std: 0.02,
        config: smollm2_135m_shape,
    },
];

pub fn find(name: &str) -> Option<&'static Preset> {
    PRESETS.iter().find(|p| p.name == name)
}

pub fn names() -> Vec<&'static str> {
    PRESETS.iter().map(|p| p.name).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qwen3_0_6b_preset_has_the_real_parameter_count() {
        assert_eq!(find("qwen3-0.6b").unwrap().config().num_params(), 596_049_920);
        // SmolLM2-135M's parameter count (tied embeddings counted once).
        assert_eq!(find("llama-135m").unwrap().config().num_params(), 134_515_008);
    }
}
