//! `[env.options]` of the `harness` env.

use std::path::PathBuf;

use arl_core::PluginError;
use arl_core::config::EnvConfig;
use arl_tasks::BankEnvOptions;
use serde::Deserialize;

/// What runs the episodes, and the bank's task counts (as the other bank gyms have them).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HarnessOptions {
    /// The agent program, run as `bash -c COMMAND` in the task's repository (`/repo`), e.g.
    /// `python3 /job/agent.py` or `mini -y -t "$ARL_TASK" …`.
    pub command: String,
    /// Host files copied into each job's directory (`/job/<file name>`), e.g. the program.
    #[serde(default)]
    pub files: Vec<PathBuf>,
    /// Directories put on the program's `PYTHONPATH` (bound read-only into the job's root by
    /// `sandbox.binds`), e.g. a `site-packages` holding the `openai` SDK.
    #[serde(default)]
    pub python_path: Vec<String>,
    /// The model name the program must ask for (`model` in its requests, `$ARL_MODEL`).
    #[serde(default = "default_model")]
    pub model: String,
    /// Wall-clock seconds per episode; the program is then stopped and its repository graded.
    /// The job's ceiling `sandbox.timeout_s` must be longer.
    #[serde(default = "default_timeout")]
    pub timeout_s: u64,
    /// Memory per process of the episode's job, MiB (address space).
    #[serde(default = "default_memory")]
    pub memory_mb: u64,
    /// Episodes whose programs run at once (their turns are sampled one request at a time).
    #[serde(default = "default_parallel")]
    pub parallel: usize,
    #[serde(default)]
    pub train_instances: Option<usize>,
    #[serde(default)]
    pub heldout_instances: Option<usize>,
    #[serde(default)]
    pub heldout_train_instances: Option<usize>,
}

fn default_model() -> String {
    "policy".into()
}

fn default_timeout() -> u64 {
    120
}

fn default_memory() -> u64 {
    1024
}

fn default_parallel() -> usize {
    4
}

/// The most episodes at once.
pub const MAX_PARALLEL: usize = 64;

impl HarnessOptions {
    /// Read `config.options` (unknown keys rejected), and the bank options the task counts
    /// select (checked as the `edit` and `tools` gyms check them).
    pub fn parse(config: &EnvConfig) -> Result<(Self, BankEnvOptions), PluginError> {
        let error = |message: String| PluginError { kind: "env", name: "harness".into(), message };
        let options: Self = serde_path_to_error::deserialize(serde_json::Value::Object(config.options.clone())).map_err(|e| {
            let key = e.path().to_string();
            let key = if key == "." { String::new() } else { format!(".{key}") };
            let fix = if e.inner().to_string().contains("missing field `command`") {
                "; set env.options.command to the agent program, e.g. 'python3 /job/agent.py' (docs/harness.md)"
            } else {
                ""
            };
            error(format!("env.options{key}: {}{fix}", e.into_inner()))
        })?;
        if options.command.trim().is_empty() {
            return Err(error("env.options.command is empty; set it to the agent program, e.g. 'python3 /job/agent.py'".into()));
        }
        for (key, n, range) in [
            ("timeout_s", options.timeout_s, 1..=86_400),
            ("memory_mb", options.memory_mb, 64..=1 << 20),
            ("parallel", options.parallel as u64, 1..=MAX_PARALLEL as u64),
        ] {
            if !range.contains(&n) {
                return Err(error(format!("env.options.{key}: {n} is out of range; valid: {} to {}", range.start(), range.end())));
            }
        }
        if options.model.is_empty() || options.model.chars().any(char::is_whitespace) {
            return Err(error(format!("env.options.model: {:?} must be one word (the name the program asks for)", options.model)));
        }
        for file in &options.files {
            let name = file.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if !file.is_file() {
                return Err(error(format!(
                    "env.options.files: {} is not a file; give the path of the program to copy into each job",
                    file.display()
                )));
            }
            if ["repo", "task.md", "harness.log", crate::episode::RUNNER_ENTRY, ".arl"].contains(&name) {
                return Err(error(format!("env.options.files: {} would replace the job's own `{name}`; rename it", file.display())));
            }
        }
        let mut bank_config = config.clone();
        let mut counts = serde_json::Map::new();
        for (key, n) in [
            ("train_instances", options.train_instances),
            ("heldout_instances", options.heldout_instances),
            ("heldout_train_instances", options.heldout_train_instances),
        ] {
            if let Some(n) = n {
                counts.insert(key.into(), n.into());
            }
        }
        bank_config.options = counts;
        let bank = BankEnvOptions::parse("harness", &bank_config)?;
        Ok((options, bank))
    }
}
