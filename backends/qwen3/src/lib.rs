//! arl-qwen3 — the policy model on burn: Qwen3 (and, from the same code, Qwen2 and Llama
//! checkpoints), computed exactly as HF transformers does (SPEC.md §1).
//!
//! It owns the architecture config ([`ModelConfig`], read from an HF `config.json` in either
//! the transformers-4.51 or -5 layout), loading and saving HF checkpoint directories
//! (safetensors, single or sharded, F32/BF16/F16 files), resolving a `--model` string
//! ([`hub`]: directory, preset, or repo id in the local HF cache — nothing is downloaded),
//! seeded random [`presets`], batched KV-cache sampling ([`sample`]) that records each token's
//! log-probability under the distribution it was drawn from, and teacher-forced scoring
//! ([`score`]) that projects only the requested positions through the LM head. [`QwenPolicy`]
//! implements arl-core's [`arl_core::policy::Policy`].
//!
//! It knows nothing about tokenizers, chat templates or environments (token ids in, token ids
//! out), and no concrete backend: the model is generic over burn's `Backend` and used as
//! `Qwen3<burn::Dispatch>`, so the device (CPU/CUDA/libtorch, with or without autodiff) is
//! chosen at run time ([`device`] maps `--backend`/`--device-index`/`--dtype` to it). Weights
//! and computation are f32, bf16 or f16 ([`load_as`]); RMSNorm statistics, attention softmax,
//! logits and log-probabilities are f32 always, as in HF. Cargo features `cuda` and `tch` compile those backends into `Dispatch` (through
//! arl-core's features of the same names).

pub mod cache;
pub mod config;
pub mod crosscheck;
pub mod device;
pub mod error;
pub mod head;
pub mod hub;
pub mod layers;
pub mod model;
pub mod policy;
pub mod prefix;
pub mod presets;
pub mod sample;
pub mod score;
pub mod train;
pub mod weights;

pub use cache::KvCache;
pub use config::{Family, ModelConfig};
pub use device::{DType, DeviceError};
pub use error::ModelError;
pub use model::Qwen3;
pub use policy::QwenPolicy;
pub use prefix::PrefixCache;
pub use sample::{GenTimings, generate, generate_cached, generate_timed};
pub use score::{ScoreOutput, score};
pub use train::QwenTrainer;

use burn::Dispatch;
use burn::DispatchDevice;

/// The model on burn's run-time-dispatched backend.
pub type DispatchQwen3 = Qwen3<Dispatch>;

/// Load `source` (a directory, a preset name, or a repo id in the local HF cache) on `device`,
/// in f32.
pub fn load(source: &str, device: &DispatchDevice) -> Result<DispatchQwen3, ModelError> {
    match hub::resolve(source)? {
        hub::Source::Dir(dir) => Qwen3::load_dir(&dir, device),
        hub::Source::Preset(name) => {
            let p = presets::find(name).expect("resolved preset exists");
            Ok(Qwen3::random(p.config(), p.seed, p.init_std, device))
        }
    }
}

/// [`load`], with the weights and the computation in `dtype` (checked against the device
/// with [`device::device`]); logits, log-probabilities and entropies stay f32.
pub fn load_as(source: &str, device: &DispatchDevice, dtype: DType) -> Result<DispatchQwen3, ModelError> {
    Ok(load(source, device)?.into_dtype(device::burn_dtype(dtype)))
}

/// The default CPU device (burn-flex).
pub fn cpu() -> DispatchDevice {
    DispatchDevice::Flex(Default::default())
}
