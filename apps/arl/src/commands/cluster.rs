//! `arl cluster status|stop|fs-check`: look at and end a run whose rollouts run in workers
//! (`--launcher procs|slurm`), and check that a folder is on a filesystem other nodes see
//! (`fs_check.rs`).

use std::io::Write;
use std::path::{Path, PathBuf};

use arl_train::dist::{Heartbeat, Index, Layout, read_json, write_atomic};

use super::slurm;

#[derive(Debug, clap::Subcommand)]
pub enum ClusterCommand {
    /// The run's Slurm jobs, the rounds in flight, each worker's heartbeat and the last step.
    Status {
        /// The run folder (`--out`).
        run_dir: PathBuf,
    },
    /// End the run: write `dist/STOP` (workers exit) and `scancel` the run's Slurm jobs.
    Stop {
        /// The run folder (`--out`).
        run_dir: PathBuf,
    },
    /// Tell whether DIR is on a filesystem that workers on other nodes can reach: by its type,
    /// or, as a Slurm step of several tasks (`srun -N2 arl cluster fs-check DIR`), by trying it.
    FsCheck {
        /// The folder (or the folder it would be created in).
        dir: PathBuf,
        /// In a Slurm step: how long a task waits to see the other tasks' files.
        #[arg(long, default_value_t = 120.0)]
        timeout_s: f64,
    },
}

impl ClusterCommand {
    pub fn execute(self, out: &mut dyn Write) -> anyhow::Result<()> {
        match self {
            ClusterCommand::Status { run_dir } => status(&run_dir, out),
            ClusterCommand::Stop { run_dir } => stop(&run_dir, out),
            ClusterCommand::FsCheck { dir, timeout_s } => {
                if !(timeout_s.is_finite() && timeout_s > 0.0) {
                    return Err(crate::usage!("--timeout-s {timeout_s}: give a number of seconds above 0"));
                }
                super::fs_check::fs_check(&dir, std::time::Duration::from_secs_f64(timeout_s), out)
            }
        }
    }
}

/// A folder that holds a run with workers, or a usage error.
fn check_run(run_dir: &Path) -> anyhow::Result<(Layout, Option<slurm::Jobs>)> {
    let layout = Layout::of(run_dir);
    let jobs = slurm::read_jobs(run_dir)?;
    if jobs.is_none() && !layout.root.exists() {
        return Err(crate::usage!(
            "{} holds no run with rollout workers (no slurm/jobs.json, no dist/); start one with --launcher slurm or procs",
            run_dir.display()
        ));
    }
    Ok((layout, jobs))
}

fn status(run_dir: &Path, out: &mut dyn Write) -> anyhow::Result<()> {
    let (layout, jobs) = check_run(run_dir)?;
    if let Some(jobs) = &jobs {
        for (role, id) in [("trainer", &jobs.trainer), ("workers", &jobs.workers)] {
            let state = match std::process::Command::new("squeue").args(["-h", "-o", "%i %T %R", "-j", id]).output() {
                Ok(o) if o.status.success() => {
                    let text = String::from_utf8_lossy(&o.stdout).lines().map(str::trim).collect::<Vec<_>>().join(", ");
                    if text.is_empty() { "ended".to_string() } else { text }
                }
                Ok(o) if String::from_utf8_lossy(&o.stderr).contains("Invalid job id") => "ended".into(),
                Ok(o) => format!("squeue failed: {}", String::from_utf8_lossy(&o.stderr).trim()),
                Err(e) => format!("squeue not run: {e}"),
            };
            writeln!(out, "{role} job {id}: {state}")?;
        }
    }
    match read_json::<Index>(&layout.index())? {
        Some(index) => {
            let rounds: Vec<String> =
                index.rounds.iter().map(|r| format!("r{}.a{} (v{})", r.round.id, r.attempt, r.round.version)).collect();
            writeln!(
                out,
                "trainer incarnation {} (arl {}): {} in flight{}{}",
                index.incarnation,
                index.arl_version,
                arl_train::trainer::plural(rounds.len(), "round"),
                if rounds.is_empty() { "" } else { ": " },
                rounds.join(", ")
            )?;
        }
        None => writeln!(out, "no trainer has published the run yet ({} missing)", layout.index().display())?,
    }
    // Workers are numbered from 0; the first missing heartbeat ends the list.
    for w in 0.. {
        let Some(beat) = read_json::<Heartbeat>(&layout.heartbeat(w)).ok().flatten() else { break };
        writeln!(
            out,
            "w{w}: pid {}, beat {}, {}, weights {}",
            beat.pid,
            beat.beat,
            beat.round.map(|r| format!("holds {r}")).unwrap_or_else(|| "idle".into()),
            beat.version.map(|v| format!("v{v}")).unwrap_or_else(|| "none".into())
        )?;
    }
    if layout.stop().exists() {
        writeln!(out, "STOP: the run was ended ({})", layout.stop().display())?;
    }
    let metrics = std::fs::read_to_string(run_dir.join("metrics.jsonl")).unwrap_or_default();
    match metrics.lines().rev().find_map(|l| serde_json::from_str::<serde_json::Value>(l).ok()) {
        Some(last) => writeln!(out, "last step {} (reward_mean {})", last["step"], last["reward_mean"])?,
        None => writeln!(out, "no step finished yet")?,
    }
    Ok(())
}

fn stop(run_dir: &Path, out: &mut dyn Write) -> anyhow::Result<()> {
    let (layout, jobs) = check_run(run_dir)?;
    if layout.root.exists() {
        write_atomic(&layout.stop(), b"")?;
        writeln!(out, "wrote {}: workers exit when they next look", layout.stop().display())?;
    }
    if let Some(jobs) = jobs {
        slurm::need_on_path("scancel", "arl cluster stop")?;
        let done = std::process::Command::new("scancel").args([&jobs.trainer, &jobs.workers]).output()?;
        if !done.status.success() {
            anyhow::bail!("scancel {} {}: {}", jobs.trainer, jobs.workers, String::from_utf8_lossy(&done.stderr).trim());
        }
        writeln!(out, "scancel {} {}: the trainer job and the worker array", jobs.trainer, jobs.workers)?;
    }
    Ok(())
}
