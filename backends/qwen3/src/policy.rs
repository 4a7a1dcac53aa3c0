//! [`QwenPolicy`]: the model behind arl-core's object-safe [`Policy`] trait.

use arl_core::policy::{Generation, Policy, PolicyError, SamplingParams, ScoreParams, Scores};
use burn::module::AutodiffModule;
use burn::{Dispatch, DispatchDevice};

use crate::{DispatchQwen3, ModelError, sample, score};

pub struct QwenPolicy {
    pub model: DispatchQwen3,
}

impl QwenPolicy {
    /// Load `source` (directory, preset or cached repo id) on `device`.
    pub fn load(source: &str, device: &DispatchDevice) -> Result<Self, ModelError> {
        Ok(Self { model: crate::load(source, device)? })
    }

    /// As [`QwenPolicy::load`], computing in `dtype`.
    pub fn load_as(source: &str, device: &DispatchDevice, dtype: crate::DType) -> Result<Self, ModelError> {
        Ok(Self { model: crate::load_as(source, device, dtype)? })
    }

    /// As [`QwenPolicy::load_as`], with a LoRA adapter directory on top, unmerged.
    pub fn load_adapted(
        source: &str,
        adapter: Option<&std::path::Path>,
        device: &DispatchDevice,
        dtype: crate::DType,
    ) -> Result<Self, ModelError> {
        Ok(Self { model: crate::load_adapted(source, adapter, device, dtype)? })
    }
}

fn err(e: ModelError) -> PolicyError {
    PolicyError(e.to_string())
}

impl Policy for QwenPolicy {
    /// On a training (autodiff) device, samples with the inner module (`valid()`), so decode
    /// steps record no autodiff graph.
    fn generate(&mut self, prompts: &[Vec<u32>], params: &SamplingParams) -> Result<Vec<Generation>, PolicyError> {
        if matches!(self.model.device(), DispatchDevice::Autodiff(_)) {
            let inner: DispatchQwen3 = self.model.valid();
            return sample::generate::<Dispatch>(&inner, prompts, params).map_err(err);
        }
        sample::generate::<Dispatch>(&self.model, prompts, params).map_err(err)
    }

    fn score(&self, sequences: &[Vec<u32>], positions: Option<&[Vec<usize>]>, params: ScoreParams) -> Result<Scores, PolicyError> {
        let out = score::score::<Dispatch>(&self.model, sequences, positions, params).map_err(err)?;
        Ok(Scores { logprobs: out.logprobs, entropy: out.entropy })
    }
}
