//! One validation pass over a resolved [`RunConfig`], before anything is loaded: every plugin
//! name against the registry, every number finite and in its range, every rule between keys,
//! then each plugin built once from its section (so a setting it does not use, or an
//! `env.options` key nobody reads, fails here). Each error is one line naming the key, the
//! value and the valid range.

use std::fmt;
use std::sync::Arc;

use super::RunConfig;
use crate::registry::{self, AdvantagePlugin, EnvPlugin, Kind, LossPlugin, SandboxPlugin};
use crate::{AdvantageInput, ConfigError, Job, JobOutcome, Sandbox, SandboxError};

/// A range of valid values, printed the way the error shows it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Range {
    /// `> lo`
    Above(f64),
    /// `≥ lo`
    AtLeast(f64),
    /// `lo ≤ v ≤ hi`
    Within(f64, f64),
    /// `lo < v ≤ hi`
    AboveUpTo(f64, f64),
    /// `lo ≤ v < hi`
    AtLeastBelow(f64, f64),
}

impl Range {
    fn contains(self, v: f64) -> bool {
        match self {
            Range::Above(lo) => v > lo,
            Range::AtLeast(lo) => v >= lo,
            Range::Within(lo, hi) => v >= lo && v <= hi,
            Range::AboveUpTo(lo, hi) => v > lo && v <= hi,
            Range::AtLeastBelow(lo, hi) => v >= lo && v < hi,
        }
    }
}

impl fmt::Display for Range {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Range::Above(lo) => write!(f, "> {lo}"),
            Range::AtLeast(lo) => write!(f, "≥ {lo}"),
            Range::Within(lo, hi) => write!(f, "{lo} to {hi}"),
            Range::AboveUpTo(lo, hi) => write!(f, "> {lo} and ≤ {hi}"),
            Range::AtLeastBelow(lo, hi) => write!(f, "≥ {lo} and < {hi}"),
        }
    }
}

/// The error for `key` = `value` outside `range`; `why` (may be empty) says where a bound
/// comes from.
fn out_of_range(key: &str, value: impl fmt::Display, range: impl fmt::Display, why: &str) -> ConfigError {
    let why = if why.is_empty() { String::new() } else { format!(" ({why})") };
    ConfigError::Invalid { key: key.to_string(), message: format!("{value} is out of range; valid: {range}{why}") }
}

fn need(key: &str, value: f64, range: Range) -> Result<(), ConfigError> {
    if range.contains(value) { Ok(()) } else { Err(out_of_range(key, value, range, "")) }
}

fn need_opt(key: &str, value: Option<impl Into<f64>>, range: Range) -> Result<(), ConfigError> {
    match value {
        Some(v) => need(key, v.into(), range),
        None => Ok(()),
    }
}

/// Every float in the document is finite: walks the TOML form, so a new key is covered the
/// day it is added.
fn finite(config: &RunConfig) -> Result<(), ConfigError> {
    fn walk(path: &str, v: &toml::Value) -> Result<(), ConfigError> {
        match v {
            toml::Value::Float(f) if !f.is_finite() => {
                Err(ConfigError::Invalid { key: path.to_string(), message: format!("{f} is not a finite number") })
            }
            toml::Value::Table(t) => {
                t.iter().try_for_each(|(k, v)| walk(&if path.is_empty() { k.clone() } else { format!("{path}.{k}") }, v))
            }
            toml::Value::Array(items) => items.iter().enumerate().try_for_each(|(i, v)| walk(&format!("{path}[{i}]"), v)),
            _ => Ok(()),
        }
    }
    // `env.options` is JSON: a non-finite float from `--set` or the TOML file is a JSON null
    // there, which the TOML walk below cannot serialize (it panicked); refuse it first, by key.
    fn nulls(path: &str, v: &serde_json::Value) -> Result<(), ConfigError> {
        match v {
            serde_json::Value::Null => {
                Err(ConfigError::Invalid { key: path.to_string(), message: "not a finite number (nan and inf are refused)".into() })
            }
            serde_json::Value::Object(o) => o.iter().try_for_each(|(k, v)| nulls(&format!("{path}.{k}"), v)),
            serde_json::Value::Array(items) => items.iter().enumerate().try_for_each(|(i, v)| nulls(&format!("{path}[{i}]"), v)),
            _ => Ok(()),
        }
    }
    config.env.options.iter().try_for_each(|(k, v)| nulls(&format!("env.options.{k}"), v))?;
    walk("", &toml::Value::try_from(config).expect("a RunConfig always serializes"))
}

