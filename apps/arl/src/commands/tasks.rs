//! `arl tasks --env NAME [--split train|heldout|heldout-instances] [--json] [--dump DIR]`: an environment's
//! task bank, listed or written out as files.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use arl_core::config::EnvConfig;
use arl_core::registry::{self, EnvPlugin};
use arl_core::{ConfigError, Job, JobOutcome, Sandbox, SandboxError, Split, Task};
use serde_json::{Value, json};

#[derive(Debug, clap::Args)]
pub struct Tasks {
    /// Registered env name (`arl list`).
    #[arg(long, default_value = "edit")]
    pub env: String,
    /// Which split: the training tasks, the held-out ones of other kinds (the gyms' held-out
    /// bug templates), or held-out new instances of the training kinds.
    #[arg(long, value_enum, default_value = "train")]
    pub split: SplitArg,
    #[command(flatten)]
    pub bank: BankArgs,
    /// Print a JSON list of objects (`id`, `family`, `split`, `function`).
    #[arg(long)]
    pub json: bool,
    /// Write each task into DIR/<id>/ (source, public tests, and task.json with everything).
    #[arg(long, value_name = "DIR")]
    pub dump: Option<PathBuf>,
    /// Write the gym's oracle demonstrations of every train task, played through real
    /// sessions, as SFT conversations (`arl sft --data FILE.jsonl`).
    #[arg(long, value_name = "FILE.jsonl", conflicts_with_all = ["dump", "json"])]
    pub transcripts: Option<PathBuf>,
    /// Demonstrations per task (each with its own draw of the noise).
    #[arg(long, value_name = "N", default_value_t = 1, requires = "transcripts")]
    pub repeats: usize,
    /// Probability that a demonstration applies a wrong (distractor) edit.
    #[arg(long, value_name = "P", default_value_t = 0.0, requires = "transcripts")]
    pub wrong_edit_rate: f64,
    /// Probability that a demonstration edits before reading the source.
    #[arg(long, value_name = "P", default_value_t = 0.0, requires = "transcripts")]
    pub skip_read_rate: f64,
    /// Probability that a demonstration finishes without running the tests.
    #[arg(long, value_name = "P", default_value_t = 0.0, requires = "transcripts")]
    pub skip_test_rate: f64,
    /// Only the first N train tasks.
    #[arg(long, value_name = "N", requires = "transcripts")]
    pub limit: Option<usize>,
    /// Seed of the noise draws.
    #[arg(long, value_name = "N", default_value_t = 0, requires = "transcripts")]
    pub oracle_seed: u64,
    /// Sandbox that runs the demonstrations' tests (`arl list`).
    #[arg(long, value_name = "NAME", default_value = "rlimit", requires = "transcripts")]
    pub sandbox: String,
    /// Assistant turns per episode (as `env.max_turns` of the run).
    #[arg(long, value_name = "N", requires = "transcripts")]
    pub max_turns: Option<u32>,
}

/// Which bank an env's tasks come from: the flags every command that names a task shares,
/// so a task id found with them is found again with the same flags.
#[derive(Debug, Default, clap::Args)]
pub struct BankArgs {
    /// Seed of the task bank.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Keep the authored function and variable names.
    #[arg(long)]
    pub plain_names: bool,
    /// Set one of the env's `[env.options]`, as `--set env.options.KEY=VALUE` does for
    /// `arl run` (e.g. `train_instances=16` for the bank gyms); repeatable.
    #[arg(long, value_name = "KEY=VALUE")]
    pub env_option: Vec<String>,
}

