//! Taking a run folder once everything has loaded, shared by `arl run` and `arl sft`: the run's
//! identity (`RunMeta`, `run.json`) and its `run.log`, opened to append on `--resume`.

use std::fs::File;
use std::path::Path;

use anyhow::Context;
use arl_core::RunConfig;
use arl_qwen3::hub::Source;
use arl_train::run_dir::{self, RunFile, Start};
use arl_train::trainer::RunMeta;

/// Claim `out_dir` for the run `start` says this is (a resumed run keeps its id), and open its
/// `run.log`. Call it only once the model, tokenizer and data have loaded: a start that fails
/// before it changes nothing in the folder.
pub(crate) fn claim(
    config: &RunConfig,
    out_dir: &Path,
    start: &Start,
    tokenizer: &Path,
    device: String,
) -> anyhow::Result<(RunMeta, File)> {
    let run_id = match start {
        Start::Resume { run_id: Some(id), .. } => id.clone(),
        _ => run_dir::new_run_id(),
    };
    let model = model_dir(&config.model.source);
    let meta = RunMeta {
        arl_version: env!("CARGO_PKG_VERSION").to_string(),
        git_commit: crate::GIT_COMMIT.map(str::to_string),
        run_id: run_id.clone(),
        model_snapshot: model.as_deref().and_then(|d| arl_core::hub::snapshot_revision(Path::new(d))),
        model_dir: model,
        tokenizer: Some(absolute(tokenizer)),
        device,
        command: std::env::args().collect::<Vec<_>>().join(" "),
        started_unix: std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0),
    };
    let run_file = RunFile {
        run_id,
        started_unix: meta.started_unix,
        arl_version: meta.arl_version.clone(),
        git_commit: meta.git_commit.clone(),
        command: meta.command.clone(),
    };
    run_dir::claim(out_dir, start, &run_file, config)?;
    let resumed = matches!(start, Start::Resume { .. });
    let log_path = out_dir.join("run.log");
    let log_file = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .append(resumed)
        .truncate(!resumed)
        .open(&log_path)
        .with_context(|| format!("opening {}", log_path.display()))?;
    Ok((meta, log_file))
}

pub(crate) fn absolute(path: &Path) -> String {
    path.canonicalize().unwrap_or_else(|_| path.to_path_buf()).display().to_string()
}

/// The directory the weights come from (`None` for a random-weights preset).
pub(crate) fn model_dir(source: &str) -> Option<String> {
    match arl_qwen3::hub::resolve(source) {
        Ok(Source::Dir(dir)) => Some(absolute(&dir)),
        _ => None,
    }
}
