//! One episode: the agent program's job in the sandbox, its report, the grade, and the episode
//! built from the endpoint's recording of its session.

use std::time::Duration;

use arl_core::{ChatCodec, Episode, EpisodeFinish, EpisodeStats, Job, JobFile, JobOutcome, Limits, Message, Sandbox, Task, TokenStream};
use arl_endpoint::SessionRecord;
use arl_tasks::{BugTask, episode_reward};
use serde::Deserialize;

use crate::HarnessEnv;

pub(crate) const RUNNER: &str = include_str!("runner/harness_runner.py");
pub(crate) const RUNNER_ENTRY: &str = "arl_harness.py";

/// Processes (and threads) the job may have at once: the runner and its relay's threads, bash,
/// the program and the commands it runs.
pub const MAX_PROCESSES: u64 = 16;

/// Counters of the episode's statistics.
pub mod counters {
    /// The program never started, or exited with an error before its first request: nothing
    /// the model did (an infrastructure failure).
    pub const AGENT_NOT_STARTED: &str = "agent_not_started";
    /// The program was stopped at `env.options.timeout_s`.
    pub const AGENT_TIMEOUT: &str = "agent_timeout";
    /// The program exited with a non-zero status after its first request.
    pub const AGENT_FAILED: &str = "agent_failed";
    /// The job ended without the runner's report (the program killed its runner, or the
    /// sandbox's own clock stopped the job): graded as an untouched repository.
    pub const AGENT_NO_REPORT: &str = "agent_no_report";
    /// Chat completions the program asked for.
    pub const HARNESS_REQUESTS: &str = "harness_requests";
    /// Requests that did not extend the recorded turns: each starts a branch, and every branch
    /// with turns of its own trains ([`Episode::branches`]).
    pub const HARNESS_FORKS: &str = "harness_forks";
    /// Requests the endpoint refused (budgets, bad input).
    pub const HARNESS_REFUSED: &str = "harness_refused";
}

/// What the runner reports after the program.
#[derive(Debug, Deserialize)]
pub(crate) struct Report {
    pub exit: Option<i32>,
    pub signal: Option<i32>,
    pub timed_out: bool,
    pub not_started: Option<String>,
    pub source: Option<String>,
    pub log: String,
}

/// The task's prompt: what `$ARL_TASK` and `/job/task.md` hold.
pub fn prompt(bug: &BugTask) -> String {
    format!(
        "The function `{f}` in /repo/{file} has a bug. Its tests are in /repo/{tests}. Find the bug and fix it in /repo/{file}.",
        f = bug.function,
        file = bug.source_file(),
        tests = bug.test_file(),
    )
}

/// The job that runs the program for `bug` with session key `key`.
pub(crate) fn job(env: &HarnessEnv, bug: &BugTask, key: &str, bash: &str) -> Job {
    let o = &env.options;
    let mut files = vec![
        JobFile { path: format!("repo/{}", bug.source_file()), contents: bug.source.clone() },
        JobFile { path: format!("repo/{}", bug.test_file()), contents: bug.public_tests.clone() },
        JobFile { path: "task.md".into(), contents: prompt(bug) },
        JobFile { path: RUNNER_ENTRY.into(), contents: RUNNER.into() },
    ];
    files.extend(env.files.iter().cloned());
    Job {
        files,
        entry: RUNNER_ENTRY.into(),
        args: vec![
            o.command.clone(),
            bash.to_string(),
            o.python_path.join(":"),
            o.timeout_s.to_string(),
            bug.source_file(),
            o.model.clone(),
        ],
        stdin: Some(format!("{key}\n")),
        limits: Limits {
            wall_timeout: Duration::from_secs(o.timeout_s + 10),
            cpu_seconds: o.timeout_s + 10,
            memory_bytes: o.memory_mb << 20,
            processes: MAX_PROCESSES,
            output_bytes: 64 * 1024,
            ..Limits::default()
        },
    }
}

/// The runner's report, if the job's stdout ends with one.
pub(crate) fn read_report(outcome: &JobOutcome) -> Option<Report> {
    outcome.stdout.lines().last().and_then(|line| serde_json::from_str(line).ok())
}

