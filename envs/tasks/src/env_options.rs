//! `[env.options]` shared by the gyms built on this bank (`edit`, `tools`).

use arl_core::PluginError;
use arl_core::config::EnvConfig;
use serde::Deserialize;

use crate::BankOptions;

/// How many tasks each bank template yields; the seed and name randomization come from the
/// env config itself.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BankEnvOptions {
    /// Tasks per training template (each with its own names).
    pub train_instances: usize,
    /// Tasks per held-out template.
    pub heldout_instances: usize,
}

impl Default for BankEnvOptions {
    fn default() -> Self {
        let bank = BankOptions::default();
        Self { train_instances: bank.train_instances, heldout_instances: bank.heldout_instances }
    }
}

impl BankEnvOptions {
    /// Read `config.options` for the env called `env` (unknown keys rejected).
    pub fn parse(env: &str, config: &EnvConfig) -> Result<Self, PluginError> {
        serde_json::from_value(config.options.clone().into())
            .map_err(|e| PluginError { kind: "env", name: env.into(), message: format!("env.options: {e}") })
    }

    /// The bank these options and `config` select.
    pub fn bank(&self, config: &EnvConfig) -> BankOptions {
        BankOptions {
            seed: config.seed,
            randomize_names: config.randomize_names,
            train_instances: self.train_instances,
            heldout_instances: self.heldout_instances,
        }
    }
}