/// The value ranges of single keys. (Loss and estimator keys are checked by the plugin that
/// reads them, when it is built.)
fn ranges(c: &RunConfig) -> Result<(), ConfigError> {
    use Range::*;
    let (e, s, m, t) = (&c.env, &c.sandbox, &c.sampling, &c.trainer);
    need("env.max_turns", e.max_turns.into(), AtLeast(1.0))?;
    need("env.max_calls_per_turn", e.max_calls_per_turn.into(), AtLeast(1.0))?;
    // Upper bounds keep the conversions to bytes and durations from overflowing.
    need("sandbox.timeout_s", s.timeout_s, AboveUpTo(0.0, 86_400.0))?;
    need("sandbox.cpu_s", s.cpu_s as f64, Within(1.0, 86_400.0))?;
    need("sandbox.memory_mb", s.memory_mb as f64, Within(1.0, 1_048_576.0))?;
    need("sandbox.file_size_kb", s.file_size_kb as f64, Within(1.0, 1_073_741_824.0))?;
    need("sandbox.output_kb", s.output_kb as f64, Within(1.0, 1_048_576.0))?;
    need("sampling.temperature", m.temperature, Above(0.0))?;
    need_opt("eval.temperature", c.eval.temperature, Above(0.0))?;
    need_opt("sampling.top_k", m.top_k.map(|k| k as f64), AtLeast(1.0))?;
    need_opt("sampling.top_p", m.top_p, AboveUpTo(0.0, 1.0))?;
    need_opt("sampling.max_new_tokens", m.max_new_tokens, AtLeast(1.0))?;
    need("sampling.max_episode_tokens", m.max_episode_tokens.into(), AtLeast(1.0))?;
    need_opt("sampling.max_prompt_tokens", m.max_prompt_tokens, AtLeast(1.0))?;
    need_opt("sampling.max_response_tokens", m.max_response_tokens, AtLeast(1.0))?;
    need_opt("loss.horizon", c.loss.horizon, Above(0.0))?;
    need("loss.kl_coef", c.loss.kl_coef, AtLeast(0.0))?;
    need("loss.entropy_coef", c.loss.entropy_coef, AtLeast(0.0))?;
    // 0 divides by a zero standard deviation whenever a group's rewards are all equal.
    need_opt("advantage.eps", c.advantage.eps, Above(0.0))?;
    need_opt("advantage.gamma", c.advantage.gamma, Within(0.0, 1.0))?;
    need_opt("advantage.lambda", c.advantage.lambda, Within(0.0, 1.0))?;
    need("trainer.steps", t.steps.into(), AtLeast(1.0))
        .map_err(|_| out_of_range("trainer.steps", t.steps, "≥ 1", "to evaluate a model without training, use `arl eval`"))?;
    need("trainer.group_size", t.group_size.into(), AtLeast(1.0))?;
    need("trainer.prompts", t.prompts.into(), AtLeast(1.0))?;
    need("trainer.lr", t.lr, Above(0.0))?;
    need("trainer.min_lr_ratio", t.min_lr_ratio, Within(0.0, 1.0))?;
    need("trainer.epochs", t.epochs.into(), AtLeast(1.0))?;
    need("trainer.minibatches", t.minibatches.into(), AtLeast(1.0))?;
    need_opt("trainer.micro", t.micro, AtLeast(1.0))?;
    need_opt("trainer.gen_batch", t.gen_batch, AtLeast(1.0))?;
    need("trainer.grad_clip", t.grad_clip, AtLeast(0.0))?;
    need("trainer.weight_decay", t.weight_decay, AtLeast(0.0))?;
    need("trainer.checkpoint_interval_s", t.checkpoint_interval_s, AtLeast(0.0))?;
    need("trainer.max_sampling_attempts", t.max_sampling_attempts.into(), AtLeast(1.0))?;
    need("trainer.overlong_penalty", t.overlong_penalty, AtLeast(0.0))?;
    need_opt("trainer.groups_in_flight", t.groups_in_flight, AtLeast(1.0))?;
    let d = &t.difficulty;
    need("trainer.difficulty.band[0]", d.band[0], AtLeastBelow(0.0, 1.0))?;
    need("trainer.difficulty.band[1]", d.band[1], AboveUpTo(0.0, 1.0))?;
    need("trainer.difficulty.unseen_share", d.unseen_share, Within(0.0, 1.0))?;
    need("trainer.difficulty.revisit_share", d.revisit_share, Within(0.0, 1.0))?;
    need("trainer.difficulty.window", d.window.into(), Within(1.0, 1000.0))?;
    if c.output.dir.trim().is_empty() {
        return Err(ConfigError::Invalid { key: "output.dir".into(), message: "is empty; valid: a directory path".into() });
    }
    Ok(())
}

