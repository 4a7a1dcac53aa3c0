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
//!
//! Or a weighted list (`rewards`), TRL's `reward_funcs` with `reward_weights`: the episode's
//! reward is Σ weight × score, each component is recorded per episode
//! ([`EpisodeStats::rewards`]), and the episode counts as solved only when the correctness
//! component (`correct`; default: the first reward in the list that is not a format reward)
//! scored 1, so format credit never makes a wrong answer solved:
//!
//! ```toml
//! [env.options]
//! path = "examples/dataset/arithmetic.jsonl"
//! rewards = [{ name = "hash", weight = 1.0 }, { name = "format-hash", weight = 0.2 }]
//! correct = "hash"
//! ```
//!
//! Prompt shaping: `system` (a system message before each `prompt` line) and `few_shot`, a
//! separate JSONL file of solved examples (`few_shot.rs`; the first `few_shot_n`) put before
//! every task as user/assistant turns; an example that is a held-out task, or (unless
//! `few_shot_allow_overlap`) whose answer is a held-out answer, is refused.

pub mod data;
pub mod decimal;
pub mod few_shot;
pub mod reward;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use arl_core::config::EnvConfig;
use arl_core::{Env, EnvError, EnvSession, EpisodeStats, Message, Outcome, PluginError, Sandbox, SingleTurn, Split, Task, ToolSchema};
use serde::Deserialize;

pub use inventory;
pub use reward::{RewardFn, RewardSettings};

/// `[env.options]` of the `dataset` env.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatasetOptions {
    /// The JSONL file of tasks.
    pub path: PathBuf,
    /// The reward function by name (unset with `rewards` unset: `exact`).
    #[serde(default)]
    pub reward: Option<String>,
    /// A weighted list of reward functions, instead of `reward`.
    #[serde(default)]
    pub rewards: Option<Vec<WeightedReward>>,
    /// The correctness component of `rewards`: the one whose score of 1 makes an episode
    /// solved. Unset: the first reward in the list that is not a format reward.
    #[serde(default)]
    pub correct: Option<String>,
    /// `length`: the reply length (characters) that still earns the full reward.
    #[serde(default = "default_length_target")]
    pub length_target: f64,
    /// A second JSONL file as the held-out split; unset: `heldout_frac` of `path`.
    #[serde(default)]
    pub heldout: Option<PathBuf>,
    /// The share of `path`'s lines held out (seeded) when `heldout` is unset.
    #[serde(default = "default_heldout_frac")]
    pub heldout_frac: f64,
    /// A system message put before each `prompt` line (not before `messages` lines).
    #[serde(default)]
    pub system: Option<String>,
    /// A JSONL file of solved examples (the data set's line format, an optional `solution`
    /// as the reply shown), put before every task as user/assistant turns.
    #[serde(default)]
    pub few_shot: Option<PathBuf>,
    /// How many of `few_shot`'s examples, from its first line; unset: all.
    #[serde(default)]
    pub few_shot_n: Option<usize>,
    /// Keep a few-shot example whose answer is also a held-out task's answer (refused by
    /// default: the block could leak it).
    #[serde(default)]
    pub few_shot_allow_overlap: bool,
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

/// One entry of `rewards`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WeightedReward {
    pub name: String,
    #[serde(default = "default_weight")]
    pub weight: f64,
}

fn default_weight() -> f64 {
    1.0
}
fn default_length_target() -> f64 {
    400.0
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
    about: "single-turn prompts from a JSONL file (env.options.path), graded by a reward function by name (env.options.reward) or a weighted list (env.options.rewards)",
    build: build,
});

pub struct DatasetEnv {
    train: Vec<data::Item>,
    heldout: Vec<data::Item>,
    reward: Arc<Reward>,
    max_new_tokens: u32,
}

