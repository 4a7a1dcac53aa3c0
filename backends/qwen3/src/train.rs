//! [`QwenTrainer`]: the model on an autodiff device with its optimizer, behind arl-core's
//! [`TrainablePolicy`]. Sampling and the no-grad recomputation use the inner module
//! (`valid()`), so they build no autodiff graph.
//!
//! With LoRA ([`TrainSetup::lora`]) the base weights are frozen (`require_grad` off, so they
//! get no gradients and no AdamW moments) and only the adapters train; sampling and scoring
//! run base + adapters unmerged; a checkpoint holds the adapter in PEFT's layout and the
//! adapters' optimizer state, not the base.

use std::cell::RefCell;
use std::path::{Path, PathBuf};

use arl_core::config::LoraConfig;
use arl_core::policy::{Generation, OptimStep, Policy, PolicyError, SamplingParams, ScoreParams, Scores, TrainablePolicy};
use arl_optim::{Optim, OptimConfig};
use burn::module::{AutodiffModule, Module, ModuleMapper, ModuleVisitor, Param};
use burn::tensor::Tensor;
use burn::{CheckpointingStrategy, Dispatch, DispatchDevice};

use crate::head::DeferredHead;
use crate::{AdapterInfo, DType, DispatchQwen3, ModelError, PrefixCache, sample, score};

/// How a model is set up for training.
#[derive(Clone, Debug, PartialEq)]
pub struct TrainSetup {
    /// Weights (of the base, with LoRA) and compute in this type; AdamW's moments too.
    pub dtype: DType,
    /// Recompute activations in the backward pass (burn's balanced strategy).
    pub gradient_checkpointing: bool,
    /// Train LoRA adapters on the frozen base instead of every weight.
    pub lora: Option<LoraConfig>,
    /// An adapter directory to start from: with `lora`, the adapter that trains (its rank,
    /// alpha and targets must be `lora`'s); without, it is merged into the weights, which all
    /// train.
    pub adapter: Option<PathBuf>,
    /// Seed of new adapters' A matrices.
    pub seed: u64,
}

impl Default for TrainSetup {
    fn default() -> Self {
        Self { dtype: DType::F32, gradient_checkpointing: false, lora: None, adapter: None, seed: 0 }
    }
}

/// A LoRA run: the adapters' settings and the base model their adapter files name.
#[derive(Clone, Debug)]
struct LoraRun {
    config: LoraConfig,
    base_model: String,
}

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
    lora: Option<LoraRun>,
    /// Where [`TrainablePolicy::snapshot`]s sample (`[model] rollout_device`); `None`: the
    /// training device.
    rollout_device: Option<DispatchDevice>,
}

/// Rebuilds every float parameter from its data: a fresh tensor on the plain device, in the
/// parameter's own dtype (`from_data` with only a device would make every weight the device's
/// default float, f32: a bf16 run's sampler and no-grad scorer would then compute in f32 while
/// its gradient pass computes in bf16).
struct Untag;

impl ModuleMapper<Dispatch> for Untag {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<Dispatch, D>>) -> Param<Tensor<Dispatch, D>> {
        let (id, tensor, mapper) = param.consume();
        let (device, dtype) = (tensor.device(), tensor.dtype());
        Param::from_mapped_value(id, Tensor::from_data(tensor.into_data(), (&device, dtype)), mapper)
    }
}

/// Counts parameters: all of them, and those that train.
#[derive(Default)]
struct CountParams {
    total: usize,
    trainable: usize,
}

impl ModuleVisitor<Dispatch> for CountParams {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<Dispatch, D>>) {
        let n = param.shape().num_elements();
        self.total += n;
        if param.val().is_require_grad() {
            self.trainable += n;
        }
    }
}

fn err(e: ModelError) -> PolicyError {
    PolicyError(e.to_string())
}

/// The name an adapter's `base_model_name_or_path` records: a directory as an absolute path
/// (so the adapter finds its base from anywhere), a preset or repo id as given.
fn base_name(source: &str) -> String {
    let path = Path::new(source);
    if path.is_dir() { path.canonicalize().unwrap_or_else(|_| path.to_path_buf()).display().to_string() } else { source.to_string() }
}

