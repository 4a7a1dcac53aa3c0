//! Tasks: what one episode is about. Environments own the meaning of `data`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Which part of an environment's task bank.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Split {
    Train,
    Heldout,
}

impl std::fmt::Display for Split {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Split::Train => "train",
            Split::Heldout => "heldout",
        })
    }
}

/// One task. `id` is stable across runs with the same seed; `family` groups tasks for
/// balanced splits and reporting (the bug family for coding gyms); `data` is the
/// environment's own payload (sources, tests, …), opaque to everything else.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Task {
    pub id: String,
    pub family: String,
    pub split: Split,
    #[serde(default)]
    pub data: serde_json::Value,
}
