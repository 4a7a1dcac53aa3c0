//! Checkpoints that a killed run resumes from.
//!
//! Layout: `<out>/checkpoints/step-NNNNN/` (every `trainer.checkpoint_every` steps, at most one
//! per `trainer.checkpoint_interval_s`: [`Cadence`]; the newest `trainer.keep_checkpoints` of
//! them kept) and
//! `<out>/checkpoints/final/`, each holding the policy's [`TrainablePolicy::save_state`]
//! (HF weights + optimizer state), the codec's tokenizer and chat template
//! ([`ChatCodec::save_files`], so `arl eval --model <checkpoint>` needs nothing else) and
//! `trainer_state.json` ([`TrainerState`]); once a newer
//! one is in place, an older one keeps only its weights and `trainer_state.json`
//! ([`TrainablePolicy::drop_state`]), since resume starts from the newest. A checkpoint
//! is written into `checkpoints/.tmp-<name>/` and renamed into place, so a kill mid-write
//! leaves only a dot-directory that [`latest`] ignores.
//!
//! Nothing else needs saving for an exact continuation besides the data position
//! (`tasks_used`) and the `difficulty` task sampler's state: every other random choice of the loop is a
//! function of the config seed and the step index (the task order is a seeded permutation,
//! each step's sampling seed is `seed ^ step·0x9e3779b9`, evaluation has its own seed).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::TrainError;
use super::eval::Evaluation;
use super::metrics::StepMetrics;
use arl_core::RunConfig;
use arl_core::chat::ChatCodec;
use arl_core::policy::TrainablePolicy;

/// The loop's own state at a checkpoint: `trainer_state.json`. The default is a fresh run's
/// (nothing done, nothing evaluated, the default config).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TrainerState {
    /// Steps done; training continues with step `step + 1`.
    pub step: u32,
    /// The run configuration (checked against the resuming one).
    pub config: RunConfig,
    /// Metrics of steps 1..=step.
    pub steps: Vec<StepMetrics>,
    pub before: Option<Evaluation>,
    /// The evaluation before training on the second held-out split (`heldout_instances`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before_instances: Option<Evaluation>,
    /// The evaluations after training finished so far (`final` only; a run killed during them
    /// resumes with the splits still missing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<Evaluation>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_instances: Option<Evaluation>,
    /// The `difficulty` task sampler's state (`None` with `uniform`, whose state is
    /// `tasks_used`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_sampler: Option<super::curriculum::DifficultyState>,
    /// Tool and episode counters summed over the training episodes so far.
    pub tool_stats: BTreeMap<String, u64>,
    /// Wall-clock seconds spent so far (over every process of the run).
    pub wall_seconds: f64,
    /// The data position: training tasks handed out so far (dynamic sampling takes a varying
    /// number per step, so the step index alone does not give it).
    #[serde(default)]
    pub tasks_used: usize,
    /// The run that wrote it (`run.json` of the run folder); `--resume` takes only
    /// checkpoints of the folder's own run. Unset in checkpoints older than run ids.
    #[serde(default)]
    pub run_id: Option<String>,
    /// Async training: groups the rollout thread had started and the trainer not yet taken
    /// when this was written. They are not in `tasks_used`, so a resumed run discards them
    /// and samples their tasks again.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub groups_in_flight: usize,
    /// An SFT run's own progress (`arl sft`; its RL fields above stay empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sft: Option<super::sft::SftProgress>,
}

pub const STATE_FILE: &str = "trainer_state.json";

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// Keys that may differ between the checkpoint's run and the resuming one.
const MAY_DIFFER: &[&str] = &[
    "trainer.resume",
    "trainer.checkpoint_every",
    "trainer.checkpoint_interval_s",
    "trainer.keep_checkpoints",
    "output.dir",
    "output.checkpoints",
    "output.tensorboard",
    "cluster.launcher",
    "cluster.rollout_workers",
    "cluster.lease_timeout_s",
    "cluster.max_round_attempts",
    "cluster.worker_idle_timeout_s",
];

