//! `dataset` — single-turn tasks from a JSONL file, each reply graded by a reward function
//! chosen by name (`reward`: `exact`, `hash`, `numeric`, `regex`, `boxed`, or one a linked crate
//! registers with [`register_reward!`]).
//!
//! Each line is `{"prompt": "…", "answer": …}` or `{"messages": [{"role": …, "content": …}, …],
//! "answer": …}`, with an optional `"id"`; the answer is a string or a number. The held-out split
//! is `heldout` (a second file) or, without one, a seeded `heldout_frac` of the lines. No tools,
//! one turn.
//!
//! ```toml
//! [env]
//! name = "dataset"
//! [env.options]
//! path = "examples/dataset/arithmetic.jsonl"
//! reward = "hash"
//! ```

pub mod data;
pub mod decimal;
pub mod reward;

use std::path::PathBuf;
use std::sync::Arc;

use arl_core::config::EnvConfig;
use arl_core::{
    AssistantTurn, Env, EnvError, EnvSession, EpisodeStats, Message, Outcome, PluginError, Sandbox, Split, Step, Task, ToolSchema,
};
use serde::Deserialize;

pub use inventory;
pub use reward::{RewardFn, RewardSettings};

/// `[env.options]` of the `dataset` env.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatasetOptions {
    /// The JSONL file of tasks.
    pub path: PathBuf,
    /// The reward function by name.
    #[serde(default = "default_reward")]
    pub reward: String,
    /// A second JSONL file as the held-out split; unset: `heldout_frac` of `path`.
    #[serde(default)]
    pub heldout: Option<PathBuf>,
    /// The share of `path`'s lines held out (seeded) when `heldout` is unset.
    #[serde(default = "default_heldout_frac")]
    pub heldout_frac: f64,
    /// A system message put before each `prompt` line (not before `messages` lines).
    #[serde(default)]
    pub system: Option<String>,
    /// `numeric`: the largest absolute difference that still counts as equal; 0 (the
    /// default): the numbers must be equal, exactly, at any size.
    #[serde(default = "default_tolerance")]
    pub tolerance: f64,
    /// `regex`: the pattern; capture group 1 (else the whole match) is the reply's answer.
    #[serde(default)]
    pub pattern: Option<String>,
    /// `exact`: compare with case.
    #[serde(default = "default_true")]
    pub case_sensitive: bool,
    /// New tokens per reply.
    #[serde(default = "default_max_new_tokens")]
    pub max_new_tokens: u32,
}

fn default_reward() -> String {
    "exact".into()
}
fn default_heldout_frac() -> f64 {
    0.2
}
fn default_tolerance() -> f64 {
    0.0
}
fn default_true() -> bool {
    true
}
fn default_max_new_tokens() -> u32 {
    256
}

arl_core::register!(EnvPlugin {
    name: "dataset",
    about: "single-turn prompts from a JSONL file (env.options.path), graded by a reward function by name (env.options.reward)",
    build: build,
});

pub struct DatasetEnv {
    train: Vec<data::Item>,
    heldout: Vec<data::Item>,
    reward: &'static RewardFn,
    settings: RewardSettings,
    max_new_tokens: u32,
}

fn plugin_error(message: String) -> PluginError {
    PluginError { kind: "env", name: "dataset".into(), message }
}

fn build(config: &EnvConfig, _sandbox: Arc<dyn Sandbox>) -> Result<Box<dyn Env>, PluginError> {
    let value: serde_json::Value = config.options.clone().into();
    if value.get("path").is_none() {
        return Err(plugin_error(
            "env.options.path is required: a JSONL file of {\"prompt\" or \"messages\", \"answer\"} lines, e.g. --set 'env.options.path=\"examples/dataset/arithmetic.jsonl\"'".into(),
        ));
    }
    let options: DatasetOptions = serde_json::from_value(value).map_err(|e| plugin_error(format!("env.options: {e}")))?;
    DatasetEnv::new(&options, config.seed).map(|e| Box::new(e) as Box<dyn Env>).map_err(plugin_error)
}

