//! `--launcher slurm`: render two sbatch scripts into `RUN_DIR/slurm/` — the trainer job
//! (`arl run --slurm-job` on the resolved `run.toml`) and a job array of rollout workers
//! (`arl worker`) that starts once the trainer job has — and submit them; `--dry-run` prints
//! them instead, `--follow` tails `metrics.jsonl` until the trainer job ends. Only sbatch flags
//! every Slurm from 22.05 on takes are rendered (no heterogeneous jobs, no `--gpus-per-task`).
//! The job ids go to `slurm/jobs.json`, which `arl cluster status|stop` read.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::Context;
use arl_core::RunConfig;
use arl_core::config::SlurmConfig;
use arl_train::run_dir::Start;
use serde::{Deserialize, Serialize};

/// How the trainer job starts the run the first time (a requeued job resumes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Fresh,
    Overwrite,
    Resume,
}

impl Mode {
    pub fn of(start: &Start) -> Self {
        match start {
            Start::Fresh => Mode::Fresh,
            Start::Overwrite { .. } => Mode::Overwrite,
            Start::Resume { .. } => Mode::Resume,
        }
    }
    fn flag(self) -> &'static str {
        match self {
            Mode::Fresh => "",
            Mode::Overwrite => "--overwrite",
            Mode::Resume => "--resume",
        }
    }
}

/// The job ids of a run (`slurm/jobs.json`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Jobs {
    pub trainer: String,
    pub workers: String,
}

/// The files of a slurm run under `RUN_DIR/slurm/`.
pub fn dir(run_dir: &Path) -> PathBuf {
    run_dir.join("slurm")
}

pub fn jobs_path(run_dir: &Path) -> PathBuf {
    dir(run_dir).join("jobs.json")
}

pub fn read_jobs(run_dir: &Path) -> anyhow::Result<Option<Jobs>> {
    arl_train::dist::read_json(&jobs_path(run_dir)).map_err(Into::into)
}

/// The two scripts of a run.
#[derive(Clone, Debug)]
pub struct Scripts {
    pub trainer: String,
    pub workers: String,
}

/// GPUs of the trainer job and of each worker task.
fn gpus(config: &RunConfig) -> (u32, u32) {
    let s = &config.cluster.slurm;
    let gpu_backend = !config.model.backend.is_cpu();
    let trainer = s.trainer_gpus.unwrap_or(gpu_backend as u32);
    (trainer, s.worker_gpus.unwrap_or(trainer))
}

/// Single-quoted for the shell.
pub fn quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// A job name from the run folder's name (letters, digits, `.`, `_`, `-`).
fn job_name(run_dir: &Path, role: &str) -> String {
    let base = run_dir.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
    let base: String = base.chars().map(|c| if c.is_ascii_alphanumeric() || "._-".contains(c) { c } else { '_' }).collect();
    format!("arl-{role}-{base}")
}

/// The `#SBATCH` lines both jobs share.
fn common(s: &SlurmConfig, cpus: u32, gpus: u32) -> Vec<String> {
    let mut lines = vec!["--nodes=1".to_string(), "--ntasks=1".into(), format!("--cpus-per-task={cpus}")];
    for (flag, value) in [("partition", &s.partition), ("account", &s.account), ("time", &s.time)] {
        if !value.is_empty() {
            lines.push(format!("--{flag}={value}"));
        }
    }
    if gpus > 0 {
        lines.push(format!("--gres=gpu:{gpus}"));
    }
    if s.requeue {
        lines.push("--requeue".into());
    }
    lines.extend(s.sbatch_extra.iter().cloned());
    lines
}

fn header(name: &str, output: &Path, flags: &[String]) -> String {
    let mut text = format!("#!/bin/bash\n#SBATCH --job-name={name}\n#SBATCH --output={}\n#SBATCH --open-mode=append\n", output.display());
    for f in flags {
        text.push_str(&format!("#SBATCH {f}\n"));
    }
    text
}

