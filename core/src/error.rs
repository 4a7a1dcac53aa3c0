//! Library error types, grouped by cause. Binaries wrap them with context (anyhow).

use thiserror::Error;

/// A run configuration that cannot be used. Every message names the offending key.
#[derive(Debug, Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("config file {path} is not valid TOML: {message}")]
    Syntax { path: String, message: String },
    #[error("config key `{key}`: {message}")]
    Invalid { key: String, message: String },
    #[error("--set {arg}: {message}")]
    Override { arg: String, message: String },
}

/// A plugin name that the registry cannot resolve.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum RegistryError {
    #[error("unknown {kind} `{name}`; valid {plural}: {}", list_or_none(.valid))]
    Unknown { kind: &'static str, plural: &'static str, name: String, valid: Vec<&'static str> },
    #[error("{kind} `{name}` is registered twice (by {first} and {second}); plugin names must be unique")]
    Duplicate { kind: &'static str, name: &'static str, first: &'static str, second: &'static str },
}

fn list_or_none(names: &[&'static str]) -> String {
    if names.is_empty() { "(none registered)".to_string() } else { names.join(", ") }
}

/// A plugin factory refused its configuration.
#[derive(Debug, Error)]
#[error("{kind} `{name}`: {message}")]
pub struct PluginError {
    pub kind: &'static str,
    pub name: String,
    pub message: String,
}

/// An environment failure that is not the model's fault (a bad task, a sandbox that broke).
/// Model mistakes are never errors: they are observations and statistics.
#[derive(Debug, Error)]
pub enum EnvError {
    #[error("task `{0}` not found")]
    UnknownTask(String),
    #[error("episode already finished")]
    Finished,
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    #[error("{0}")]
    Other(String),
}

/// The sandbox itself failed (could not start a job); a job that crashes is an outcome.
#[derive(Debug, Error)]
pub enum SandboxError {
    #[error("sandbox setup failed: {0}")]
    Setup(String),
    #[error("sandbox i/o: {0}")]
    Io(#[from] std::io::Error),
    /// The host ran short (disk space, inodes, memory, descriptors, processes) while
    /// setting up one job: that job did not run, the sandbox itself is fine. Gyms give the
    /// episode reward 0 and count it (`sandbox_exhausted`) instead of ending the run.
    #[error("sandbox out of resources: {0}")]
    Exhausted(String),
}

impl SandboxError {
    /// An i/o error while setting up a job: [`SandboxError::Exhausted`] when the host ran
    /// short, else [`SandboxError::Setup`] with `context`.
    pub fn io(context: &str, e: std::io::Error) -> SandboxError {
        let short = [libc::ENOSPC, libc::EDQUOT, libc::ENOMEM, libc::EMFILE, libc::ENFILE, libc::EAGAIN];
        if e.raw_os_error().is_some_and(|code| short.contains(&code)) {
            SandboxError::Exhausted(format!("{context}: {e}"))
        } else {
            SandboxError::Setup(format!("{context}: {e}"))
        }
    }
}

/// Losses and advantage estimators refuse inputs that do not fit.
#[derive(Debug, Error)]
pub enum LossError {
    #[error("shape mismatch: {0}")]
    Shape(String),
    #[error("setting `{key}` does not apply to {what}")]
    NotApplicable { key: String, what: String },
    #[error("{0}")]
    Invalid(String),
}
