//! The policy interface: the model behind one object-safe trait, whatever the backend.
//!
//! Two operations, both token-in/token-out:
//! - [`Policy::generate`]: batched sampling of continuations for prompts of different lengths;
//!   each sampled token comes with its log-probability under the distribution it was
//!   actually drawn from (after temperature and any top-k/top-p truncation), and each row says
//!   why it stopped.
//! - [`Policy::score`]: teacher-forced log-probabilities (and optionally entropies) of given
//!   sequences at requested positions only, as `[rows, tokens]` tensors on the policy's
//!   device — with gradients when that device is an autodiff device (the trainer's update) —
//!   at a temperature ([`ScoreParams`]): the trainer scores at the sampling temperature, so its
//!   log-probabilities are those of the distribution the sampler drew from (verl divides the
//!   actor's logits by the rollout temperature the same way).
//!
//! Optimizer steps and checkpoints are the implementation's business (it owns the module).

use burn::Dispatch;
use burn::tensor::Tensor;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How to sample. The defaults (temperature 1, no truncation) make the sampler's
/// distribution exactly the model's, so sampler and trainer log-probabilities agree.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct SamplingParams {
    /// 0 means greedy (the recorded log-probability is then 0: a point mass).
    pub temperature: f64,
    /// Sample only from the k most likely tokens; `None`: no truncation.
    pub top_k: Option<usize>,
    /// Nucleus sampling: only from the smallest set of tokens with probability ≥ p;
    /// `None`: no truncation.
    pub top_p: Option<f64>,
    /// Most tokens sampled per row; a row that reaches it ends with [`FinishReason::Length`].
    pub max_new_tokens: usize,
    /// Seeds every row's random stream; the same seed and prompts give the same samples.
    pub seed: u64,
    /// Token ids that end a row (the stop token is kept in the output). `None`: the model's
    /// own EOS ids (config.json and generation_config.json).
    pub stop_ids: Option<Vec<u32>>,
}

impl Default for SamplingParams {
    fn default() -> Self {
        Self { temperature: 1.0, top_k: None, top_p: None, max_new_tokens: 256, seed: 0, stop_ids: None }
    }
}

/// How to score. `temperature` divides the logits before the softmax, as the sampler does:
/// scoring a step's tokens at its sampling temperature gives the log-probabilities the sampler
/// recorded (up to rounding). Top-k/top-p truncation is not replayed (the trainer refuses it).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ScoreParams {
    /// > 0; 1 scores the model's own distribution.
    pub temperature: f64,
    /// Also return the entropy of each scored next-token distribution (at `temperature`).
    pub entropy: bool,
}

impl Default for ScoreParams {
    fn default() -> Self {
        Self { temperature: 1.0, entropy: false }
    }
}

impl ScoreParams {
    /// Scores at `temperature`, without entropy.
    pub fn at(temperature: f64) -> Self {
        Self { temperature, entropy: false }
    }

    /// The same, with entropies returned or not.
    pub fn with_entropy(self, entropy: bool) -> Self {
        Self { entropy, ..self }
    }
}

/// Why a row stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// It sampled a stop id (the last of `ids`).
    Stop,
    /// It reached `max_new_tokens`.
    Length,
}

/// One row's continuation (the prompt is not repeated).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Generation {
    /// The sampled token ids, a stop id last when it stopped on one.
    pub ids: Vec<u32>,
    /// One per id: log-probability under the distribution it was sampled from.
    pub sampler_logprobs: Vec<f32>,
    /// Why the row stopped.
    pub finish: FinishReason,
}

/// Teacher-forced scores, `[rows, tokens]` with `tokens` = the longest sequence. Entry
/// `[r, t]` is `log p(ids[t] | ids[..t])` where `t` was requested for row `r`, else 0.
#[derive(Clone, Debug)]
pub struct Scores {
    /// The log-probabilities, on the policy's device.
    pub logprobs: Tensor<Dispatch, 2>,
    /// Entropy of the next-token distribution at the same entries, when asked for.
    pub entropy: Option<Tensor<Dispatch, 2>>,
}

/// A policy failed on a well-formed call (bad ids, out-of-range positions, a device error).
#[derive(Debug, thiserror::Error)]
#[error("policy: {0}")]
pub struct PolicyError(pub String);

/// A language model that samples and scores token ids; the object the rollout and the
/// evaluation drive. [`TrainablePolicy`] adds what the update needs.
pub trait Policy {
    /// Sample a continuation of every prompt (token ids), all rows decoded together.
    fn generate(&mut self, prompts: &[Vec<u32>], params: &SamplingParams) -> Result<Vec<Generation>, PolicyError>;

    /// Score `sequences` at `positions` (per row, each `t` in `1..len`; `None`: every
    /// `t ≥ 1`) at `params.temperature`. Only those positions go through the LM head.
    fn score(&self, sequences: &[Vec<u32>], positions: Option<&[Vec<usize>]>, params: ScoreParams) -> Result<Scores, PolicyError>;

    /// Prompt tokens [`Policy::generate`] has run through the model so far (a sampler that
    /// reuses cached keys and values runs fewer than it was given); `None` if not counted.
    fn prefill_tokens(&self) -> Option<u64> {
        None
    }

