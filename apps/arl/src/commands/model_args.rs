//! `--model` and `--backend`, shared by the commands that run a model (`score`, `generate`,
//! `bench`). Only the CPU device is wired here; choosing cuda/tch devices is issue #5.

use anyhow::Context;
use arl_core::BackendKind;
use arl_qwen3::DispatchQwen3;
use burn::DispatchDevice;

#[derive(Debug, Clone, clap::Args)]
pub struct ModelArgs {
    /// Model directory, Hugging Face repo id (local cache only) or preset (tiny,
    /// tiny-vocab512, small, qwen3-0.6b).
    #[arg(long, default_value = "tiny")]
    pub model: String,
    /// cpu | cuda | tch | tch-cuda.
    #[arg(long, default_value = "cpu")]
    pub backend: String,
}

impl ModelArgs {
    pub fn device(&self) -> anyhow::Result<DispatchDevice> {
        let kind: BackendKind = serde_json::from_value(serde_json::Value::String(self.backend.clone()))
            .map_err(|_| anyhow::anyhow!("unknown backend `{}`; valid backends: cpu, cuda, tch, tch-cuda", self.backend))?;
        kind.ensure_compiled_in().map_err(anyhow::Error::msg)?;
        match kind {
            BackendKind::Cpu => Ok(arl_qwen3::cpu()),
            other => anyhow::bail!("backend `{other}` is compiled in but not wired to a device yet (issue #5); use --backend cpu"),
        }
    }

    /// Load the model on `device`, with the source in the error context.
    pub fn load_on(&self, device: &DispatchDevice) -> anyhow::Result<DispatchQwen3> {
        arl_qwen3::load(&self.model, device).with_context(|| format!("loading model `{}`", self.model))
    }
}