/// Render both scripts for the run in `run_dir` (absolute) with the `arl` binary `exe`.
pub fn render(config: &RunConfig, exe: &Path, run_dir: &Path, mode: Mode) -> Scripts {
    let s = &config.cluster.slurm;
    let (trainer_gpus, worker_gpus) = gpus(config);
    let slurm = dir(run_dir);
    let (exe_q, run_q) = (quote(&exe.display().to_string()), quote(&run_dir.display().to_string()));
    let version = env!("CARGO_PKG_VERSION");

    let mut trainer = header(&job_name(run_dir, "train"), &slurm.join("trainer-%j.log"), &common(s, s.trainer_cpus, trainer_gpus));
    trainer.push_str(&format!(
        "# The trainer of the run in {run}, rendered by arl {version} (arl run --launcher slurm).\n\
         # A requeued job (SLURM_RESTART_COUNT > 0) resumes from the last checkpoint.\n\
         set -eu\n\
         mode={flag}\n\
         if [ \"${{SLURM_RESTART_COUNT:-0}}\" -gt 0 ]; then\n\
         \x20   if ls -d {run_q}/checkpoints/step-* >/dev/null 2>&1; then mode=--resume; else mode=--overwrite; fi\n\
         fi\n\
         exec {exe_q} run --config {config_q} --slurm-job $mode\n",
        run = run_dir.display(),
        flag = mode.flag(),
        config_q = quote(&slurm.join("run.toml").display().to_string()),
    ));

    let mut flags = vec![format!("--array=0-{}", config.cluster.rollout_workers.saturating_sub(1))];
    flags.extend(common(s, s.worker_cpus, worker_gpus));
    let mut workers = header(&job_name(run_dir, "roll"), &slurm.join("worker-%A_%a.log"), &flags);
    workers.push_str(&format!(
        "# The rollout workers of the run in {run}, rendered by arl {version}: each waits for the trainer,\n\
         # takes rounds from {run}/dist/ and exits 0 when the trainer ends the run.\n\
         set -eu\n\
         exec {exe_q} worker {run_q} --worker-id \"$SLURM_ARRAY_TASK_ID\" --wait-for-trainer {wait}\n",
        run = run_dir.display(),
        wait = WORKER_WAIT_S,
    ));
    Scripts { trainer, workers }
}

/// How long a worker waits for its trainer to publish the run (loading a model included).
const WORKER_WAIT_S: u32 = 3600;

/// Where the run folder lives: one line naming the filesystem, and whether other nodes see it.
pub fn filesystem(path: &Path) -> anyhow::Result<(String, bool)> {
    // The folder may not exist yet: look at its nearest existing ancestor.
    let mut at = path.to_path_buf();
    while !at.exists() {
        if !at.pop() {
            break;
        }
    }
    let c = std::ffi::CString::new(at.as_os_str().as_encoded_bytes()).context("a path with a NUL byte")?;
    // SAFETY: statfs is plain data, valid all zero.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a valid C string and `st` a valid out-pointer.
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        return Err(std::io::Error::last_os_error()).with_context(|| format!("statfs {}", at.display()));
    }
    let (name, shared) = match st.f_type as u64 {
        0x6969 => ("nfs", true),
        0x0BD0_0BD0 => ("lustre", true),
        0x4750_4653 => ("gpfs", true),
        0x1983_0326 => ("beegfs", true),
        0x00C3_6400 => ("cephfs", true),
        0xFF53_4D42 | 0xFE53_4D42 | 0x517B => ("smb", true),
        0x5346_414F => ("afs", true),
        0xAAD7_AAEA => ("panfs", true),
        0x6573_5546 => ("fuse", true),
        0x0102_1994 => ("tmpfs", false),
        0x8584_58f6 => ("ramfs", false),
        0xEF53 => ("ext4", false),
        0x5846_5342 => ("xfs", false),
        0x9123_683E => ("btrfs", false),
        0x794C_7630 => ("overlay", false),
        0x2FC1_2FC1 => ("zfs", false),
        _ => ("a local filesystem", false),
    };
    Ok((format!("{name} (statfs type {:#x})", st.f_type as u64), shared))
}

