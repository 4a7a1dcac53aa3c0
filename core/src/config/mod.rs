//! The run configuration: one TOML document, every key with a default, every section
//! `deny_unknown_fields`. Resolution order: defaults ← `--config FILE` ← flags ← `--set
//! key=value` (see [`load`]), with an algorithm preset (`algo`, see [`preset`]) beneath the
//! file: only keys left unset take the preset's values. Plugin names are checked against the
//! registry by [`RunConfig::validate`], which also builds the loss and the estimator so that a
//! setting the chosen one does not use fails there.

mod load;
mod loss;
pub mod preset;
mod trainer;

pub use load::{Overrides, parse_set};
pub use loss::{AdvantageConfig, IcePopConfig, KPopConfig, KlEstimator, KlPlacement, LossConfig, NormLevel, TisConfig};
pub use preset::AlgoPreset;
pub use trainer::{EvalConfig, LrSchedule, OutputConfig, TrainerConfig};

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::registry::{self, AdvantagePlugin, EnvPlugin, Kind, LossPlugin, SandboxPlugin};
use crate::{BackendKind, ConfigError};

/// Everything `arl run` needs.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct RunConfig {
    /// Algorithm preset (`arl list`): sets loss, advantage and clip keys together, beneath
    /// every key the user sets.
    pub algo: Option<String>,
    pub env: EnvConfig,
    pub sandbox: SandboxConfig,
    pub model: ModelConfig,
    pub sampling: SamplingConfig,
    pub loss: LossConfig,
    pub advantage: AdvantageConfig,
    pub trainer: TrainerConfig,
    pub eval: EvalConfig,
    pub output: OutputConfig,
}

/// Which gym, and how its episodes run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct EnvConfig {
    /// Registered env name (`arl list`).
    pub name: String,
    /// Seed of the task bank (task generation and splits).
    pub seed: u64,
    /// Replace function and variable names so the name carries no hint about the bug.
    pub randomize_names: bool,
    /// Assistant turns per episode.
    pub max_turns: u32,
    /// Tool calls honoured per assistant turn; further calls are malformed.
    pub max_calls_per_turn: u32,
    /// The env's own settings, checked by the env when it is built.
    pub options: Map<String, Value>,
}

impl Default for EnvConfig {
    fn default() -> Self {
        Self { name: "sum".into(), seed: 0, randomize_names: true, max_turns: 6, max_calls_per_turn: 4, options: Map::new() }
    }
}

/// Where model-influenced code runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct SandboxConfig {
    /// Registered sandbox name (`arl list`).
    pub name: String,
    /// Wall-clock limit per job, seconds; the job's process group is killed after it.
    pub timeout_s: f64,
    pub cpu_s: u64,
    pub memory_mb: u64,
    /// Largest file a job may write, KiB.
    pub file_size_kb: u64,
    /// Bytes of stdout and of stderr kept per job, KiB.
    pub output_kb: u64,
    /// Sandbox `wasm` only: the WASI CPython (`python.wasm`); empty picks the one
    /// `scripts/setup/python-wasm.sh` caches under `$HOME/.cache/arl/assets/python-wasm/`.
    pub python_wasm: String,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        Self {
            name: "rlimit".into(),
            timeout_s: 10.0,
            cpu_s: 5,
            memory_mb: 1024,
            file_size_kb: 1024,
            output_kb: 64,
            python_wasm: String::new(),
        }
    }
}

