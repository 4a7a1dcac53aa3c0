//! `arl tasks --env edit|tools --transcripts FILE.jsonl`: the gym's oracle
//! ([`arl_core::Env::oracle`]) played back through real sessions (real tool results, real
//! test runs in the sandbox), written as SFT conversations (`arl sft --data FILE.jsonl`).
//! Train-split tasks only: held-out tasks never reach a warm start.

use std::io::Write;
use std::path::Path;

use anyhow::Context;
use arl_core::config::{EnvConfig, SandboxConfig};
use arl_core::registry::{self, EnvPlugin, SandboxPlugin};
use arl_core::{AssistantTurn, OracleNoise, OracleTurn, ParsedCall, Split, Step};
use serde_json::{Value, json};

/// What was written, for the console.
#[derive(Debug, Default)]
pub struct Summary {
    pub conversations: usize,
    pub rewarded: usize,
    pub turns: usize,
    pub failed_calls: usize,
}

/// Play `repeats` oracle demonstrations of every train task of `env` (the first `limit`
/// ones) and write them to `path` (atomically: a temporary file renamed at the end).
pub fn write(
    env_config: &EnvConfig,
    sandbox_config: &SandboxConfig,
    noise: &OracleNoise,
    oracle_seed: u64,
    (repeats, limit): (usize, Option<usize>),
    path: &Path,
    progress: &mut dyn FnMut(usize, usize),
) -> anyhow::Result<Summary> {
    if let Some((name, p)) = noise.invalid() {
        let flag = name.replace('_', "-");
        return Err(crate::UsageError(format!("--{flag} {p} is not a probability: give a value in [0, 1]")).into());
    }
    let sandbox = (registry::get::<SandboxPlugin>(&sandbox_config.name)?.build)(sandbox_config)?;
    let env = (registry::get::<EnvPlugin>(&env_config.name)?.build)(env_config, sandbox)?;
    let mut tasks = env.tasks(Split::Train)?;
    tasks.truncate(limit.unwrap_or(usize::MAX));
    let tools: Vec<Value> = env.tools().iter().map(|t| t.to_openai()).collect();
    let tmp = path.with_extension("jsonl.partial");
    let mut file = std::io::BufWriter::new(std::fs::File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?);
    let mut summary = Summary::default();
    let total = tasks.len() * repeats;
    for (i, task) in tasks.iter().enumerate() {
        for r in 0..repeats {
            let seed = oracle_seed.wrapping_mul(0x9e37_79b9).wrapping_add(r as u64);
            let Some(turns) = env.oracle(task, noise, seed)? else {
                let message =
                    format!("env `{}` has no oracle to script transcripts with (the `edit` and `tools` gyms have one)", env_config.name);
                return Err(crate::UsageError(message).into());
            };
            let mut session = env.reset(task)?;
            let mut messages: Vec<Value> = session.messages().iter().map(|m| json!({"role": m.role, "content": m.content})).collect();
            let mut outcome = None;
            for turn in turns {
                summary.turns += 1;
                let (assistant, parsed) = match turn {
                    OracleTurn::Calls(calls) => (
                        json!({"role": "assistant", "content": "", "tool_calls": calls.iter().map(|c| json!({"type": "function", "function": c})).collect::<Vec<_>>()}),
                        AssistantTurn { text: String::new(), calls: calls.into_iter().map(ParsedCall::Call).collect() },
                    ),
                    OracleTurn::Answer(text) => (json!({"role": "assistant", "content": text}), AssistantTurn { text, calls: Vec::new() }),
                };
                messages.push(assistant);
                match session.step(&parsed)? {
                    Step::Observe(results) => {
                        summary.failed_calls += results.iter().filter(|r| !matches!(r.outcome, arl_core::ToolOutcome::Ok(_))).count();
                        messages.extend(results.iter().map(|r| json!({"role": "tool", "content": r.outcome.text()})));
                    }
                    Step::Done(o) => {
                        outcome = Some(o);
                        break;
                    }
                }
            }
            let outcome = match outcome {
                Some(o) => o,
                None => anyhow::bail!(
                    "the oracle of `{}` did not finish task {} within env.max_turns = {}: raise --max-turns",
                    env_config.name,
                    task.id,
                    env_config.max_turns
                ),
            };
            summary.conversations += 1;
            summary.rewarded += usize::from(outcome.reward > 0.0);
            let line = json!({
                "messages": messages,
                "tools": tools,
                "meta": {"env": env_config.name, "task": task.id, "seed": seed, "reward": outcome.reward, "counters": outcome.stats.counters},
            });
            writeln!(file, "{line}")?;
            progress(i * repeats + r + 1, total);
        }
    }
    file.flush()?;
    drop(file);
    std::fs::rename(&tmp, path).with_context(|| format!("renaming {} to {}", tmp.display(), path.display()))?;
    Ok(summary)
}
