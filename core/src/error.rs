//! Library error types, grouped by cause. Binaries wrap them with context (anyhow).

use thiserror::Error;

/// A run configuration that cannot be used. Every message names the offending key.
#[derive(Debug, Error)]
pub enum ConfigError {
    /// The config file could not be read (missing, unreadable): check the path given.
    #[error("cannot read config file {path}: {source}")]
    Read {
        /// The file as given on the command line.
        path: String,
        /// Why reading failed.
        source: std::io::Error,
    },
    /// The config text is not TOML; fix the file at the position the parser names.
    #[error("config file {path} is not valid TOML: {message}")]
    Syntax {
        /// The file, or `<string>` for config text parsed from memory.
        path: String,
        /// The TOML parser's message, folded onto one line.
        message: String,
    },
    /// A key that does not exist, or a value of the wrong type or out of range, or a
    /// combination of settings that cannot work together.
    #[error("config key `{key}`: {message}")]
    Invalid {
        /// The dotted key at fault, e.g. `trainer.steps`.
        key: String,
        /// What is wrong and, where there is one, what to set instead.
        message: String,
    },
    /// A `--set key=value` override that is not of that form (no `=`, an empty key part).
    #[error("--set {arg}: {message}")]
    Override {
        /// The override as given on the command line.
        arg: String,
        /// What form was expected.
        message: String,
    },
}

/// A plugin name that the registry cannot resolve.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum RegistryError {
    /// No plugin of this kind is registered under the name: a typo, or the crate that
    /// provides it is not linked into the binary. The message lists the valid names.
    #[error("unknown {kind} `{name}`; valid {plural}: {}", list_or_none(.valid))]
    Unknown {
        /// The plugin kind ([`crate::registry::Kind::KIND`]), e.g. `env`.
        kind: &'static str,
        /// The kind in the plural, for the message.
        plural: &'static str,
        /// The name asked for.
        name: String,
        /// Every name registered for this kind.
        valid: Vec<&'static str>,
    },
    /// Two linked crates register a plugin of one kind under one name; one must be
    /// renamed (or one crate left out of the build).
    #[error("{kind} `{name}` is registered twice (by {first} and {second}); plugin names must be unique")]
    Duplicate {
        /// The plugin kind, e.g. `env`.
        kind: &'static str,
        /// The name registered twice.
        name: &'static str,
        /// One registering module path (the smaller of the two, so the message is stable).
        first: &'static str,
        /// The other registering module path.
        second: &'static str,
    },
}

fn list_or_none(names: &[&'static str]) -> String {
    if names.is_empty() { "(none registered)".to_string() } else { names.join(", ") }
}

/// A plugin factory refused its configuration.
#[derive(Debug, Error)]
#[error("{kind} `{name}`: {message}")]
pub struct PluginError {
    /// The plugin kind, e.g. `env`, `tool set`, `sandbox`.
    pub kind: &'static str,
    /// The plugin's registered name.
    pub name: String,
    /// What in the configuration the factory refused, and why.
    pub message: String,
}

/// An environment failure that is not the model's fault (a bad task, a sandbox that broke).
/// Model mistakes are never errors: they are observations and statistics.
#[derive(Debug, Error)]
pub enum EnvError {
    /// The environment has no task with this id.
    #[error("task `{0}` not found")]
    UnknownTask(String),
    /// A session was stepped or finished after it had already ended: a caller bug, not a
    /// model mistake.
    #[error("episode already finished")]
    Finished,
    /// The sandbox failed in a way the environment did not turn into an outcome.
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    /// Any other environment failure (a task it cannot parse, an env process that broke);
    /// the message says which task and what.
    #[error("{0}")]
    Other(String),
}

/// The sandbox itself failed (could not start a job); a job that crashes is an outcome.
#[derive(Debug, Error)]
pub enum SandboxError {
    /// The sandbox could not start a job (no interpreter, a bad job file path, a
    /// missing runtime asset); the message says what and, where it can, how to fix it.
    #[error("sandbox setup failed: {0}")]
    Setup(String),
    /// An i/o error from the host while running a job, outside the job itself.
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
    /// Inputs whose lengths or tensor shapes disagree (e.g. rewards and group ids of
    /// different lengths): a caller bug; the message gives both sizes.
    #[error("shape mismatch: {0}")]
    Shape(String),
    /// A setting was given for a loss or estimator it has no meaning for.
    #[error("setting `{key}` does not apply to {what}")]
    NotApplicable {
        /// The setting's dotted key.
        key: String,
        /// The loss or estimator it was given for.
        what: String,
    },
    /// A value out of its domain (a reward that is not finite, a count that is not a
    /// count) or an input the configured loss needs but did not get.
    #[error("{0}")]
    Invalid(String),
}
