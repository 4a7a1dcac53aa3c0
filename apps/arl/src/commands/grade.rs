//! `arl grade --env edit --task ID --source FILE.py`: grade a candidate source against a
//! task's hidden tests in the sandbox; prints the reward and per-test results as JSON.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use arl_core::config::SandboxConfig;
use arl_core::registry::{self, SandboxPlugin};
use arl_tasks::BugTask;
use serde_json::json;

use super::tasks::{BankArgs, load_tasks};

#[derive(Debug, clap::Args)]
pub struct Grade {
    /// Registered env name whose bank holds the task (`edit`, `tools`: the same bank).
    #[arg(long, default_value = "edit")]
    pub env: String,
    /// Task id (`arl tasks --env edit` lists them).
    #[arg(long)]
    pub task: String,
    /// The candidate source of the task's function file.
    #[arg(long, value_name = "FILE.py")]
    pub source: PathBuf,
    /// The bank the task id came from.
    #[command(flatten)]
    pub bank: BankArgs,
    /// Sandbox to run in (`arl list`).
    #[arg(long, default_value = "rlimit")]
    pub sandbox: String,
}

impl Grade {
    pub fn execute(self, out: &mut dyn Write) -> anyhow::Result<()> {
        let source = super::read_input(&self.source, "--source")?;
        let tasks = load_tasks(&self.bank.config(&self.env)?, None)?;
        let Some(task) = tasks.iter().find(|t| t.id == self.task) else {
            return Err(crate::usage!(
                "no task `{}` in env `{}` (seed {}); list them with `arl tasks --env {}`",
                self.task,
                self.env,
                self.bank.seed,
                self.env
            ));
        };
        let bug = BugTask::from_task(task)?;
        let config = SandboxConfig { name: self.sandbox.clone(), ..SandboxConfig::default() };
        let sandbox = (registry::get::<SandboxPlugin>(&self.sandbox)?.build)(&config)?;
        let report = arl_tasks::grade(sandbox.as_ref(), &bug, &source).context("grading in the sandbox")?;
        let doc = json!({
            "task": task.id,
            "function": bug.function,
            "reward": report.reward,
            "passed": report.passed,
            "total": report.total,
            "note": report.note,
            "cases": report.cases,
        });
        writeln!(out, "{}", serde_json::to_string_pretty(&doc)?)?;
        Ok(())
    }
}
