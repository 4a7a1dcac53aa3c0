//! arl-tasks — the bug-fix task bank and its grader.
//!
//! It owns the authored templates (`bank/<family>.txt`: a small Python function with one
//! injected bug, the reference fix, plausible distractor edits, public `test_*` functions
//! and hidden (arguments, expected value) cases), their deterministic instantiation from a
//! seed with name randomization ([`generate`]), the fixed held-out split (two templates per
//! family), and hack-resistant grading ([`grade`]): the sandbox only reports what the
//! function returned; the comparison with expected values happens here, outside.
//!
//! It deliberately knows nothing about episodes, tools or tokens (the gyms do), nor how
//! jobs are isolated (any [`arl_core::Sandbox`]). No cargo features.

mod bank;
mod bank_env;
pub mod grade;
mod names;
pub mod oracle;
mod rng;
mod task;

pub use bank::{Case, FAMILIES, Replace, Template, templates};
pub use bank_env::{BankEnv, BankEnvOptions, MenuOrder};
pub use grade::{GradeReport, PublicReport, episode_reward, grade, run_public};
pub use task::{BankOptions, BugTask, EditOp, HiddenCase, find, generate};

/// A task the bank cannot produce or read.
#[derive(Debug, thiserror::Error)]
pub enum TaskError {
    #[error("no task `{0}` in the bank (list them with `arl tasks --env edit`)")]
    UnknownTask(String),
    #[error("task `{id}` is not a bug-fix task: {message}")]
    BadTask { id: String, message: String },
}

#[cfg(test)]
mod hacks;
#[cfg(test)]
mod validate;