/// The run folder's path goes unquoted into the rendered `#SBATCH --output=` lines: a path
/// with a space or a tab is refused in one line rather than split there.
pub fn check_path(run_dir: &Path) -> anyhow::Result<()> {
    if run_dir.to_string_lossy().contains(char::is_whitespace) {
        return Err(crate::usage!(
            "--launcher slurm: the run folder {:?} has white space in its path, which the rendered #SBATCH lines do not \
             quote; choose an --out without spaces",
            run_dir.display().to_string()
        ));
    }
    Ok(())
}

/// Refuse a run folder only this node sees (exit 2), unless `require_shared_fs` is off.
pub fn check_shared(run_dir: &Path, s: &SlurmConfig) -> anyhow::Result<()> {
    if !s.require_shared_fs {
        return Ok(());
    }
    let (fs, shared) = filesystem(run_dir)?;
    if !shared {
        return Err(crate::usage!(
            "--launcher slurm: the run folder {} is on {fs}, which workers on other nodes cannot reach; put --out on a shared \
             filesystem (NFS, Lustre, GPFS; `arl cluster fs-check DIR` tells) or, for a cluster of one node, --set \
             cluster.slurm.require_shared_fs=false",
            run_dir.display()
        ));
    }
    Ok(())
}

/// `PROGRAM` on PATH, or a usage error naming the fix (`who` needs it).
pub fn need_on_path(program: &str, who: &str) -> anyhow::Result<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path).map(|d| d.join(program)).find(|p| p.is_file()).ok_or_else(|| {
        crate::usage!(
            "{who}: `{program}` is not on PATH; run arl on a Slurm login node (or `module load slurm` first), or use \
             --launcher procs on this machine"
        )
    })
}

/// Whether job `id` (or any task of an array) is still pending or running.
pub fn live(id: &str) -> anyhow::Result<bool> {
    let out = Command::new("squeue").args(["-h", "-o", "%i", "-j", id]).output().context("running squeue")?;
    // A job Slurm has already forgotten is "Invalid job id specified" (status 1).
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() && !stderr.contains("Invalid job id") {
        anyhow::bail!("squeue -j {id}: {}", stderr.trim());
    }
    Ok(out.status.success() && !String::from_utf8_lossy(&out.stdout).trim().is_empty())
}

/// For the trainer job's waits: an error once the worker array has no task left in the queue
/// (cancelled, or every task failed), looked up at most every `every`. A failing `squeue`
/// (the controller briefly away) is no verdict.
pub fn watch_workers(array: String, every: Duration) -> Box<dyn FnMut() -> Result<(), String>> {
    let mut last = std::time::Instant::now();
    Box::new(move || {
        if last.elapsed() < every {
            return Ok(());
        }
        last = std::time::Instant::now();
        match Command::new("squeue").args(["-h", "-o", "%i", "-j", &array]).output() {
            Ok(out) if out.status.success() && String::from_utf8_lossy(&out.stdout).trim().is_empty() => Err(format!(
                "worker job array {array} has no task left in the queue, so no round can finish; submit workers again with \
                 `arl run ... --launcher slurm --resume` after this trainer ends"
            )),
            _ => Ok(()),
        }
    })
}

/// `sbatch --parsable ARGS SCRIPT`: the job id.
fn sbatch(args: &[String], script: &Path) -> anyhow::Result<String> {
    let out = Command::new("sbatch").arg("--parsable").args(args).arg(script).output().context("running sbatch")?;
    if !out.status.success() {
        anyhow::bail!("sbatch {}: {}", script.display(), String::from_utf8_lossy(&out.stderr).trim());
    }
    // `--parsable` prints `id` or `id;cluster`.
    let text = String::from_utf8_lossy(&out.stdout);
    let id = text.trim().split(';').next().unwrap_or_default().to_string();
    if id.is_empty() || !id.chars().all(|c| c.is_ascii_digit()) {
        anyhow::bail!("sbatch {}: no job id in its output `{}`", script.display(), text.trim());
    }
    Ok(id)
}

