//! `process` — an environment in any language: a child process that speaks JSON lines over
//! stdio (protocol version 1, `PROTOCOL.md` at the repository root). `env.options.command` starts
//! it (`sh -c`); one process serves every episode of a run, one request at a time.
//!
//! A process that crashes, hangs past `env.options.timeout_s`, prints something that is not an
//! answer, or reports an error costs the episode in progress its reward (0, counted as
//! `env_process_errors`, the line with the process's stderr tail printed once per episode;
//! an infrastructure failure, which the trainer leaves out of its statistics and loss),
//! never the run: the next request starts a fresh process. Only `hello` and `tasks` — at start,
//! before anything loads — fail the run, with that line.

mod child;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use arl_core::config::EnvConfig;
use arl_core::{
    AssistantTurn, Env, EnvError, EnvSession, EpisodeStats, Message, Outcome, ParsedCall, PluginError, Sandbox, Split, Step, Task,
    ToolOutcome, ToolResult, ToolSchema,
};
use serde::Deserialize;
use serde_json::{Value, json};

pub use child::{EnvProcess, Spawn};

/// The protocol version this side speaks.
pub const PROTOCOL: u64 = 1;

/// The counter an episode lost to a process failure bumps.
pub const ENV_PROCESS_ERRORS: &str = "env_process_errors";

/// `[env.options]` of the `process` env.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProcessOptions {
    /// The command line that starts the env (run by `sh -c`), e.g. `python3 my_env.py`.
    pub command: String,
    /// Seconds to wait for each answer before the process is killed.
    #[serde(default = "default_timeout")]
    pub timeout_s: f64,
    /// Sent to the process in `hello` as `options`: the env's own settings.
    #[serde(default)]
    pub settings: Value,
}

fn default_timeout() -> f64 {
    30.0
}

arl_core::register!(EnvPlugin {
    name: "process",
    about: "an env in any language: a child process speaking JSON lines over stdio (env.options.command; PROTOCOL.md)",
    build: build,
});

fn plugin_error(message: String) -> PluginError {
    PluginError { kind: "env", name: "process".into(), message }
}

fn build(config: &EnvConfig, _sandbox: Arc<dyn Sandbox>) -> Result<Box<dyn Env>, PluginError> {
    let value: Value = config.options.clone().into();
    if value.get("command").is_none() {
        return Err(plugin_error(
            "env.options.command is required: the command that starts the env process, e.g. --set 'env.options.command=\"python3 examples/process-env/sum_env.py\"'".into(),
        ));
    }
    let options: ProcessOptions = serde_json::from_value(value).map_err(|e| plugin_error(format!("env.options: {e}")))?;
    ProcessEnv::start(&options, config.seed).map(|e| Box::new(e) as Box<dyn Env>).map_err(plugin_error)
}

/// What `hello` told us.
#[derive(Debug, Deserialize)]
struct Hello {
    protocol: u64,
    #[serde(default)]
    tools: Vec<ToolSchema>,
    #[serde(default)]
    max_new_tokens: Option<u32>,
}

pub struct ProcessEnv {
    process: Arc<Mutex<EnvProcess>>,
    tools: Vec<ToolSchema>,
    max_new_tokens: Option<u32>,
    next_episode: std::sync::atomic::AtomicU64,
}

impl ProcessEnv {
    /// Start the process and greet it (`hello`: protocol version, the env's settings and the
    /// run's seed; the answer names its tools).
    pub fn start(options: &ProcessOptions, seed: u64) -> Result<Self, String> {
        if !(options.timeout_s > 0.0 && options.timeout_s.is_finite()) {
            return Err(format!("env.options.timeout_s: {} is out of range; valid: > 0", options.timeout_s));
        }
        let spawn = Spawn { command: options.command.clone(), timeout: Duration::from_secs_f64(options.timeout_s) };
        let mut process = EnvProcess::new(spawn, json!({"protocol": PROTOCOL, "options": options.settings, "seed": seed}));
        let hello: Hello = serde_json::from_value(process.hello()?)
            .map_err(|e| format!("env process `{}`, `hello`: the answer does not fit protocol {PROTOCOL}: {e}", options.command))?;
        if hello.protocol != PROTOCOL {
            return Err(format!(
                "env process `{}` speaks protocol {}; arl speaks {PROTOCOL} (PROTOCOL.md)",
                options.command, hello.protocol
            ));
        }
        Ok(Self {
            process: Arc::new(Mutex::new(process)),
            tools: hello.tools,
            max_new_tokens: hello.max_new_tokens,
            next_episode: 1.into(),
        })
    }

