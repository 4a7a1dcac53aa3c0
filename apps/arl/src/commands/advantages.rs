//! `arl advantages`: run a registered advantage estimator on rewards from a JSON file.

use std::io::Write;
use std::path::PathBuf;

use arl_core::registry::{self, AdvantagePlugin};
use arl_core::{AdvantageInput, RunConfig};
use serde::Deserialize;
use serde_json::json;

use super::loss::section_overrides;

#[derive(Debug, clap::Args)]
pub struct Advantages {
    /// Registered advantage estimator (advantage.name; `arl list`).
    #[arg(long, value_name = "NAME")]
    pub advantage: String,
    /// An estimator setting, with the run config's key: --set advantage.std_unbiased=false
    /// (the `advantage.` prefix may be left out). Repeatable.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// JSON {"rewards": [..], "group_ids": [..]} (one entry per episode), optionally
    /// "response_tokens": [..] (response lengths, for REINFORCE++'s whitening over tokens, as
    /// `arl run` passes them) or "token_counts": [..] for token-weighted statistics (AReaL).
    #[arg(long, value_name = "FILE")]
    pub input: PathBuf,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Rewards {
    rewards: Vec<f64>,
    group_ids: Vec<usize>,
    /// Response tokens per episode: the whitening of REINFORCE++ runs over them (verl).
    #[serde(default)]
    response_tokens: Option<Vec<f64>>,
    /// Policy tokens per episode: statistics weighted by tokens, as AReaL computes them.
    #[serde(default)]
    token_counts: Option<Vec<f64>>,
}

impl Advantages {
    pub fn execute(self, out: &mut dyn Write) -> anyhow::Result<()> {
        let mut o = section_overrides("advantage", &self.set)?;
        o.set("advantage.name", self.advantage.clone());
        let config = RunConfig::load(None, &o)?.advantage;
        let estimator = (registry::get::<AdvantagePlugin>(&config.name)?.build)(&config)?;
        let text = super::read_input(&self.input, "--input")?;
        let r: Rewards = serde_json::from_str(&text).map_err(|e| {
            crate::usage!("rewards file {}: {e} (expected {{\"rewards\": [..], \"group_ids\": [..]}})", self.input.display())
        })?;
        if let Some(counts) = &r.token_counts
            && counts.len() != r.rewards.len()
        {
            return Err(crate::usage!(
                "rewards file {}: {} token_counts for {} rewards",
                self.input.display(),
                counts.len(),
                r.rewards.len()
            ));
        }
        let input = AdvantageInput { rewards: &r.rewards, group_ids: &r.group_ids, response_tokens: r.response_tokens.as_deref() };
        let adv = match &r.token_counts {
            Some(counts) => estimator.advantages_token_weighted(&input, counts),
            None => estimator.advantages(&input),
        }
        .map_err(|e| crate::usage!("rewards file {}: {e}", self.input.display()))?;
        writeln!(out, "{}", serde_json::to_string_pretty(&json!({ "advantages": adv }))?)?;
        Ok(())
    }
}