impl DatasetEnv {
    pub fn new(o: &DatasetOptions, seed: u64) -> Result<Self, String> {
        let reward = reward::get(&o.reward)?;
        if !(o.tolerance >= 0.0 && o.tolerance.is_finite()) {
            return Err(format!("env.options.tolerance: {} is out of range; valid: ≥ 0", o.tolerance));
        }
        let pattern = match (&o.pattern, o.reward.as_str()) {
            (Some(p), _) => Some(regex::Regex::new(p).map_err(|e| format!("env.options.pattern: not a regular expression: {e}"))?),
            (None, "regex") => return Err("env.options.pattern is required with reward = \"regex\", e.g. \"Answer: (\\\\S+)\"".into()),
            (None, _) => None,
        };
        let items = data::read(&o.path, o.system.as_deref())?;
        let (train, heldout) = match &o.heldout {
            Some(h) => (items, data::read(h, o.system.as_deref())?),
            None => {
                if !(0.0..1.0).contains(&o.heldout_frac) {
                    return Err(format!("env.options.heldout_frac: {} is out of range; valid: ≥ 0 and < 1", o.heldout_frac));
                }
                data::split(items, o.heldout_frac, seed)
            }
        };
        if train.is_empty() {
            return Err(format!("{}: no training tasks (every line is held out); lower env.options.heldout_frac", o.path.display()));
        }
        let settings = RewardSettings { tolerance: o.tolerance, pattern, case_sensitive: o.case_sensitive };
        Ok(Self { train, heldout, reward, settings, max_new_tokens: o.max_new_tokens })
    }
}

impl Env for DatasetEnv {
    fn tasks(&self, split: Split) -> Result<Vec<Task>, EnvError> {
        let items = match split {
            Split::Train => &self.train,
            Split::Heldout => &self.heldout,
            // A data set has one held-out split: its lines.
            Split::HeldoutInstances => return Ok(Vec::new()),
        };
        Ok(items.iter().map(|it| it.task(split)).collect())
    }

    fn tools(&self) -> Vec<ToolSchema> {
        Vec::new()
    }

    fn default_max_new_tokens(&self) -> u32 {
        self.max_new_tokens
    }

    fn reset(&self, task: &Task) -> Result<Box<dyn EnvSession>, EnvError> {
        let messages: Vec<Message> = serde_json::from_value(task.data["messages"].clone())
            .map_err(|e| EnvError::Other(format!("task {}: messages: {e}", task.id)))?;
        let answer = task.data["answer"].as_str().ok_or_else(|| EnvError::Other(format!("task {}: no answer", task.id)))?.to_string();
        Ok(Box::new(DatasetSession { messages, answer, reward: self.reward, settings: self.settings.clone(), done: false }))
    }
}

struct DatasetSession {
    messages: Vec<Message>,
    answer: String,
    reward: &'static RewardFn,
    settings: RewardSettings,
    done: bool,
}

impl DatasetSession {
    fn grade(&mut self, text: &str, truncated: bool) -> Outcome {
        self.done = true;
        let reward = (self.reward.score)(text, &self.answer, &self.settings);
        Outcome { reward, stats: EpisodeStats { turns: 1, truncated, ..Default::default() } }
    }
}

impl EnvSession for DatasetSession {
    fn messages(&self) -> &[Message] {
        &self.messages
    }

    fn step(&mut self, turn: &AssistantTurn) -> Result<Step, EnvError> {
        if self.done {
            return Err(EnvError::Finished);
        }
        Ok(Step::Done(self.grade(&turn.text, false)))
    }

    /// The episode ended before a reply (a token budget): graded as an empty reply.
    fn finish(&mut self) -> Result<Outcome, EnvError> {
        if self.done {
            return Err(EnvError::Finished);
        }
        Ok(self.grade("", true))
    }
}
