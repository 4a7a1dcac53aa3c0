//! arl-env-harness — the `harness` env: an existing agent program fixes a bank bug inside the
//! sandbox, and every turn it asks for is sampled from the policy being trained.
//!
//! Each episode gets one bank task (the `edit` and `tools` gyms' bank) as a repository at
//! `/repo` (`<fn>.py`, `test_<fn>.py`; hidden tests never enter it) and runs
//! `env.options.command` there with `bash -c`, in an `rlimit` job ([`Sandbox::run_with_endpoint`])
//! whose only way out is the unix socket of an arl-endpoint serving the policy: a relay in the
//! job ([`episode`], `runner/harness_runner.py`) listens on the job's own loopback, and the
//! program reaches its session as `OPENAI_BASE_URL`/`OPENAI_API_KEY` (the key is the session's
//! random id, so a job can reach no other session). The task is in `$ARL_TASK` and
//! `/job/task.md`, the model's name in `$ARL_MODEL`. The program and every command it runs are
//! model-driven: they run as the job, with its limits.
//!
//! When the program exits (or is stopped at `timeout_s`), the `<fn>.py` it left is graded by
//! the hidden tests, exactly as the bank gyms grade ([`arl_tasks::episode_reward`]), and the
//! episode's tokens are the endpoint's recording of the session: the sampled ids, their
//! sampler log-probs and the template's ids of everything else, never a re-tokenization. When
//! the program changed the history it re-sent (a fork), the last branch trains; the turns only
//! earlier branches hold are counted (`harness_forks`), not trained. A program that fails
//! before its first request is an infrastructure failure (the model had no say yet); after it,
//! whatever the program does is the model's doing, graded as it stands.
//!
//! Episodes run `parallel` at a time; their requests are sampled one at a time, on the thread
//! that lent the policy ([`arl_endpoint::lend`]). Options: [`HarnessOptions`]. No cargo
//! features.

pub mod episode;
mod options;

pub use options::{HarnessOptions, MAX_PARALLEL};

use std::io::Read;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use arl_core::config::EnvConfig;
use arl_core::{
    AgentEnv, AgentSampling, ChatCodec, Env, EnvError, EnvSession, Episode, Generation, JobFile, PluginError, Policy, PolicyError,
    SamplingParams, Sandbox, ScoreParams, Scores, Split, Task, ToolSchema,
};
use arl_endpoint::{Endpoint, EndpointConfig, SessionConfig};
use arl_tasks::{BankEnv, BugTask};

use crate::episode::{Report, counters};

arl_core::register!(EnvPlugin {
    name: "harness",
    about: "an agent program of your own (openai SDK script, mini-swe-agent) fixes a Python bug in the sandbox, sampling from the policy",
    build: build,
});

fn build(config: &EnvConfig, sandbox: Arc<dyn Sandbox>) -> Result<Box<dyn Env>, PluginError> {
    Ok(Box::new(HarnessEnv::new(config, sandbox)?))
}

/// The `harness` env.
pub struct HarnessEnv {
    pub bank: BankEnv,
    pub options: HarnessOptions,
    /// `options.files`, read once.
    files: Vec<JobFile>,
}

impl HarnessEnv {
    pub fn new(config: &EnvConfig, sandbox: Arc<dyn Sandbox>) -> Result<Self, PluginError> {
        let (options, bank) = HarnessOptions::parse(config)?;
        if sandbox.shell().is_none() && sandbox.name() != arl_core::config::VALIDATION_SANDBOX {
            return Err(PluginError {
                kind: "env",
                name: "harness".into(),
                message: format!(
                    "sandbox `{}` has no shell to run an agent program in, nor an endpoint for it; use --sandbox rlimit",
                    sandbox.name()
                ),
            });
        }
        let mut files = Vec::new();
        for path in &options.files {
            let contents = std::fs::read_to_string(path).map_err(|e| PluginError {
                kind: "env",
                name: "harness".into(),
                message: format!("env.options.files: {}: {e}", path.display()),
            })?;
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_string();
            files.push(JobFile { path: name, contents });
        }
        Ok(Self { bank: BankEnv::new(config, &bank, sandbox), options, files })
    }
}

impl Env for HarnessEnv {
    fn tasks(&self, split: Split) -> Result<Vec<Task>, EnvError> {
        Ok(self.bank.tasks(split))
    }

    /// None of its own: the program sends its tools with its requests.
    fn tools(&self) -> Vec<ToolSchema> {
        Vec::new()
    }

    fn reset(&self, task: &Task) -> Result<Box<dyn EnvSession>, EnvError> {
        Err(EnvError::Other(format!(
            "env harness: task {}: an agent program runs its episodes (the rollout reaches it through Env::agent), not turn by turn",
            task.id
        )))
    }

    fn default_max_new_tokens(&self) -> u32 {
        512
    }

    fn agent(&self) -> Option<&dyn AgentEnv> {
        Some(self)
    }
}

