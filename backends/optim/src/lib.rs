//! arl-optim — the optimizer side of the update, for any burn module on `Dispatch`.
//!
//! - Gradients of several micro-batches accumulate into one set ([`Optim::backward`]);
//!   the loss's normalizer is the caller's (one per minibatch), so the sum is the
//!   minibatch gradient.
//! - The gradient-norm clip is *global*, over all parameters together, as torch's
//!   `clip_grad_norm_`: coefficient `max_norm / (total_norm + 1e-6)`, applied only when it is
//!   below 1. burn's `GradientClippingConfig::Norm` clips each tensor on its own, which is a
//!   different algorithm, so it is not used.
//! - AdamW with torch's defaults (β = (0.9, 0.999), ε = 1e-8) and weight decay off by
//!   default (burn's own defaults are ε = 1e-5 and decay 1e-4), computed with the clip over
//!   flat buffers (`flat`: the gradients of all parameters of a dtype concatenated, the moments
//!   kept flat), burn's `AdamW` arithmetic op for op: ~13 ops a step plus 5 per parameter
//!   instead of ~19 per parameter; on a device computing in host memory a group per parameter
//!   (no launches to save, no concatenation to pay).
//!
//! - The AdamW moments are saved and restored by parameter order ([`Optim::save_state`],
//!   [`Optim::load_state`]), since a module reloaded from safetensors has new `ParamId`s.
//!
//! It knows nothing about models, losses or RL.

mod clip;
mod flat;
#[cfg(any(test, feature = "opcount"))]
pub mod opcount;
mod optim;
mod state;
#[cfg(test)]
mod testing;

pub use clip::{clip_global_norm, global_grad_norm};
pub use optim::{Optim, OptimConfig, StepStats};
pub use state::StateError;