/// Rules between keys.
fn cross(c: &RunConfig) -> Result<(), ConfigError> {
    let (m, t) = (&c.sampling, &c.trainer);
    let rows = t.prompts as u64 * t.group_size as u64;
    if t.minibatches as u64 > rows {
        return Err(out_of_range(
            "trainer.minibatches",
            t.minibatches,
            format!("1 to {rows}"),
            "a step has trainer.prompts × trainer.group_size rows to split",
        ));
    }
    let per_minibatch = rows.div_ceil(t.minibatches as u64);
    if let Some(micro) = t.micro
        && micro as u64 > per_minibatch
    {
        return Err(out_of_range(
            "trainer.micro",
            micro,
            format!("1 to {per_minibatch}"),
            "the rows of one minibatch: trainer.prompts × trainer.group_size / trainer.minibatches",
        ));
    }
    if t.warmup_steps > 0 && t.warmup_steps >= t.steps {
        return Err(out_of_range("trainer.warmup_steps", t.warmup_steps, format!("0 to {}", t.steps - 1), "fewer than trainer.steps"));
    }
    if t.max_steps_off_policy.is_none() {
        let lockstep = "is set but trainer.max_steps_off_policy is not (lockstep training has no rollout thread); \
                        set trainer.max_steps_off_policy or unset it";
        if t.groups_in_flight.is_some() {
            return Err(invalid("trainer.groups_in_flight", lockstep));
        }
        if t.weight_sync != super::WeightSync::Sync {
            return Err(invalid("trainer.weight_sync", lockstep));
        }
    }
    if t.weight_sync == super::WeightSync::Pinned {
        if t.max_steps_off_policy == Some(0) {
            return Err(out_of_range(
                "trainer.max_steps_off_policy",
                0,
                "≥ 1 with trainer.weight_sync = \"pinned\"",
                "pinned with k = 0 is lockstep: unset both",
            ));
        }
        if t.groups_in_flight.is_some() {
            return Err(invalid(
                "trainer.groups_in_flight",
                "is set but trainer.weight_sync is `pinned` (its schedule keeps k + 1 steps of groups issued, no rollout thread); unset it",
            ));
        }
    }
    let d = &t.difficulty;
    if d.band[0] >= d.band[1] {
        return Err(out_of_range("trainer.difficulty.band", format!("{:?}", d.band), "[lo, hi] with 0 ≤ lo < hi ≤ 1", ""));
    }
    if d.unseen_share + d.revisit_share > 1.0 {
        return Err(out_of_range(
            "trainer.difficulty.revisit_share",
            d.revisit_share,
            format!("0 to {}", 1.0 - d.unseen_share),
            "trainer.difficulty.unseen_share + revisit_share ≤ 1",
        ));
    }
    cluster(c)?;
    if t.task_sampler == super::TaskSampler::Difficulty && t.max_steps_off_policy.is_some() {
        return Err(invalid(
            "trainer.task_sampler",
            "`difficulty` needs lockstep training (its draws depend on the rates of the groups before them); \
             unset trainer.max_steps_off_policy or use `uniform`",
        ));
    }
    if let Some(n) = m.max_new_tokens
        && n > m.max_episode_tokens
    {
        return Err(out_of_range(
            "sampling.max_new_tokens",
            n,
            format!("1 to {}", m.max_episode_tokens),
            "a turn must fit in sampling.max_episode_tokens",
        ));
    }
    if let Some(p) = m.max_prompt_tokens
        && p >= m.max_episode_tokens
    {
        return Err(out_of_range(
            "sampling.max_prompt_tokens",
            p,
            format!("1 to {}", m.max_episode_tokens - 1),
            "below sampling.max_episode_tokens, which must leave room for a turn",
        ));
    }
    if let Some(r) = m.max_response_tokens
        && t.overlong_buffer > r
    {
        return Err(out_of_range("trainer.overlong_buffer", t.overlong_buffer, format!("0 to {r}"), "sampling.max_response_tokens"));
    }
    Ok(())
}

/// The `[cluster]` section: a round size that divides a step, workers that can be given
/// rounds, and a schedule that does not depend on timing where workers roll out.
fn cluster(c: &RunConfig) -> Result<(), ConfigError> {
    use Range::*;
    let (k, t) = (&c.cluster, &c.trainer);
    need_opt("cluster.round_groups", k.round_groups, AtLeast(1.0))?;
    need("cluster.rollout_workers", k.rollout_workers.into(), Within(1.0, 4096.0))?;
    need("cluster.lease_timeout_s", k.lease_timeout_s, AboveUpTo(0.0, 86_400.0))?;
    need("cluster.max_round_attempts", k.max_round_attempts.into(), AtLeast(1.0))?;
    need("cluster.worker_idle_timeout_s", k.worker_idle_timeout_s, AboveUpTo(0.0, 31_536_000.0))?;
    let n = k.round_groups(t.prompts);
    if t.prompts % n != 0 {
        let divisors: Vec<String> = (1..=t.prompts).filter(|d| t.prompts % d == 0).map(|d| d.to_string()).collect();
        return Err(out_of_range(
            "cluster.round_groups",
            n,
            format!("a divisor of trainer.prompts = {} ({})", t.prompts, divisors.join(", ")),
            "a step's groups are split into rounds of equal size",
        ));
    }
    if k.launcher != super::Launcher::Local && t.max_steps_off_policy.is_some() && t.weight_sync != super::WeightSync::Pinned {
        return Err(invalid(
            "cluster.launcher",
            format!(
                "`{}` needs lockstep training or trainer.weight_sync=\"pinned\" (async sampling's schedule depends on timing, \
                 so workers could not reproduce it); unset trainer.max_steps_off_policy, pin it, or use `local`",
                k.launcher.name()
            ),
        ));
    }
    slurm(&k.slurm)
}

