//! arl-losses — the policy-gradient family of arl (SPEC.md §4–5): policy losses (PPO/GRPO
//! clipped surrogate with clip-higher and dual clip, GSPO, CISPO, SAPO, DPPO, DRO, plain IS,
//! REINFORCE), the decoupled objective and rollout/trainer corrections (TIS, IcePop, KPop),
//! KL estimators (k1/k2/k3, in the loss or the reward), the entropy bonus, advantage
//! estimators with AReaL's `NormConfig` semantics and GAE, and the algorithm presets
//! (`--algo dapo`). Every loss is a `LossPlugin`, every estimator an `AdvantagePlugin`,
//! every preset an `AlgoPreset`, all registered by name.
//!
//! It computes per-token terms on burn's `Dispatch` tensors and never reduces them itself:
//! aggregation and its minibatch-wide normalizer are arl-core's (`arl_core::Normalizer`). It
//! knows no model, no trainer and no device beyond the tensors it is given ([`eval`] is the
//! f64 CPU evaluation `arl loss eval` uses). No cargo features.

pub mod advantage;
pub mod eval;
pub mod filters;
pub mod kl;
pub mod loss;
pub mod objective;
mod ops;
mod plugins;
pub mod presets;
pub mod settings;

pub use loss::Loss;

#[cfg(test)]
mod tests;
