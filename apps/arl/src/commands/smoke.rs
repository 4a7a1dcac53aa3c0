//! `arl run --smoke`: everything a run needs, checked in a minute and without training —
//! the chat template's self-check, the env's tools (each schema renders into the prompt; for
//! the `tools` gym, a scripted call of each tool on a held-out task's repository succeeds),
//! then `--smoke-n` held-out episodes with the configured model: per-episode reward and tool
//! counters, and the first transcripts decoded. Writes `smoke.json` into the output dir.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, bail};
use arl_core::chat::ChatCodec;
use arl_core::policy::Policy;
use arl_core::toolcall::parse_turn;
use arl_core::{Env, RunConfig, Split, Step, Task, ToolOutcome};
use arl_train::rollout::rollout;
use arl_train::trainer::{plural, rollout_options};
use serde_json::{Value, json};

/// Transcripts printed in full (up to [`TRANSCRIPT_CHARS`] each).
const TRANSCRIPTS: usize = 2;
const TRANSCRIPT_CHARS: usize = 4000;

pub fn smoke(
    config: &RunConfig,
    env: &dyn Env,
    codec: &dyn ChatCodec,
    policy: &mut dyn Policy,
    n: usize,
    out_dir: &Path,
    log: &mut dyn FnMut(&str),
) -> anyhow::Result<()> {
    if n == 0 {
        return Err(crate::usage!("--smoke-n must be ≥ 1"));
    }
    let self_check = codec.self_check()?;
    log(&format!("smoke: {self_check}"));

    let heldout = env.tasks(Split::Heldout)?;
    let Some(first) = heldout.first() else { bail!("env `{}` has no held-out tasks to smoke-test", config.env.name) };
    let rendered = check_schemas(env, codec, first)?;
    log(&format!("smoke: tool schemas render: {}", rendered.join(", ")));
    let scripted = if config.env.name == "tools" {
        let calls = check_tool_calls(env, first, config)?;
        for c in &calls {
            let output = c["output"].as_str().unwrap_or_default();
            let first_line: String = output.lines().next().unwrap_or("").chars().take(80).collect();
            log(&format!("smoke: tool {} {}: ok ({first_line})", c["call"]["name"].as_str().unwrap_or_default(), c["call"]["arguments"]));
        }
        calls
    } else {
        log(&format!("smoke: scripted tool calls: skipped (only the `tools` env has a script; this is `{}`)", config.env.name));
        Vec::new()
    };

    let specs: Vec<(Task, usize)> = (0..n).map(|i| (heldout[i % heldout.len()].clone(), i)).collect();
    let opts = rollout_options(config, env, config.trainer.seed ^ 0x5e0c);
    log(&format!("smoke: {} (sandbox {})", plural(n, "held-out episode"), config.sandbox.name));
    let (episodes, stats) = rollout(env, codec, policy, &specs, &opts, &mut |_, _| {})?;
    let mut rows = Vec::new();
    for (i, e) in episodes.iter().enumerate() {
        let s = &e.stats;
        let counters: BTreeMap<&str, u64> = s.counters.iter().filter(|(_, v)| **v > 0).map(|(k, v)| (k.as_str(), *v)).collect();
        log(&format!(
            "smoke: episode {i} task={} reward={} turns={} tool_calls={} malformed={} failed={} truncated={} counters={}",
            e.task_id,
            e.reward,
            s.turns,
            s.tool_calls,
            s.malformed_calls,
            s.failed_calls,
            s.truncated,
            serde_json::to_string(&counters)?
        ));
        rows.push(json!({"task_id": e.task_id, "reward": e.reward, "stats": s}));
    }
    for (i, e) in episodes.iter().take(TRANSCRIPTS).enumerate() {
        let text = codec.decode_transcript(&e.ids)?;
        let shown: String = text.chars().take(TRANSCRIPT_CHARS).collect();
        let more = if shown.len() < text.len() { format!("\n… ({} more characters)", text.len() - shown.len()) } else { String::new() };
        log(&format!("smoke: transcript of episode {i} ({}):\n{shown}{more}", e.task_id));
    }
    let mean = episodes.iter().map(|e| e.reward).sum::<f64>() / episodes.len() as f64;
    log(&format!(
        "smoke: done: mean reward {mean:.3} over {}, {} tokens generated in {:.1} s; no training",
        plural(n, "episode"),
        stats.generated_tokens,
        stats.seconds
    ));
    let doc = json!({
        "sandbox": config.sandbox.name,
        "env": config.env.name,
        "model": config.model.source,
        "chat_self_check": self_check,
        "tool_schemas": rendered,
        "scripted_calls": scripted,
        "episodes": rows,
        "mean_reward": mean,
    });
    let path = out_dir.join("smoke.json");
    std::fs::write(&path, serde_json::to_string_pretty(&doc)?).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// Every tool's name and parameter names appear in the rendered first prompt.
fn check_schemas(env: &dyn Env, codec: &dyn ChatCodec, task: &Task) -> anyhow::Result<Vec<String>> {
    let tools = env.tools();
    let session = env.reset(task)?;
    let ids = codec.prompt_ids(session.messages(), &tools).context("rendering the first prompt with the tools")?;
    let text = codec.decode(&ids)?;
    let mut names = Vec::new();
    for tool in &tools {
        let params: Vec<&String> =
            tool.parameters.get("properties").and_then(Value::as_object).map(|p| p.keys().collect()).unwrap_or_default();
        let missing: Vec<&&String> = params.iter().filter(|p| !text.contains(p.as_str())).collect();
        if !text.contains(&tool.name) || !missing.is_empty() {
            bail!("the chat template does not render tool `{}` (missing from the prompt: name or parameters {missing:?})", tool.name);
        }
        names.push(format!("{}({})", tool.name, params.iter().map(|p| p.as_str()).collect::<Vec<_>>().join(", ")));
    }
    Ok(names)
}

/// Read then Edit (a no-op change: a trailing comment), Write (a new file) then Bash (ls,
/// python on it, pytest) on the task's repository: each pair one turn of a fresh episode (so
/// any `env.max_turns` ≥ 2 and `max_calls_per_turn` ≥ 2 will do); each call must succeed.
/// Each call with its whole observation, for `smoke.json` (the console shows its first line).
fn check_tool_calls(env: &dyn Env, task: &Task, config: &RunConfig) -> anyhow::Result<Vec<Value>> {
    if config.env.max_turns < 2 || config.env.max_calls_per_turn < 2 {
        return Err(crate::usage!("--smoke's scripted tool calls need env.max_turns ≥ 2 and env.max_calls_per_turn ≥ 2"));
    }
    let function = task.data["function"].as_str().context("the tools task has no `function`")?;
    let src = format!("/repo/{function}.py");
    let source = task.data["source"].as_str().context("the tools task has no `source`")?;
    let last = source.lines().rfind(|l| !l.trim().is_empty()).context("empty source")?;
    let read = json!({"name": "Read", "arguments": {"file_path": src}});
    let write = json!({"name": "Write", "arguments": {"file_path": "/repo/smoke_check.py", "content": "print('smoke ok')\n"}});
    let turns = [
        vec![
            read.clone(),
            json!({"name": "Edit", "arguments": {"file_path": src, "old_string": last, "new_string": format!("{last}  # smoke")}}),
        ],
        vec![write.clone(), json!({"name": "Bash", "arguments": {"command": "ls"}})],
        vec![write, json!({"name": "Bash", "arguments": {"command": "python smoke_check.py"}})],
        vec![read, json!({"name": "Bash", "arguments": {"command": "pytest"}})],
    ];
    let tools = env.tools();
    let mut lines = Vec::new();
    for calls in turns {
        let mut session = env.reset(task)?;
        let text: String = calls.iter().map(|c| format!("<tool_call>\n{c}\n</tool_call>\n")).collect();
        let turn = parse_turn(&text, &tools, calls.len());
        let Step::Observe(results) = session.step(&turn)? else { bail!("the episode ended on the scripted calls {text}") };
        if results.len() != calls.len() {
            bail!("expected {} results for {text}, got {}", calls.len(), results.len());
        }
        for (call, result) in calls.iter().zip(&results) {
            match &result.outcome {
                ToolOutcome::Ok(text) => lines.push(json!({"call": call, "status": "ok", "output": text})),
                other => bail!("scripted call {call} did not succeed: {other:?}"),
            }
        }
    }
    Ok(lines)
}