    fn request(&self, method: &str, params: Value) -> Result<Value, String> {
        self.process.lock().unwrap_or_else(|p| p.into_inner()).request(method, params)
    }

    /// The line of the last episode lost to the process, if any.
    pub fn last_failure(&self) -> Option<String> {
        self.process.lock().unwrap_or_else(|p| p.into_inner()).last_failure.clone()
    }
}

impl Env for ProcessEnv {
    fn tasks(&self, split: Split) -> Result<Vec<Task>, EnvError> {
        if split == Split::HeldoutInstances {
            // Protocol 1 has two splits (`train`, `heldout`); the second held-out split is none.
            return Ok(Vec::new());
        }
        #[derive(Deserialize)]
        struct Listed {
            id: String,
            #[serde(default)]
            family: Option<String>,
            #[serde(default)]
            data: Value,
        }
        let answer = self.request("tasks", json!({"split": split})).map_err(EnvError::Other)?;
        let listed: Vec<Listed> = serde_json::from_value(answer.get("tasks").cloned().unwrap_or(Value::Null))
            .map_err(|e| EnvError::Other(format!("env process, `tasks`: want {{\"tasks\": [{{\"id\": …}}, …]}}: {e}")))?;
        Ok(listed
            .into_iter()
            .map(|t| Task { id: t.id, family: t.family.unwrap_or_else(|| "process".into()), split, data: t.data })
            .collect())
    }

    fn tools(&self) -> Vec<ToolSchema> {
        self.tools.clone()
    }

    fn default_max_new_tokens(&self) -> u32 {
        self.max_new_tokens.unwrap_or(64)
    }

    fn reset(&self, task: &Task) -> Result<Box<dyn EnvSession>, EnvError> {
        let episode = self.next_episode.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let answer = self.request("reset", json!({"episode": episode, "task": task})).map_err(EnvError::Other)?;
        let messages: Vec<Message> = serde_json::from_value(answer.get("messages").cloned().unwrap_or(Value::Null))
            .map_err(|e| EnvError::Other(format!("env process, `reset` of task {}: want {{\"messages\": [...]}}: {e}", task.id)))?;
        if messages.is_empty() {
            return Err(EnvError::Other(format!("env process, `reset` of task {}: no messages", task.id)));
        }
        Ok(Box::new(ProcessSession { process: Arc::clone(&self.process), episode, messages, stats: EpisodeStats::default(), done: false }))
    }
}

struct ProcessSession {
    process: Arc<Mutex<EnvProcess>>,
    episode: u64,
    messages: Vec<Message>,
    stats: EpisodeStats,
    done: bool,
}

/// The end of an episode as the process reports it.
#[derive(Deserialize)]
struct Ended {
    reward: f64,
    #[serde(default)]
    counters: std::collections::BTreeMap<String, u64>,
}

/// One tool result as the process reports it.
#[derive(Deserialize)]
struct Reported {
    #[serde(default = "ok")]
    status: String,
    #[serde(default)]
    text: String,
}

fn ok() -> String {
    "ok".into()
}

impl ProcessSession {
    fn request(&self, method: &str, params: Value) -> Result<Value, String> {
        self.process.lock().unwrap_or_else(|p| p.into_inner()).request(method, params)
    }

