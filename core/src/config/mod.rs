//! The run configuration: one TOML document, every key with a default, every section
//! `deny_unknown_fields`. Resolution order: defaults ← `--config FILE` ← flags ← `--set
//! key=value` (see [`RunConfig::load`]), with an algorithm preset (`algo`, see [`preset`]) beneath the
//! file: only keys left unset take the preset's values. [`RunConfig::validate`] (`validate`)
//! is the one pass over the resolved document before anything is loaded: plugin names, every
//! number finite and in range, the rules between keys, and each plugin built once.

mod cluster;
mod load;
mod lora;
mod loss;
pub mod preset;
mod sft;
mod trainer;
mod validate;

pub use cluster::{ClusterConfig, Launcher, SlurmConfig};
pub use load::{Overrides, parse_set};
pub use lora::{LORA_TARGETS, LoraConfig, lora_scale};
pub use loss::{AdvantageConfig, IcePopConfig, KPopConfig, KlEstimator, KlPlacement, LossConfig, NormLevel, TisConfig};
pub use preset::AlgoPreset;
pub use sft::{SftConfig, TrainOn};
pub use trainer::{DifficultyConfig, EvalConfig, LrSchedule, OutputConfig, TaskSampler, TrainerConfig, WeightSync, ZeroAdvantageMinibatch};
pub use validate::{Range, VALIDATION_SANDBOX};

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::BackendKind;

/// Everything `arl run` needs.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct RunConfig {
    /// Algorithm preset (`arl list`): sets loss, advantage and clip keys together, beneath
    /// every key the user sets.
    pub algo: Option<String>,
    /// The gym: which env, its task bank and its turn limits.
    pub env: EnvConfig,
    /// Where model-written code runs, and its limits.
    pub sandbox: SandboxConfig,
    /// The policy checkpoint, its tokenizer and the device.
    pub model: ModelConfig,
    /// How episodes are sampled, and their token budgets.
    pub sampling: SamplingConfig,
    /// The policy loss.
    pub loss: LossConfig,
    /// The advantage estimator.
    pub advantage: AdvantageConfig,
    /// The training loop: batch shape, optimizer, schedule, checkpoints.
    pub trainer: TrainerConfig,
    /// Held-out evaluation before and after training.
    pub eval: EvalConfig,
    /// Where the run writes its files.
    pub output: OutputConfig,
    /// LoRA adapters: with this section the base weights are frozen and only the adapters
    /// train (`--lora`); unset: every weight trains.
    pub lora: Option<LoraConfig>,
    /// Supervised fine-tuning on conversations (`arl sft`).
    pub sft: SftConfig,
    /// Where rollouts run, and the size of a rollout round.
    pub cluster: ClusterConfig,
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
    /// Wall-clock limit per job, seconds; the job (its whole PID namespace) is killed after it.
    pub timeout_s: f64,
    /// CPU-time limit per job, seconds (`RLIMIT_CPU`; the wasm sandbox checks it every 10 ms).
    pub cpu_s: u64,
    /// Memory limit per job, MiB (address space for `rlimit`, linear memory for `wasm`).
    pub memory_mb: u64,
    /// Largest file a job may write, KiB.
    pub file_size_kb: u64,
    /// Bytes of stdout and of stderr kept per job, KiB.
    pub output_kb: u64,
    /// Sandbox `wasm` only: the WASI CPython (`python.wasm`); empty picks the one
    /// `scripts/setup/python-wasm.sh` caches under `$HOME/.cache/arl/assets/python-wasm/`.
    pub python_wasm: String,
    /// Sandbox `rlimit` only: more host paths bound read-only at the same place in each
    /// job's root, beside the interpreter's own (e.g. `["/bin/bash"]`).
    pub binds: Vec<String>,
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
            binds: Vec::new(),
        }
    }
}

impl SandboxConfig {
    /// These settings as the per-job [`Limits`](crate::Limits) (in bytes), with
    /// [`Limits::processes`](crate::Limits::processes) 0.
    pub fn limits(&self) -> crate::Limits {
        crate::Limits {
            wall_timeout: std::time::Duration::from_secs_f64(self.timeout_s),
            cpu_seconds: self.cpu_s,
            memory_bytes: self.memory_mb << 20,
            file_size_bytes: self.file_size_kb << 10,
            output_bytes: (self.output_kb << 10) as usize,
            processes: 0,
        }
    }
}

