//! [`QwenTrainer`]: the model on an autodiff device with its optimizer, behind arl-core's
//! [`TrainablePolicy`]. Sampling and the no-grad recomputation use the inner module
//! (`valid()`), so they build no autodiff graph.

use std::cell::RefCell;
use std::path::Path;

use arl_core::policy::{Generation, OptimStep, Policy, PolicyError, SamplingParams, ScoreParams, Scores, TrainablePolicy};
use arl_optim::{Optim, OptimConfig};
use burn::module::{AutodiffModule, Module, ModuleMapper, Param};
use burn::tensor::Tensor;
use burn::{CheckpointingStrategy, Dispatch, DispatchDevice};

use crate::head::DeferredHead;
use crate::{DType, DispatchQwen3, ModelError, PrefixCache, sample, score};

pub struct QwenTrainer {
    /// On an autodiff device. `None` only transiently inside [`TrainablePolicy::step`].
    model: Option<DispatchQwen3>,
    optim: Optim<DispatchQwen3>,
    gradient_checkpointing: bool,
    /// With gradient checkpointing: a plain copy of the weights for sampling and no-grad
    /// scoring, made once per optimizer step (see [`QwenTrainer::inference`]).
    inference_copy: RefCell<Option<DispatchQwen3>>,
    /// LM heads of `score_with_grad` calls whose gradient the next `backward` computes
    /// (`head::DeferredHead`: the head is recomputed chunk by chunk there).
    pending_heads: RefCell<Vec<DeferredHead<Dispatch>>>,
    /// Keys and values of earlier sampling calls' rows, for the weights as they are (cleared
    /// by every optimizer step and reload).
    prefix_cache: PrefixCache<Dispatch>,
    prefilled: u64,
}

/// Rebuilds every float parameter from its data: a fresh tensor on the plain device.
struct Untag;

impl ModuleMapper<Dispatch> for Untag {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<Dispatch, D>>) -> Param<Tensor<Dispatch, D>> {
        let (id, tensor, mapper) = param.consume();
        let device = tensor.device();
        Param::from_mapped_value(id, Tensor::from_data(tensor.into_data(), &device), mapper)
    }
}

fn err(e: ModelError) -> PolicyError {
    PolicyError(e.to_string())
}

impl QwenTrainer {
    /// Load `source` (directory, preset or cached repo id) for training on `device` (a plain
    /// device; the autodiff wrapper is added here).
    pub fn load(source: &str, device: &DispatchDevice, optim: OptimConfig) -> Result<Self, ModelError> {
        Self::load_with(source, device, optim, DType::F32, false)
    }

    /// As [`QwenTrainer::load`], with the weights (and AdamW's moments) in `dtype` — no f32
    /// master copy, so bf16/f16 training rounds every update; with `gradient_checkpointing`,
    /// the autodiff device recomputes activations in the backward pass instead of keeping them
    /// (burn's balanced strategy).
    pub fn load_with(
        source: &str,
        device: &DispatchDevice,
        optim: OptimConfig,
        dtype: DType,
        gradient_checkpointing: bool,
    ) -> Result<Self, ModelError> {
        let strategy = if gradient_checkpointing { CheckpointingStrategy::Balanced } else { CheckpointingStrategy::None };
        let model = crate::load_as(source, &DispatchDevice::autodiff_checkpointed(device.clone(), strategy), dtype)?;
        Ok(Self {
            model: Some(model),
            optim: Optim::new(optim),
            gradient_checkpointing,
            inference_copy: RefCell::new(None),
            pending_heads: RefCell::new(Vec::new()),
            prefix_cache: PrefixCache::default(),
            prefilled: 0,
        })
    }

    pub fn model(&self) -> &DispatchQwen3 {
        self.model.as_ref().expect("model present outside step")
    }

