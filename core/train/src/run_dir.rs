//! Run folders (`output.dir`): which run owns one, and the rules that keep a run's files safe.
//!
//! A run claims its folder by writing `run.json` ([`RUN_FILE`]: its id, the arl build, the
//! command). The rules, checked by [`check_start`] before anything is loaded:
//! - a new run refuses a folder that holds another run's files ([`RUN_FILES`]) unless asked to
//!   overwrite them, and with `overwrite` those files (and only those) are removed when the
//!   run claims the folder — never before, so a start that fails changes nothing;
//! - `--resume` needs the folder's run, a checkpoint of that run (checkpoints carry the run id,
//!   so another run's stale ones are never picked), and a configuration it may continue.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::TrainError;
use super::checkpoint::{self, TrainerState};
use arl_core::{ConfigError, RunConfig};

/// The file that says which run owns a folder.
pub const RUN_FILE: &str = "run.json";

/// Every file or folder a run writes into its folder; any of them means "a run lives here".
pub const RUN_FILES: &[&str] = &[RUN_FILE, "config.toml", "run.log", "metrics.jsonl", "results.json", "checkpoints"];

/// `run.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunFile {
    pub run_id: String,
    pub started_unix: u64,
    pub arl_version: String,
    pub git_commit: Option<String>,
    pub command: String,
}

/// What a start found in the folder and may go ahead with.
#[derive(Clone, Debug, PartialEq)]
pub enum Start {
    /// Nothing of a run is there (or the folder does not exist yet).
    Fresh,
    /// Another run's files are there and will be removed when this run claims the folder.
    Overwrite { files: Vec<String> },
    /// Continue the folder's run from this checkpoint.
    Resume { run_id: Option<String>, checkpoint: PathBuf, step: u32 },
}

/// The run files present in `dir`.
pub fn run_files(dir: &Path) -> Vec<String> {
    RUN_FILES.iter().filter(|f| dir.join(f).exists()).map(|f| f.to_string()).collect()
}

/// The folder's owner, if it has a readable `run.json`.
pub fn owner(dir: &Path) -> Result<Option<RunFile>, TrainError> {
    let path = dir.join(RUN_FILE);
    if !path.is_file() {
        return Ok(None);
    }
    let text = std::fs::read_to_string(&path).map_err(TrainError::at(&path))?;
    serde_json::from_str(&text).map(Some).map_err(|e| TrainError::Other(format!("{}: not a run file: {e}", path.display())))
}

fn refuse(message: String) -> TrainError {
    TrainError::Config(ConfigError::Invalid { key: "output.dir".into(), message })
}

/// Decide, reading only, whether a run with `config` may start in `dir` (see the module docs).
pub fn check_start(dir: &Path, config: &RunConfig, overwrite: bool) -> Result<Start, TrainError> {
    if dir.exists() && !dir.is_dir() {
        return Err(refuse(format!("{} exists and is not a directory", dir.display())));
    }
    let files = run_files(dir);
    if config.trainer.resume {
        if overwrite {
            return Err(refuse("--resume continues the run in the folder and --overwrite replaces it; pass one of them".into()));
        }
        let run_id = owner(dir)?.map(|o| o.run_id);
        let Some((checkpoint, state)) = checkpoint::latest_of(dir, run_id.as_deref())? else {
            return Err(refuse(format!(
                "--resume: no checkpoint in {} of {} (checkpoints are written every trainer.checkpoint_every steps, at most one per trainer.checkpoint_interval_s); run \
                 without --resume to start",
                checkpoint::checkpoints_dir(dir).display(),
                run_id.as_deref().map(|id| format!("run {id}")).unwrap_or_else(|| "any run".into()),
            )));
        };
        check_continues(&checkpoint, &state, config)?;
        return Ok(Start::Resume { run_id, checkpoint, step: state.step });
    }
    if files.is_empty() {
        return Ok(Start::Fresh);
    }
    if overwrite {
        return Ok(Start::Overwrite { files });
    }
    let who = match owner(dir) {
        Ok(Some(o)) => format!("run {} (`{}`)", o.run_id, o.command),
        _ => "another run".into(),
    };
    Err(refuse(format!(
        "{} holds {who} ({}); pass --resume to continue it, --overwrite to replace it, or choose another --out",
        dir.display(),
        files.join(", ")
    )))
}

/// The checkpoint's configuration may be continued by `config` (one line naming the key).
pub fn check_continues(dir: &Path, state: &TrainerState, config: &RunConfig) -> Result<(), TrainError> {
    if let Some(key) = checkpoint::differing_key(&state.config, config) {
        return Err(TrainError::Config(ConfigError::Invalid {
            key: key.clone(),
            message: format!(
                "--resume: differs from the run that wrote {} ({} → {}); resume with the same value or start a new run in another --out",
                dir.display(),
                checkpoint::value_at(&state.config, &key),
                checkpoint::value_at(config, &key),
            ),
        }));
    }
    Ok(())
}