/// A float type of weights and compute.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    /// 32-bit IEEE float.
    F32,
    /// bfloat16: f32's exponent range, 8-bit mantissa.
    Bf16,
    /// 16-bit IEEE half float.
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
    /// Where the model runs: `cpu`, `cuda`, `tch` or `tch-cuda` (`arl list` shows those compiled in).
    pub backend: BackendKind,
    /// GPU ordinal for `cuda` and `tch-cuda`.
    pub device_index: usize,
    /// Async training only (`trainer.max_steps_off_policy`): the device the rollout thread
    /// samples on, as `BACKEND` or `BACKEND:GPU` (`cuda:1`, `tch-cuda:1`, `cpu`), while the
    /// update runs on `backend`/`device_index`. After every step the trainer copies its
    /// weights there (with LoRA, base and adapters). Unset, or the training device itself:
    /// sampling shares the training device.
    pub rollout_device: Option<String>,
    /// Float type of weights and compute: `f32`, `bf16` or `f16` (logprobs are always f32).
    /// With `[lora]` it is the frozen base's; the adapters and their AdamW moments are f32.
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
    /// A LoRA adapter directory (`adapter_config.json` + `adapter_model.safetensors`, written
    /// by arl or by PEFT) on top of `source`. With `[lora]` it is the adapter that trains
    /// (its rank, alpha and targets must match `[lora]`); without, sampling and scoring use
    /// base + adapter unmerged, and full fine-tuning starts from the merged weights.
    pub adapter: Option<String>,
}

impl Default for ModelConfig {
    fn default() -> Self {
        Self {
            source: "smollm2-135m".into(),
            backend: BackendKind::Cpu,
            device_index: 0,
            rollout_device: None,
            dtype: DType::F32,
            tokenizer: None,
            chat_template: None,
            reference: None,
            adapter: None,
        }
    }
}

/// How episodes are sampled. The defaults (temperature 1, no truncation) make the
/// sampler's distribution the one the trainer differentiates.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct SamplingConfig {
    /// Softmax temperature of the sampler (> 0). The trainer scores old, new and reference
    /// log-probabilities at the same temperature (as verl), so T ≠ 1 trains the policy that acted.
    pub temperature: f64,
    /// Sample only from the k most likely tokens; unset: no truncation. Scoring does not
    /// replay the truncation, so `arl run` refuses it for training (the trainer scores at
    /// `temperature` instead, which is exact).
    pub top_k: Option<usize>,
    /// Nucleus sampling: the smallest set of tokens with probability ≥ p; unset: no
    /// truncation. Refused for training, as `top_k`.
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

#[cfg(test)]
mod schema_tests {
    use super::*;

    /// Dotted keys of every property without a description (its own, or that of the type it
    /// refers to), recursing into sections.
    fn undocumented(schema: &Value, node: &Value, path: &str, out: &mut Vec<String>, seen: &mut Vec<String>) {
        let resolve = |n: &Value| -> Option<Value> {
            let r = n
                .get("$ref")
                .and_then(Value::as_str)
                .or_else(|| n.get("anyOf")?.as_array()?.iter().find_map(|alt| alt.get("$ref").and_then(Value::as_str)))?;
            schema.get("$defs")?.get(r.strip_prefix("#/$defs/")?).cloned()
        };
        let Some(props) = node.get("properties").and_then(Value::as_object) else { return };
        for (key, prop) in props {
            let dotted = if path.is_empty() { key.clone() } else { format!("{path}.{key}") };
            seen.push(dotted.clone());
            let target = resolve(prop);
            let described = prop.get("description").or_else(|| target.as_ref()?.get("description")).is_some();
            if !described {
                out.push(dotted.clone());
            }
            if let Some(t) = &target {
                undocumented(schema, t, &dotted, out, seen);
            }
        }
    }

    #[test]
    fn every_config_key_is_described_in_the_schema() {
        let schema = RunConfig::json_schema();
        let (mut missing, mut seen) = (Vec::new(), Vec::new());
        undocumented(&schema, &schema, "", &mut missing, &mut seen);
        assert!(missing.is_empty(), "config keys without a description: {missing:?}");
        // The walk reaches nested keys (not vacuous).
        for key in ["trainer.steps", "loss.icepop.lower", "sampling.top_k", "model.backend", "output.dir"] {
            assert!(seen.iter().any(|k| k == key), "{key} not visited: {seen:?}");
        }
    }
}
