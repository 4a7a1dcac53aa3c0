//! What the gyms built on this bank (`edit`, `tools`) share: `[env.options]`
//! ([`BankEnvOptions`]) and the env's own state ([`BankEnv`]: the bank its tasks come from,
//! the turn limits and the sandbox). Each gym adds only its tools and its session.

use std::sync::Arc;

use arl_core::config::EnvConfig;
use arl_core::{PluginError, Sandbox, Split, Task};
use serde::Deserialize;

use crate::{BankOptions, BugTask, generate};

/// How many tasks each bank template yields; the seed and name randomization come from the
/// env config itself.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BankEnvOptions {
    /// Tasks per training template (each with its own names).
    pub train_instances: usize,
    /// Tasks per held-out template (the `heldout` split: bugs no training task has).
    pub heldout_instances: usize,
    /// Held-out tasks per training template (the `heldout_instances` split: the training
    /// bugs under names and operand orders no training task has); 0: no such split.
    pub heldout_train_instances: usize,
    /// The order of the `edit` gym's menu of edits ([`MenuOrder`]); other gyms have no menu.
    pub menu_order: MenuOrder,
}

/// Where the order of a task's menu of edits comes from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MenuOrder {
    /// The task's own, fixed by its instance: every episode of a task sees the same menu.
    #[default]
    Task,
    /// Drawn again for every episode ([`arl_core::Env::reset_seeded`]), so the letter that
    /// names the fix differs between the episodes of a group: a policy that prefers a letter
    /// earns the same in every group and only reading the edits is rewarded.
    Episode,
}

impl Default for BankEnvOptions {
    fn default() -> Self {
        let bank = BankOptions::default();
        Self {
            train_instances: bank.train_instances,
            heldout_instances: bank.heldout_instances,
            heldout_train_instances: bank.heldout_train_instances,
            menu_order: MenuOrder::Task,
        }
    }
}

impl BankEnvOptions {
    /// Most instances per template: the bank holds every task in memory (32 training
    /// templates × this), and name randomization repeats itself long before.
    pub const MAX_INSTANCES: usize = 1000;

    /// Read `config.options` for the env called `env` (unknown keys rejected, counts in
    /// 1..=[`Self::MAX_INSTANCES`], `heldout_train_instances` from 0).
    pub fn parse(env: &str, config: &EnvConfig) -> Result<Self, PluginError> {
        let error = |message: String| PluginError { kind: "env", name: env.into(), message };
        let options: Self = serde_path_to_error::deserialize(serde_json::Value::from(config.options.clone())).map_err(|e| {
            let key = e.path().to_string();
            let key = if key == "." { String::new() } else { format!(".{key}") };
            error(format!("env.options{key}: {}", e.into_inner()))
        })?;
        for (key, n, least) in [
            ("train_instances", options.train_instances, 1),
            ("heldout_instances", options.heldout_instances, 1),
            ("heldout_train_instances", options.heldout_train_instances, 0),
        ] {
            if !(least..=Self::MAX_INSTANCES).contains(&n) {
                return Err(error(format!("env.options.{key}: {n} is out of range; valid: {least} to {}", Self::MAX_INSTANCES)));
            }
        }
        if options.menu_order == MenuOrder::Episode && env != "edit" {
            return Err(error(format!(
                "env.options.menu_order: the `{env}` gym shows no menu of edits; \"episode\" is the edit gym's (remove the key)"
            )));
        }
        Ok(options)
    }

    /// The bank these options and `config` select.
    pub fn bank(&self, config: &EnvConfig) -> BankOptions {
        BankOptions {
            seed: config.seed,
            randomize_names: config.randomize_names,
            train_instances: self.train_instances,
            heldout_instances: self.heldout_instances,
            heldout_train_instances: self.heldout_train_instances,
        }
    }
}

/// A bank gym's state: its tasks, turn limits and sandbox.
#[derive(Clone)]
pub struct BankEnv {
    pub bank: BankOptions,
    pub max_turns: u32,
    pub max_calls_per_turn: u32,
    pub menu_order: MenuOrder,
    pub sandbox: Arc<dyn Sandbox>,
}

impl BankEnv {
    pub fn new(config: &EnvConfig, options: &BankEnvOptions, sandbox: Arc<dyn Sandbox>) -> Self {
        Self {
            bank: options.bank(config),
            max_turns: config.max_turns,
            max_calls_per_turn: config.max_calls_per_turn,
            menu_order: options.menu_order,
            sandbox,
        }
    }

    /// From the env config, parsing `[env.options]` for the env called `env`.
    pub fn from_config(env: &str, config: &EnvConfig, sandbox: Arc<dyn Sandbox>) -> Result<Self, PluginError> {
        Ok(Self::new(config, &BankEnvOptions::parse(env, config)?, sandbox))
    }

    /// The bank's tasks of `split`, as the trainer sees them.
    pub fn tasks(&self, split: Split) -> Vec<Task> {
        generate(&self.bank, split).iter().map(BugTask::to_task).collect()
    }
}
