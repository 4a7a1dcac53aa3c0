//! LoRA adapters on disk in PEFT's layout, so PEFT loads arl's and arl loads PEFT's:
//! `adapter_config.json` (PEFT's `LoraConfig` fields) and `adapter_model.safetensors` with
//! `base_model.model.<module>.lora_A.weight` (`[r, in]`) and `….lora_B.weight` (`[out, r]`)
//! for every adapted module (`model.layers.3.self_attn.q_proj`).
//!
//! Loading reads which modules are adapted, and each one's rank, from the tensors themselves
//! (so `layers_to_transform`, a regex `target_modules` or a `rank_pattern` need no
//! interpretation), and refuses what arl does not compute: DoRA, LoRA biases, `bias` other
//! than "none", `modules_to_save`, `alpha_pattern`, `fan_in_fan_out`, adapters on modules
//! other than the decoder's linear layers. A tensor whose shape does not fit the base model
//! is named, with the base the adapter says it was made for.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use burn::tensor::backend::Backend;
use safetensors::SafeTensors;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::ModelError;
use crate::lora::{LoraAdapter, LoraScaling};
use crate::model::Qwen3;
use crate::weights::write_safetensors;

pub const ADAPTER_CONFIG: &str = "adapter_config.json";
pub const ADAPTER_WEIGHTS: &str = "adapter_model.safetensors";
/// What PEFT's `PeftModelForCausalLM` puts before the base model's own module names.
const PREFIX: &str = "base_model.model.";

/// Whether `dir` holds an adapter (its `adapter_config.json`).
pub fn is_adapter_dir(dir: &Path) -> bool {
    dir.join(ADAPTER_CONFIG).is_file()
}

/// The fields of `adapter_config.json` arl reads; PEFT writes many more, which are ignored
/// when they do not change the computation and refused when they do (see the module docs).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct PeftConfig {
    pub peft_type: Option<String>,
    pub r: Option<u64>,
    pub lora_alpha: Option<f64>,
    pub lora_dropout: Option<f64>,
    pub target_modules: Option<Value>,
    pub use_rslora: bool,
    pub use_dora: bool,
    pub bias: Option<String>,
    pub lora_bias: bool,
    pub fan_in_fan_out: bool,
    pub modules_to_save: Option<Value>,
    pub alpha_pattern: Option<serde_json::Map<String, Value>>,
    pub trainable_token_indices: Option<Value>,
    pub base_model_name_or_path: Option<String>,
}

impl PeftConfig {
    pub fn read(dir: &Path) -> Result<Self, ModelError> {
        let path = dir.join(ADAPTER_CONFIG);
        let text = std::fs::read_to_string(&path).map_err(|e| ModelError::missing(&path, e))?;
        serde_json::from_str(&text).map_err(|e| ModelError::Config { path: path.display().to_string(), message: e.to_string() })
    }

    /// The first setting arl cannot compute, as a message naming it.
    fn unsupported(&self) -> Option<String> {
        let non_empty = |v: &Option<Value>| match v {
            None | Some(Value::Null) => false,
            Some(Value::Array(a)) => !a.is_empty(),
            Some(Value::Object(o)) => !o.is_empty(),
            Some(_) => true,
        };
        match self.peft_type.as_deref() {
            Some("LORA") | None => {}
            Some(other) => return Some(format!("peft_type is {other}; arl loads LORA adapters")),
        }
        if self.use_dora {
            return Some("use_dora is true; arl computes plain LoRA, not DoRA".into());
        }
        if self.lora_bias || self.bias.as_deref().is_some_and(|b| b != "none") {
            return Some(format!("it trains biases (bias = {:?}, lora_bias = {}); arl's adapters have none", self.bias, self.lora_bias));
        }
        if self.fan_in_fan_out {
            return Some("fan_in_fan_out is true (GPT-2 Conv1D weights); arl's linear layers are nn.Linear".into());
        }
        if non_empty(&self.modules_to_save) {
            return Some(format!("modules_to_save = {}; arl loads adapters only", self.modules_to_save.as_ref().expect("set")));
        }
        if self.alpha_pattern.as_ref().is_some_and(|p| !p.is_empty()) {
            return Some("alpha_pattern is set; arl takes one lora_alpha for every module".into());
        }
        if non_empty(&self.trainable_token_indices) {
            return Some("trainable_token_indices is set; arl adapts linear layers only".into());
        }
        None
    }
}

