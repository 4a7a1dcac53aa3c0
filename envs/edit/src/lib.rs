//! arl-env-edit — the `edit` gym: fix a bug by choosing one of the task's authored edit
//! operations from a small tool menu.
//!
//! Tools ([`tools::EditTools`]): `read_source`, `apply_edit` (by name; the gym writes the
//! change; one edit per episode), `run_tests` (the public tests, in the sandbox) and
//! `submit`. A turn without a tool call is a final answer and also ends the episode. The
//! reward is 1 iff the final source passes every hidden test ([`arl_tasks::grade`]).
//! Malformed and failed calls use up the turn with an error observation and are counted.
//!
//! It deliberately knows nothing about tokens or the chat template (the trainer parses
//! `<tool_call>` blocks with [`arl_core::toolcall`]), nor about how jobs are isolated.
//! Options (`[env.options]`): `train_instances`, `heldout_instances`, `heldout_train_instances`,
//! `menu_order` (`"task"` or `"episode"`: the menu's order drawn per episode). No cargo features.

pub mod oracle;
mod session;
pub mod tools;

pub use session::EditSession;

use std::sync::Arc;

use arl_core::config::EnvConfig;
use arl_core::{Env, EnvError, EnvSession, OracleNoise, OracleTurn, PluginError, Sandbox, Split, Task, ToolSchema, ToolSet};
use arl_tasks::{BankEnv, BankEnvOptions, BankOptions, BugTask, MenuOrder};

/// `[env.options]` of the `edit` env.
pub type EditOptions = BankEnvOptions;

pub struct EditEnv(BankEnv);

arl_core::register!(EnvPlugin {
    name: "edit",
    about: "fix a Python bug by choosing one authored edit from a tool menu (read, edit, test, submit)",
    build: build,
});

fn build(config: &EnvConfig, sandbox: Arc<dyn Sandbox>) -> Result<Box<dyn Env>, PluginError> {
    Ok(Box::new(EditEnv(BankEnv::from_config("edit", config, sandbox)?)))
}

impl EditEnv {
    pub fn new(config: &EnvConfig, options: &EditOptions, sandbox: Arc<dyn Sandbox>) -> Self {
        Self(BankEnv::new(config, options, sandbox))
    }

    pub fn bank(&self) -> &BankOptions {
        &self.0.bank
    }

    pub fn max_calls_per_turn(&self) -> u32 {
        self.0.max_calls_per_turn
    }
}

impl Env for EditEnv {
    fn tasks(&self, split: Split) -> Result<Vec<Task>, EnvError> {
        Ok(self.0.tasks(split))
    }

    fn tools(&self) -> Vec<ToolSchema> {
        tools::EditTools.schemas()
    }

    fn reset(&self, task: &Task) -> Result<Box<dyn EnvSession>, EnvError> {
        Ok(Box::new(EditSession::new(task, self.0.max_turns, self.0.sandbox.clone())?))
    }

    /// With `menu_order = "episode"` the menu's order is drawn from `seed`; else the task's own.
    fn reset_seeded(&self, task: &Task, seed: u64) -> Result<Box<dyn EnvSession>, EnvError> {
        match self.0.menu_order {
            MenuOrder::Task => self.reset(task),
            MenuOrder::Episode => {
                let mut bug = BugTask::from_task(task).map_err(|e| EnvError::Other(e.to_string()))?;
                bug.shuffle_menu(seed);
                self.reset(&bug.to_task())
            }
        }
    }

    fn oracle(&self, task: &Task, noise: &OracleNoise, seed: u64) -> Result<Option<Vec<OracleTurn>>, EnvError> {
        let bug = BugTask::from_task(task).map_err(|e| EnvError::Other(e.to_string()))?;
        Ok(Some(oracle::turns(&bug, noise, seed)))
    }
}