impl SandboxConfig {
    pub fn limits(&self) -> crate::Limits {
        crate::Limits {
            wall_timeout: std::time::Duration::from_secs_f64(self.timeout_s),
            cpu_seconds: self.cpu_s,
            memory_bytes: self.memory_mb << 20,
            file_size_bytes: self.file_size_kb << 10,
            output_bytes: (self.output_kb << 10) as usize,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    F32,
    Bf16,
    F16,
}

/// The policy: a checkpoint and where it runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct ModelConfig {
    /// A model directory, a repo id in the local Hugging Face cache (`Qwen/Qwen3-0.6B`), a
    /// GGUF file, or a preset: `smollm2-135m` (the real SmolLM2-135M-Instruct, fetched by
    /// `scripts/setup/smollm2.sh`) or a random-weight shape (`tiny`, `small`, …). Nothing is
    /// ever downloaded.
    pub source: String,
    pub backend: BackendKind,
    /// GPU ordinal for `cuda` and `tch-cuda`.
    pub device_index: usize,
    pub dtype: DType,
    /// Directory with `tokenizer.json` and the chat template. Unset: the model directory
    /// itself, or for a preset the Qwen3 tokenizer fetched by
    /// `scripts/setup/qwen3-tokenizer.sh` (`$ARL_QWEN3_TOKENIZER_DIR` or
    /// `~/.cache/arl/assets/qwen3-tokenizer`).
    pub tokenizer: Option<String>,
    /// A Jinja chat template file used instead of the model's own. Unset: the model's, or,
    /// when the env has tools and the model's template ignores them (SmolLM2), arl's
    /// tool-capable ChatML template (`backends/chat/templates/chatml-tools.jinja`).
    pub chat_template: Option<String>,
    /// The frozen reference policy of the KL term (`loss.kl_coef > 0`), as `source` is
    /// given. Unset: `source` itself (the initial policy, also when resuming).
    pub reference: Option<String>,
}

impl Default for ModelConfig {
    fn default() -> Self {
        Self {
            source: "smollm2-135m".into(),
            backend: BackendKind::Cpu,
            device_index: 0,
            dtype: DType::F32,
            tokenizer: None,
            chat_template: None,
            reference: None,
        }
    }
}

/// How episodes are sampled. The defaults (temperature 1, no truncation) make the
/// sampler's distribution the one the trainer differentiates.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct SamplingConfig {
    pub temperature: f64,
    /// Sample only from the k most likely tokens; unset: no truncation. Scoring does not
    /// replay the truncation, so only untruncated sampling is exact for training.
    pub top_k: Option<usize>,
    /// Nucleus sampling: the smallest set of tokens with probability ≥ p; unset: no truncation.
    pub top_p: Option<f64>,
    /// New tokens per assistant turn; unset means the env's default (64 for `edit`, 256
    /// for `tools`).
    pub max_new_tokens: Option<u32>,
    /// Token budget of a whole episode (prompt, turns and observations); an episode that
    /// cannot fit another full turn ends, truncated.
    pub max_episode_tokens: u32,
    /// Budget of the first prompt (system, user, tool schemas); an episode whose prompt is
    /// longer ends before its first turn, truncated, and is counted (`prompt_over_budget`).
    pub max_prompt_tokens: Option<u32>,
    /// Budget of the tokens the policy generates in a whole episode (all turns); a turn is
    /// cut where it runs out. Unset: `max_turns × max_new_tokens`. It is L_max of
    /// overlong shaping.
    pub max_response_tokens: Option<u32>,
}

impl Default for SamplingConfig {
    fn default() -> Self {
        Self {
            temperature: 1.0,
            top_k: None,
            top_p: None,
            max_new_tokens: None,
            max_episode_tokens: 4096,
            max_prompt_tokens: None,
            max_response_tokens: None,
        }
    }
}

