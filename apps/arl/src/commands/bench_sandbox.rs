//! `arl bench sandbox [--sandbox rlimit,wasm] [--jobs N] [--json]`: how fast each sandbox runs
//! jobs, one after another on one thread. Per sandbox: the time to build it (the `wasm`
//! sandbox loads, or the first time compiles, its interpreter), the first job's latency
//! (cold), then `N` trivial jobs (`print`), `N` grading jobs (a held-out task's reference
//! fix against its hidden tests, as the gyms grade) and `N` shell calls (the `tools` gym's
//! `Bash` running `pytest -q` in a task's repository: a real shell under `rlimit`, the
//! emulated one under `wasm`) with their jobs/s. Every grading job must earn reward 1 and
//! every shell call must show pytest's summary, so a sandbox that runs fast but wrong fails
//! the benchmark.

use std::io::Write;
use std::time::Instant;

use anyhow::{Context, ensure};
use arl_core::config::{EnvConfig, SandboxConfig};
use arl_core::registry::{self, EnvPlugin, SandboxPlugin};
use arl_core::{AssistantTurn, Job, JobFile, ParsedCall, Split, Step, ToolCall};
use arl_tasks::{BankOptions, generate};
use serde_json::{Value, json};

#[derive(Debug, clap::Args)]
pub struct BenchSandbox {
    /// Sandboxes to measure, comma-separated (`arl list`).
    #[arg(long, value_delimiter = ',', default_value = "rlimit,wasm")]
    pub sandbox: Vec<String>,
    /// Trivial jobs and grading jobs per sandbox (each).
    #[arg(long, default_value_t = 20)]
    pub jobs: usize,
    /// One JSON line per sandbox instead of a table.
    #[arg(long)]
    pub json: bool,
}

impl BenchSandbox {
    pub fn execute(self, out: &mut dyn Write) -> anyhow::Result<()> {
        if self.jobs == 0 {
            return Err(crate::usage!("--jobs must be ≥ 1"));
        }
        let tasks = generate(&BankOptions::default(), Split::Heldout);
        ensure!(!tasks.is_empty(), "the task bank has no held-out tasks");
        let mut rows = Vec::new();
        for name in &self.sandbox {
            let row = measure(name, self.jobs, &tasks).with_context(|| format!("benchmarking sandbox `{name}`"))?;
            if self.json {
                writeln!(out, "{row}")?;
            }
            rows.push(row);
        }
        if !self.json {
            writeln!(
                out,
                "{:<8} {:>9} {:>13} {:>15} {:>14} {:>14} {:>5}",
                "sandbox", "build_ms", "first_job_ms", "trivial_jobs/s", "grade_jobs/s", "shell_calls/s", "jobs"
            )?;
            for r in &rows {
                writeln!(
                    out,
                    "{:<8} {:>9.0} {:>13.1} {:>15.1} {:>14.1} {:>14.1} {:>5}",
                    r["sandbox"].as_str().unwrap_or("?"),
                    r["build_ms"].as_f64().unwrap_or(0.0),
                    r["first_job_ms"].as_f64().unwrap_or(0.0),
                    r["trivial_jobs_per_s"].as_f64().unwrap_or(0.0),
                    r["grade_jobs_per_s"].as_f64().unwrap_or(0.0),
                    r["shell_calls_per_s"].as_f64().unwrap_or(0.0),
                    r["jobs"],
                )?;
            }
        }
        Ok(())
    }
}

fn measure(name: &str, jobs: usize, tasks: &[arl_tasks::BugTask]) -> anyhow::Result<Value> {
    let config = SandboxConfig { name: name.to_string(), ..SandboxConfig::default() };
    let t = Instant::now();
    let sandbox = (registry::get::<SandboxPlugin>(name)?.build)(&config)?;
    let build_ms = ms(t);

    let trivial = Job::python("main.py", vec![JobFile { path: "main.py".into(), contents: "print('ok')\n".into() }]);
    let t = Instant::now();
    let first = sandbox.run(&trivial)?;
    let first_job_ms = ms(t);
    ensure!(first.success() && first.stdout == "ok\n", "the first trivial job failed: {first:?}");

    let t = Instant::now();
    for _ in 0..jobs {
        let o = sandbox.run(&trivial)?;
        ensure!(o.success() && o.stdout == "ok\n", "a trivial job failed: {o:?}");
    }
    let trivial_s = t.elapsed().as_secs_f64();

    let t = Instant::now();
    for i in 0..jobs {
        let task = &tasks[i % tasks.len()];
        let report = arl_tasks::grade(sandbox.as_ref(), task, &task.reference)?;
        ensure!(report.reward == 1.0, "grading the reference fix of {} gave reward {} ({:?})", task.id, report.reward, report.note);
    }
    let grade_s = t.elapsed().as_secs_f64();

    // The tools gym's Bash, `pytest -q` in a task's repository (a fresh episode each call).
    let env_config = EnvConfig { name: "tools".into(), ..EnvConfig::default() };
    let env = (registry::get::<EnvPlugin>("tools")?.build)(&env_config, sandbox.clone())?;
    let task = env.tasks(Split::Heldout)?.into_iter().next().context("the tools gym has no held-out task")?;
    let arguments = json!({"command": "pytest -q"}).as_object().cloned().unwrap_or_default();
    let call = AssistantTurn { text: String::new(), calls: vec![ParsedCall::Call(ToolCall { name: "Bash".into(), arguments })] };
    let t = Instant::now();
    for _ in 0..jobs {
        let Step::Observe(results) = env.reset(&task)?.step(&call)? else { anyhow::bail!("the tools session ended on a Bash call") };
        let text = results.first().map(|r| r.outcome.text()).unwrap_or_default();
        ensure!(text.contains(" in ") && (text.contains("passed") || text.contains("failed")), "a Bash `pytest -q` call failed: {text}");
    }
    let shell_s = t.elapsed().as_secs_f64();

    Ok(json!({
        "bench": "sandbox",
        "sandbox": name,
        "jobs": jobs,
        "build_ms": build_ms,
        "first_job_ms": first_job_ms,
        "trivial_jobs_per_s": jobs as f64 / trivial_s,
        "grade_jobs_per_s": jobs as f64 / grade_s,
        "shell_calls_per_s": jobs as f64 / shell_s,
        "trivial_ms_mean": trivial_s * 1e3 / jobs as f64,
        "grade_ms_mean": grade_s * 1e3 / jobs as f64,
        "shell_ms_mean": shell_s * 1e3 / jobs as f64,
    }))
}

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}