/// Grade what the program left and build the episode from its session's recording.
pub(crate) fn finish(
    env: &HarnessEnv,
    codec: &dyn ChatCodec,
    task: &Task,
    bug: &BugTask,
    group: usize,
    report: Option<&Report>,
    record: SessionRecord,
) -> Result<Episode, arl_core::EnvError> {
    use counters::*;
    let mut stats = EpisodeStats::default();
    let SessionRecord { mut branches, stats: s } = record;
    for (name, n) in [(HARNESS_REQUESTS, s.requests), (HARNESS_FORKS, s.harness_forks), (HARNESS_REFUSED, s.refused)] {
        if n > 0 {
            stats.counters.insert(name.into(), n);
        }
    }
    stats.tool_calls = (s.tool_calls + s.malformed_calls) as u32;
    stats.malformed_calls = s.malformed_calls as u32;
    stats.finish = Some(EpisodeFinish::Done);
    let reward = match report {
        // Before its first request the model had no say: a program that did not start is the
        // host's failure, masked from the update.
        Some(r) if s.requests == 0 && (r.not_started.is_some() || r.exit.is_some_and(|c| c != 0) || r.signal.is_some()) => {
            stats.infra_failure(AGENT_NOT_STARTED);
            0.0
        }
        Some(r) => {
            if r.timed_out {
                stats.bump(AGENT_TIMEOUT);
                stats.truncated = true;
                stats.finish = Some(EpisodeFinish::TimeLimit);
            } else if r.exit.is_some_and(|c| c != 0) || r.signal.is_some() {
                stats.bump(AGENT_FAILED);
            }
            let source = r.source.as_deref().unwrap_or("");
            episode_reward(env.bank.sandbox.as_ref(), bug, source, &mut stats)
        }
        None => {
            stats.bump(AGENT_NO_REPORT);
            episode_reward(env.bank.sandbox.as_ref(), bug, &bug.source, &mut stats)
        }
    };
    let last = branches.pop();
    // A turn trains once, in the branch that sampled it: earlier branches with turns of their own
    // train beside the last, with the episode's advantage.
    let earlier: Vec<TokenStream> = branches.into_iter().map(|b| b.stream).filter(|s| s.policy_mask.iter().any(|&m| m)).collect();
    let turns = |t: &[i32]| t.iter().filter(|&&t| t >= 0).max().map_or(0, |&t| t as u32 + 1);
    stats.turns = earlier.iter().map(|b| turns(&b.turn_ids)).sum::<u32>() + last.as_ref().map_or(0, |b| turns(&b.stream.turn_ids));
    // A last turn cut at max_new_tokens is not a final answer (as the gyms' rollout marks it).
    let cut = last
        .as_ref()
        .map(|b| &b.stream)
        .and_then(|t| (0..t.ids.len()).rev().find(|&i| t.policy_mask[i]).map(|i| !codec.stop_ids().contains(&t.ids[i])));
    if cut == Some(true) && stats.finish == Some(EpisodeFinish::Done) {
        stats.truncated = true;
        stats.finish = Some(EpisodeFinish::Length);
    }
    let episode = match last {
        Some(branch) => Episode { branches: earlier, ..branch.into_episode(task.id.clone(), group, reward, stats) },
        // No request: the stream is the task's prompt, with no policy token.
        None => Episode { reward, ..prompt_only(codec, task, bug, group, stats)? },
    };
    Ok(episode)
}

/// An episode without a request: its stream is the task's prompt, with no policy token, and
/// reward 0.
pub(crate) fn prompt_only(
    codec: &dyn ChatCodec,
    task: &Task,
    bug: &BugTask,
    group: usize,
    stats: EpisodeStats,
) -> Result<Episode, arl_core::EnvError> {
    let messages = vec![Message::user(prompt(bug))];
    let ids =
        codec.prompt_ids(&messages, &[]).map_err(|e| arl_core::EnvError::Other(format!("env harness: rendering the task prompt: {e}")))?;
    let n = ids.len();
    Ok(Episode {
        task_id: task.id.clone(),
        group,
        ids,
        policy_mask: vec![false; n],
        sampler_logprobs: vec![0.0; n],
        turn_ids: vec![-1; n],
        reward: 0.0,
        stats,
        messages,
        branches: Vec::new(),
    })
}

/// The one-line reason a batch whose every program failed to start stops the run.
pub(crate) fn not_started_message(env: &HarnessEnv, report: &Report) -> String {
    let why = match (&report.not_started, report.exit, report.signal) {
        (Some(why), ..) => why.clone(),
        (None, Some(code), _) => format!("exit status {code}"),
        (None, None, Some(signal)) => format!("signal {signal}"),
        _ => "no request".into(),
    };
    let log = report.log.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("").trim();
    format!(
        "env harness: the agent program `{}` failed before its first request in every episode ({why}{}); check env.options.command, files and python_path",
        env.options.command,
        if log.is_empty() { String::new() } else { format!(": {log}") }
    )
}

/// The sandbox's own clock (`sandbox.timeout_s`) stopped the job before the program's limit.
pub(crate) fn cut_by_sandbox(env: &HarnessEnv, outcome: &JobOutcome) -> Option<String> {
    (outcome.timed_out && outcome.wall_ms < env.options.timeout_s * 1000).then(|| {
        format!(
            "env harness: the sandbox stopped an episode's job after {:.1} s, before env.options.timeout_s = {}; raise sandbox.timeout_s and sandbox.cpu_s above it",
            outcome.wall_ms as f64 / 1000.0,
            env.options.timeout_s
        )
    })
}

/// Whether the sandbox offers what the program needs: a real shell.
pub(crate) fn bash(sandbox: &dyn Sandbox) -> Option<String> {
    sandbox.shell().map(|s| s.bash.clone())
}