impl RunConfig {
    /// Check every plugin name against the registry and every value that serde cannot;
    /// the error names the key and the valid choices.
    pub fn validate(&self) -> Result<(), ConfigError> {
        check::<EnvPlugin>("env.name", &self.env.name)?;
        check::<SandboxPlugin>("sandbox.name", &self.sandbox.name)?;
        check::<LossPlugin>("loss.name", &self.loss.name)?;
        check::<AdvantagePlugin>("advantage.name", &self.advantage.name)?;
        if let Some(algo) = &self.algo {
            check::<AlgoPreset>("algo", algo)?;
        }
        // Build the loss and the estimator once, so settings they do not use fail here.
        (registry::get::<LossPlugin>(&self.loss.name).expect("checked").build)(&self.loss).map_err(|e| invalid("loss", e.to_string()))?;
        (registry::get::<AdvantagePlugin>(&self.advantage.name).expect("checked").build)(&self.advantage)
            .map_err(|e| invalid("advantage", e.to_string()))?;
        self.model.backend.ensure_compiled_in().map_err(|message| invalid("model.backend", message))?;
        let positive = [
            ("trainer.group_size", self.trainer.group_size as f64),
            ("trainer.prompts", self.trainer.prompts as f64),
            ("trainer.epochs", self.trainer.epochs as f64),
            ("trainer.minibatches", self.trainer.minibatches as f64),
            ("env.max_turns", self.env.max_turns as f64),
            ("sandbox.timeout_s", self.sandbox.timeout_s),
            ("sampling.temperature", self.sampling.temperature),
            ("trainer.max_sampling_attempts", self.trainer.max_sampling_attempts as f64),
        ];
        for (key, value) in positive {
            // (NaN is not greater than 0 either.)
            if value.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) {
                return Err(invalid(key, format!("must be greater than 0, got {value}")));
            }
        }
        if let Some(p) = self.sampling.top_p
            && !(p > 0.0 && p <= 1.0)
        {
            return Err(invalid("sampling.top_p", format!("must be in (0, 1], got {p}")));
        }
        Ok(())
    }

    /// The configuration as TOML (what `arl config show` prints).
    ///
    /// Keys left unset (`None`) have no TOML form; each is listed as a comment under its
    /// section, with its documentation, so the output shows every key.
    pub fn to_toml(&self) -> String {
        let text = toml::to_string_pretty(self).expect("a RunConfig always serializes");
        let mut unset: BTreeMap<String, Vec<String>> = BTreeMap::new();
        collect_unset("", &serde_json::to_value(self).expect("config is JSON"), &mut unset);
        let schema = Self::json_schema();
        let comment = |section: &str, keys: &[String]| -> String {
            keys.iter()
                .map(|key| {
                    let path = if section.is_empty() { key.clone() } else { format!("{section}.{key}") };
                    match describe(&schema, &path) {
                        Some(doc) => format!("# {key} = (unset) — {}\n", doc.split_whitespace().collect::<Vec<_>>().join(" ")),
                        None => format!("# {key} = (unset)\n"),
                    }
                })
                .collect()
        };
        let mut out = unset.get("").map(|keys| comment("", keys)).unwrap_or_default();
        for line in text.lines() {
            out.push_str(line);
            out.push('\n');
            if let Some(section) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']'))
                && let Some(keys) = unset.get(section)
            {
                out.push_str(&comment(section, keys));
            }
        }
        out
    }

    /// JSON Schema of the whole document.
    pub fn json_schema() -> Value {
        serde_json::to_value(schemars::schema_for!(RunConfig)).expect("schema is JSON")
    }
}

/// Null leaves of `value` by their parent's dotted path (`""` for the top level).
fn collect_unset(path: &str, value: &Value, out: &mut BTreeMap<String, Vec<String>>) {
    if let Value::Object(map) = value {
        for (key, v) in map {
            match v {
                Value::Null => out.entry(path.to_string()).or_default().push(key.clone()),
                Value::Object(_) => collect_unset(&if path.is_empty() { key.clone() } else { format!("{path}.{key}") }, v, out),
                _ => {}
            }
        }
    }
}

/// The schema's description of the dotted key `path` (following `$ref`s into `$defs`).
fn describe(schema: &Value, path: &str) -> Option<String> {
    let resolve = |node: &'_ Value| -> Option<Value> {
        match node.get("$ref").and_then(Value::as_str) {
            Some(r) => schema.get("$defs")?.get(r.strip_prefix("#/$defs/")?).cloned(),
            None => Some(node.clone()),
        }
    };
    let parts: Vec<&str> = path.split('.').collect();
    let mut node = schema.clone();
    for (i, part) in parts.iter().enumerate() {
        let prop = node.get("properties")?.get(*part)?.clone();
        if i + 1 == parts.len()
            && let Some(doc) = prop.get("description").and_then(Value::as_str)
        {
            return Some(doc.to_string());
        }
        node = resolve(&prop)?;
    }
    node.get("description").and_then(Value::as_str).map(str::to_string)
}

fn check<P: Kind>(key: &str, name: &str) -> Result<(), ConfigError> {
    registry::get::<P>(name).map(|_| ()).map_err(|e| invalid(key, e.to_string()))
}

fn invalid(key: &str, message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid { key: key.to_string(), message: message.into() }
}

#[cfg(test)]
mod toml_tests {
    use super::*;

    #[test]
    fn unset_keys_show_as_documented_comments_and_parse_back() {
        let config = RunConfig::default();
        let text = config.to_toml();
        assert!(text.starts_with("# algo = (unset) — Algorithm preset"), "{text}");
        let sampling = text.split("[sampling]\n").nth(1).unwrap();
        assert!(sampling.starts_with("# top_k = (unset) — Sample only from the k most likely tokens"), "{sampling}");
        assert!(sampling.contains("# max_new_tokens = (unset) — New tokens per assistant turn; unset means the env's default"));
        assert!(text.contains("[trainer]\n# micro = (unset) — Rows per micro-batch"), "{text}");
        let back: RunConfig = toml::from_str(&text).unwrap();
        assert_eq!(back, config);
    }
}
