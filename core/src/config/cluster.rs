//! Where rollouts run (`[cluster]`): in the trainer's process, or in rollout workers that
//! take rounds through the run folder (`train::dist`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The rollout side of a run. Every key except `round_groups` may change on `--resume`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct ClusterConfig {
    /// `local`: the trainer rolls out itself; `procs`: `rollout_workers` local child
    /// processes (`arl worker`) roll out rounds through `<output.dir>/dist/`; `slurm`: the
    /// trainer and a job array of `rollout_workers` workers are submitted with `sbatch`.
    pub launcher: Launcher,
    /// Rollout workers (`procs`, `slurm`).
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
    /// A worker whose trainer's heartbeat (`dist/trainer.json`) has not moved for this long
    /// exits (seconds): its trainer died without ending the run. Longer than a trainer takes
    /// to start again and load the model.
    pub worker_idle_timeout_s: f64,
    /// The sbatch settings of `launcher = "slurm"`.
    pub slurm: SlurmConfig,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        Self {
            launcher: Launcher::Local,
            rollout_workers: 1,
            round_groups: None,
            lease_timeout_s: 300.0,
            max_round_attempts: 3,
            worker_idle_timeout_s: 3600.0,
            slurm: SlurmConfig::default(),
        }
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
    /// In a Slurm job array of `cluster.rollout_workers` tasks beside a trainer job.
    Slurm,
}

impl Launcher {
    /// The name as written in `cluster.launcher` and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Launcher::Local => "local",
            Launcher::Procs => "procs",
            Launcher::Slurm => "slurm",
        }
    }
}

/// `[cluster.slurm]`: what `arl run --launcher slurm` asks `sbatch` for. Only flags every
/// Slurm from 22.05 on takes are rendered; anything else goes in `sbatch_extra`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct SlurmConfig {
    /// `--partition` of both jobs; empty: the site's default.
    pub partition: String,
    /// `--account` of both jobs; empty: the user's default.
    pub account: String,
    /// `--time` of both jobs (`D-HH:MM:SS`, `HH:MM:SS` or minutes); empty: the partition's.
    #[serde(deserialize_with = "slurm_time")]
    pub time: String,
    /// GPUs of the trainer job (`--gres=gpu:N`); unset: 1 when `model.backend` is a GPU
    /// backend, else 0.
    pub trainer_gpus: Option<u32>,
    /// GPUs of each worker task; unset: as `trainer_gpus`.
    pub worker_gpus: Option<u32>,
    /// `--cpus-per-task` of the trainer job.
    pub trainer_cpus: u32,
    /// `--cpus-per-task` of each worker task (grading runs on them).
    pub worker_cpus: u32,
    /// Both jobs are submitted `--requeue` (Slurm restarts them after a node failure; a
    /// requeued trainer resumes from its last checkpoint).
    pub requeue: bool,
    /// More `#SBATCH` flags for both jobs, each one `--flag` or `--flag=value`
    /// (e.g. `--qos=high`, `--constraint=h100`).
    pub sbatch_extra: Vec<String>,
    /// Refuse a run folder on a filesystem only one node sees (tmpfs, or a local disk); set
    /// false for a cluster of one node.
    pub require_shared_fs: bool,
}

impl Default for SlurmConfig {
    fn default() -> Self {
        Self {
            partition: String::new(),
            account: String::new(),
            time: String::new(),
            trainer_gpus: None,
            worker_gpus: None,
            trainer_cpus: 4,
            worker_cpus: 4,
            requeue: true,
            sbatch_extra: Vec::new(),
            require_shared_fs: true,
        }
    }
}

/// `time` as Slurm writes it, also when TOML or `--set` read it as a number of minutes (`90`)
/// or a time of day (`12:00:00`).
fn slurm_time<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    match toml::Value::deserialize(d)? {
        toml::Value::String(s) => Ok(s),
        toml::Value::Integer(n) => Ok(n.to_string()),
        toml::Value::Datetime(t) => Ok(t.to_string()),
        other => Err(serde::de::Error::custom(format!("`{other}` is not a Slurm time; valid: \"D-HH:MM:SS\", \"HH:MM:SS\" or minutes"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slurm_time_may_be_written_as_toml_reads_it() {
        for (text, want) in [("time = 90", "90"), ("time = 12:00:00", "12:00:00"), ("time = \"1-00:00:00\"", "1-00:00:00")] {
            let s: SlurmConfig = toml::from_str(text).unwrap();
            assert_eq!(s.time, want, "{text}");
        }
        assert!(toml::from_str::<SlurmConfig>("time = 1.5").unwrap_err().to_string().contains("is not a Slurm time"));
    }
}