/// What an adapter directory held.
#[derive(Clone, Debug, PartialEq)]
pub struct AdapterInfo {
    pub dir: PathBuf,
    /// The rank of every adapted module, if it is the same everywhere.
    pub rank: Option<usize>,
    pub alpha: f64,
    pub use_rslora: bool,
    /// Short names of the adapted modules (`q_proj`, …), sorted.
    pub target_modules: Vec<String>,
    /// How many linear layers carry an adapter.
    pub modules: usize,
    pub base_model: Option<String>,
}

/// The base model an adapter directory names (`base_model_name_or_path`), if any.
pub fn base_of(dir: &Path) -> Result<Option<String>, ModelError> {
    Ok(PeftConfig::read(dir)?.base_model_name_or_path.filter(|b| !b.is_empty()))
}

impl<B: Backend> Qwen3<B> {
    /// Attach the adapter in `dir` (arl's or PEFT's) to this model's linear layers, replacing
    /// any adapters it had; f32 on the model's device. `dropout` overrides the file's
    /// `lora_dropout` (a training setting).
    pub fn load_adapter(&mut self, dir: &Path, dropout: Option<f64>) -> Result<AdapterInfo, ModelError> {
        let fail = |message: String| ModelError::Adapter { path: dir.display().to_string(), message };
        let config = PeftConfig::read(dir)?;
        if let Some(why) = config.unsupported() {
            return Err(fail(why));
        }
        let path = dir.join(ADAPTER_WEIGHTS);
        let bytes = std::fs::read(&path).map_err(|e| ModelError::missing(&path, e))?;
        let st = SafeTensors::deserialize(&bytes).map_err(|e| ModelError::Safetensors { path: path.clone(), message: e.to_string() })?;
        let base = config.base_model_name_or_path.clone().unwrap_or_default();
        let made_for = if base.is_empty() { String::new() } else { format!(" (its adapter_config.json names base model `{base}`)") };
        // module → (A name, B name)
        let mut modules: BTreeMap<String, [Option<String>; 2]> = BTreeMap::new();
        for name in st.names() {
            let parsed = name.strip_prefix(PREFIX).and_then(|rest| {
                let (module, which) = rest.rsplit_once(".lora_")?;
                let slot = match which {
                    "A.weight" => 0,
                    "B.weight" => 1,
                    _ => return None,
                };
                Some((module.to_string(), slot))
            });
            let Some((module, slot)) = parsed else {
                return Err(fail(format!(
                    "tensor `{name}` is not a LoRA matrix of a linear layer (`{PREFIX}<module>.lora_A.weight` / `.lora_B.weight`); \
                     arl loads plain LoRA adapters of the decoder's linear layers"
                )));
            };
            modules.entry(module).or_default()[slot] = Some(name.to_string());
        }
        if modules.is_empty() {
            return Err(fail(format!("{} holds no LoRA tensors", path.display())));
        }
        let alpha = config.lora_alpha.unwrap_or(8.0);
        let dropout = dropout.or(config.lora_dropout).unwrap_or(0.0);
        let scaling = LoraScaling { alpha, use_rslora: config.use_rslora, dropout };
        let device = self.device();
        let mut linears: BTreeMap<String, crate::layers::LinearMut<'_, B>> =
            self.linears_mut().into_iter().map(|(name, _, l)| (name, l)).collect();
        let (mut ranks, mut shorts) = (BTreeSet::new(), BTreeSet::new());
        let mut loaded = Vec::new();
        for (module, [a_name, b_name]) in &modules {
            let (Some(a_name), Some(b_name)) = (a_name, b_name) else {
                return Err(fail(format!("module `{module}` has only one of lora_A and lora_B")));
            };
            let Some(linear) = linears.get(module) else {
                return Err(fail(format!(
                    "tensor `{a_name}` adapts `{module}`, which this base model does not have (its linear layers are \
                     model.layers.0-{}.{{self_attn.q_proj, …, mlp.down_proj}}){made_for}",
                    self_layers(&linears)
                )));
            };
            let [d_in, d_out] = linear.dims;
            let (a, b) = (st.tensor(a_name).expect("listed"), st.tensor(b_name).expect("listed"));
            let r = a.shape().first().copied().unwrap_or(0);
            for (name, view, want) in [(a_name, &a, [r, d_in]), (b_name, &b, [d_out, r])] {
                if view.shape() != want {
                    return Err(fail(format!(
                        "tensor `{name}` has shape {:?}, but the base model's `{module}` needs {want:?} ([{d_out}, {d_in}] weight, rank {r}): \
                         the adapter was made for another base model{made_for}",
                        view.shape()
                    )));
                }
            }
            let (a, b) = (crate::weights::to_f32(a_name, &a)?, crate::weights::to_f32(b_name, &b)?);
            ranks.insert(r);
            shorts.insert(module.rsplit('.').next().unwrap_or(module).to_string());
            loaded.push((module.clone(), LoraAdapter::from_hf(&a, &b, [r, d_in, d_out], scaling, &device)));
        }
        for (_, linear) in linears.iter_mut() {
            *linear.lora = None;
        }
        let n = loaded.len();
        for (module, adapter) in loaded {
            *linears.get_mut(&module).expect("checked").lora = Some(adapter);
        }
        Ok(AdapterInfo {
            dir: dir.to_path_buf(),
            rank: (ranks.len() == 1).then(|| *ranks.first().expect("one")),
            alpha,
            use_rslora: config.use_rslora,
            target_modules: shorts.into_iter().collect(),
            modules: n,
            base_model: Some(base).filter(|b| !b.is_empty()),
        })
    }

