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

pub mod adapter;
pub mod cache;
pub mod config;
pub mod crosscheck;
pub mod device;
pub mod error;
pub mod fused;
pub mod head;
pub mod host_head;
pub mod hub;
pub mod layers;
pub mod lora;
pub mod model;
pub mod policy;
pub mod prefix;
pub mod presets;
pub mod sample;
pub mod score;
pub mod train;
pub mod weights;

pub use adapter::AdapterInfo;
pub use cache::KvCache;
pub use config::{Family, ModelConfig};
pub use device::{DType, DeviceError};
pub use error::ModelError;
pub use model::Qwen3;
pub use policy::QwenPolicy;
pub use prefix::PrefixCache;
pub use sample::{GenTimings, generate, generate_cached, generate_timed};
pub use score::{ScoreOutput, score};
pub use train::{QwenTrainer, TrainSetup};

use std::path::{Path, PathBuf};

use burn::Dispatch;
use burn::DispatchDevice;

/// The model on burn's run-time-dispatched backend.
pub type DispatchQwen3 = Qwen3<Dispatch>;

/// Load `source` (a directory, a preset name, or a repo id in the local HF cache) on `device`,
/// in f32. A directory that holds only a LoRA adapter loads its base model
/// (`base_model_name_or_path`) with the adapter on top (see [`load_adapted`]).
pub fn load(source: &str, device: &DispatchDevice) -> Result<DispatchQwen3, ModelError> {
    load_adapted(source, None, device, DType::F32)
}

/// [`load`], with the weights and the computation in `dtype` (checked against the device
/// with [`device::device`]); logits, log-probabilities and entropies stay f32.
pub fn load_as(source: &str, device: &DispatchDevice, dtype: DType) -> Result<DispatchQwen3, ModelError> {
    load_adapted(source, None, device, dtype)
}

/// The base weights of `source` (no adapter), in f32.
pub fn load_base(source: &str, device: &DispatchDevice) -> Result<DispatchQwen3, ModelError> {
    match hub::resolve(source)? {
        hub::Source::Dir(dir) => Qwen3::load_dir(&dir, device),
        hub::Source::Preset(name) => {
            let p = presets::find(name).expect("resolved preset exists");
            Ok(Qwen3::random(p.config(), p.seed, p.init_std, device))
        }
    }
}

/// The base model and the adapter directory a `--model`/`--adapter` pair names: `source`
/// itself, or — when `source` is a directory holding only an adapter (`adapter_config.json`,
/// no `config.json`, as arl's LoRA checkpoints) — the base it names, with `source` as the
/// adapter.
pub fn resolve_adapter(source: &str, adapter: Option<&Path>) -> Result<(String, Option<PathBuf>), ModelError> {
    let dir = Path::new(source);
    if !(dir.is_dir() && adapter::is_adapter_dir(dir) && !dir.join("config.json").exists()) {
        return Ok((source.to_string(), adapter.map(Path::to_path_buf)));
    }
    let fail = |message: String| ModelError::Adapter { path: dir.display().to_string(), message };
    if let Some(other) = adapter {
        return Err(fail(format!(
            "is an adapter directory itself, and --adapter {} names another; pass the base model with --model",
            other.display()
        )));
    }
    let Some(base) = adapter::base_of(dir)? else {
        return Err(fail("holds an adapter that names no base model (base_model_name_or_path); pass the base with --model and this directory with --adapter".into()));
    };
    if Path::new(&base).is_dir() && adapter::is_adapter_dir(Path::new(&base)) && !Path::new(&base).join("config.json").exists() {
        return Err(fail(format!("names base model {base}, which is an adapter too; pass the base model with --model")));
    }
    Ok((base, Some(dir.to_path_buf())))
}

/// `source` in `dtype` with a LoRA adapter on top (unmerged, f32): `adapter`, or the one
/// `source` itself is ([`resolve_adapter`]).
pub fn load_adapted(source: &str, adapter: Option<&Path>, device: &DispatchDevice, dtype: DType) -> Result<DispatchQwen3, ModelError> {
    let (base, adapter) = resolve_adapter(source, adapter)?;
    let mut model = load_base(&base, device)?.into_dtype(device::burn_dtype(dtype));
    if let Some(dir) = adapter {
        model.load_adapter(&dir, None)?;
    }
    Ok(model)
}

/// The default CPU device (burn-flex).
pub fn cpu() -> DispatchDevice {
    DispatchDevice::Flex(Default::default())
}
