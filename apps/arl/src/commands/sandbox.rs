//! `arl sandbox run [--sandbox rlimit] FILE.py [--timeout S]`: run a Python file (with the
//! other files of its directory) in a sandbox and print the outcome as JSON.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use arl_core::config::SandboxConfig;
use arl_core::registry::{self, SandboxPlugin};
use arl_core::{Job, JobFile};
use serde_json::json;

#[derive(Debug, clap::Subcommand)]
pub enum SandboxCommand {
    /// Run FILE.py in the sandbox; prints exit_code, signal, timed_out, stdout, stderr and
    /// the resources used as JSON.
    Run(SandboxRun),
}

#[derive(Debug, clap::Args)]
pub struct SandboxRun {
    /// Sandbox to run in (`arl list`).
    #[arg(long, default_value = "rlimit")]
    pub sandbox: String,
    /// Wall-clock limit, seconds.
    #[arg(long, default_value_t = 10.0)]
    pub timeout: f64,
    /// The entry file; regular files beside it (up to 1 MiB each) are copied along.
    #[arg(value_name = "FILE.py")]
    pub file: PathBuf,
}

impl SandboxCommand {
    pub fn execute(self, out: &mut dyn Write) -> anyhow::Result<()> {
        match self {
            SandboxCommand::Run(run) => run.execute(out),
        }
    }
}

impl SandboxRun {
    fn execute(self, out: &mut dyn Write) -> anyhow::Result<()> {
        if !(self.timeout > 0.0 && self.timeout <= 86_400.0) {
            return Err(crate::usage!("--timeout {}: must be > 0 and ≤ 86400 seconds", self.timeout));
        }
        let entry = self.file.file_name().and_then(|n| n.to_str()).map(str::to_string);
        let Some(entry) = entry.filter(|_| self.file.is_file()) else {
            return Err(crate::usage!("{} is not a file; pass the Python file to run", self.file.display()));
        };
        let dir = self.file.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let files = sibling_files(dir)?;
        let config = SandboxConfig { name: self.sandbox.clone(), timeout_s: self.timeout, ..SandboxConfig::default() };
        let sandbox = (registry::get::<SandboxPlugin>(&self.sandbox)?.build)(&config)?;
        let job = Job { limits: config.limits(), ..Job::python(entry, files) };
        let outcome = sandbox.run(&job).context("running the job")?;
        let doc = json!({
            "sandbox": sandbox.name(),
            "exit_code": outcome.exit_code,
            "signal": outcome.signal,
            "timed_out": outcome.timed_out,
            "stdout": outcome.stdout,
            "stderr": outcome.stderr,
            "stdout_truncated": outcome.stdout_truncated,
            "stderr_truncated": outcome.stderr_truncated,
            "resources": {"wall_ms": outcome.wall_ms, "cpu_ms": outcome.cpu_ms, "max_rss_kb": outcome.max_rss_kb},
        });
        writeln!(out, "{}", serde_json::to_string_pretty(&doc)?)?;
        Ok(())
    }
}

fn sibling_files(dir: &Path) -> anyhow::Result<Vec<JobFile>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let entry = entry.with_context(|| format!("reading {}", dir.display()))?;
        let meta = entry.metadata().with_context(|| format!("reading {}", entry.path().display()))?;
        let Some(name) = entry.file_name().to_str().map(str::to_string) else { continue };
        if !meta.is_file() || meta.len() > 1 << 20 {
            continue;
        }
        if let Ok(contents) = std::fs::read_to_string(entry.path()) {
            files.push(JobFile { path: name, contents });
        }
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(files)
}