/// When a step checkpoint is due: after every `trainer.checkpoint_every`-th step, once
/// `trainer.checkpoint_interval_s` has passed since the last one was written (or since the
/// run, or its resumption, started).
pub struct Cadence {
    every: u32,
    interval: std::time::Duration,
    last: std::time::Instant,
}

impl Cadence {
    pub fn new(trainer: &arl_core::config::TrainerConfig) -> Self {
        // Validated finite and ≥ 0; one too large for a `Duration` waits for ever.
        let interval = std::time::Duration::try_from_secs_f64(trainer.checkpoint_interval_s.max(0.0)).unwrap_or(std::time::Duration::MAX);
        Self { every: trainer.checkpoint_every, interval, last: std::time::Instant::now() }
    }

    /// Whether to write one after `steps_done` steps.
    pub fn due(&self, steps_done: u32) -> bool {
        self.every > 0 && steps_done.is_multiple_of(self.every) && self.last.elapsed() >= self.interval
    }

    /// A checkpoint was just written.
    pub fn written(&mut self) {
        self.last = std::time::Instant::now();
    }
}

pub fn checkpoints_dir(out: &Path) -> PathBuf {
    out.join("checkpoints")
}

/// Write `policy`'s state, `codec`'s files and `state` as checkpoint `name` (atomically: temp
/// dir + rename).
pub fn write(
    policy: &dyn TrainablePolicy,
    codec: &dyn ChatCodec,
    out: &Path,
    name: &str,
    state: &TrainerState,
) -> Result<PathBuf, TrainError> {
    let root = checkpoints_dir(out);
    let tmp = root.join(format!(".tmp-{name}"));
    let old = root.join(format!(".old-{name}"));
    let dir = root.join(name);
    for stale in [&tmp, &old] {
        if stale.exists() {
            std::fs::remove_dir_all(stale).map_err(TrainError::at(stale))?;
        }
    }
    std::fs::create_dir_all(&tmp).map_err(TrainError::at(&tmp))?;
    policy.save_state(&tmp)?;
    codec.save_files(&tmp)?;
    let state_path = tmp.join(STATE_FILE);
    std::fs::write(&state_path, serde_json::to_string_pretty(state).expect("trainer state serializes"))
        .map_err(TrainError::at(&state_path))?;
    if dir.exists() {
        std::fs::rename(&dir, &old).map_err(TrainError::at(&dir))?;
    }
    std::fs::rename(&tmp, &dir).map_err(TrainError::at(&tmp))?;
    if old.exists() {
        std::fs::remove_dir_all(&old).map_err(TrainError::at(&old))?;
    }
    // Only the newest checkpoint keeps the optimizer state: resume needs no other.
    for entry in std::fs::read_dir(&root).map_err(TrainError::at(&root))? {
        let other = entry.map_err(TrainError::at(&root))?.path();
        let hidden = other.file_name().is_some_and(|n| n.to_string_lossy().starts_with('.'));
        if other != dir && !hidden && other.join(STATE_FILE).is_file() {
            policy.drop_state(&other)?;
        }
    }
    Ok(dir)
}

/// Replace the `trainer_state.json` of checkpoint `dir` (written beside it and renamed into
/// place, so a kill leaves the old or the new one).
pub fn rewrite_state(dir: &Path, state: &TrainerState) -> Result<(), TrainError> {
    let path = dir.join(STATE_FILE);
    let tmp = dir.join(format!(".{STATE_FILE}.tmp"));
    std::fs::write(&tmp, serde_json::to_string_pretty(state).expect("trainer state serializes")).map_err(TrainError::at(&tmp))?;
    std::fs::rename(&tmp, &path).map_err(TrainError::at(&path))
}

/// Remove all but the newest `keep` `step-NNNNN` checkpoints under `out` (`final` is never
/// removed; `keep` 0 keeps every one). Returns how many were removed.
pub fn prune(out: &Path, keep: usize) -> Result<usize, TrainError> {
    if keep == 0 {
        return Ok(0);
    }
    let Ok(entries) = std::fs::read_dir(checkpoints_dir(out)) else { return Ok(0) };
    let mut steps: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("step-")))
        .collect();
    // Zero-padded step numbers sort by name.
    steps.sort();
    let old = steps.len().saturating_sub(keep);
    for dir in &steps[..old] {
        std::fs::remove_dir_all(dir).map_err(TrainError::at(dir))?;
    }
    Ok(old)
}