/// An adapter that is to keep training must have the `[lora]` section's shape.
fn check_matches(config: &LoraConfig, info: &AdapterInfo) -> Result<(), ModelError> {
    let fail = |message: String| ModelError::Adapter { path: info.dir.display().to_string(), message };
    let mut want: Vec<String> = config.target_modules.clone();
    want.sort();
    want.dedup();
    let mismatch = if info.rank != Some(config.rank as usize) {
        Some(("lora.rank", config.rank.to_string(), info.rank.map_or("several ranks".into(), |r| format!("r = {r}"))))
    } else if info.alpha != config.alpha {
        Some(("lora.alpha", config.alpha.to_string(), format!("lora_alpha = {}", info.alpha)))
    } else if info.use_rslora != config.use_rslora {
        Some(("lora.use_rslora", config.use_rslora.to_string(), format!("use_rslora = {}", info.use_rslora)))
    } else if info.target_modules != want {
        Some(("lora.target_modules", format!("{want:?}"), format!("adapters on {:?}", info.target_modules)))
    } else {
        None
    };
    match mismatch {
        Some((key, ours, theirs)) => Err(fail(format!(
            "has {theirs}, but {key} = {ours}: set {key} to the adapter's value to keep training it, or drop --adapter to start a new one"
        ))),
        None => Ok(()),
    }
}

impl QwenTrainer {
    /// Load `source` (directory, preset or cached repo id) for training on `device` (a plain
    /// device; the autodiff wrapper is added here).
    pub fn load(source: &str, device: &DispatchDevice, optim: OptimConfig) -> Result<Self, ModelError> {
        Self::load_setup(source, device, optim, &TrainSetup::default())
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
        Self::load_setup(source, device, optim, &TrainSetup { dtype, gradient_checkpointing, ..TrainSetup::default() })
    }

    /// Load `source` as `setup` says: every weight trainable, or LoRA adapters (new, or
    /// `setup.adapter`) on a frozen base. `source` may itself be an adapter directory (an arl
    /// LoRA checkpoint): its base and the adapter are loaded.
    pub fn load_setup(source: &str, device: &DispatchDevice, optim: OptimConfig, setup: &TrainSetup) -> Result<Self, ModelError> {
        let strategy = if setup.gradient_checkpointing { CheckpointingStrategy::Balanced } else { CheckpointingStrategy::None };
        let ad = DispatchDevice::autodiff_checkpointed(device.clone(), strategy);
        let (base, adapter) = crate::resolve_adapter(source, setup.adapter.as_deref())?;
        let model = crate::load_base(&base, &ad)?.into_dtype(crate::device::burn_dtype(setup.dtype));
        let (model, lora) = match (&setup.lora, adapter) {
            (Some(config), adapter) => {
                let mut model = model.no_grad();
                match adapter {
                    Some(dir) => check_matches(config, &model.load_adapter(&dir, Some(config.dropout))?)?,
                    None => {
                        model.attach_lora(config, setup.seed)?;
                    }
                }
                (model, Some(LoraRun { config: config.clone(), base_model: base_name(&base) }))
            }
            (None, Some(dir)) => {
                let mut model = model;
                model.load_adapter(&dir, None)?;
                (model.merge_lora(), None)
            }
            (None, None) => (model, None),
        };
        Ok(Self {
            model: Some(model),
            optim: Optim::new(optim),
            gradient_checkpointing: setup.gradient_checkpointing,
            inference_copy: RefCell::new(None),
            pending_heads: RefCell::new(Vec::new()),
            prefix_cache: PrefixCache::default(),
            prefilled: 0,
            lora,
            rollout_device: None,
        })
    }

    /// Snapshots for async sampling (`TrainablePolicy::snapshot`) go to `device`, another
    /// device than the training one, or any backend's (`Dispatch` copies across backends
    /// through host memory); `None`: they share the training device.
    pub fn set_rollout_device(&mut self, device: Option<DispatchDevice>) {
        self.rollout_device = device;
    }

