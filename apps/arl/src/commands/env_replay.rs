//! `arl env replay --env NAME --task ID --calls FILE`: drive one task's episode with a
//! scripted list of turns and print every observation, the counters and the reward as JSON.
//!
//! FILE holds a JSON list; each element is one assistant turn:
//! - `{"name": …, "arguments": {…}}`: a turn with that one tool call;
//! - `[{…}, {…}]`: a turn with several calls (run in order, as a model's turn would);
//! - `"text"`: a final answer (a turn without a call): the episode ends and is graded.
//!
//! Calls go through the same parser as sampled ones ([`arl_core::toolcall::parse_call`]), so a
//! call the schema refuses is malformed exactly as in training. A script that ends without a
//! final answer is graded as it stands (`truncated`), as when the turn budget runs out.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use arl_core::config::{EnvConfig, SandboxConfig};
use arl_core::registry::{self, EnvPlugin, SandboxPlugin};
use arl_core::toolcall::parse_call;
use arl_core::{AssistantTurn, Outcome, ParsedCall, Step};
use serde_json::{Value, json};

use super::tasks::{BankArgs, load_tasks};

#[derive(Debug, clap::Subcommand)]
pub enum EnvCommand {
    /// Run a scripted list of tool calls against one task's episode (JSON report).
    Replay(Replay),
}

impl EnvCommand {
    pub fn execute(self, out: &mut dyn Write) -> anyhow::Result<()> {
        match self {
            EnvCommand::Replay(cmd) => cmd.execute(out),
        }
    }
}

#[derive(Debug, clap::Args)]
pub struct Replay {
    /// Registered env name (`arl list`).
    #[arg(long, default_value = "tools")]
    pub env: String,
    /// Task id (`arl tasks --env NAME` lists them).
    #[arg(long)]
    pub task: String,
    /// JSON list of turns: a call object, a list of call objects, or a final text.
    #[arg(long, value_name = "FILE.json")]
    pub calls: PathBuf,
    /// The bank the task id came from.
    #[command(flatten)]
    pub bank: BankArgs,
    /// Sandbox to run in (`arl list`).
    #[arg(long, default_value = "rlimit")]
    pub sandbox: String,
    /// Turn budget of the episode.
    #[arg(long, default_value_t = 50)]
    pub max_turns: u32,
    /// Calls run per turn.
    #[arg(long, default_value_t = 8)]
    pub max_calls_per_turn: u32,
}

impl Replay {
    pub fn execute(self, out: &mut dyn Write) -> anyhow::Result<()> {
        let script = super::read_input(&self.calls, "--calls")?;
        let turns = parse_script(&script).map_err(|e| crate::usage!("--calls {}: {e}", self.calls.display()))?;
        let bank = self.bank.config(&self.env)?;
        let tasks = load_tasks(&bank, None)?;
        let Some(task) = tasks.into_iter().find(|t| t.id == self.task) else {
            return Err(crate::usage!(
                "no task `{}` in env `{}` (seed {}); list them with `arl tasks --env {}`",
                self.task,
                self.env,
                self.bank.seed,
                self.env
            ));
        };
        let sandbox_config = SandboxConfig { name: self.sandbox.clone(), ..SandboxConfig::default() };
        let sandbox = (registry::get::<SandboxPlugin>(&self.sandbox)?.build)(&sandbox_config)?;
        let env_config = EnvConfig { max_turns: self.max_turns, max_calls_per_turn: self.max_calls_per_turn, ..bank };
        let env = (registry::get::<EnvPlugin>(&self.env)?.build)(&env_config, sandbox)?;
        let schemas = env.tools();
        let mut session = env.reset(&task).with_context(|| format!("starting an episode of task `{}`", task.id))?;
        let mut log = Vec::new();
        let mut outcome: Option<Outcome> = None;
        for (i, turn) in turns.into_iter().enumerate() {
            let assistant = match &turn {
                Turn::Final(text) => AssistantTurn { text: text.clone(), calls: Vec::new() },
                Turn::Calls(calls) => AssistantTurn {
                    text: String::new(),
                    calls: calls
                        .iter()
                        .map(|raw| match parse_call(raw, &schemas) {
                            Ok(call) => ParsedCall::Call(call),
                            Err(reason) => ParsedCall::Malformed { raw: raw.clone(), reason },
                        })
                        .collect(),
                },
            };
            match session.step(&assistant).with_context(|| format!("turn {}", i + 1))? {
                Step::Observe(results) => {
                    let observations: Vec<Value> = turn
                        .raws()
                        .iter()
                        .zip(&results)
                        .map(|(raw, r)| json!({"call": serde_json::from_str::<Value>(raw).unwrap_or(Value::Null), "name": r.name, "outcome": r.outcome}))
                        .collect();
                    log.push(json!({"turn": i + 1, "observations": observations}));
                }
                Step::Done(done) => {
                    log.push(json!({"turn": i + 1, "final": matches!(turn, Turn::Final(_))}));
                    outcome = Some(done);
                    break;
                }
            }
        }
        let outcome = match outcome {
            Some(o) => o,
            None => session.finish().context("grading the episode")?,
        };
        let doc = json!({
            "env": self.env,
            "task": task.id,
            "sandbox": self.sandbox,
            "turns": log,
            "reward": outcome.reward,
            "stats": outcome.stats,
        });
        writeln!(out, "{}", serde_json::to_string_pretty(&doc)?)?;
        Ok(())
    }
}

/// One scripted turn: raw call JSON texts, or a final answer.
enum Turn {
    Calls(Vec<String>),
    Final(String),
}

impl Turn {
    fn raws(&self) -> &[String] {
        match self {
            Turn::Calls(c) => c,
            Turn::Final(_) => &[],
        }
    }
}

fn parse_script(text: &str) -> Result<Vec<Turn>, String> {
    let value: Value = serde_json::from_str(text).map_err(|e| format!("not valid JSON: {e}"))?;
    let Value::Array(items) = value else {
        return Err("expected a JSON list of turns ({\"name\", \"arguments\"} objects, lists of them, or a final text)".into());
    };
    items
        .into_iter()
        .enumerate()
        .map(|(i, item)| match item {
            Value::String(s) => Ok(Turn::Final(s)),
            Value::Object(_) => Ok(Turn::Calls(vec![item.to_string()])),
            Value::Array(calls) if calls.iter().all(Value::is_object) && !calls.is_empty() => {
                Ok(Turn::Calls(calls.iter().map(Value::to_string).collect()))
            }
            other => Err(format!("element {i}: expected a call object, a non-empty list of call objects or a final text, got `{other}`")),
        })
        .collect()
}