    /// Forget what earlier [`Policy::generate`] calls cached (a prefix cache), so the next
    /// call samples as a fresh policy with these weights would: a rollout round starts so
    /// (`train::rounds`). The default has nothing cached.
    fn clear_cache(&mut self) {}
}

/// What one optimizer step did (see [`TrainablePolicy::step`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct OptimStep {
    /// Global gradient norm before clipping.
    pub grad_norm: f64,
    /// The norm exceeded `trainer.grad_clip` and the gradients were scaled down to it.
    pub clipped: bool,
    /// Micro-batches whose gradients went into the step.
    pub micro_batches: u32,
    /// The gradient was NaN or infinite, so no step was taken (weights unchanged).
    #[serde(default)]
    pub non_finite: bool,
}

/// A policy that can be trained: the update scores with gradients, backpropagates each
/// micro-batch's normalized loss into accumulated gradients, and takes optimizer steps.
///
/// [`Policy::score`] on a trainable policy never builds an autodiff graph (it is the
/// "before the update" recomputation); [`TrainablePolicy::score_with_grad`] does.
pub trait TrainablePolicy: Policy {
    /// The device scores live on (a plain device; tensors built for the loss go there).
    fn device(&self) -> burn::DispatchDevice;

    /// As [`Policy::score`], on the training module, with gradients.
    fn score_with_grad(&self, sequences: &[Vec<u32>], positions: Option<&[Vec<usize>]>, params: ScoreParams)
    -> Result<Scores, PolicyError>;

    /// Backpropagate one micro-batch's scalar loss and add its gradients to the
    /// accumulated ones.
    fn backward(&mut self, loss: Tensor<Dispatch, 1>) -> Result<(), PolicyError>;

    /// Add a zero gradient for every trainable parameter, as torch's backward through a loss
    /// whose every term is weighted by zero gives one: the next [`TrainablePolicy::step`]
    /// then takes an AdamW step on a zero gradient (momentum still moves the weights, weight
    /// decay applies, the step count advances), as torch and verl do for a minibatch whose
    /// advantages are all zero (`trainer.zero_advantage_minibatch = "step"`). The default
    /// cannot.
    fn backward_zero(&mut self) -> Result<(), PolicyError> {
        Err(PolicyError(
            "this policy cannot take an optimizer step on a zero gradient (TrainablePolicy::backward_zero); \
             set trainer.zero_advantage_minibatch = \"skip\""
                .into(),
        ))
    }

    /// Whether [`TrainablePolicy::score_with_grad`]'s forward is random (dropout, as LoRA's
    /// `lora.dropout > 0`): its log-probabilities are then not the policy's, so the update
    /// takes every old log-probability and the metrics before the update from the no-grad
    /// [`Policy::score`], the first minibatch's too. The default: a deterministic forward.
    fn dropout_in_gradient_pass(&self) -> bool {
        false
    }

    /// Clip the accumulated gradients globally (torch `clip_grad_norm_`) and take one
    /// optimizer step at `lr`; gradients are cleared. A non-finite gradient norm takes no
    /// step and says so (`OptimStep::non_finite`).
    fn step(&mut self, lr: f64) -> Result<OptimStep, PolicyError>;

    /// Drop the accumulated gradients without a step (the update found a non-finite loss
    /// in a minibatch).
    fn discard_gradients(&mut self);

    /// Write the weights as a checkpoint directory (HF layout).
    fn save(&self, dir: &std::path::Path) -> Result<(), PolicyError>;

    /// Write everything needed to continue training into `dir`: the weights (as
    /// [`TrainablePolicy::save`]) and the optimizer state. The default has no optimizer
    /// state to save, so such a policy cannot be resumed exactly.
    fn save_state(&self, dir: &std::path::Path) -> Result<(), PolicyError> {
        self.save(dir)
    }

    /// Restore weights and optimizer state written by [`TrainablePolicy::save_state`], so the
    /// next step is the one an uninterrupted run would have taken.
    fn load_state(&mut self, dir: &std::path::Path) -> Result<(), PolicyError> {
        Err(PolicyError(format!("this policy cannot resume training from {}", dir.display())))
    }

    /// A sampler of the weights as they are now, which another thread can own: async
    /// off-policy training (`trainer.max_steps_off_policy`) rolls out with it while the
    /// trainer keeps stepping. Later optimizer steps do not change it (a versioned snapshot,
    /// not a view); on the same device it may share the weights' memory. The default cannot
    /// make one.
    fn snapshot(&self) -> Result<Box<dyn Policy + Send>, PolicyError> {
        Err(PolicyError(
            "this policy cannot hand a snapshot of its weights to a sampling thread (TrainablePolicy::snapshot); \
             unset trainer.max_steps_off_policy to train in lockstep"
                .into(),
        ))
    }

    /// Delete what [`TrainablePolicy::save_state`] wrote beyond the weights (the optimizer
    /// state, often twice the weights' size) from an older checkpoint; the weights stay.
    fn drop_state(&self, _dir: &std::path::Path) -> Result<(), PolicyError> {
        Ok(())
    }
}
