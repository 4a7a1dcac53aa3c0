//! Test helpers: one task's repository and a way to call a tool as a model would.

use std::sync::{Arc, OnceLock};

use arl_core::toolcall::parse_call;
use arl_core::{EpisodeStats, Sandbox, Split, Task, ToolContext, ToolOutcome, ToolSet, Workspace};
use arl_sandbox::{RlimitSandbox, RlimitSettings};
use arl_tasks::{BankOptions, BugTask, generate};
use serde_json::Value;

use crate::tools::ClaudeCodeTools;

/// The rlimit sandbox without a shell: `Bash` is the emulated one (as under wasm).
pub fn sandbox() -> Arc<dyn Sandbox> {
    static SANDBOX: OnceLock<Arc<RlimitSandbox>> = OnceLock::new();
    SANDBOX.get_or_init(|| Arc::new(RlimitSandbox::new(RlimitSettings { shell: false, ..RlimitSettings::default() }).unwrap())).clone()
}

/// The rlimit sandbox as `--sandbox rlimit` builds it: `Bash` is real bash.
pub fn shell_sandbox() -> Arc<dyn Sandbox> {
    static SANDBOX: OnceLock<Arc<RlimitSandbox>> = OnceLock::new();
    let sandbox = SANDBOX.get_or_init(|| Arc::new(RlimitSandbox::new(RlimitSettings::default()).unwrap())).clone();
    assert!(sandbox.shell().is_some(), "no bash on this host");
    sandbox
}

/// `compare/count_positive` with its authored names: `count_positive.py` and
/// `test_count_positive.py` (one public test, `test_mixed`, which fails on the bug).
pub struct Repo {
    pub task: Task,
    pub bug: BugTask,
    pub workspace: Workspace,
    pub stats: EpisodeStats,
    pub sandbox: Arc<dyn Sandbox>,
}

impl Repo {
    pub fn new() -> Self {
        let options = BankOptions { randomize_names: false, ..BankOptions::default() };
        let bug = generate(&options, Split::Train).into_iter().find(|t| t.function == "count_positive").unwrap();
        let mut workspace = Workspace::default();
        workspace.files.insert(bug.source_file(), bug.source.clone());
        workspace.files.insert(bug.test_file(), bug.public_tests.clone());
        Self { task: bug.to_task(), bug, workspace, stats: EpisodeStats::default(), sandbox: sandbox() }
    }

    /// The same repository with a real shell behind `Bash`.
    pub fn real() -> Self {
        Self { sandbox: shell_sandbox(), ..Self::new() }
    }

    /// Call `tool` with `args` (JSON text), checked against the schema as the parser does.
    pub fn call(&mut self, tool: &str, args: Value) -> ToolOutcome {
        let raw = serde_json::json!({"name": tool, "arguments": args}).to_string();
        let call = match parse_call(&raw, &ClaudeCodeTools.schemas()) {
            Ok(call) => call,
            Err(reason) => return ToolOutcome::Malformed(reason),
        };
        let sandbox = self.sandbox.clone();
        let mut ctx = ToolContext { task: &self.task, workspace: &mut self.workspace, sandbox: sandbox.as_ref(), stats: &mut self.stats };
        ClaudeCodeTools.call(&mut ctx, &call)
    }

    pub fn bash(&mut self, command: &str) -> ToolOutcome {
        self.call("Bash", serde_json::json!({"command": command}))
    }

    pub fn counter(&self, name: &str) -> u64 {
        crate::counters::get(&self.stats, name)
    }

    pub fn source(&self) -> &str {
        &self.workspace.files["count_positive.py"]
    }
}

pub fn ok(outcome: ToolOutcome) -> String {
    match outcome {
        ToolOutcome::Ok(text) => text,
        other => panic!("expected Ok, got {other:?}"),
    }
}

pub fn failed(outcome: ToolOutcome) -> String {
    match outcome {
        ToolOutcome::Failed(text) => text,
        other => panic!("expected Failed, got {other:?}"),
    }
}
