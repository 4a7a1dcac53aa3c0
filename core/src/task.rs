//! Tasks: what one episode is about. Environments own the meaning of `data`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Which part of an environment's task bank.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Split {
    /// The tasks training samples from.
    Train,
    /// Tasks of kinds no training task has (the coding gyms: bug templates never trained on).
    /// Every env should have it: the run's main claim is measured on it.
    Heldout,
    /// New instances of the training tasks' own kinds, never trained on (the coding gyms: other
    /// names and operand orders of the training templates, from a disjoint seed range). An env
    /// without such a split returns no tasks, and the run reports the one above only.
    HeldoutInstances,
}

impl Split {
    /// The held-out splits a run evaluates, in the order reports show them.
    pub const HELDOUT: [Split; 2] = [Split::Heldout, Split::HeldoutInstances];
}

impl std::fmt::Display for Split {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Split::Train => "train",
            Split::Heldout => "heldout",
            Split::HeldoutInstances => "heldout_instances",
        })
    }
}

/// One task. `id` is stable across runs with the same seed; `family` groups tasks for
/// balanced splits and reporting (the bug family for coding gyms); `data` is the
/// environment's own payload (sources, tests, …), opaque to everything else.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Task {
    /// Identifies the task within its env; evaluations pair and report tasks by it.
    pub id: String,
    /// The group the task belongs to, for balanced splits and per-family reports.
    pub family: String,
    /// The split the task is in.
    pub split: Split,
    /// The env's own payload (`null` when absent).
    #[serde(default)]
    pub data: serde_json::Value,
}
