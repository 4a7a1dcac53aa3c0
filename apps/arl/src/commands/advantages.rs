//! `arl advantages`: run a registered advantage estimator on rewards from a JSON file.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use arl_core::registry::{self, AdvantagePlugin};
use arl_core::{AdvantageInput, RunConfig};
use serde::Deserialize;
use serde_json::json;

use super::loss::section_overrides;

#[derive(Debug, clap::Args)]
pub struct Advantages {
    /// Registered estimator (advantage.name; `arl list`).
    #[arg(long)]
    pub estimator: String,
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
        o.set("advantage.name", self.estimator.clone());
        let config = RunConfig::load(None, &o)?.advantage;
        let estimator = (registry::get::<AdvantagePlugin>(&config.name)?.build)(&config)?;
        let text = std::fs::read_to_string(&self.input).with_context(|| format!("reading {}", self.input.display()))?;
        let r: Rewards = serde_json::from_str(&text).with_context(|| format!("rewards file {}", self.input.display()))?;
        let input = AdvantageInput { rewards: &r.rewards, group_ids: &r.group_ids, response_tokens: r.response_tokens.as_deref() };
        let adv = match &r.token_counts {
            Some(counts) => estimator.advantages_token_weighted(&input, counts)?,
            None => estimator.advantages(&input)?,
        };
        writeln!(out, "{}", serde_json::to_string_pretty(&json!({ "advantages": adv }))?)?;
        Ok(())
    }
}
