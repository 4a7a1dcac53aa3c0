//! Reading a run folder as it is: finished, in progress, or resumed.
//!
//! `metrics.jsonl` may end in a half-written line (a run being written or killed) and may hold a
//! step twice (a killed process logged a step it never checkpointed; the resumed run redoes it):
//! the last complete line of each step wins. Without `results.json` (a run in progress) the
//! before-evaluation comes from the newest checkpoint's `trainer_state.json`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde_json::Value;

/// The held-out splits a run may report, as `results.json` names them.
pub const HELDOUT_SPLITS: [&str; 2] = ["heldout", "heldout_instances"];

/// One run folder, read.
#[derive(Debug)]
pub struct RunData {
    pub dir: PathBuf,
    /// The label in legends: the config keys where this run differs from the others, else the
    /// folder name.
    pub label: String,
    /// `config.toml` flattened to `section.key = value`.
    pub config: BTreeMap<String, String>,
    /// One metrics object per step, in step order.
    pub steps: Vec<Value>,
    /// `results.json`, when the run has finished.
    pub results: Option<Value>,
    /// The evaluation before training (from `results.json`, else the newest checkpoint).
    pub before: Option<Value>,
    /// The same on the second held-out split, `heldout_instances`, when the run has it.
    pub before_instances: Option<Value>,
    /// Notes on what was missing or skipped, shown on the page.
    pub notes: Vec<String>,
}

impl RunData {
    pub fn after(&self) -> Option<&Value> {
        self.results.as_ref().and_then(|r| r.get("after")).filter(|v| !v.is_null())
    }

    pub fn difference(&self) -> Option<&Value> {
        self.results.as_ref().and_then(|r| r.get("difference")).filter(|v| !v.is_null())
    }

    /// A held-out split's evaluations before and after and their paired difference:
    /// [`HELDOUT_SPLITS`]`[0]` is `results.json`'s `before`/`after`/`difference`, `[1]` its
    /// `heldout_instances` object.
    pub fn split(&self, split: &str) -> [Option<&Value>; 3] {
        if split == HELDOUT_SPLITS[0] {
            return [self.before.as_ref(), self.after(), self.difference()];
        }
        let second = self.results.as_ref().and_then(|r| r.get(split)).filter(|v| !v.is_null());
        let get = |k: &str| second.and_then(|s| s.get(k)).filter(|v| !v.is_null());
        [self.before_instances.as_ref(), get("after"), get("difference")]
    }

    pub fn name(&self) -> String {
        self.dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| self.dir.display().to_string())
    }
}

/// Read the run folders and label each by its config differences.
pub fn load_runs(dirs: &[PathBuf]) -> anyhow::Result<Vec<RunData>> {
    let mut runs = dirs.iter().map(|d| load_run(d)).collect::<Result<Vec<_>, _>>()?;
    label_runs(&mut runs);
    Ok(runs)
}

fn load_run(dir: &Path) -> anyhow::Result<RunData> {
    if !dir.is_dir() {
        return Err(crate::usage!("{}: no such directory", dir.display()));
    }
    let (metrics, results, config) = (dir.join("metrics.jsonl"), dir.join("results.json"), dir.join("config.toml"));
    if !metrics.is_file() && !results.is_file() && !config.is_file() {
        return Err(crate::usage!(
            "{}: not a run folder (no metrics.jsonl, results.json or config.toml); give the --out folder of an `arl run`",
            dir.display()
        ));
    }
    let mut notes = Vec::new();
    let steps = if metrics.is_file() { read_steps(&metrics, &mut notes)? } else { Vec::new() };
    let results = if results.is_file() { Some(read_json(&results)?) } else { None };
    // Prefer the config the run recorded in results.json; a run in progress has config.toml.
    let config = match results.as_ref().and_then(|r| r.get("config")) {
        Some(c) => flatten_json(c),
        None if config.is_file() => {
            let text = read(&config)?;
            match text.parse::<toml::Table>() {
                Ok(t) => flatten_json(&serde_json::to_value(t).unwrap_or(Value::Null)),
                Err(e) => {
                    notes.push(format!("config.toml is not valid TOML ({e}); the run is labelled by its folder"));
                    BTreeMap::new()
                }
            }
        }
        None => BTreeMap::new(),
    };
    let before = match results.as_ref().and_then(|r| r.get("before")).filter(|v| !v.is_null()) {
        Some(b) => Some(b.clone()),
        None => before_from_checkpoint(dir, "before")?,
    };
    let before_instances = match results.as_ref().and_then(|r| r.get("heldout_instances")).and_then(|h| h.get("before")) {
        Some(b) if !b.is_null() => Some(b.clone()),
        _ => before_from_checkpoint(dir, "before_instances")?,
    };
    if results.is_none() {
        notes.push(format!("no results.json yet: a run in progress or stopped ({} steps logged)", steps.len()));
    }
    Ok(RunData { dir: dir.to_path_buf(), label: String::new(), config, steps, results, before, before_instances, notes })
}

fn read(path: &Path) -> anyhow::Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))
}

fn read_json(path: &Path) -> anyhow::Result<Value> {
    serde_json::from_str(&read(path)?).with_context(|| format!("{}: not valid JSON", path.display()))
}