/// Take the folder for the run `run` after everything has loaded: remove the files of the run
/// being overwritten, create the folder, and (for a new run) write `run.json` and
/// `config.toml`. A resumed run keeps both.
pub fn claim(dir: &Path, start: &Start, run: &RunFile, config: &RunConfig) -> Result<(), TrainError> {
    if let Start::Overwrite { files } = start {
        for f in files {
            let path = dir.join(f);
            let removed = if path.is_dir() { std::fs::remove_dir_all(&path) } else { std::fs::remove_file(&path) };
            removed.map_err(TrainError::at(&path))?;
        }
    }
    std::fs::create_dir_all(dir).map_err(TrainError::at(dir))?;
    if matches!(start, Start::Resume { .. }) {
        return Ok(());
    }
    let path = dir.join(RUN_FILE);
    std::fs::write(&path, serde_json::to_string_pretty(run).expect("run file serializes") + "\n").map_err(TrainError::at(&path))?;
    let path = dir.join("config.toml");
    std::fs::write(&path, config.to_toml()).map_err(TrainError::at(&path))?;
    Ok(())
}

/// A run id: the start time and the process, unique enough to tell two runs of a folder apart.
pub fn new_run_id() -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    format!("{:x}-{:x}", nanos, std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("arl-run-dir-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    fn run_file(id: &str) -> RunFile {
        RunFile { run_id: id.into(), started_unix: 0, arl_version: "0".into(), git_commit: None, command: "arl run".into() }
    }

    fn put_checkpoint(dir: &Path, name: &str, step: u32, run_id: Option<&str>, config: &RunConfig) {
        let d = dir.join("checkpoints").join(name);
        std::fs::create_dir_all(&d).unwrap();
        let state = TrainerState { step, config: config.clone(), run_id: run_id.map(str::to_string), ..TrainerState::default() };
        std::fs::write(d.join(checkpoint::STATE_FILE), serde_json::to_string(&state).unwrap()).unwrap();
    }

    #[test]
    fn a_new_run_takes_an_empty_folder_and_refuses_an_occupied_one() {
        let dir = scratch("occupied");
        let config = RunConfig::default();
        assert_eq!(check_start(&dir, &config, false).unwrap(), Start::Fresh);
        claim(&dir, &Start::Fresh, &run_file("a"), &config).unwrap();
        std::fs::write(dir.join("notes.txt"), "mine").unwrap();
        let err = check_start(&dir, &config, false).unwrap_err().to_string();
        assert!(err.starts_with("config key `output.dir`: ") && err.contains("holds run a (`arl run`) (run.json, config.toml)"), "{err}");
        assert!(err.contains("--overwrite"), "{err}");
        let start = check_start(&dir, &config, true).unwrap();
        assert_eq!(start, Start::Overwrite { files: vec!["run.json".into(), "config.toml".into()] });
        put_checkpoint(&dir, "step-00003", 3, Some("a"), &config);
        let start = check_start(&dir, &config, true).unwrap();
        claim(&dir, &start, &run_file("b"), &config).unwrap();
        assert!(!dir.join("checkpoints").exists(), "the old run's checkpoints are gone");
        assert_eq!(owner(&dir).unwrap().unwrap().run_id, "b");
        assert_eq!(std::fs::read_to_string(dir.join("notes.txt")).unwrap(), "mine", "files that are not a run's stay");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn resume_continues_only_the_folders_own_run() {
        let dir = scratch("resume");
        let mut config = RunConfig::default();
        claim(&dir, &Start::Fresh, &run_file("mine"), &config).unwrap();
        config.trainer.resume = true;
        let err = check_start(&dir, &config, false).unwrap_err().to_string();
        assert!(err.contains("no checkpoint in") && err.contains("of run mine"), "{err}");
        put_checkpoint(&dir, "step-00009", 9, Some("stale"), &config);
        put_checkpoint(&dir, "step-00002", 2, Some("mine"), &config);
        match check_start(&dir, &config, false).unwrap() {
            Start::Resume { step, checkpoint, .. } => assert_eq!((step, checkpoint.ends_with("step-00002")), (2, true)),
            other => panic!("{other:?}"),
        }
        let mut other = config.clone();
        other.trainer.lr = 1.0;
        let err = check_start(&dir, &other, false).unwrap_err().to_string();
        assert!(err.starts_with("config key `trainer.lr`: --resume: differs from the run that wrote"), "{err}");
        assert!(check_start(&dir, &config, true).unwrap_err().to_string().contains("pass one of them"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_file_in_place_of_the_folder_is_refused() {
        let dir = scratch("file");
        std::fs::write(&dir, "x").unwrap();
        let err = check_start(&dir, &RunConfig::default(), false).unwrap_err().to_string();
        assert!(err.ends_with("exists and is not a directory"), "{err}");
        std::fs::remove_file(&dir).unwrap();
    }
}
