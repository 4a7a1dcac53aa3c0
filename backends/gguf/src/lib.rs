//! arl-gguf — GGUF import: reads llama.cpp's GGUF files (versions 2 and 3), dequantizes their
//! tensors to f32 (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 and the K-quants Q2_K–Q6_K),
//! maps llama.cpp's tensor names to Hugging Face's (undoing the rotary row permutation of
//! `llama` files), and writes an HF model directory: `config.json` from the metadata,
//! `model.safetensors`, `generation_config.json`, and a `tokenizer.json` and
//! `tokenizer_config.json` (with the chat template) built from `tokenizer.ggml.*` as HF
//! transformers' own GGUF loader builds them. Architectures: llama, qwen2, qwen3.
//!
//! [`known`] makes GGUF files usable wherever `--model` is taken: a `.gguf` path or a known
//! model's name (`smollm2-135m`) resolves to a directory converted once into arl's cache.
//!
//! It knows nothing of tensors on a device, of burn, or of chat rendering: bytes in, an HF
//! directory out. No cargo features.

mod convert;
mod error;
pub mod file;
mod hf_config;
pub mod known;
mod names;
pub mod quant;
mod tokenizer;

pub use convert::{Converted, convert, sha256_file};
pub use error::GgufError;
pub use file::GgufFile;
pub use hf_config::Arch;
pub use quant::GgmlType;