impl AgentEnv for HarnessEnv {
    fn run_episodes(
        &self,
        specs: &[(Task, usize)],
        policy: &mut dyn Policy,
        codec: &dyn ChatCodec,
        sampling: &AgentSampling,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<Vec<Episode>, EnvError> {
        let bugs = specs
            .iter()
            .map(|(task, _)| BugTask::from_task(task).map_err(|e| EnvError::Other(e.to_string())))
            .collect::<Result<Vec<_>, _>>()?;
        let bash =
            episode::bash(self.bank.sandbox.as_ref()).ok_or_else(|| EnvError::Other("env harness: the sandbox has no shell".into()))?;
        let dir = SocketDir::new()?;
        let done = AtomicUsize::new(0);
        progress(0, specs.len());
        let mut reporting = Progress { inner: policy, done: &done, shown: 0, total: specs.len(), progress };
        let config = EndpointConfig {
            model: self.options.model.clone(),
            temperature: sampling.temperature,
            max_new_tokens: sampling.max_new_tokens,
            max_calls_per_turn: sampling.max_calls_per_turn as usize,
        };
        let results = arl_endpoint::lend(&mut reporting, codec, |policy, codec| -> Result<Vec<Episode>, EnvError> {
            let socket = dir.0.join("endpoint.sock");
            let endpoint = Endpoint::serve_unix(&socket, policy, codec.clone(), config)
                .map_err(|e| EnvError::Other(format!("env harness: serving the endpoint at {}: {e}", socket.display())))?;
            std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o666))
                .map_err(|e| EnvError::Other(format!("env harness: {}: {e}", socket.display())))?;
            let next = AtomicUsize::new(0);
            let out: Mutex<Vec<Option<Ran>>> = Mutex::new((0..specs.len()).map(|_| None).collect());
            std::thread::scope(|s| {
                for _ in 0..self.options.parallel.min(specs.len()) {
                    s.spawn(|| {
                        loop {
                            let i = next.fetch_add(1, Ordering::SeqCst);
                            if i >= specs.len() {
                                return;
                            }
                            let result = self.one(&endpoint, &socket, codec.as_ref(), &specs[i], &bugs[i], &bash, sampling, i);
                            out.lock().unwrap_or_else(|p| p.into_inner())[i] = Some(result);
                            done.fetch_add(1, Ordering::SeqCst);
                        }
                    });
                }
            });
            let results: Vec<(Episode, Option<Report>)> = out
                .into_inner()
                .unwrap_or_else(|p| p.into_inner())
                .into_iter()
                .map(|r| r.expect("every episode ran"))
                .collect::<Result<_, _>>()?;
            if let Some((_, Some(report))) = results.first()
                && results.iter().all(|(e, _)| e.stats.counters.contains_key(counters::AGENT_NOT_STARTED))
            {
                return Err(EnvError::Other(episode::not_started_message(self, report)));
            }
            Ok(results.into_iter().map(|(e, _)| e).collect())
        })?;
        progress(specs.len(), specs.len());
        Ok(results)
    }
}

impl HarnessEnv {
    /// One episode: a session, the program's job, the grade.
    #[allow(clippy::too_many_arguments)]
    fn one(
        &self,
        endpoint: &Endpoint,
        socket: &Path,
        codec: &dyn ChatCodec,
        (task, group): &(Task, usize),
        bug: &BugTask,
        bash: &str,
        sampling: &AgentSampling,
        index: usize,
    ) -> Ran {
        let key = session_key()?;
        let session = SessionConfig {
            max_episode_tokens: sampling.max_episode_tokens,
            max_turns: sampling.max_turns as usize,
            seed: sampling.seed ^ (index as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15),
        };
        endpoint.open_session(&key, session).map_err(|e| EnvError::Other(format!("env harness: {e}")))?;
        let job = episode::job(self, bug, &key, bash);
        let outcome = self.bank.sandbox.run_with_endpoint(&job, socket);
        let record = endpoint.end_session(&key).unwrap_or_default();
        let outcome = match outcome {
            Ok(outcome) => outcome,
            Err(e) => {
                // The job never ran: the host's failure, masked.
                let mut stats = arl_core::EpisodeStats::default();
                stats.sandbox_error(&e);
                return Ok((episode::prompt_only(codec, task, bug, *group, stats)?, None));
            }
        };
        if let Some(message) = episode::cut_by_sandbox(self, &outcome) {
            return Err(EnvError::Other(message));
        }
        let report = episode::read_report(&outcome);
        let episode = episode::finish(self, codec, task, bug, *group, report.as_ref(), record)?;
        Ok((episode, report))
    }
}

/// An episode and the runner's report, or why the run must stop.
type Ran = Result<(Episode, Option<Report>), EnvError>;

/// A fresh session id: 128 random bits, so that a job can guess no other session's.
fn session_key() -> Result<String, EnvError> {
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(|e| EnvError::Other(format!("env harness: reading /dev/urandom: {e}")))?;
    Ok(format!("arl-{}", bytes.iter().map(|b| format!("{b:02x}")).collect::<String>()))
}

/// A directory only this process may enter, holding the endpoint's socket; removed on drop.
struct SocketDir(PathBuf);

impl SocketDir {
    fn new() -> Result<Self, EnvError> {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!("arl-harness-{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::SeqCst)));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .map_err(|e| EnvError::Other(format!("env harness: creating {}: {e}", dir.display())))?;
        Ok(Self(dir))
    }
}

impl Drop for SocketDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The lent policy, reporting progress as episodes end (checked at each request and at the end).
struct Progress<'a> {
    inner: &'a mut dyn Policy,
    done: &'a AtomicUsize,
    shown: usize,
    total: usize,
    progress: &'a mut dyn FnMut(usize, usize),
}

impl Policy for Progress<'_> {
    fn generate(&mut self, prompts: &[Vec<u32>], params: &SamplingParams) -> Result<Vec<Generation>, PolicyError> {
        let done = self.done.load(Ordering::SeqCst);
        if done != self.shown {
            self.shown = done;
            (self.progress)(done, self.total);
        }
        self.inner.generate(prompts, params)
    }

    fn score(&self, sequences: &[Vec<u32>], positions: Option<&[Vec<usize>]>, params: ScoreParams) -> Result<Scores, PolicyError> {
        self.inner.score(sequences, positions, params)
    }
}