/// `[cluster.slurm]`: values that go into an sbatch script one line each.
fn slurm(s: &super::SlurmConfig) -> Result<(), ConfigError> {
    use Range::*;
    need("cluster.slurm.trainer_cpus", s.trainer_cpus.into(), AtLeast(1.0))?;
    need("cluster.slurm.worker_cpus", s.worker_cpus.into(), AtLeast(1.0))?;
    for (key, value) in [("partition", &s.partition), ("account", &s.account), ("time", &s.time)] {
        if value.chars().any(|c| c.is_whitespace() || c == '\'' || c == '"') {
            return Err(invalid(
                &format!("cluster.slurm.{key}"),
                format!("`{value}` has a space or quote; valid: one word, or empty for the site's default"),
            ));
        }
    }
    if let Some(bad) = s.sbatch_extra.iter().find(|f| !f.starts_with("--") || f.len() < 3 || f.contains(['\n', '\r'])) {
        return Err(invalid(
            "cluster.slurm.sbatch_extra",
            format!("`{bad}` is not one sbatch flag; valid: flags such as \"--qos=high\", each `--flag` or `--flag=value` on one line"),
        ));
    }
    Ok(())
}

/// The `[lora]` section, when there is one: rank, alpha, dropout, and target modules that are
/// linear layers of the model.
fn lora(c: &RunConfig) -> Result<(), ConfigError> {
    use Range::*;
    let Some(l) = &c.lora else { return Ok(()) };
    need("lora.rank", l.rank.into(), AtLeast(1.0))?;
    need("lora.alpha", l.alpha, Above(0.0))?;
    need("lora.dropout", l.dropout, AtLeastBelow(0.0, 1.0))?;
    let valid = super::LORA_TARGETS.join(", ");
    if l.target_modules.is_empty() {
        return Err(invalid("lora.target_modules", format!("is empty; valid: one or more of the model's linear layers: {valid}")));
    }
    if let Some(bad) = l.target_modules.iter().find(|m| !super::LORA_TARGETS.contains(&m.as_str())) {
        return Err(invalid("lora.target_modules", format!("`{bad}` is not a linear layer of the model; valid: {valid}")));
    }
    if c.model.adapter.as_deref().is_some_and(|a| a.trim().is_empty()) {
        return Err(invalid("model.adapter", "is empty; valid: an adapter directory (adapter_config.json + adapter_model.safetensors)"));
    }
    Ok(())
}

/// The `[sft]` section and the `[trainer]` keys as `arl sft` reads them.
fn sft(c: &RunConfig) -> Result<(), ConfigError> {
    use Range::*;
    let (s, t) = (&c.sft, &c.trainer);
    if s.data.trim().is_empty() {
        return Err(invalid("sft.data", "is empty; valid: a JSONL file of conversations (--data FILE.jsonl)"));
    }
    need("sft.heldout_frac", s.heldout_frac, AtLeastBelow(0.0, 1.0))?;
    need("sft.batch_size", s.batch_size.into(), AtLeast(1.0))?;
    need("sft.max_tokens", s.max_tokens.into(), AtLeast(2.0))?;
    if let Some(micro) = t.micro
        && micro > s.batch_size
    {
        return Err(out_of_range(
            "trainer.micro",
            micro,
            format!("1 to {}", s.batch_size),
            "the conversations of one step: sft.batch_size",
        ));
    }
    if t.warmup_steps > 0 && t.warmup_steps >= t.steps {
        return Err(out_of_range("trainer.warmup_steps", t.warmup_steps, format!("0 to {}", t.steps - 1), "fewer than trainer.steps"));
    }
    Ok(())
}

