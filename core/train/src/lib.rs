//! The RL loop, written only against arl-core's traits: [`rollout`] samples episodes
//! token-in/token-out, [`update`] turns them into gradient steps, [`eval`] measures pass@1 on
//! held-out tasks, [`checkpoint`] saves and resumes a run, and [`trainer`] composes them into
//! a run ([`offpolicy`]: its rollout thread when `trainer.max_steps_off_policy` is set). Each
//! is a public building block, so a researcher can write their own loop; `arl run` is only the
//! default composition. [`sft`] is supervised fine-tuning on chat data with the
//! same pieces (`arl sft`).

pub mod batch;
pub mod checkpoint;
pub mod curriculum;
pub mod dist;
pub mod eval;
pub mod metrics;
pub mod micro;
pub mod offpolicy;
pub mod preflight;
pub mod rollout;
pub mod rounds;
pub mod run_dir;
pub mod sft;
pub mod tensorboard;
pub mod trainer;
pub mod update;

use thiserror::Error;

use arl_core::chat::ChatError;
use arl_core::policy::PolicyError;
use arl_core::{ConfigError, EnvError, LossError};

/// Why a training run stopped with an error (never a model mistake: those are statistics).
#[derive(Debug, Error)]
pub enum TrainError {
    #[error(transparent)]
    Env(#[from] EnvError),
    #[error(transparent)]
    Chat(#[from] ChatError),
    #[error(transparent)]
    Policy(#[from] PolicyError),
    #[error(transparent)]
    Loss(#[from] LossError),
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// A file or folder that could not be read or written, with its path.
    #[error("{}: {error}", path.display())]
    File { path: std::path::PathBuf, error: std::io::Error },
    /// The configuration or the run folder does not allow this run (a usage error).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// SFT data that cannot be used (its file and line).
    #[error(transparent)]
    SftData(#[from] sft::SftDataError),
    #[error("{0}")]
    Other(String),
}

impl TrainError {
    /// Attach `path` to an I/O error: `fs::write(&p, …).map_err(TrainError::at(&p))`.
    pub fn at(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> TrainError + '_ {
        move |error| TrainError::File { path: path.to_path_buf(), error }
    }

    /// Whether this is a configuration or usage error rather than a failure at run time.
    pub fn is_config(&self) -> bool {
        matches!(self, TrainError::Config(_) | TrainError::SftData(_))
    }
}
