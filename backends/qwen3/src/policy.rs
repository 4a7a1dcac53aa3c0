//! [`QwenPolicy`]: the model behind arl-core's object-safe [`Policy`] trait.

use arl_core::policy::{Generation, Policy, PolicyError, SamplingParams, Scores};
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
}

fn err(e: ModelError) -> PolicyError {
    PolicyError(e.to_string())
}

impl Policy for QwenPolicy {
    fn generate(&mut self, prompts: &[Vec<u32>], params: &SamplingParams) -> Result<Vec<Generation>, PolicyError> {
        sample::generate::<Dispatch>(&self.model, prompts, params).map_err(err)
    }

    fn score(&self, sequences: &[Vec<u32>], positions: Option<&[Vec<usize>]>, entropy: bool) -> Result<Scores, PolicyError> {
        let out = score::score::<Dispatch>(&self.model, sequences, positions, entropy).map_err(err)?;
        Ok(Scores { logprobs: out.logprobs, entropy: out.entropy })
    }
}
