//! `arl cluster fs-check DIR`: whether DIR is on a filesystem rollout workers on other nodes can
//! share. Alone, by its type (statfs). As a Slurm step of several tasks (`srun -N2 arl cluster
//! fs-check DIR`), by trying it: each task writes its own file there, all race for one
//! `O_CREAT|O_EXCL` claim, and each waits to read every other task's file by name — what the
//! rollout protocol does (`arl_train::dist`).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;
use arl_train::dist::{Claim, host_name, read_json, try_claim, write_atomic};
use serde::{Deserialize, Serialize};

use super::slurm;

/// What one task wrote: who it is and whether it won the claim.
#[derive(Debug, Serialize, Deserialize)]
struct Seen {
    task: u32,
    host: String,
    pid: u32,
    won: bool,
}

/// The Slurm step this process is a task of: (tasks, this task, the step's tag).
fn slurm_step() -> Option<(u32, u32, String)> {
    let var = |name: &str| std::env::var(name).ok();
    let tasks: u32 = var("SLURM_NTASKS")?.parse().ok()?;
    let me: u32 = var("SLURM_PROCID")?.parse().ok()?;
    let tag = format!("{}.{}", var("SLURM_JOB_ID")?, var("SLURM_STEP_ID").unwrap_or_else(|| "0".into()));
    (tasks > 1 && me < tasks).then_some((tasks, me, tag))
}

pub fn fs_check(dir: &Path, timeout: Duration, out: &mut dyn Write) -> anyhow::Result<()> {
    let (fs, shared) = slurm::filesystem(dir)?;
    let Some((tasks, me, tag)) = slurm_step() else {
        if !shared {
            return Err(crate::usage!(
                "{} is on {fs}: only this node sees it; choose a folder on NFS, Lustre, GPFS or another shared filesystem \
                 (or try it across nodes: srun -N2 arl cluster fs-check DIR)",
                dir.display()
            ));
        }
        writeln!(out, "{}: {fs}, shared: workers on other nodes can reach it (srun -N2 arl cluster fs-check DIR tries it)", dir.display())?;
        return Ok(());
    };
    let seen = rendezvous(&dir.join(format!(".arl-fs-check-{tag}")), tasks, me, timeout)
        .with_context(|| format!("fs-check task {me} of {tasks} on {}", host_name()))?;
    let mut hosts: Vec<&str> = seen.iter().map(|s| s.host.as_str()).collect();
    hosts.sort();
    hosts.dedup();
    if me == 0 {
        let across = if hosts.len() > 1 {
            String::new()
        } else {
            "; all on one node, so nothing was tried across nodes (srun -N2 or more does)".to_string()
        };
        writeln!(
            out,
            "{}: {fs}; {tasks} Slurm tasks on {} ({}) each read the others' files and exactly one won an O_CREAT|O_EXCL claim: \
             rollout workers on these nodes can share it{across}",
            dir.display(),
            arl_train::trainer::plural(hosts.len(), "node"),
            hosts.join(", ")
        )?;
    }
    Ok(())
}

/// Write this task's file into `folder`, race for its claim, and read every task's file;
/// task 0 removes the folder once every task is done.
fn rendezvous(folder: &Path, tasks: u32, me: u32, timeout: Duration) -> anyhow::Result<Vec<Seen>> {
    std::fs::create_dir_all(folder).with_context(|| format!("creating {}", folder.display()))?;
    let file = |name: String| -> PathBuf { folder.join(name) };
    let host = host_name();
    let claim = Claim { worker: me, pid: std::process::id(), host: host.clone() };
    let won = try_claim(&file("claim".into()), &claim)?;
    let mine = Seen { task: me, host, pid: std::process::id(), won };
    write_atomic(&file(format!("task{me}.json")), &serde_json::to_vec(&mine).expect("serializes"))?;
    let start = Instant::now();
    let mut seen: Vec<Option<Seen>> = (0..tasks).map(|_| None).collect();
    while seen.iter().any(Option::is_none) {
        for (t, slot) in seen.iter_mut().enumerate().filter(|(_, s)| s.is_none()) {
            *slot = read_json::<Seen>(&file(format!("task{t}.json")))?;
        }
        if start.elapsed() > timeout && seen.iter().any(Option::is_none) {
            let missing: Vec<String> = seen.iter().enumerate().filter(|(_, s)| s.is_none()).map(|(t, _)| t.to_string()).collect();
            return Err(crate::usage!(
                "did not see the file of task(s) {} in {} within {:.0} s: the folder is not shared between the nodes of this \
                 step (or the tasks started that far apart); choose a folder on a shared filesystem",
                missing.join(", "),
                folder.display(),
                timeout.as_secs_f64()
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let seen: Vec<Seen> = seen.into_iter().map(|s| s.expect("all seen")).collect();
    let winners: Vec<u32> = seen.iter().filter(|s| s.won).map(|s| s.task).collect();
    let holder = read_json::<Claim>(&file("claim".into()))?;
    if winners.len() != 1 || holder.as_ref().map(|c| c.worker) != winners.first().copied() {
        return Err(crate::usage!(
            "O_CREAT|O_EXCL is not exclusive on {} across these nodes: tasks {winners:?} each created the one claim (its file \
             names task {:?}); rollout workers would run rounds twice there",
            folder.display(),
            holder.map(|c| c.worker)
        ));
    }
    // Done: task 0 waits for every other task to be, then removes the folder.
    write_atomic(&file(format!("done{me}")), b"")?;
    if me == 0 {
        while (1..tasks).any(|t| !file(format!("done{t}")).exists()) && start.elapsed() < timeout * 2 {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = std::fs::remove_dir_all(folder);
    }
    Ok(seen)
}