/// The complete checkpoint with the most steps done under `out`, if any.
pub fn latest(out: &Path) -> Result<Option<(PathBuf, TrainerState)>, TrainError> {
    latest_of(out, None)
}

/// As [`latest`], among the checkpoints of run `run_id` only (with `Some`; a checkpoint that
/// names no run counts as any run's).
pub fn latest_of(out: &Path, run_id: Option<&str>) -> Result<Option<(PathBuf, TrainerState)>, TrainError> {
    let root = checkpoints_dir(out);
    let Ok(entries) = std::fs::read_dir(&root) else { return Ok(None) };
    let mut best: Option<(PathBuf, TrainerState)> = None;
    for entry in entries {
        let dir = entry.map_err(TrainError::at(&root))?.path();
        let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let state_path = dir.join(STATE_FILE);
        if name.starts_with('.') || !state_path.is_file() {
            continue;
        }
        let text = std::fs::read_to_string(&state_path).map_err(TrainError::at(&state_path))?;
        let state: TrainerState = serde_json::from_str(&text)
            .map_err(|e| TrainError::Other(format!("checkpoint {}: unreadable {STATE_FILE}: {e}", dir.display())))?;
        if let (Some(want), Some(got)) = (run_id, state.run_id.as_deref())
            && want != got
        {
            continue;
        }
        // On a tie `final` wins: it is written after `step-NNNNN` of the same step, which
        // then lost its optimizer state.
        if best.as_ref().is_none_or(|(_, b)| state.step > b.step || (state.step == b.step && name == "final")) {
            best = Some((dir, state));
        }
    }
    Ok(best)
}

/// Load the latest checkpoint of run `run_id` (any run with `None`) under `out` into `policy`
/// after checking that `config` may continue it. Errors are one line naming the fix.
pub fn resume(
    policy: &mut dyn TrainablePolicy,
    out: &Path,
    run_id: Option<&str>,
    config: &RunConfig,
) -> Result<(PathBuf, TrainerState), TrainError> {
    let Some((dir, state)) = latest_of(out, run_id)? else {
        return Err(TrainError::Config(arl_core::ConfigError::Invalid {
            key: "trainer.resume".into(),
            message: format!(
                "no checkpoint in {} (checkpoints are written every trainer.checkpoint_every steps, at most one per trainer.checkpoint_interval_s); run without --resume to start",
                checkpoints_dir(out).display()
            ),
        }));
    };
    super::run_dir::check_continues(&dir, &state, config)?;
    policy.load_state(&dir)?;
    Ok((dir, state))
}

/// The first config key (dotted) whose value differs and matters for an exact continuation.
/// `trainer.steps` may grow unless the learning-rate schedule depends on it.
pub fn differing_key(saved: &RunConfig, now: &RunConfig) -> Option<String> {
    let (a, b) = (flatten(saved), flatten(now));
    let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    keys.into_iter()
        .filter(|k| !MAY_DIFFER.contains(&k.as_str()) && !k.starts_with("cluster.slurm."))
        .filter(|k| !(k.as_str() == "trainer.steps" && now.trainer.lr_schedule == arl_core::config::LrSchedule::Constant))
        .find(|k| a.get(*k) != b.get(*k))
        .cloned()
}

/// The value of dotted `key` in `config`, as JSON text (`unset` when absent).
pub fn value_at(config: &RunConfig, key: &str) -> String {
    flatten(config).get(key).map(|v| v.to_string()).unwrap_or_else(|| "unset".into())
}

