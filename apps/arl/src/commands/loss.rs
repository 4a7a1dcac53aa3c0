//! `arl loss eval`: evaluate a registered loss on a small batch from a JSON file, in f64 on
//! the CPU, and print the loss, d loss / d log_prob and the metrics — for checking a recipe
//! ported from another framework number by number.

use std::io::Write;
use std::path::PathBuf;

use arl_core::config::Overrides;
use arl_core::registry::{self, LossPlugin};
use arl_core::{Aggregation, RunConfig};
use arl_losses::eval::{Batch, evaluate};

#[derive(Debug, clap::Subcommand)]
pub enum LossCommand {
    /// Evaluate a loss on a batch: prints {"loss", "grad_log_prob", "metrics"} as JSON.
    Eval(Eval),
}

#[derive(Debug, clap::Args)]
pub struct Eval {
    /// Registered loss (loss.name; `arl list`).
    #[arg(long, value_name = "NAME")]
    pub loss: String,
    /// token-mean | token-sum | seq-mean-token-mean | seq-mean-token-sum | constant-horizon
    /// (loss.aggregation; default: the loss's own).
    #[arg(long, value_name = "NAME")]
    pub aggregation: Option<String>,
    /// A loss setting, with the run config's key: --set loss.clip_high=0.28 (the `loss.`
    /// prefix may be left out). Repeatable.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// JSON with log_prob, old_log_prob, advantages, mask as [batch][tokens] arrays, and
    /// optionally ref_log_prob, behavior_log_prob, entropy.
    #[arg(long, value_name = "FILE")]
    pub input: PathBuf,
}

/// Every array is `[rows][tokens]` with the shape of `log_prob` (at least one row and token).
fn check_shapes(b: &Batch) -> Result<(), String> {
    let rows = b.log_prob.len();
    let tokens = b.log_prob.first().map_or(0, Vec::len);
    if rows == 0 || tokens == 0 {
        return Err("log_prob must have at least one row and one token".into());
    }
    let arrays = [
        ("log_prob", Some(&b.log_prob)),
        ("old_log_prob", Some(&b.old_log_prob)),
        ("advantages", Some(&b.advantages)),
        ("mask", Some(&b.mask)),
        ("ref_log_prob", b.ref_log_prob.as_ref()),
        ("behavior_log_prob", b.behavior_log_prob.as_ref()),
        ("entropy", b.entropy.as_ref()),
    ];
    for (name, array) in arrays {
        let Some(a) = array else { continue };
        if a.len() != rows {
            return Err(format!("{name} has {} rows, log_prob has {rows}", a.len()));
        }
        if let Some((i, r)) = a.iter().enumerate().find(|(_, r)| r.len() != tokens) {
            return Err(format!("{name} row {i} has {} tokens, log_prob rows have {tokens}", r.len()));
        }
    }
    Ok(())
}

/// `--set` keys relative to `section` (`clip_high=…` means `loss.clip_high=…`).
pub fn section_overrides(section: &str, sets: &[String]) -> anyhow::Result<Overrides> {
    let mut o = Overrides::default();
    for arg in sets {
        let prefixed = if arg.starts_with(&format!("{section}.")) { arg.clone() } else { format!("{section}.{arg}") };
        o.push_set(&prefixed)?;
    }
    Ok(o)
}

impl LossCommand {
    pub fn execute(self, out: &mut dyn Write) -> anyhow::Result<()> {
        let LossCommand::Eval(eval) = self;
        let mut o = section_overrides("loss", &eval.set)?;
        o.set("loss.name", eval.loss.clone());
        if let Some(agg) = &eval.aggregation {
            agg.parse::<Aggregation>().map_err(|e| crate::usage!("--aggregation {agg}: {e}"))?;
            o.set("loss.aggregation", agg.clone());
        }
        let config = RunConfig::load(None, &o)?.loss;
        let plugin = registry::get::<LossPlugin>(&config.name)?;
        let loss = (plugin.build)(&config)?;
        let text = super::read_input(&eval.input, "--input")?;
        let batch: Batch = serde_json::from_str(&text).map_err(|e| crate::usage!("batch file {}: {e}", eval.input.display()))?;
        check_shapes(&batch).map_err(|e| crate::usage!("batch file {}: {e}", eval.input.display()))?;
        let result = evaluate(loss.as_ref(), config.aggregation, config.horizon, &batch)
            .map_err(|e| crate::usage!("evaluating loss `{}` on {}: {e}", config.name, eval.input.display()))?;
        writeln!(out, "{}", serde_json::to_string_pretty(&result)?)?;
        Ok(())
    }
}