    /// The episode ends with reward 0, counted, the process's failure said once; it is an
    /// infrastructure failure (`infra_failed`), so the trainer drops it rather than train on it.
    fn lost(&mut self, why: String) -> Outcome {
        eprintln!("{why}");
        self.process.lock().unwrap_or_else(|p| p.into_inner()).last_failure = Some(why);
        self.done = true;
        self.stats.infra_failure(ENV_PROCESS_ERRORS);
        Outcome { reward: 0.0, stats: self.stats.clone() }
    }

    fn ended(&mut self, answer: Value) -> Outcome {
        match serde_json::from_value::<Ended>(answer) {
            Ok(e) if e.reward.is_finite() => {
                self.done = true;
                for (k, v) in e.counters {
                    *self.stats.counters.entry(k).or_default() += v;
                }
                Outcome { reward: e.reward, stats: self.stats.clone() }
            }
            Ok(e) => self.lost(format!("env process: episode {}: reward {} is not a finite number", self.episode, e.reward)),
            Err(e) => self.lost(format!("env process: episode {}: want {{\"done\": true, \"reward\": …}}: {e}", self.episode)),
        }
    }
}

impl EnvSession for ProcessSession {
    fn messages(&self) -> &[Message] {
        &self.messages
    }

    fn step(&mut self, turn: &AssistantTurn) -> Result<Step, EnvError> {
        if self.done {
            return Err(EnvError::Finished);
        }
        self.stats.turns += 1;
        let calls: Vec<Value> = turn
            .calls
            .iter()
            .map(|c| match c {
                ParsedCall::Call(call) => json!({"name": call.name, "arguments": call.arguments}),
                ParsedCall::Malformed { raw, reason } => json!({"malformed": raw, "reason": reason}),
            })
            .collect();
        let answer = match self.request("step", json!({"episode": self.episode, "text": turn.text, "calls": calls})) {
            Ok(a) => a,
            Err(e) => return Ok(Step::Done(self.lost(e))),
        };
        if answer.get("done").and_then(Value::as_bool) == Some(true) {
            return Ok(Step::Done(self.ended(answer)));
        }
        let reported: Vec<Reported> = match serde_json::from_value(answer.get("results").cloned().unwrap_or(Value::Null)) {
            Ok(r) => r,
            Err(e) => {
                return Ok(Step::Done(
                    self.lost(format!("env process: episode {}: want {{\"done\": true, …}} or {{\"results\": [...]}}: {e}", self.episode)),
                ));
            }
        };
        if reported.len() != turn.calls.len() {
            let why = format!("env process: episode {}: {} results for {} calls", self.episode, reported.len(), turn.calls.len());
            return Ok(Step::Done(self.lost(why)));
        }
        let mut results = Vec::with_capacity(reported.len());
        for (call, r) in turn.calls.iter().zip(reported) {
            self.stats.tool_calls += 1;
            let name = match call {
                ParsedCall::Call(c) => c.name.clone(),
                ParsedCall::Malformed { .. } => String::new(),
            };
            let outcome = match (call, r.status.as_str()) {
                (ParsedCall::Malformed { .. }, _) | (_, "malformed") => {
                    self.stats.malformed_calls += 1;
                    ToolOutcome::Malformed(r.text)
                }
                (_, "failed") => {
                    self.stats.failed_calls += 1;
                    ToolOutcome::Failed(r.text)
                }
                (_, "ok") => ToolOutcome::Ok(r.text),
                (_, other) => {
                    let why = format!("env process: episode {}: status `{other}`; valid: ok, failed, malformed", self.episode);
                    return Ok(Step::Done(self.lost(why)));
                }
            };
            results.push(ToolResult { name, outcome });
        }
        Ok(Step::Observe(results))
    }

    fn finish(&mut self) -> Result<Outcome, EnvError> {
        if self.done {
            return Err(EnvError::Finished);
        }
        match self.request("finish", json!({"episode": self.episode})) {
            Ok(a) => Ok(self.ended(a)),
            Err(e) => Ok(self.lost(e)),
        }
    }
}