impl BankArgs {
    /// The env config these flags select for env `name` (turn limits at their defaults),
    /// checked by the env.
    pub fn config(&self, name: &str) -> anyhow::Result<EnvConfig> {
        let mut options = serde_json::Map::new();
        for arg in &self.env_option {
            if !arg.contains('=') {
                return Err(crate::usage!("--env-option {arg}: expected KEY=VALUE, e.g. train_instances=16"));
            }
            let (key, value) = arl_core::config::parse_set(arg).map_err(|e| match e {
                ConfigError::Override { message, .. } => crate::usage!("--env-option {arg}: {message}"),
                other => other.into(),
            })?;
            if key.contains('.') {
                return Err(crate::usage!("--env-option {arg}: give the option's own name (e.g. train_instances=16), not a dotted key"));
            }
            options.insert(key, serde_json::to_value(value)?);
        }
        let config = EnvConfig { name: name.into(), seed: self.seed, randomize_names: !self.plain_names, options, ..EnvConfig::default() };
        // Build it once with no sandbox, so a bad option is refused as bad input (as `arl run` does).
        (registry::get::<EnvPlugin>(name)?.build)(&config, Arc::new(NoJobs)).map_err(|e| crate::usage!("{e}"))?;
        Ok(config)
    }
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum SplitArg {
    Train,
    /// Held-out tasks of kinds training never sees (the coding gyms: held-out bug templates).
    Heldout,
    /// Held-out new instances of the training tasks' kinds (the coding gyms: training templates
    /// under other names).
    HeldoutInstances,
}

impl From<SplitArg> for Split {
    fn from(s: SplitArg) -> Self {
        match s {
            SplitArg::Train => Split::Train,
            SplitArg::Heldout => Split::Heldout,
            SplitArg::HeldoutInstances => Split::HeldoutInstances,
        }
    }
}

/// Stands in for a sandbox where nothing runs (listing a bank runs no code).
struct NoJobs;
impl Sandbox for NoJobs {
    fn name(&self) -> &str {
        "none"
    }
    fn run(&self, _: &Job) -> Result<JobOutcome, SandboxError> {
        Err(SandboxError::Setup("listing tasks runs no jobs".into()))
    }
}

/// The tasks of the env `config` names (every split when `split` is None).
pub fn load_tasks(config: &EnvConfig, split: Option<Split>) -> anyhow::Result<Vec<Task>> {
    let plugin = registry::get::<EnvPlugin>(&config.name)?;
    let env = (plugin.build)(config, Arc::new(NoJobs))?;
    let splits = match split {
        Some(s) => vec![s],
        None => vec![Split::Train, Split::Heldout, Split::HeldoutInstances],
    };
    let mut tasks = Vec::new();
    for s in splits {
        tasks.extend(env.tasks(s).with_context(|| format!("listing the {s} tasks of env `{}`", config.name))?);
    }
    Ok(tasks)
}

impl Tasks {
    pub fn execute(self, out: &mut dyn Write) -> anyhow::Result<()> {
        if let Some(path) = &self.transcripts {
            return self.write_transcripts(path, out);
        }
        let tasks = load_tasks(&self.bank.config(&self.env)?, Some(self.split.into()))?;
        if let Some(dir) = &self.dump {
            for task in &tasks {
                dump(dir, task)?;
            }
            writeln!(out, "wrote {} tasks to {}", tasks.len(), dir.display())?;
            return Ok(());
        }
        if self.json {
            let list: Vec<Value> = tasks
                .iter()
                .map(|t| json!({"id": t.id, "family": t.family, "split": t.split, "function": t.data.get("function")}))
                .collect();
            writeln!(out, "{}", serde_json::to_string_pretty(&list)?)?;
            return Ok(());
        }
        let width = tasks.iter().map(|t| t.id.len()).max().unwrap_or(0);
        for t in &tasks {
            let function = t.data.get("function").and_then(Value::as_str).unwrap_or("");
            writeln!(out, "{:width$}  {:9}  {function}", t.id, t.family)?;
        }
        writeln!(out, "{} {} tasks", tasks.len(), Split::from(self.split))?;
        Ok(())
    }
}

impl Tasks {
    fn write_transcripts(&self, path: &std::path::Path, out: &mut dyn Write) -> anyhow::Result<()> {
        if !matches!(self.split, SplitArg::Train) {
            return Err(crate::UsageError(format!(
                "transcripts are made from train tasks only (held-out tasks must stay unseen): drop --split {}",
                clap::ValueEnum::to_possible_value(&self.split).map(|v| v.get_name().to_string()).unwrap_or_default()
            ))
            .into());
        }
        if self.repeats == 0 {
            return Err(crate::UsageError("--repeats 0 writes nothing: give 1 or more".into()).into());
        }
        let mut env = self.bank.config(&self.env)?;
        env.max_turns = self.max_turns.unwrap_or(env.max_turns);
        let sandbox = arl_core::config::SandboxConfig { name: self.sandbox.clone(), ..Default::default() };
        let noise = arl_core::OracleNoise {
            wrong_edit_rate: self.wrong_edit_rate,
            skip_read_rate: self.skip_read_rate,
            skip_test_rate: self.skip_test_rate,
        };
        let mut shown = 0;
        let mut progress = |done: usize, total: usize| {
            if done == total || done >= shown + total.div_ceil(10) {
                shown = done;
                eprintln!("transcripts: {done}/{total}");
            }
        };
        let s = super::transcripts::write(&env, &sandbox, &noise, self.oracle_seed, (self.repeats, self.limit), path, &mut progress)?;
        writeln!(
            out,
            "wrote {} transcripts of `{}` train tasks to {}: {} rewarded ({:.1} %), {:.1} turns each, {} failed tool calls",
            s.conversations,
            self.env,
            path.display(),
            s.rewarded,
            100.0 * s.rewarded as f64 / s.conversations.max(1) as f64,
            s.turns as f64 / s.conversations.max(1) as f64,
            s.failed_calls
        )?;
        Ok(())
    }
}

fn dump(dir: &std::path::Path, task: &Task) -> anyhow::Result<()> {
    let target = dir.join(&task.id);
    std::fs::create_dir_all(&target).with_context(|| format!("creating {}", target.display()))?;
    let text = |key: &str| task.data.get(key).and_then(Value::as_str);
    let write = |name: String, text: &str| {
        let path = target.join(name);
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))
    };
    if let (Some(function), Some(source)) = (text("function"), text("source")) {
        write(format!("{function}.py"), source)?;
        if let Some(tests) = text("public_tests") {
            write(format!("test_{function}.py"), tests)?;
        }
        if let Some(reference) = text("reference") {
            write("reference.py".into(), reference)?;
        }
    }
    write("task.json".into(), &(serde_json::to_string_pretty(task)? + "\n"))
}
