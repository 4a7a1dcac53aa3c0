//! LoRA adapters (Hu et al. 2021) as PEFT configures them: a `[lora]` section turns them on,
//! freezing the base weights so that only the adapters (and their AdamW moments) train.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The linear layers of a Qwen3/Qwen2/Llama decoder layer, by their Hugging Face names: the
/// valid `lora.target_modules`.
pub const LORA_TARGETS: [&str; 7] = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"];

/// LoRA settings (PEFT's `LoraConfig`: `r`, `lora_alpha`, `lora_dropout`, `target_modules`,
/// `use_rslora`). Each targeted linear layer W gets `W x + s · B A dropout(x)` with A `[r, in]`
/// Kaiming-uniform and B `[out, r]` zero at the start, so training starts at the base model;
/// s = alpha / rank (alpha / √rank with `use_rslora`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct LoraConfig {
    /// Rank r of every adapter (≥ 1).
    pub rank: u32,
    /// α: adapters are scaled by alpha / rank (alpha / √rank with `use_rslora`); > 0.
    pub alpha: f64,
    /// Dropout on the adapters' input while training (PEFT's `lora_dropout`), 0 ≤ p < 1;
    /// sampling and scoring without gradients never drop.
    pub dropout: f64,
    /// The linear layers that get an adapter, by Hugging Face name: q_proj, k_proj, v_proj,
    /// o_proj, gate_proj, up_proj, down_proj (in every decoder layer).
    pub target_modules: Vec<String>,
    /// Rank-stabilized LoRA (Kalajdzievski 2023): scale by alpha / √rank instead of alpha / rank.
    pub use_rslora: bool,
}

impl Default for LoraConfig {
    fn default() -> Self {
        Self {
            rank: 16,
            alpha: 16.0,
            dropout: 0.0,
            target_modules: LORA_TARGETS.iter().map(|s| s.to_string()).collect(),
            use_rslora: false,
        }
    }
}

impl LoraConfig {
    /// The factor on the adapters' output.
    pub fn scale(&self) -> f64 {
        lora_scale(self.rank as usize, self.alpha, self.use_rslora)
    }
}

/// alpha / r, or alpha / √r for rank-stabilized LoRA (PEFT `LoraLayer.update_layer`).
pub fn lora_scale(rank: usize, alpha: f64, use_rslora: bool) -> f64 {
    if use_rslora { alpha / (rank as f64).sqrt() } else { alpha / rank as f64 }
}