/// The metrics lines, the last of each step kept, in step order. A line that does not parse is
/// skipped with a note (the last one is usually a write in progress).
fn read_steps(path: &Path, notes: &mut Vec<String>) -> anyhow::Result<Vec<Value>> {
    let mut by_step: BTreeMap<i64, Value> = BTreeMap::new();
    let mut bad = Vec::new();
    let mut repeated = 0;
    for (i, line) in read(path)?.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Value>(line) {
            Ok(v) => match v.get("step").and_then(Value::as_i64) {
                Some(step) => {
                    repeated += usize::from(by_step.insert(step, v).is_some());
                }
                None => bad.push(i + 1),
            },
            Err(_) => bad.push(i + 1),
        }
    }
    if !bad.is_empty() {
        notes.push(format!("metrics.jsonl: skipped {} unreadable line(s): {:?}", bad.len(), bad));
    }
    if repeated > 0 {
        notes.push(format!("metrics.jsonl: {repeated} step(s) logged twice (a resumed run); the last line of each is shown"));
    }
    Ok(by_step.into_values().collect())
}

/// A before-evaluation (`key`) of a run in progress, from its newest checkpoint.
fn before_from_checkpoint(dir: &Path, key: &str) -> anyhow::Result<Option<Value>> {
    let Ok(entries) = std::fs::read_dir(dir.join("checkpoints")) else { return Ok(None) };
    let mut states: Vec<PathBuf> =
        entries.filter_map(|e| e.ok()).map(|e| e.path().join("trainer_state.json")).filter(|p| p.is_file()).collect();
    states.sort();
    match states.last() {
        Some(p) => Ok(read_json(p)?.get(key).filter(|v| !v.is_null()).cloned()),
        None => Ok(None),
    }
}

/// `{"a": {"b": 1}}` → `a.b = 1` (arrays and scalars as their JSON text).
fn flatten_json(v: &Value) -> BTreeMap<String, String> {
    fn walk(prefix: &str, v: &Value, out: &mut BTreeMap<String, String>) {
        match v {
            Value::Object(map) => {
                for (k, v) in map {
                    let key = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
                    walk(&key, v, out);
                }
            }
            Value::Null => {}
            Value::String(s) => {
                out.insert(prefix.to_string(), s.clone());
            }
            other => {
                out.insert(prefix.to_string(), other.to_string());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk("", v, &mut out);
    out
}

/// Each run's label: `key=value` for the keys whose values differ between the runs (output
/// paths and seeds of the output aside), else the folder name.
fn label_runs(runs: &mut [RunData]) {
    let keys: std::collections::BTreeSet<&String> = runs.iter().flat_map(|r| r.config.keys()).collect();
    let differing: Vec<String> = keys
        .into_iter()
        .filter(|k| !k.starts_with("output."))
        .filter(|k| {
            let first = runs[0].config.get(*k);
            runs.iter().any(|r| r.config.get(*k) != first)
        })
        .cloned()
        .collect();
    // The keys a reader compares runs by come first; a label names at most three.
    const FIRST: [&str; 10] = [
        "env.name",
        "loss.name",
        "advantage.name",
        "model.source",
        "trainer.lr",
        "trainer.group_size",
        "trainer.prompts",
        "sampling.temperature",
        "loss.kl_coef",
        "trainer.steps",
    ];
    let mut differing = differing;
    differing.sort_by_key(|k| FIRST.iter().position(|f| f == k).unwrap_or(FIRST.len()));
    for r in runs.iter_mut() {
        let parts: Vec<String> = differing
            .iter()
            .take(3)
            .map(|k| match r.config.get(k).map(String::as_str) {
                Some("") => format!("{k}=\"\""),
                Some(v) => format!("{k}={v}"),
                None => format!("{k} unset"),
            })
            .collect();
        r.label = if parts.is_empty() { r.name() } else { parts.join(", ") };
    }
    // Two runs with the same label (same config) are told apart by their folders.
    let labels: Vec<String> = runs.iter().map(|r| r.label.clone()).collect();
    for (i, r) in runs.iter_mut().enumerate() {
        if labels.iter().filter(|l| **l == labels[i]).count() > 1 {
            r.label = format!("{} ({})", r.label, r.name());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(dir: &str, config: &[(&str, &str)]) -> RunData {
        RunData {
            dir: PathBuf::from(dir),
            label: String::new(),
            config: config.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            steps: Vec::new(),
            results: None,
            before: None,
            before_instances: None,
            notes: Vec::new(),
        }
    }

    #[test]
    fn runs_are_labelled_by_the_keys_where_they_differ() {
        let mut runs = vec![
            run("runs/a", &[("loss.name", "grpo"), ("trainer.lr", "2e-5"), ("output.dir", "runs/a")]),
            run("runs/b", &[("loss.name", "cispo"), ("trainer.lr", "2e-5"), ("output.dir", "runs/b")]),
        ];
        label_runs(&mut runs);
        assert_eq!(runs[0].label, "loss.name=grpo");
        assert_eq!(runs[1].label, "loss.name=cispo");
        let mut same = vec![run("runs/a", &[("trainer.lr", "1")]), run("runs/b", &[("trainer.lr", "1")])];
        label_runs(&mut same);
        assert_eq!((same[0].label.as_str(), same[1].label.as_str()), ("a", "b"));
    }

    #[test]
    fn a_repeated_step_keeps_its_last_line_and_a_torn_line_is_skipped() {
        let dir = std::env::temp_dir().join(format!("arl-report-load-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("metrics.jsonl");
        std::fs::write(
            &path,
            "{\"step\":1,\"reward_mean\":0.1}\n{\"step\":2,\"reward_mean\":0.2}\n{\"step\":2,\"reward_mean\":0.3}\n{\"step\":3,\"rew",
        )
        .unwrap();
        let mut notes = Vec::new();
        let steps = read_steps(&path, &mut notes).unwrap();
        let rewards: Vec<f64> = steps.iter().map(|s| s["reward_mean"].as_f64().unwrap()).collect();
        assert_eq!(rewards, vec![0.1, 0.3]);
        assert_eq!(notes.len(), 2, "{notes:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
