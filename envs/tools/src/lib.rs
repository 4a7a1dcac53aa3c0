//! arl-env-tools — the `tools` gym: fix a bug with Claude-Code-style tools over an in-memory
//! repository, writing the change yourself.
//!
//! Each episode gets one bank task as a repository at `/repo` holding `<fn>.py` (the buggy
//! source) and `test_<fn>.py` (the public tests); hidden tests never enter it. The tool set
//! ([`tools::ClaudeCodeTools`], also registered alone as tool set `claude-code`) has Claude
//! Code's names and parameters (SPEC.md §3): `Read(file_path, offset?, limit?)`,
//! `Edit(file_path, old_string, new_string, replace_all?)`, `Write(file_path, content)` and
//! `Bash(command, timeout?, description?)`, where Bash is an emulated shell ([`shell`]) whose
//! every Python execution runs in the [`Sandbox`]. Up to `max_calls_per_turn` calls per turn
//! run in order; a turn without a call is the final answer; after `max_turns` turns the
//! episode is graded as it stands. The reward is 1 iff the final `<fn>.py` passes every hidden
//! test ([`arl_tasks::grade`], which copies only that file). Per-episode statistics are in
//! [`counters`].
//!
//! It deliberately knows nothing about tokens or the chat template (the trainer parses
//! `<tool_call>` blocks with [`arl_core::toolcall`]), nor about how jobs are isolated.
//! Options (`[env.options]`): `train_instances`, `heldout_instances`. No cargo features.

pub mod claims;
pub mod counters;
mod files;
pub mod oracle;
pub mod paths;
mod session;
pub mod shell;
pub mod tools;

#[cfg(test)]
mod testing;

pub use session::ToolsSession;

use std::sync::Arc;

use arl_core::config::EnvConfig;
use arl_core::{Env, EnvError, EnvSession, OracleNoise, OracleTurn, PluginError, Sandbox, Split, Task, ToolSchema};
use arl_tasks::{BankEnv, BankEnvOptions, BankOptions, BugTask};

/// `[env.options]` of the `tools` env.
pub type ToolsOptions = BankEnvOptions;

pub struct ToolsEnv(BankEnv);

arl_core::register!(EnvPlugin {
    name: "tools",
    about: "fix a Python bug with Claude-Code-style tools (Read, Edit, Write, Bash) over an in-memory repo",
    build: build,
});

fn build(config: &EnvConfig, sandbox: Arc<dyn Sandbox>) -> Result<Box<dyn Env>, PluginError> {
    Ok(Box::new(ToolsEnv(BankEnv::from_config("tools", config, sandbox)?)))
}

impl ToolsEnv {
    pub fn new(config: &EnvConfig, options: &ToolsOptions, sandbox: Arc<dyn Sandbox>) -> Self {
        Self(BankEnv::new(config, options, sandbox))
    }

    pub fn bank(&self) -> &BankOptions {
        &self.0.bank
    }

    pub fn max_calls_per_turn(&self) -> u32 {
        self.0.max_calls_per_turn
    }
}

impl Env for ToolsEnv {
    fn tasks(&self, split: Split) -> Result<Vec<Task>, EnvError> {
        Ok(self.0.tasks(split))
    }

    fn tools(&self) -> Vec<ToolSchema> {
        let sandbox = &self.0.sandbox;
        tools::ClaudeCodeTools::schemas_for(sandbox.shell().is_some(), sandbox.python_packages().is_some())
    }

    /// Writing a whole function in one Edit or Write takes more room than picking a menu item.
    fn default_max_new_tokens(&self) -> u32 {
        256
    }

    fn reset(&self, task: &Task) -> Result<Box<dyn EnvSession>, EnvError> {
        Ok(Box::new(ToolsSession::new(task, self.0.max_turns, self.0.max_calls_per_turn, self.0.sandbox.clone())?))
    }

    fn oracle(&self, task: &Task, noise: &OracleNoise, seed: u64) -> Result<Option<Vec<OracleTurn>>, EnvError> {
        let bug = BugTask::from_task(task).map_err(|e| EnvError::Other(e.to_string()))?;
        Ok(Some(oracle::turns(&bug, noise, seed)))
    }
}