/// The reward of a run: its components with their weights, and which one is correctness.
pub struct Reward {
    /// (function, weight); one entry with weight 1 for the single `reward` key.
    pub components: Vec<(&'static RewardFn, f64)>,
    /// The index in `components` of the correctness component.
    pub correct: usize,
    /// Whether per-component scores are recorded (a `rewards` list).
    pub weighted: bool,
    pub settings: RewardSettings,
}

impl Reward {
    /// Grade a reply: the weighted reward, each component's score (empty for a single
    /// `reward`) and whether the correctness component scored 1.
    pub fn grade(&self, reply: &str, answer: &str, truncated: bool) -> (f64, BTreeMap<String, f64>, bool) {
        let mut total = 0.0;
        let mut scores = BTreeMap::new();
        let mut solved = false;
        for (i, (f, w)) in self.components.iter().enumerate() {
            // A reply cut at the budget earns no format credit (not even for being short).
            let score = if truncated && f.format { 0.0 } else { (f.score)(reply, answer, &self.settings) };
            total += w * score;
            if i == self.correct {
                solved = score >= 1.0;
            }
            if self.weighted {
                scores.insert(f.name.to_string(), score);
            }
        }
        (total, scores, solved)
    }

    /// Resolve `reward` / `rewards` / `correct`, refusing bad input with one line.
    pub fn from_options(o: &DatasetOptions, settings: RewardSettings) -> Result<Self, String> {
        let (list, weighted) = match (&o.reward, &o.rewards) {
            (Some(_), Some(_)) => {
                return Err("env.options.reward and env.options.rewards are both set; keep one (rewards = [{ name = \"hash\", weight = 1.0 }, …] lists several)".into())
            }
            (None, Some(list)) => (list.clone(), true),
            (single, None) => (vec![WeightedReward { name: single.clone().unwrap_or_else(|| "exact".into()), weight: 1.0 }], false),
        };
        if list.is_empty() {
            return Err("env.options.rewards is empty; list at least one, e.g. [{ name = \"hash\", weight = 1.0 }]".into());
        }
        let mut components = Vec::new();
        for (i, r) in list.iter().enumerate() {
            let key = if weighted { format!("env.options.rewards[{i}].name") } else { "env.options.reward".into() };
            let f = reward::get(&r.name).map_err(|e| e.replacen("env.options.reward", &key, 1))?;
            if !(r.weight.is_finite() && r.weight >= 0.0) {
                return Err(format!("env.options.rewards[{i}].weight: {} is out of range; valid: finite and ≥ 0", r.weight));
            }
            if components.iter().any(|(g, _): &(&RewardFn, f64)| g.name == f.name) {
                return Err(format!("env.options.rewards[{i}].name: `{}` is listed twice; list each reward once", f.name));
            }
            components.push((f, r.weight));
        }
        let correct = match &o.correct {
            Some(name) => {
                let i = components.iter().position(|(f, _)| f.name == name).ok_or_else(|| {
                    format!(
                        "env.options.correct: `{name}` is not in the reward list; valid: {}",
                        components.iter().map(|(f, _)| f.name).collect::<Vec<_>>().join(", ")
                    )
                })?;
                if components[i].0.format {
                    return Err(format!("env.options.correct: `{name}` is a format reward, which cannot decide correctness; name one that checks the answer (e.g. \"hash\")"));
                }
                i
            }
            None => components.iter().position(|(f, _)| !f.format).ok_or_else(|| {
                let key = if weighted { "env.options.rewards" } else { "env.options.reward" };
                format!("{key}: no correctness component: every reward listed is a format reward; add one that checks the answer, e.g. {{ name = \"hash\", weight = 1.0 }}")
            })?,
        };
        Ok(Self { components, correct, weighted, settings })
    }
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
        if !(o.length_target > 0.0 && o.length_target.is_finite()) {
            return Err(format!("env.options.length_target: {} is out of range; valid: finite and > 0", o.length_target));
        }
        if !(o.tolerance >= 0.0 && o.tolerance.is_finite()) {
            return Err(format!("env.options.tolerance: {} is out of range; valid: ≥ 0", o.tolerance));
        }
        let pattern = match &o.pattern {
            Some(p) => Some(regex::Regex::new(p).map_err(|e| format!("env.options.pattern: not a regular expression: {e}"))?),
            None => None,
        };
        let settings = RewardSettings { tolerance: o.tolerance, pattern, case_sensitive: o.case_sensitive, length_target: o.length_target };
        let reward = Reward::from_options(o, settings)?;
        if reward.settings.pattern.is_none() && reward.components.iter().any(|(f, _)| f.name == "regex") {
            return Err("env.options.pattern is required with reward = \"regex\", e.g. \"Answer: (\\\\S+)\"".into());
        }
        let items = data::read(&o.path, "env.options.path", o.system.as_deref())?;
        let (mut train, mut heldout) = match &o.heldout {
            Some(h) => (items, data::read(h, "env.options.heldout", o.system.as_deref())?),
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
        match &o.few_shot {
            Some(path) => {
                let examples = few_shot::read(path, o.few_shot_n)?;
                few_shot::check_heldout(&examples, &heldout, path, o.few_shot_allow_overlap)?;
                for it in train.iter_mut().chain(heldout.iter_mut()) {
                    few_shot::insert(&mut it.messages, &examples);
                }
            }
            None if o.few_shot_n.is_some() || o.few_shot_allow_overlap => {
                return Err(
                    "env.options.few_shot_n and few_shot_allow_overlap need env.options.few_shot, a JSONL file of solved examples".into()
                );
            }
            None => {}
        }
        Ok(Self { train, heldout, reward: Arc::new(reward), max_new_tokens: o.max_new_tokens })
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
        let reward = self.reward.clone();
        // One reply, graded; a budget cut before it grades the empty reply.
        Ok(Box::new(SingleTurn::new(messages, move |text: &str, truncated| {
            let (total, rewards, solved) = reward.grade(text, &answer, truncated);
            let solved = reward.weighted.then_some(solved);
            Outcome { reward: total, stats: EpisodeStats { turns: 1, truncated, rewards, solved, ..Default::default() } }
        })))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arl_core::{AssistantTurn, Step};

    /// `[env.options]` from JSON (with `path`), with `weights` replacing the list's weights
    /// where given (JSON has no NaN or infinity).
    fn options(json: serde_json::Value, weights: &[(usize, f64)]) -> DatasetOptions {
        let mut v = json;
        v["path"] = "x.jsonl".into();
        let mut o: DatasetOptions = serde_json::from_value(v).unwrap();
        for &(i, w) in weights {
            o.rewards.as_mut().unwrap()[i].weight = w;
        }
        o
    }

    fn reward(json: serde_json::Value) -> Result<Reward, String> {
        reward_with(json, &[])
    }

    fn reward_with(json: serde_json::Value, weights: &[(usize, f64)]) -> Result<Reward, String> {
        let o = options(json, weights);
        let settings = RewardSettings { tolerance: 0.0, pattern: None, case_sensitive: true, length_target: o.length_target };
        Reward::from_options(&o, settings)
    }

    #[test]
    fn a_weighted_list_sums_its_components_and_records_each() {
        let r = reward(serde_json::json!({"rewards": [{"name": "hash", "weight": 1.0}, {"name": "format-hash", "weight": 0.2}, {"name": "format-number", "weight": 0.5}]})).unwrap();
        let (total, scores, solved) = r.grade("3 + 4\n#### 7", "7", false);
        assert!((total - 1.7).abs() < 1e-12, "{total}");
        assert_eq!(scores, BTreeMap::from([("hash".into(), 1.0), ("format-hash".into(), 1.0), ("format-number".into(), 1.0)]));
        assert!(solved);
        // Right format, wrong answer: format credit only, not solved.
        let (total, scores, solved) = r.grade("#### 8", "7", false);
        assert!((total - 0.7).abs() < 1e-12, "{total}");
        assert_eq!(scores["hash"], 0.0);
        assert!(!solved);
        // Cut at the budget: no format credit.
        let (total, _, solved) = r.grade("", "7", true);
        assert_eq!((total, solved), (0.0, false));
        // The single key: one component, weight 1, nothing extra recorded.
        let single = reward(serde_json::json!({"reward": "hash"})).unwrap();
        assert_eq!(single.grade("#### 7", "7", false), (1.0, BTreeMap::new(), true));
        assert!(!single.weighted);
    }

    /// A format reward with a weight that alone reaches 1 still never makes a wrong answer
    /// solved: the correctness component decides, through `EpisodeStats::solved`.
    #[test]
    fn format_credit_never_makes_a_wrong_answer_solved() {
        let r = reward(serde_json::json!({"rewards": [{"name": "format-hash", "weight": 2.0}, {"name": "hash", "weight": 0.5}]})).unwrap();
        assert_eq!(r.components[r.correct].0.name, "hash", "the first reward that is not a format reward");
        let env = DatasetEnv { train: Vec::new(), heldout: Vec::new(), reward: Arc::new(r), max_new_tokens: 8 };
        let task = Task {
            id: "t".into(),
            split: Split::Train,
            family: "arithmetic".into(),
            data: serde_json::json!({"messages": [{"role": "user", "content": "2+5?"}], "answer": "7"}),
        };
        let mut session = env.reset(&task).unwrap();
        let Step::Done(outcome) = session.step(&AssistantTurn { text: "#### 8".into(), calls: Vec::new() }).unwrap() else { panic!() };
        assert_eq!(outcome.reward, 2.0);
        assert_eq!(outcome.stats.solved, Some(false));
        let episode = arl_core::Episode { reward: outcome.reward, stats: outcome.stats, ..Default::default() };
        assert!(!episode.solved(), "reward 2 from format credit alone is not a solved episode");
        let mut session = env.reset(&task).unwrap();
        let Step::Done(outcome) = session.step(&AssistantTurn { text: "#### 7".into(), calls: Vec::new() }).unwrap() else { panic!() };
        assert_eq!((outcome.reward, outcome.stats.solved), (2.5, Some(true)));
        assert_eq!(outcome.stats.rewards, BTreeMap::from([("format-hash".into(), 1.0), ("hash".into(), 1.0)]));
    }

    #[test]
    fn bad_reward_lists_are_refused_with_one_line_naming_the_key() {
        use serde_json::json;
        let (hash, fmt) = (json!({"name": "hash"}), json!({"name": "format-hash"}));
        let cases = [
            (
                json!({"rewards": [{"name": "hash", "weight": -0.5}]}),
                vec![],
                "env.options.rewards[0].weight: -0.5 is out of range; valid: finite and ≥ 0",
            ),
            (json!({"rewards": [hash, fmt]}), vec![(1, f64::NAN)], "env.options.rewards[1].weight: NaN is out of range"),
            (json!({"rewards": [hash]}), vec![(0, f64::INFINITY)], "env.options.rewards[0].weight: inf is out of range"),
            (
                json!({"rewards": [hash, {"name": "gsm8k"}]}),
                vec![],
                "env.options.rewards[1].name: no reward function `gsm8k`; valid: boxed, exact, format-boxed",
            ),
            (json!({"rewards": [fmt, {"name": "length"}]}), vec![], "env.options.rewards: no correctness component"),
            (json!({"reward": "format-hash"}), vec![], "env.options.reward: no correctness component"),
            (json!({"rewards": [hash], "correct": "boxed"}), vec![], "env.options.correct: `boxed` is not in the reward list; valid: hash"),
            (json!({"rewards": [hash, fmt], "correct": "format-hash"}), vec![], "env.options.correct: `format-hash` is a format reward"),
            (json!({"rewards": []}), vec![], "env.options.rewards is empty"),
            (json!({"rewards": [hash, hash]}), vec![], "env.options.rewards[1].name: `hash` is listed twice"),
            (json!({"reward": "hash", "rewards": [hash]}), vec![], "env.options.reward and env.options.rewards are both set"),
        ];
        for (json, weights, says) in cases {
            let err = reward_with(json.clone(), &weights).err().unwrap_or_else(|| panic!("{json}: accepted"));
            assert!(err.starts_with(says), "{json}: {err} (want {says})");
            assert_eq!(err.lines().count(), 1, "{err}");
        }
        let unknown: Result<DatasetOptions, _> =
            serde_json::from_value(serde_json::json!({"path": "x", "rewards": [{"name": "hash", "wieght": 1.0}]}));
        assert!(unknown.unwrap_err().to_string().contains("unknown field `wieght`"));
    }
}
