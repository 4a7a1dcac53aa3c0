//! Settings of the policy loss and of the advantage estimator.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::Aggregation;

/// The policy loss. Keys not used by the chosen loss must stay unset or at their default.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct LossConfig {
    /// Registered loss name (`arl list`).
    pub name: String,
    /// Unset: the loss's own default aggregation.
    pub aggregation: Option<Aggregation>,
    /// Lower clip ε: ratios below 1 − clip_low are clipped.
    pub clip_low: f64,
    /// Upper clip ε: ratios above 1 + clip_high are clipped (DAPO's clip-higher).
    pub clip_high: f64,
    /// Constant horizon H for `constant-horizon` aggregation (tokens per sequence).
    pub horizon: Option<f64>,
}

impl Default for LossConfig {
    fn default() -> Self {
        Self { name: "grpo".into(), aggregation: None, clip_low: 0.2, clip_high: 0.2, horizon: None }
    }
}

/// The advantage estimator.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct AdvantageConfig {
    /// Registered estimator name (`arl list`).
    pub name: String,
}

impl Default for AdvantageConfig {
    fn default() -> Self {
        Self { name: "grpo".into() }
    }
}
