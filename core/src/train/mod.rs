//! The RL loop, written only against arl-core's traits: [`rollout`] samples episodes
//! token-in/token-out, [`update`] turns them into gradient steps, [`eval`] measures pass@1 on
//! held-out tasks, [`checkpoint`] saves and resumes a run, and [`trainer`] composes them into
//! a run. Each is a public building block, so a researcher can write their own loop; `arl run`
//! is only the default composition.

pub mod batch;
pub mod checkpoint;
pub mod eval;
pub mod metrics;
pub mod rollout;
pub mod trainer;
pub mod update;

use thiserror::Error;

use crate::chat::ChatError;
use crate::policy::PolicyError;
use crate::{EnvError, LossError};

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
    #[error("{0}")]
    Other(String),
}
