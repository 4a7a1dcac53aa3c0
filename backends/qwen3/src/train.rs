//! [`QwenTrainer`]: the model on an autodiff device with its optimizer, behind arl-core's
//! [`TrainablePolicy`]. Sampling and the no-grad recomputation use the inner module
//! (`valid()`), so they build no autodiff graph.

use std::path::Path;

use arl_core::policy::{Generation, OptimStep, Policy, PolicyError, SamplingParams, Scores, TrainablePolicy};
use arl_optim::{Optim, OptimConfig};
use burn::module::AutodiffModule;
use burn::tensor::Tensor;
use burn::{Dispatch, DispatchDevice};

use crate::{DispatchQwen3, ModelError, sample, score};

pub struct QwenTrainer {
    /// On an autodiff device. `None` only transiently inside [`TrainablePolicy::step`].
    model: Option<DispatchQwen3>,
    optim: Optim<DispatchQwen3>,
}

fn err(e: ModelError) -> PolicyError {
    PolicyError(e.to_string())
}

impl QwenTrainer {
    /// Load `source` (directory, preset or cached repo id) for training on `device` (a plain
    /// device; the autodiff wrapper is added here).
    pub fn load(source: &str, device: &DispatchDevice, optim: OptimConfig) -> Result<Self, ModelError> {
        let model = crate::load(source, &DispatchDevice::autodiff(device.clone()))?;
        Ok(Self { model: Some(model), optim: Optim::new(optim) })
    }

    pub fn model(&self) -> &DispatchQwen3 {
        self.model.as_ref().expect("model present outside step")
    }

    fn inference(&self) -> DispatchQwen3 {
        self.model().valid()
    }
}

impl Policy for QwenTrainer {
    fn generate(&mut self, prompts: &[Vec<u32>], params: &SamplingParams) -> Result<Vec<Generation>, PolicyError> {
        sample::generate::<Dispatch>(&self.inference(), prompts, params).map_err(err)
    }

    fn score(&self, sequences: &[Vec<u32>], positions: Option<&[Vec<usize>]>, entropy: bool) -> Result<Scores, PolicyError> {
        let out = score::score::<Dispatch>(&self.inference(), sequences, positions, entropy).map_err(err)?;
        Ok(Scores { logprobs: out.logprobs, entropy: out.entropy })
    }
}

impl TrainablePolicy for QwenTrainer {
    fn device(&self) -> DispatchDevice {
        self.model().device()
    }

    fn score_with_grad(&self, sequences: &[Vec<u32>], positions: Option<&[Vec<usize>]>, entropy: bool) -> Result<Scores, PolicyError> {
        let out = score::score::<Dispatch>(self.model(), sequences, positions, entropy).map_err(err)?;
        Ok(Scores { logprobs: out.logprobs, entropy: out.entropy })
    }

    fn backward(&mut self, loss: Tensor<Dispatch, 1>) -> Result<(), PolicyError> {
        let model = self.model.as_ref().expect("model present outside step");
        self.optim.backward(model, loss);
        Ok(())
    }

    fn step(&mut self, lr: f64) -> Result<OptimStep, PolicyError> {
        let model = self.model.take().expect("model present outside step");
        let (model, stats) = self.optim.step(model, lr);
        self.model = Some(model);
        Ok(OptimStep { grad_norm: stats.grad_norm, clipped: stats.clipped, micro_batches: stats.micro_batches })
    }

    fn save(&self, dir: &Path) -> Result<(), PolicyError> {
        self.inference().save_dir(dir).map_err(err)
    }

    /// The weights (HF layout) plus `optimizer.safetensors` (AdamW moments by parameter
    /// order, see arl-optim).
    fn save_state(&self, dir: &Path) -> Result<(), PolicyError> {
        self.save(dir)?;
        self.optim.save_state(self.model(), &dir.join(OPTIMIZER_FILE)).map_err(|e| PolicyError(e.to_string()))
    }

    /// Reload the weights from `dir` on the same device (new parameter ids) and map the
    /// optimizer moments onto them by parameter order.
    fn load_state(&mut self, dir: &Path) -> Result<(), PolicyError> {
        let device = self.model().device();
        let model = crate::Qwen3::load_dir(dir, &device).map_err(err)?;
        self.optim.load_state(&model, &dir.join(OPTIMIZER_FILE)).map_err(|e| PolicyError(e.to_string()))?;
        self.model = Some(model);
        Ok(())
    }

    fn drop_state(&self, dir: &Path) -> Result<(), PolicyError> {
        match std::fs::remove_file(dir.join(OPTIMIZER_FILE)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(PolicyError(format!("{}: {e}", dir.display()))),
            _ => Ok(()),
        }
    }
}

/// The optimizer state inside a checkpoint directory.
pub const OPTIMIZER_FILE: &str = "optimizer.safetensors";
