//! Where rollouts run (`[cluster]`): in the trainer's process, or in rollout workers that
//! take rounds through the run folder (`train::dist`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The rollout side of a run. Every key except `round_groups` may change on `--resume`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct ClusterConfig {
    /// `local`: the trainer rolls out itself; `procs`: `rollout_workers` local child
    /// processes (`arl worker`) roll out rounds through `<output.dir>/dist/`.
    pub launcher: Launcher,
    /// Rollout workers (`procs`).
    pub rollout_workers: u32,
    /// Groups per rollout round, the unit of work and of determinism: a round's episodes are
    /// a function of its tasks, its seed and its weights version only. Must divide
    /// `trainer.prompts`; unset: `trainer.prompts` (one round per step).
    pub round_groups: Option<u32>,
    /// A worker whose heartbeat has not moved for this long loses its round, which is issued
    /// again (seconds).
    pub lease_timeout_s: f64,
    /// A round issued this many times without a result stops the run.
    pub max_round_attempts: u32,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        Self { launcher: Launcher::Local, rollout_workers: 1, round_groups: None, lease_timeout_s: 300.0, max_round_attempts: 3 }
    }
}

impl ClusterConfig {
    /// Groups per round: `round_groups`, else all of a step's `prompts`.
    pub fn round_groups(&self, prompts: u32) -> u32 {
        self.round_groups.unwrap_or(prompts)
    }
}

/// Where a run's rollouts run (`cluster.launcher`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Launcher {
    /// In the trainer's process.
    #[default]
    Local,
    /// In `cluster.rollout_workers` child processes of the trainer (`arl worker`).
    Procs,
}

impl Launcher {
    pub fn name(self) -> &'static str {
        match self {
            Launcher::Local => "local",
            Launcher::Procs => "procs",
        }
    }
}