fn flatten(config: &RunConfig) -> BTreeMap<String, Value> {
    fn walk(prefix: &str, v: &Value, out: &mut BTreeMap<String, Value>) {
        match v {
            // An empty table has no keys (so a key added to it is named, not the table).
            Value::Object(m) => {
                for (k, v) in m {
                    walk(&if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") }, v, out);
                }
            }
            _ => {
                out.insert(prefix.to_string(), v.clone());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk("", &serde_json::to_value(config).expect("config serializes"), &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cadence_waits_out_the_interval() {
        let mut t = arl_core::config::TrainerConfig { checkpoint_every: 2, checkpoint_interval_s: 0.0, ..Default::default() };
        let every_other = Cadence::new(&t);
        assert_eq!((1..=6).map(|s| every_other.due(s)).collect::<Vec<_>>(), [false, true, false, true, false, true]);
        t.checkpoint_interval_s = 0.2;
        let mut timed = Cadence::new(&t);
        assert!(!timed.due(2), "within the interval of the start");
        std::thread::sleep(std::time::Duration::from_millis(250));
        assert!(timed.due(2) && !timed.due(3), "past it, on the every-th steps only");
        timed.written();
        assert!(!timed.due(4), "within the interval of the last one");
        t.checkpoint_every = 0;
        t.checkpoint_interval_s = 0.0;
        let never = Cadence::new(&t);
        assert!(!never.due(2), "0: only the final one");
        t.checkpoint_every = 1;
        t.checkpoint_interval_s = 1e300;
        assert!(!Cadence::new(&t).due(1), "an interval beyond a Duration: no step checkpoint, no panic");
    }

    #[test]
    fn pruning_keeps_the_newest_step_checkpoints_and_final() {
        let root = std::env::temp_dir().join(format!("arl-prune-{}", std::process::id()));
        for name in ["step-00001", "step-00002", "step-00010", "final", ".tmp-step-00011"] {
            std::fs::create_dir_all(root.join("checkpoints").join(name)).unwrap();
        }
        assert_eq!(prune(&root, 0).unwrap(), 0);
        assert_eq!(prune(&root, 2).unwrap(), 1);
        let mut left: Vec<String> =
            std::fs::read_dir(root.join("checkpoints")).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        left.sort();
        assert_eq!(left, [".tmp-step-00011", "final", "step-00002", "step-00010"]);
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn only_keys_that_matter_block_a_resume() {
        let saved = RunConfig::default();
        let mut now = saved.clone();
        now.trainer.resume = true;
        now.trainer.steps += 5;
        now.output.dir = "elsewhere".into();
        assert_eq!(differing_key(&saved, &now), None);
        now.trainer.lr = 3e-4;
        assert_eq!(differing_key(&saved, &now).as_deref(), Some("trainer.lr"));
        let mut cosine = saved.clone();
        cosine.trainer.lr_schedule = arl_core::config::LrSchedule::Cosine;
        let mut longer = cosine.clone();
        longer.trainer.steps += 1;
        assert_eq!(differing_key(&cosine, &longer).as_deref(), Some("trainer.steps"));
        let mut opts = saved.clone();
        opts.env.options.insert("heldout_tasks".into(), 3.into());
        assert_eq!(differing_key(&saved, &opts).as_deref(), Some("env.options.heldout_tasks"));
    }

    fn put(root: &Path, name: &str, step: u32) {
        let dir = root.join("checkpoints").join(name);
        std::fs::create_dir_all(&dir).unwrap();
        let state = TrainerState { step, ..TrainerState::default() };
        std::fs::write(dir.join(STATE_FILE), serde_json::to_string(&state).unwrap()).unwrap();
    }

    #[test]
    fn latest_takes_the_most_steps_prefers_final_on_a_tie_and_skips_partial_writes() {
        let root = std::env::temp_dir().join(format!("arl-latest-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        assert!(latest(&root).unwrap().is_none());
        put(&root, "step-00002", 2);
        put(&root, ".tmp-step-00004", 4);
        std::fs::create_dir_all(root.join("checkpoints/step-00003")).unwrap(); // no state file
        assert!(latest(&root).unwrap().unwrap().0.ends_with("step-00002"));
        put(&root, "final", 3);
        put(&root, "step-00003", 3);
        assert!(latest(&root).unwrap().unwrap().0.ends_with("final"));
        std::fs::remove_dir_all(&root).unwrap();
    }
}
