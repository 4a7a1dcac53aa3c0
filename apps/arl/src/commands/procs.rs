//! `--launcher procs`: rollout workers as child processes of the trainer (`arl worker`), each
//! logging to `dist/logs/w{N}.log`, taken down with it (`PR_SET_PDEATHSIG`).

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use arl_train::dist::Layout;

/// The running workers.
pub struct Workers {
    children: Arc<Mutex<Vec<Child>>>,
    logs: std::path::PathBuf,
}

impl Workers {
    /// Start `n` workers on the run in `run_dir`.
    pub fn spawn(run_dir: &Path, n: u32) -> anyhow::Result<Self> {
        let logs = Layout::of(run_dir).logs();
        let mut children = Vec::new();
        for id in 0..n {
            let log_path = logs.join(format!("w{id}.log"));
            let log = std::fs::File::create(&log_path).with_context(|| format!("creating {}", log_path.display()))?;
            let args = ["worker".to_string(), run_dir.display().to_string(), "--worker-id".into(), id.to_string()];
            let mut command = crate::self_command(&args);
            command.stdin(Stdio::null()).stdout(log.try_clone()?).stderr(log);
            // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
            unsafe {
                command.pre_exec(|| {
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                    Ok(())
                });
            }
            children.push(command.spawn().with_context(|| format!("starting rollout worker w{id}"))?);
        }
        Ok(Self { children: Arc::new(Mutex::new(children)), logs })
    }

    /// For the trainer's wait: an error once every worker has exited (nobody left to roll out).
    pub fn watch(&self) -> Box<dyn FnMut() -> Result<(), String>> {
        let children = self.children.clone();
        let logs = self.logs.clone();
        Box::new(move || {
            let mut children = children.lock().unwrap_or_else(|e| e.into_inner());
            let mut last = None;
            for (id, child) in children.iter_mut().enumerate() {
                match child.try_wait() {
                    Ok(Some(status)) => last = Some((id, status)),
                    _ => return Ok(()),
                }
            }
            match last {
                Some((id, status)) => Err(format!(
                    "all {} rollout workers exited (w{id}: {status}): {}",
                    children.len(),
                    last_line(&logs.join(format!("w{id}.log")))
                )),
                None => Ok(()),
            }
        })
    }

    /// After `STOP`: wait up to `grace` for the workers to exit, then kill those left.
    pub fn finish(self, grace: Duration) {
        let mut children = self.children.lock().unwrap_or_else(|e| e.into_inner());
        let t = Instant::now();
        while t.elapsed() < grace && children.iter_mut().any(|c| matches!(c.try_wait(), Ok(None))) {
            std::thread::sleep(Duration::from_millis(20));
        }
        for child in children.iter_mut() {
            if matches!(child.try_wait(), Ok(None)) {
                let _ = child.kill();
            }
            let _ = child.wait();
        }
    }
}

/// The last non-empty line of a log (`(empty log)` when none).
fn last_line(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let line = text.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("(empty log)").to_string();
    format!("{line} (see {})", path.display())
}