/// With one episode per group, an estimator that compares the episodes of a group has nothing
/// to compare: each episode falls back to the singleton rule (0, or verl's mean 0 / std 1,
/// which is the raw reward with no baseline). Found by asking the estimator — do two rewards
/// get other advantages as one group than as two groups of one? — not by its name.
fn group_signal(c: &RunConfig, estimator: &dyn crate::AdvantageFn) -> Result<(), ConfigError> {
    if c.trainer.group_size != 1 {
        return Ok(());
    }
    let rewards = [0.0, 1.0];
    let apart = AdvantageInput { rewards: &rewards, group_ids: &[0, 1], response_tokens: None };
    let together = AdvantageInput { rewards: &rewards, group_ids: &[0, 0], response_tokens: None };
    let (Ok(apart), Ok(together)) = (estimator.advantages(&apart), estimator.advantages(&together)) else { return Ok(()) };
    if apart != together {
        return Err(out_of_range(
            "trainer.group_size",
            1,
            "≥ 2",
            &format!("estimator `{}` compares the episodes of a group, so with one episode per group it has no baseline", c.advantage.name),
        ));
    }
    Ok(())
}

/// The name of the sandbox that stands in while an env is built only to check its options
/// ([`RunConfig::validate`]): it runs no job and offers no shell, so an env that needs what a
/// real sandbox offers checks that when built with any other.
pub const VALIDATION_SANDBOX: &str = "none";

/// Stands in for the sandbox while an env is built only to check its options.
struct NoJobs;

impl Sandbox for NoJobs {
    fn name(&self) -> &str {
        VALIDATION_SANDBOX
    }
    fn run(&self, _: &Job) -> Result<JobOutcome, SandboxError> {
        Err(SandboxError::Setup("config validation runs no jobs".into()))
    }
}

impl RunConfig {
    /// The whole validation pass (see the module docs); nothing is loaded and no job runs.
    pub fn validate(&self) -> Result<(), ConfigError> {
        check::<EnvPlugin>("env.name", &self.env.name)?;
        check::<SandboxPlugin>("sandbox.name", &self.sandbox.name)?;
        check::<LossPlugin>("loss.name", &self.loss.name)?;
        check::<AdvantagePlugin>("advantage.name", &self.advantage.name)?;
        if let Some(algo) = &self.algo {
            check::<super::AlgoPreset>("algo", algo)?;
        }
        finite(self)?;
        ranges(self)?;
        cross(self)?;
        lora(self)?;
        // Build the loss, the estimator and the env once, so settings they do not use fail here.
        (registry::get::<LossPlugin>(&self.loss.name).expect("checked").build)(&self.loss).map_err(|e| invalid("loss", e.to_string()))?;
        let estimator = (registry::get::<AdvantagePlugin>(&self.advantage.name).expect("checked").build)(&self.advantage)
            .map_err(|e| invalid("advantage", e.to_string()))?;
        group_signal(self, estimator.as_ref())?;
        (registry::get::<EnvPlugin>(&self.env.name).expect("checked").build)(&self.env, Arc::new(NoJobs))
            .map_err(|e| invalid("env", e.to_string()))?;
        self.model.backend.ensure_compiled_in().map_err(|message| invalid("model.backend", message))?;
        rollout_device(self)?;
        Ok(())
    }
}

/// `model.rollout_device`: a device spec, of a backend compiled in, and only with a rollout
/// thread to use it.
fn rollout_device(c: &RunConfig) -> Result<(), ConfigError> {
    let Some(text) = &c.model.rollout_device else { return Ok(()) };
    let key = "model.rollout_device";
    let spec: crate::DeviceSpec = text.parse().map_err(|message: String| invalid(key, message))?;
    if c.trainer.max_steps_off_policy.is_none() {
        return Err(invalid(
            key,
            "is set but trainer.max_steps_off_policy is not (lockstep training samples on the training device); \
             set trainer.max_steps_off_policy or unset it",
        ));
    }
    if c.trainer.weight_sync == crate::config::WeightSync::Pinned {
        return Err(invalid(
            key,
            "is set but trainer.weight_sync is `pinned` (its rounds run in the rollout executor: on the training device, \
             or on rollout workers); unset it or use another weight_sync",
        ));
    }
    spec.backend.ensure_compiled_in().map_err(|message| invalid(key, message))
}

impl RunConfig {
    /// The validation pass of `arl sft`: every number finite and in range, the `[lora]` and
    /// `[sft]` sections and the rules between the keys SFT reads. The RL sections (env,
    /// sandbox, loss, advantage, sampling) are not used, so their plugins are not built.
    pub fn validate_sft(&self) -> Result<(), ConfigError> {
        finite(self)?;
        ranges(self)?;
        lora(self)?;
        sft(self)?;
        self.model.backend.ensure_compiled_in().map_err(|message| invalid("model.backend", message))?;
        Ok(())
    }
}

fn check<P: Kind>(key: &str, name: &str) -> Result<(), ConfigError> {
    registry::get::<P>(name).map(|_| ()).map_err(|e| invalid(key, e.to_string()))
}