    /// Write this model's adapters as a PEFT adapter directory: `adapter_config.json` (with
    /// `base_model` as `base_model_name_or_path`) and an F32 `adapter_model.safetensors`.
    pub fn save_adapter(&self, dir: &Path, base_model: Option<&str>) -> Result<(), ModelError> {
        let linears = self.linears();
        let adapted: Vec<_> = linears.iter().filter_map(|(name, short, l)| l.lora.as_ref().map(|a| (name, *short, a))).collect();
        let Some((_, _, first)) = adapted.first() else {
            return Err(ModelError::Lora("the model has no adapters to save".into()));
        };
        let scaling = first.scaling();
        if adapted.iter().any(|(_, _, a)| a.alpha != scaling.alpha || a.use_rslora != scaling.use_rslora) {
            return Err(ModelError::Lora("adapters with different alpha or use_rslora cannot share one adapter_config.json".into()));
        }
        // The most common rank is `r`; other modules go into `rank_pattern` by full name.
        let mut counts: BTreeMap<usize, usize> = BTreeMap::new();
        for (_, _, a) in &adapted {
            *counts.entry(a.rank()).or_default() += 1;
        }
        let r = counts.iter().max_by_key(|(rank, n)| (**n, std::cmp::Reverse(**rank))).map(|(rank, _)| *rank).expect("some");
        let rank_pattern: serde_json::Map<String, Value> =
            adapted.iter().filter(|(_, _, a)| a.rank() != r).map(|(name, _, a)| (name.to_string(), a.rank().into())).collect();
        // Short names when every decoder layer has the same set, else every full name.
        let shorts: BTreeSet<&str> = adapted.iter().map(|(_, s, _)| *s).collect();
        let uniform = linears.iter().all(|(_, s, l)| l.lora.is_some() == shorts.contains(s));
        let targets: Vec<String> =
            if uniform { shorts.iter().map(|s| s.to_string()).collect() } else { adapted.iter().map(|(n, _, _)| n.to_string()).collect() };
        let config = json!({
            "peft_type": "LORA",
            "task_type": "CAUSAL_LM",
            "base_model_name_or_path": base_model,
            "r": r,
            "lora_alpha": scaling.alpha,
            "lora_dropout": scaling.dropout,
            "target_modules": targets,
            "use_rslora": scaling.use_rslora,
            "use_dora": false,
            "bias": "none",
            "lora_bias": false,
            "fan_in_fan_out": false,
            "init_lora_weights": true,
            "inference_mode": true,
            "modules_to_save": null,
            "layers_to_transform": null,
            "layers_pattern": null,
            "rank_pattern": rank_pattern,
            "alpha_pattern": {},
            "revision": null,
        });
        std::fs::create_dir_all(dir).map_err(|e| ModelError::write(dir, e))?;
        let path = dir.join(ADAPTER_CONFIG);
        std::fs::write(&path, serde_json::to_string_pretty(&config).expect("json") + "\n").map_err(|e| ModelError::write(&path, e))?;
        let mut tensors = Vec::new();
        for (name, _, a) in &adapted {
            let ([d_in, r], [_, d_out]) = (a.a.dims(), a.b.dims());
            let (a_data, b_data) = a.hf_data();
            tensors.push((format!("{PREFIX}{name}.lora_A.weight"), vec![r, d_in], a_data));
            tensors.push((format!("{PREFIX}{name}.lora_B.weight"), vec![d_out, r], b_data));
        }
        write_safetensors(&dir.join(ADAPTER_WEIGHTS), &tensors)
    }
}

/// The last decoder layer index, for messages.
fn self_layers<L>(linears: &BTreeMap<String, L>) -> usize {
    linears.keys().filter_map(|k| k.strip_prefix("model.layers.")?.split('.').next()?.parse::<usize>().ok()).max().unwrap_or(0)
}