    pub fn model(&self) -> &DispatchQwen3 {
        self.model.as_ref().expect("model present outside step")
    }

    /// The LoRA settings, when only adapters train.
    pub fn lora(&self) -> Option<&LoraConfig> {
        self.lora.as_ref().map(|l| &l.config)
    }

    /// (all parameters, trainable parameters).
    pub fn param_counts(&self) -> (usize, usize) {
        let mut count = CountParams::default();
        self.model().visit(&mut count);
        (count.total, count.trainable)
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

    fn clear_cache(&mut self) {
        self.prefix_cache.clear();
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

    fn backward_zero(&mut self) -> Result<(), PolicyError> {
        self.optim.backward_zero(self.model.as_ref().expect("model present outside step"));
        Ok(())
    }

    /// LoRA's dropout acts in the gradient pass only (on the autodiff device).
    fn dropout_in_gradient_pass(&self) -> bool {
        self.lora.as_ref().is_some_and(|l| l.config.dropout > 0.0)
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

    /// A [`crate::QwenPolicy`] on the inner (no-autodiff) module: it shares the weights'
    /// tensors, which an optimizer step replaces rather than writes, so it keeps sampling the
    /// weights of the moment it was taken (its own, empty prefix cache). On the rollout device
    /// ([`QwenTrainer::set_rollout_device`]) it holds a copy of them instead.
    fn snapshot(&self) -> Result<Box<dyn Policy + Send>, PolicyError> {
        let model = self.inference();
        let model = match &self.rollout_device {
            Some(device) => model.to_device(device),
            None => model,
        };
        Ok(Box::new(crate::QwenPolicy::new(model)))
    }

    fn discard_gradients(&mut self) {
        self.pending_heads.take();
        self.optim.zero_grad();
    }

    /// The weights in the HF layout; with LoRA, the adapter only, in PEFT's layout
    /// (`adapter_config.json` naming the base, `adapter_model.safetensors`).
    fn save(&self, dir: &Path) -> Result<(), PolicyError> {
        match &self.lora {
            Some(l) => self.model().save_adapter(dir, Some(&l.base_model)).map_err(err),
            None => self.inference().save_dir(dir).map_err(err),
        }
    }

    /// The weights (or the adapter) plus `optimizer.safetensors` (AdamW moments by trainable
    /// parameter order, see arl-optim: with LoRA, the adapters' only).
    fn save_state(&self, dir: &Path) -> Result<(), PolicyError> {
        self.save(dir)?;
        self.optim.save_state(self.model(), &dir.join(OPTIMIZER_FILE)).map_err(|e| PolicyError(e.to_string()))
    }

    /// Reload the weights from `dir` on the same device (new parameter ids) in the dtype
    /// being trained (a bf16 run continues in bf16: the F32 checkpoint holds its bf16 values
    /// exactly) and map the optimizer moments onto them by parameter order, in that dtype too.
    /// With LoRA only the adapter is reloaded; the frozen base stays as it was loaded.
    fn load_state(&mut self, dir: &Path) -> Result<(), PolicyError> {
        // Whatever happens below, the cached keys and values may no longer be these weights'.
        self.prefix_cache.clear();
        let model = match &self.lora {
            Some(l) => {
                let mut model = self.model.take().expect("model present outside step");
                let loaded = model.load_adapter(dir, Some(l.config.dropout)).and_then(|info| check_matches(&l.config, &info));
                self.model = Some(model);
                loaded.map_err(err)?;
                self.model.take().expect("just put back")
            }
            None => {
                let (device, dtype) = (self.model().device(), self.model().dtype());
                crate::Qwen3::load_dir(dir, &device).map_err(err)?.into_dtype(dtype)
            }
        };
        let restored = self.optim.load_state(&model, &dir.join(OPTIMIZER_FILE)).map_err(|e| PolicyError(e.to_string()));
        self.model = Some(model);
        self.inference_copy.take();
        restored
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