/// What `arl run --launcher slurm` was asked for.
pub struct Submit<'a> {
    pub config: &'a RunConfig,
    pub run_dir: PathBuf,
    pub mode: Mode,
    pub dry_run: bool,
    pub follow: bool,
}

/// Submit (or print) the run's jobs.
pub fn submit(req: Submit<'_>, out: &mut dyn Write) -> anyhow::Result<()> {
    let Submit { config, run_dir, mode, dry_run, follow } = req;
    let exe = std::env::current_exe().context("locating the arl binary")?;
    let scripts = render(config, &exe, &run_dir, mode);
    let slurm = dir(&run_dir);
    let (trainer_path, workers_path) = (slurm.join("trainer.sbatch"), slurm.join("workers.sbatch"));
    if dry_run {
        writeln!(out, "# {} (sbatch --parsable {})", trainer_path.display(), trainer_path.display())?;
        write!(out, "{}", scripts.trainer)?;
        writeln!(out, "\n# {} (sbatch --parsable --dependency=after:TRAINER_JOB {})", workers_path.display(), workers_path.display())?;
        write!(out, "{}", scripts.workers)?;
        return Ok(());
    }
    // A run whose trainer still runs is not started again; workers still alive serve a resume.
    let mut reuse = None;
    if let Some(jobs) = read_jobs(&run_dir)? {
        if live(&jobs.trainer)? {
            return Err(crate::usage!(
                "the run in {} is still running (trainer job {}); `arl cluster stop {}` first, or follow it with `arl cluster status`",
                run_dir.display(),
                jobs.trainer,
                run_dir.display()
            ));
        }
        if live(&jobs.workers)? {
            if mode != Mode::Resume {
                return Err(crate::usage!(
                    "worker job {} of the earlier run in {} is still running; `arl cluster stop {}` first",
                    jobs.workers,
                    run_dir.display(),
                    run_dir.display()
                ));
            }
            reuse = Some(jobs.workers);
        }
    }
    std::fs::create_dir_all(&slurm).with_context(|| format!("creating {}", slurm.display()))?;
    let mut job_config = config.clone();
    job_config.output.dir = run_dir.display().to_string();
    job_config.trainer.resume = false;
    let write = |path: &Path, text: &str| std::fs::write(path, text).with_context(|| format!("writing {}", path.display()));
    write(&slurm.join("run.toml"), &job_config.to_toml())?;
    write(&trainer_path, &scripts.trainer)?;
    write(&workers_path, &scripts.workers)?;
    // The protocol folder of an ended trainer (its STOP would end new workers at once).
    let dist = arl_train::dist::Layout::of(&run_dir).root;
    match std::fs::remove_dir_all(&dist) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e).with_context(|| format!("removing {}", dist.display())),
        _ => {}
    }
    let trainer = sbatch(&[], &trainer_path)?;
    let workers = match reuse {
        Some(id) => {
            writeln!(out, "worker job {id} is still running: the resumed trainer uses it")?;
            id
        }
        None => sbatch(&[format!("--dependency=after:{trainer}")], &workers_path)?,
    };
    let jobs = Jobs { trainer: trainer.clone(), workers: workers.clone() };
    write(&jobs_path(&run_dir), &serde_json::to_string_pretty(&jobs)?)?;
    writeln!(
        out,
        "submitted: trainer job {trainer}, worker job array {workers} ({} tasks); logs in {}\nstatus: arl cluster status {}  stop: arl cluster stop {}",
        config.cluster.rollout_workers,
        slurm.display(),
        run_dir.display(),
        run_dir.display()
    )?;
    if follow {
        return follow_metrics(&run_dir, &trainer, out);
    }
    Ok(())
}

