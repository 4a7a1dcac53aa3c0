//! `--model`, `--adapter`, `--backend`, `--device-index` and `--dtype`, shared by the commands
//! that run a model (`score`, `generate`, `bench`, `crosscheck`). The device mapping itself is
//! `arl_qwen3::device`.

use anyhow::Context;
use arl_qwen3::{DType, DispatchQwen3};
use burn::DispatchDevice;

#[derive(Debug, Clone, clap::Args)]
pub struct ModelArgs {
    /// Model directory, GGUF file, Hugging Face repo id (local cache only) or preset
    /// (smollm2-135m, a real model; tiny, tiny-vocab512, small, qwen3-0.6b, llama-135m, random
    /// weights).
    #[arg(long, default_value = "tiny")]
    pub model: String,
    /// A LoRA adapter directory (adapter_config.json + adapter_model.safetensors, arl's or
    /// PEFT's) applied on --model, unmerged.
    #[arg(long, value_name = "DIR")]
    pub adapter: Option<std::path::PathBuf>,
    /// cpu | cuda | tch | tch-cuda (`arl list` shows those compiled in).
    #[arg(long, default_value = "cpu")]
    pub backend: String,
    #[command(flatten)]
    pub device: DeviceArgs,
}

/// Which GPU and which float type; shared with commands that take several backends.
#[derive(Debug, Clone, clap::Args)]
pub struct DeviceArgs {
    /// GPU number for cuda / tch-cuda.
    #[arg(long, default_value_t = 0)]
    pub device_index: usize,
    /// f32 | bf16 | f16: the weights' and compute's float type (logprobs always f32).
    #[arg(long, default_value = "f32")]
    pub dtype: String,
}

impl DeviceArgs {
    pub fn device(&self, backend: &str) -> anyhow::Result<DispatchDevice> {
        Ok(arl_qwen3::device::device_from_args(backend, self.device_index, &self.dtype)?)
    }

    pub fn dtype(&self) -> anyhow::Result<DType> {
        Ok(arl_qwen3::device::parse_dtype(&self.dtype)?)
    }
}

impl ModelArgs {
    pub fn device(&self) -> anyhow::Result<DispatchDevice> {
        self.device.device(&self.backend)
    }

    /// Load the model (and `--adapter`) on `device` in `--dtype`, with the source in the
    /// error context.
    pub fn load_on(&self, device: &DispatchDevice) -> anyhow::Result<DispatchQwen3> {
        load(&self.model, self.adapter.as_deref(), device, self.device.dtype()?)
    }
}

pub fn load(model: &str, adapter: Option<&std::path::Path>, device: &DispatchDevice, dtype: DType) -> anyhow::Result<DispatchQwen3> {
    arl_qwen3::load_adapted(model, adapter, device, dtype).with_context(|| match adapter {
        Some(a) => format!("loading model `{model}` with adapter {}", a.display()),
        None => format!("loading model `{model}`"),
    })
}