fn invalid(key: &str, message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid { key: key.to_string(), message: message.into() }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--set` lines over the defaults → the error line (validation without the registry:
    /// only the range and cross-field passes, which need no plugin).
    fn check(sets: &[&str]) -> Result<(), String> {
        let mut o = super::super::Overrides::default();
        for s in sets {
            o.push_set(s).unwrap();
        }
        let c = RunConfig::load(None, &o).map_err(|e| e.to_string())?;
        finite(&c)
            .and_then(|_| ranges(&c))
            .and_then(|_| cross(&c))
            .and_then(|_| lora(&c))
            .and_then(|_| rollout_device(&c))
            .map_err(|e| e.to_string())
    }

    /// As [`check`], through `arl sft`'s pass.
    fn check_sft(sets: &[&str]) -> Result<(), String> {
        let mut o = super::super::Overrides::default();
        for s in sets {
            o.push_set(s).unwrap();
        }
        let c = RunConfig::load(None, &o).map_err(|e| e.to_string())?;
        finite(&c).and_then(|_| ranges(&c)).and_then(|_| lora(&c)).and_then(|_| sft(&c)).map_err(|e| e.to_string())
    }

    #[test]
    fn lora_settings_are_checked_when_the_section_is_there() {
        let valid = "valid: q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj";
        let cases: &[(&[&str], String)] = &[
            (&["lora.rank=0"], "config key `lora.rank`: 0 is out of range; valid: ≥ 1".into()),
            (&["lora.alpha=0"], "config key `lora.alpha`: 0 is out of range; valid: > 0".into()),
            (&["lora.dropout=1"], "config key `lora.dropout`: 1 is out of range; valid: ≥ 0 and < 1".into()),
            (&["lora.target_modules=[\"q_proj\", \"qkv\"]"], format!("config key `lora.target_modules`: `qkv` is not a linear layer of the model; {valid}")),
            (&["lora.target_modules=[\"lm_head\"]"], format!("config key `lora.target_modules`: `lm_head` is not a linear layer of the model; {valid}")),
            (
                &["lora.target_modules=[]"],
                "config key `lora.target_modules`: is empty; valid: one or more of the model's linear layers: q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj".into(),
            ),
        ];
        for (sets, want) in cases {
            assert_eq!(check(sets).unwrap_err(), *want, "{sets:?}");
        }
        let negative = check(&["lora.rank=-4"]).unwrap_err();
        assert!(negative.starts_with("config key `lora.rank`: invalid value: integer `-4`"), "{negative}");
        // Without a [lora] section nothing of it is checked; with one, its defaults pass.
        check(&[]).unwrap();
        check(&["lora.use_rslora=true"]).unwrap();
        check(&["lora.target_modules=[\"down_proj\"]", "lora.rank=1", "lora.dropout=0.1"]).unwrap();
    }

    #[test]
    fn sft_settings_are_checked_by_the_sft_pass_only() {
        let cases: &[(&[&str], &str)] = &[
            (&[], "config key `sft.data`: is empty; valid: a JSONL file of conversations (--data FILE.jsonl)"),
            (&["sft.data=a.jsonl", "sft.heldout_frac=1"], "config key `sft.heldout_frac`: 1 is out of range; valid: ≥ 0 and < 1"),
            (&["sft.data=a.jsonl", "sft.batch_size=0"], "config key `sft.batch_size`: 0 is out of range; valid: ≥ 1"),
            (&["sft.data=a.jsonl", "sft.max_tokens=1"], "config key `sft.max_tokens`: 1 is out of range; valid: ≥ 2"),
            (
                &["sft.data=a.jsonl", "sft.batch_size=4", "trainer.micro=5"],
                "config key `trainer.micro`: 5 is out of range; valid: 1 to 4 (the conversations of one step: sft.batch_size)",
            ),
            (&["sft.data=a.jsonl", "lora.rank=0"], "config key `lora.rank`: 0 is out of range; valid: ≥ 1"),
        ];
        for (sets, want) in cases {
            assert_eq!(check_sft(sets).unwrap_err(), *want, "{sets:?}");
        }
        check_sft(&["sft.data=a.jsonl"]).unwrap();
        // RL's micro-batch rule does not apply to SFT (and SFT's keys do not bother `arl run`).
        check_sft(&["sft.data=a.jsonl", "sft.batch_size=64", "trainer.micro=40"]).unwrap();
        check(&["sft.batch_size=0"]).unwrap();
    }

    #[test]
    fn a_flag_that_adds_a_section_keeps_what_the_file_set_in_it() {
        let dir = std::env::temp_dir().join(format!("arl-lora-merge-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("run.toml");
        std::fs::write(&file, "[lora]\nrank = 4\n").unwrap();
        let mut o = super::super::Overrides::default();
        o.set("lora", toml::Value::Table(Default::default()));
        let c = RunConfig::load(Some(&file), &o).unwrap();
        assert_eq!(c.lora.as_ref().map(|l| l.rank), Some(4));
        let c = RunConfig::load(None, &o).unwrap();
        assert_eq!(c.lora, Some(crate::config::LoraConfig::default()));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn each_bad_value_is_one_line_naming_key_value_and_range() {
        let cases: &[(&[&str], &str)] = &[
            (&["trainer.lr=nan"], "config key `trainer.lr`: NaN is not a finite number"),
            (&["trainer.lr=inf"], "config key `trainer.lr`: inf is not a finite number"),
            (&["trainer.lr=-1"], "config key `trainer.lr`: -1 is out of range; valid: > 0"),
            (&["trainer.lr=0"], "config key `trainer.lr`: 0 is out of range; valid: > 0"),
            (&["sampling.max_new_tokens=0"], "config key `sampling.max_new_tokens`: 0 is out of range; valid: ≥ 1"),
            (&["trainer.micro=0"], "config key `trainer.micro`: 0 is out of range; valid: ≥ 1"),
            (&["trainer.gen_batch=0"], "config key `trainer.gen_batch`: 0 is out of range; valid: ≥ 1"),
            (&["trainer.grad_clip=-1"], "config key `trainer.grad_clip`: -1 is out of range; valid: ≥ 0"),
            (&["trainer.checkpoint_interval_s=-1"], "config key `trainer.checkpoint_interval_s`: -1 is out of range; valid: ≥ 0"),
            (&["sampling.max_episode_tokens=0"], "config key `sampling.max_episode_tokens`: 0 is out of range; valid: ≥ 1"),
            (&["trainer.min_lr_ratio=2"], "config key `trainer.min_lr_ratio`: 2 is out of range; valid: 0 to 1"),
            (&["sampling.top_k=0"], "config key `sampling.top_k`: 0 is out of range; valid: ≥ 1"),
            (&["sampling.top_p=0"], "config key `sampling.top_p`: 0 is out of range; valid: > 0 and ≤ 1"),
            (&["sampling.temperature=0"], "config key `sampling.temperature`: 0 is out of range; valid: > 0"),
            (&["eval.temperature=0"], "config key `eval.temperature`: 0 is out of range; valid: > 0"),
            (&["loss.horizon=0"], "config key `loss.horizon`: 0 is out of range; valid: > 0"),
            (&["advantage.eps=0"], "config key `advantage.eps`: 0 is out of range; valid: > 0"),
            (&["advantage.gamma=1.5"], "config key `advantage.gamma`: 1.5 is out of range; valid: 0 to 1"),
            (&["sandbox.timeout_s=0"], "config key `sandbox.timeout_s`: 0 is out of range; valid: > 0 and ≤ 86400"),
            (&["sandbox.memory_mb=99999999999999"], "config key `sandbox.memory_mb`: 99999999999999 is out of range; valid: 1 to 1048576"),
            (&["env.max_turns=0"], "config key `env.max_turns`: 0 is out of range; valid: ≥ 1"),
            (&["trainer.group_size=0"], "config key `trainer.group_size`: 0 is out of range; valid: ≥ 1"),
            (
                &["trainer.steps=0"],
                "config key `trainer.steps`: 0 is out of range; valid: ≥ 1 (to evaluate a model without training, use `arl eval`)",
            ),
            (
                &["trainer.prompts=2", "trainer.group_size=4", "trainer.minibatches=9"],
                "config key `trainer.minibatches`: 9 is out of range; valid: 1 to 8 (a step has trainer.prompts × trainer.group_size rows to split)",
            ),
            (
                &["trainer.prompts=2", "trainer.group_size=4", "trainer.minibatches=2", "trainer.micro=5"],
                "config key `trainer.micro`: 5 is out of range; valid: 1 to 4 (the rows of one minibatch: trainer.prompts × trainer.group_size / trainer.minibatches)",
            ),
            (
                &["trainer.prompts=4", "cluster.round_groups=3"],
                "config key `cluster.round_groups`: 3 is out of range; valid: a divisor of trainer.prompts = 4 (1, 2, 4) (a step's groups are split into rounds of equal size)",
            ),
            (&["cluster.round_groups=0"], "config key `cluster.round_groups`: 0 is out of range; valid: ≥ 1"),
            (
                &["cluster.launcher=\"procs\"", "trainer.max_steps_off_policy=1"],
                "config key `cluster.launcher`: `procs` needs lockstep training or trainer.weight_sync=\"pinned\" (async sampling's \
                 schedule depends on timing, so workers could not reproduce it); unset trainer.max_steps_off_policy, pin it, or use `local`",
            ),
            (
                &["trainer.max_steps_off_policy=0", "trainer.weight_sync=\"pinned\""],
                "config key `trainer.max_steps_off_policy`: 0 is out of range; valid: ≥ 1 with trainer.weight_sync = \"pinned\" \
                 (pinned with k = 0 is lockstep: unset both)",
            ),
            (
                &["trainer.max_steps_off_policy=1", "trainer.weight_sync=\"pinned\"", "trainer.groups_in_flight=4"],
                "config key `trainer.groups_in_flight`: is set but trainer.weight_sync is `pinned` (its schedule keeps k + 1 steps \
                 of groups issued, no rollout thread); unset it",
            ),
            (
                &["trainer.max_steps_off_policy=1", "trainer.weight_sync=\"pinned\"", "model.rollout_device=\"cpu\""],
                "config key `model.rollout_device`: is set but trainer.weight_sync is `pinned` (its rounds run in the rollout \
                 executor: on the training device, or on rollout workers); unset it or use another weight_sync",
            ),
            (
                &["trainer.weight_sync=\"pinned\""],
                "config key `trainer.weight_sync`: is set but trainer.max_steps_off_policy is not (lockstep training has no \
                 rollout thread); set trainer.max_steps_off_policy or unset it",
            ),
            (
                &["trainer.steps=5", "trainer.warmup_steps=5"],
                "config key `trainer.warmup_steps`: 5 is out of range; valid: 0 to 4 (fewer than trainer.steps)",
            ),
            (
                &["sampling.max_episode_tokens=100", "sampling.max_new_tokens=101"],
                "config key `sampling.max_new_tokens`: 101 is out of range; valid: 1 to 100 (a turn must fit in sampling.max_episode_tokens)",
            ),
            (
                &["sampling.max_episode_tokens=100", "sampling.max_prompt_tokens=100"],
                "config key `sampling.max_prompt_tokens`: 100 is out of range; valid: 1 to 99 (below sampling.max_episode_tokens, which must leave room for a turn)",
            ),
            (
                &["sampling.max_response_tokens=10", "trainer.overlong_buffer=11"],
                "config key `trainer.overlong_buffer`: 11 is out of range; valid: 0 to 10 (sampling.max_response_tokens)",
            ),
            (&["output.dir=\" \""], "config key `output.dir`: is empty; valid: a directory path"),
            (
                &["trainer.max_steps_off_policy=1", "trainer.groups_in_flight=0"],
                "config key `trainer.groups_in_flight`: 0 is out of range; valid: ≥ 1",
            ),
            (
                &["trainer.groups_in_flight=8"],
                "config key `trainer.groups_in_flight`: is set but trainer.max_steps_off_policy is not (lockstep training has no \
                 rollout thread); set trainer.max_steps_off_policy or unset it",
            ),
            (
                &["model.rollout_device=\"cuda:1\""],
                "config key `model.rollout_device`: is set but trainer.max_steps_off_policy is not (lockstep training samples on \
                 the training device); set trainer.max_steps_off_policy or unset it",
            ),
            (
                &["trainer.max_steps_off_policy=1", "model.rollout_device=\"gpu1\""],
                "config key `model.rollout_device`: `gpu1` names no backend; valid: BACKEND or BACKEND:GPU with BACKEND one of \
                 cpu, cuda, tch, tch-cuda (e.g. `cuda:1`)",
            ),
            (
                &["trainer.weight_sync=\"background\""],
                "config key `trainer.weight_sync`: is set but trainer.max_steps_off_policy is not (lockstep training has no \
                 rollout thread); set trainer.max_steps_off_policy or unset it",
            ),
        ];
        for (sets, want) in cases {
            assert_eq!(check(sets).unwrap_err(), *want, "{sets:?}");
        }
    }

    /// `trainer.zero_advantage_minibatch`: `skip` (the default) or `step`, anything else
    /// refused in one line naming the key and both values.
    #[test]
    fn the_zero_advantage_minibatch_is_skip_or_step() {
        assert_eq!(RunConfig::default().trainer.zero_advantage_minibatch, crate::config::ZeroAdvantageMinibatch::Skip);
        check(&["trainer.zero_advantage_minibatch=\"skip\""]).unwrap();
        check(&["trainer.zero_advantage_minibatch=\"step\""]).unwrap();
        assert_eq!(
            check(&["trainer.zero_advantage_minibatch=\"always\""]).unwrap_err(),
            "config key `trainer.zero_advantage_minibatch`: unknown variant `always`, expected `skip` or `step`"
        );
    }

    #[test]
    fn the_defaults_and_edge_values_pass() {
        check(&[]).unwrap();
        check(&["trainer.grad_clip=0", "trainer.min_lr_ratio=1", "sampling.top_p=1", "trainer.steps=5", "trainer.warmup_steps=4"]).unwrap();
        check(&["trainer.prompts=2", "trainer.group_size=4", "trainer.minibatches=8", "trainer.micro=1"]).unwrap();
        check(&["trainer.max_steps_off_policy=0"]).unwrap();
        check(&["trainer.max_steps_off_policy=1", "model.rollout_device=\"cpu\""]).unwrap();
        check(&["trainer.max_steps_off_policy=2", "trainer.groups_in_flight=12", "trainer.weight_sync=\"background\""]).unwrap();
    }
}