/// Print `metrics.jsonl` as it grows until the trainer job ends; an error when it ended without
/// finishing the run.
fn follow_metrics(run_dir: &Path, trainer: &str, out: &mut dyn Write) -> anyhow::Result<()> {
    let metrics = run_dir.join("metrics.jsonl");
    let mut printed = 0;
    loop {
        let running = live(trainer)?;
        let text = std::fs::read_to_string(&metrics).unwrap_or_default();
        // Only whole lines (the trainer appends a line at a time).
        let complete = text.rfind('\n').map(|i| i + 1).unwrap_or(0);
        if complete > printed {
            out.write_all(&text.as_bytes()[printed..complete])?;
            out.flush()?;
            printed = complete;
        }
        if !running {
            break;
        }
        std::thread::sleep(Duration::from_secs(2));
    }
    if !run_dir.join("results.json").exists() {
        anyhow::bail!(
            "trainer job {trainer} ended before the run finished; see {}",
            dir(run_dir).join(format!("trainer-{trainer}.log")).display()
        );
    }
    writeln!(out, "trainer job {trainer} finished: arl report {}", run_dir.display())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(set: &[(&str, toml::Value)]) -> RunConfig {
        let mut o = arl_core::config::Overrides::default();
        o.set("cluster.launcher", "slurm");
        o.set("cluster.rollout_workers", 3);
        for (k, v) in set {
            o.set(k, v.clone());
        }
        let c = RunConfig::load(None, &o).unwrap();
        // A GPU backend is valid only where it is compiled in; rendering does not care.
        if c.model.backend.is_cpu() {
            c.validate().unwrap();
        }
        c
    }

    fn sbatch_flags(script: &str) -> Vec<&str> {
        script.lines().filter_map(|l| l.strip_prefix("#SBATCH ")).collect()
    }

    fn render_at(c: &RunConfig, mode: Mode) -> Scripts {
        render(c, Path::new("/opt/arl/bin/arl"), Path::new("/shared/runs/it's"), mode)
    }

    /// The shell accepts the script (`bash -n`).
    fn parses(script: &str) {
        let out = Command::new("bash").args(["-n", "-c", script]).output().unwrap();
        assert!(out.status.success(), "{}\n{script}", String::from_utf8_lossy(&out.stderr));
    }

    #[test]
    fn a_cpu_run_renders_a_trainer_job_and_a_requeueable_worker_array_without_gpus() {
        let s = render_at(&config(&[]), Mode::Fresh);
        let t = sbatch_flags(&s.trainer);
        assert_eq!(
            t,
            [
                "--job-name=arl-train-it_s",
                "--output=/shared/runs/it's/slurm/trainer-%j.log",
                "--open-mode=append",
                "--nodes=1",
                "--ntasks=1",
                "--cpus-per-task=4",
                "--requeue"
            ]
        );
        let w = sbatch_flags(&s.workers);
        assert!(
            w.contains(&"--array=0-2") && w.contains(&"--requeue") && w.contains(&"--output=/shared/runs/it's/slurm/worker-%A_%a.log"),
            "{w:?}"
        );
        assert!(!s.trainer.contains("gres") && !s.workers.contains("gres"));
        // The binary and the folder, quoted; the worker number from the array.
        assert!(
            s.workers.contains(
                "exec '/opt/arl/bin/arl' worker '/shared/runs/it'\\''s' --worker-id \"$SLURM_ARRAY_TASK_ID\" --wait-for-trainer 3600\n"
            ),
            "{}",
            s.workers
        );
        assert!(s.trainer.contains("exec '/opt/arl/bin/arl' run --config '/shared/runs/it'\\''s/slurm/run.toml' --slurm-job $mode\n"));
        assert!(s.trainer.contains("\nmode=\n"), "{}", s.trainer);
        parses(&s.trainer);
        parses(&s.workers);
    }

    #[test]
    fn site_settings_and_gpus_become_sbatch_flags_of_both_jobs() {
        let c = config(&[
            ("model.backend", "cuda".into()),
            ("cluster.slurm.partition", "gpu".into()),
            ("cluster.slurm.account", "rl".into()),
            ("cluster.slurm.time", "1-00:00:00".into()),
            ("cluster.slurm.worker_cpus", 16.into()),
            ("cluster.slurm.requeue", false.into()),
            ("cluster.slurm.sbatch_extra", toml::Value::Array(vec!["--qos=high".into(), "--constraint=h100".into()])),
        ]);
        let s = render_at(&c, Mode::Resume);
        for script in [&s.trainer, &s.workers] {
            let f = sbatch_flags(script);
            for flag in ["--partition=gpu", "--account=rl", "--time=1-00:00:00", "--gres=gpu:1", "--qos=high", "--constraint=h100"] {
                assert!(f.contains(&flag), "{flag} not in {f:?}");
            }
            assert!(!f.contains(&"--requeue"));
            // Only flags of every Slurm since 22.05.
            assert!(!script.contains("--gpus-per-task") && !script.contains("hetjob"));
            parses(script);
        }
        assert!(sbatch_flags(&s.trainer).contains(&"--cpus-per-task=4"));
        assert!(sbatch_flags(&s.workers).contains(&"--cpus-per-task=16"));
        assert!(s.trainer.contains("\nmode=--resume\n"));

        let c =
            config(&[("model.backend", "cuda".into()), ("cluster.slurm.worker_gpus", 2.into()), ("cluster.slurm.trainer_gpus", 0.into())]);
        let s = render_at(&c, Mode::Overwrite);
        assert!(!s.trainer.contains("--gres"));
        assert!(sbatch_flags(&s.workers).contains(&"--gres=gpu:2"));
        assert!(s.trainer.contains("\nmode=--overwrite\n"));
    }

    /// The trainer script's own logic: the first start uses the submitted mode, a requeued one
    /// resumes when a step checkpoint exists (and starts over when none does).
    #[test]
    fn a_requeued_trainer_resumes_from_a_checkpoint() {
        let dir = std::env::temp_dir().join(format!("arl-slurm-requeue-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        // A stand-in binary that prints its arguments.
        let exe = dir.join("arl");
        std::fs::write(&exe, "#!/bin/sh\necho \"$@\"\n").unwrap();
        std::fs::set_permissions(&exe, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let s = render(&config(&[]), &exe, &dir, Mode::Fresh);
        let run = |restarts: &str| {
            let out = Command::new("bash").args(["-c", &s.trainer]).env("SLURM_RESTART_COUNT", restarts).output().unwrap();
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
            String::from_utf8_lossy(&out.stdout).trim().to_string()
        };
        let config_path = dir.join("slurm/run.toml").display().to_string();
        assert_eq!(run("0"), format!("run --config {config_path} --slurm-job"));
        assert_eq!(run("1"), format!("run --config {config_path} --slurm-job --overwrite"));
        std::fs::create_dir_all(dir.join("checkpoints/step-00002")).unwrap();
        assert_eq!(run("1"), format!("run --config {config_path} --slurm-job --resume"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_folder_on_tmpfs_is_refused_in_one_line_unless_the_cluster_is_one_node() {
        let (fs, shared) = filesystem(Path::new("/dev/shm/arl-not-there/run")).unwrap();
        assert!(fs.starts_with("tmpfs") && !shared, "{fs}");
        let s = SlurmConfig::default();
        let err = check_shared(Path::new("/dev/shm/run"), &s).unwrap_err();
        let text = crate::message(&err);
        assert!(text.contains("/dev/shm/run is on tmpfs") && text.contains("require_shared_fs=false") && !text.contains('\n'), "{text}");
        assert_eq!(crate::exit_code(&err), 2);
        assert!(check_shared(Path::new("/dev/shm/run"), &SlurmConfig { require_shared_fs: false, ..s }).is_ok());
    }
}