    /// The weights without autodiff. burn-dispatch 0.21's `valid()` keeps a checkpointed
    /// device's strategy tag on the inner tensors, so they cannot meet tensors made on the
    /// plain device (it asserts "Autodiff strategy mismatch"); under gradient checkpointing
    /// the weights are therefore copied once per optimizer step instead.
    fn inference(&self) -> DispatchQwen3 {
        if !self.gradient_checkpointing {
            return self.model().valid();
        }
        self.inference_copy.borrow_mut().get_or_insert_with(|| self.model().valid().map(&mut Untag)).clone()
    }
}

impl Policy for QwenTrainer {
    fn generate(&mut self, prompts: &[Vec<u32>], params: &SamplingParams) -> Result<Vec<Generation>, PolicyError> {
        let model = self.inference();
        let (gens, t) = sample::generate_cached::<Dispatch>(&model, prompts, params, &mut self.prefix_cache).map_err(err)?;
        self.prefilled += t.prefill_tokens as u64;
        Ok(gens)
    }

    fn prefill_tokens(&self) -> Option<u64> {
        Some(self.prefilled)
    }

    fn score(&self, sequences: &[Vec<u32>], positions: Option<&[Vec<usize>]>, params: ScoreParams) -> Result<Scores, PolicyError> {
        let out = score::score::<Dispatch>(&self.inference(), sequences, positions, params).map_err(err)?;
        Ok(Scores { logprobs: out.logprobs, entropy: out.entropy })
    }
}

impl TrainablePolicy for QwenTrainer {
    fn device(&self) -> DispatchDevice {
        self.model().device()
    }

    fn score_with_grad(
        &self,
        sequences: &[Vec<u32>],
        positions: Option<&[Vec<usize>]>,
        params: ScoreParams,
    ) -> Result<Scores, PolicyError> {
        let (out, head) = score::score_deferred::<Dispatch>(self.model(), sequences, positions, params).map_err(err)?;
        self.pending_heads.borrow_mut().extend(head);
        Ok(Scores { logprobs: out.logprobs, entropy: out.entropy })
    }

    /// The loss depends on the model only through `score_with_grad`'s scores: its backward
    /// gives their gradients, and each pending head turns those into the model's.
    fn backward(&mut self, loss: Tensor<Dispatch, 1>) -> Result<(), PolicyError> {
        let model = self.model.as_ref().expect("model present outside step");
        let heads = self.pending_heads.take();
        if heads.is_empty() {
            self.optim.backward(model, loss);
            return Ok(());
        }
        let grads = loss.backward();
        let surrogate = heads.into_iter().map(|h| h.surrogate(&grads, model)).reduce(|a, b| a + b).expect("a pending head");
        self.optim.backward(model, surrogate);
        Ok(())
    }

    fn step(&mut self, lr: f64) -> Result<OptimStep, PolicyError> {
        let model = self.model.take().expect("model present outside step");
        let (model, stats) = self.optim.step(model, lr);
        self.model = Some(model);
        self.inference_copy.take();
        self.prefix_cache.clear();
        Ok(OptimStep {
            grad_norm: stats.grad_norm,
            clipped: stats.clipped,
            micro_batches: stats.micro_batches,
            non_finite: stats.non_finite,
        })
    }

    fn discard_gradients(&mut self) {
        self.pending_heads.take();
        self.optim.zero_grad();
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

    /// Reload the weights from `dir` on the same device (new parameter ids) in the dtype
    /// being trained (a bf16 run continues in bf16: the F32 checkpoint holds its bf16 values
    /// exactly) and map the optimizer moments onto them by parameter order, in that dtype too.
    fn load_state(&mut self, dir: &Path) -> Result<(), PolicyError> {
        let (device, dtype) = (self.model().device(), self.model().dtype());
        let model = crate::Qwen3::load_dir(dir, &device).map_err(err)?.into_dtype(dtype);
        self.optim.load_state(&model, &dir.join(OPTIMIZER_FILE)).map_err(|e| PolicyError(e.to_string()))?;
        self.model = Some(model);
        self.inference_copy.take();
        self.prefix_cache.clear();
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
