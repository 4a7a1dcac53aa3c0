//! [`QwenPolicy`]: the model behind arl-core's object-safe [`Policy`] trait.

use arl_core::policy::{Generation, Policy, PolicyError, SamplingParams, ScoreParams, Scores};
use burn::module::AutodiffModule;
use burn::{Dispatch, DispatchDevice};

use crate::{DispatchQwen3, ModelError, PrefixCache, sample, score};

pub struct QwenPolicy {
    pub model: DispatchQwen3,
    /// Keys and values of earlier calls' rows (see [`crate::prefix`]); cleared when `model`
    /// is replaced through [`QwenPolicy::set_model`].
    cache: PrefixCache<Dispatch>,
    prefilled: u64,
}

impl QwenPolicy {
    /// Load `source` (directory, preset or cached repo id) on `device`.
    pub fn load(source: &str, device: &DispatchDevice) -> Result<Self, ModelError> {
        Ok(Self::new(crate::load(source, device)?))
    }

    pub fn new(model: DispatchQwen3) -> Self {
        Self { model, cache: PrefixCache::default(), prefilled: 0 }
    }

    /// Replace the weights (and drop the cached keys and values of the old ones).
    pub fn set_model(&mut self, model: DispatchQwen3) {
        self.model = model;
        self.cache.clear();
    }

    /// As [`QwenPolicy::load`], computing in `dtype`.
    pub fn load_as(source: &str, device: &DispatchDevice, dtype: crate::DType) -> Result<Self, ModelError> {
        Ok(Self::new(crate::load_as(source, device, dtype)?))
    }

    /// As [`QwenPolicy::load_as`], with a LoRA adapter directory on top, unmerged.
    pub fn load_adapted(
        source: &str,
        adapter: Option<&std::path::Path>,
        device: &DispatchDevice,
        dtype: crate::DType,
    ) -> Result<Self, ModelError> {
        Ok(Self::new(crate::load_adapted(source, adapter, device, dtype)?))
    }
}

fn err(e: ModelError) -> PolicyError {
    PolicyError(e.to_string())
}

impl Policy for QwenPolicy {
    /// On a training (autodiff) device, samples with the inner module (`valid()`), so decode
    /// steps record no autodiff graph.
    fn generate(&mut self, prompts: &[Vec<u32>], params: &SamplingParams) -> Result<Vec<Generation>, PolicyError> {
        let inner;
        let model = if matches!(self.model.device(), DispatchDevice::Autodiff(_)) {
            inner = self.model.valid();
            &inner
        } else {
            &self.model
        };
        let (gens, t) = sample::generate_cached::<Dispatch>(model, prompts, params, &mut self.cache).map_err(err)?;
        self.prefilled += t.prefill_tokens as u64;
        Ok(gens)
    }

    fn prefill_tokens(&self) -> Option<u64> {
        Some(self.prefilled)
    }

    fn clear_cache(&mut self) {
        self.cache.clear();
    }

    fn score(&self, sequences: &[Vec<u32>], positions: Option<&[Vec<usize>]>, params: ScoreParams) -> Result<Scores, PolicyError> {
        let out = score::score::<Dispatch>(&self.model, sequences, positions, params).map_err(err)?;
        Ok(Scores { logprobs: out.logprobs, entropy: out.entropy })
    }
}
