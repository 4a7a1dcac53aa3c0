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
    check_real_pytest(sandbox.as_ref())?;
    Ok(Box::new(ToolsEnv(BankEnv::from_config("tools", config, sandbox)?)))
}

/// Under a real shell (`rlimit`), `Bash` says pytest is available and runs the installed one
/// (`scripts/setup/pytest.sh`); without it every test run would show the model (and the oracle
/// transcripts) `ModuleNotFoundError: No module named 'pytest'`, so the env refuses to start.
/// The emulated shell (`wasm`) has its own runner and needs nothing.
fn check_real_pytest(sandbox: &dyn Sandbox) -> Result<(), PluginError> {
    match sandbox.shell() {
        Some(shell) if !shell.python_path.iter().any(|p| p == arl_core::PYTEST_AT) => Err(PluginError {
            kind: "env",
            name: "tools".into(),
            message: format!(
                "sandbox `{}` runs Bash in a real shell, and pytest is not installed for it; run scripts/setup/pytest.sh once \
                 (it fills ~/.cache/arl/assets/pytest, or set ARL_PYTEST_DIR), or use --sandbox wasm",
                sandbox.name()
            ),
        }),
        _ => Ok(()),
    }
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

#[cfg(test)]
mod pytest_tests {
    use arl_core::{Job, JobOutcome, Sandbox, SandboxError, ShellSupport};

    use super::check_real_pytest;

    /// A sandbox with a real shell (`Some`) or an emulated one (`None`); it never runs a job.
    struct StandIn(Option<ShellSupport>);

    impl Sandbox for StandIn {
        fn name(&self) -> &str {
            "stand-in"
        }
        fn run(&self, _: &Job) -> Result<JobOutcome, SandboxError> {
            unreachable!("never runs a job")
        }
        fn shell(&self) -> Option<&ShellSupport> {
            self.0.as_ref()
        }
    }

    #[test]
    fn a_real_shell_without_pytest_is_refused_in_one_line() {
        let shell = |python_path: Vec<String>| ShellSupport { bash: "/bin/bash".into(), repo: "/repo".into(), python_path };
        let err = check_real_pytest(&StandIn(Some(shell(vec![])))).expect_err("no pytest: refused").to_string();
        assert!(err.starts_with("env `tools`: sandbox `stand-in` runs Bash in a real shell"), "{err}");
        assert!(err.contains("scripts/setup/pytest.sh") && !err.contains('\n'), "{err}");
        assert!(check_real_pytest(&StandIn(Some(shell(vec![arl_core::PYTEST_AT.into()])))).is_ok());
        // The emulated shell has its own runner.
        assert!(check_real_pytest(&StandIn(None)).is_ok());
    }
}
