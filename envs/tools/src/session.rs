//! One `tools` episode.

use std::sync::Arc;

use arl_core::{
    AssistantTurn, EnvError, EnvSession, EpisodeStats, Message, Outcome, ParsedCall, Sandbox, Step, Task, ToolContext, Workspace, dispatch,
};
use arl_tasks::{BugTask, episode_reward};

use crate::claims::claims_tests_pass;
use crate::counters as c;
use crate::paths::display;
use crate::tools::ClaudeCodeTools;

const SYSTEM: &str = "You are a coding agent. The repository is at /repo. Use the tools (Read, Edit, Write, Bash) \
to inspect, change and test it; file paths must be absolute. When you are done, reply without a tool call: \
a reply without a tool call ends the session.";

pub struct ToolsSession {
    task: Task,
    bug: BugTask,
    messages: Vec<Message>,
    workspace: Workspace,
    stats: EpisodeStats,
    sandbox: Arc<dyn Sandbox>,
    max_turns: u32,
    max_calls_per_turn: u32,
    done: bool,
}

impl ToolsSession {
    /// A session over `task`; at most `max_turns` assistant turns and `max_calls_per_turn`
    /// calls run per turn (the parser caps calls too; this holds whatever the caller passes).
    pub fn new(task: &Task, max_turns: u32, max_calls_per_turn: u32, sandbox: Arc<dyn Sandbox>) -> Result<Self, EnvError> {
        let bug = BugTask::from_task(task).map_err(|e| EnvError::Other(e.to_string()))?;
        let mut workspace = Workspace::default();
        workspace.files.insert(bug.source_file(), bug.source.clone());
        workspace.files.insert(bug.test_file(), bug.public_tests.clone());
        let messages = vec![Message::system(SYSTEM), Message::user(prompt(&bug, max_turns))];
        Ok(Self {
            task: task.clone(),
            bug,
            messages,
            workspace,
            stats: EpisodeStats::default(),
            sandbox,
            max_turns,
            max_calls_per_turn,
            done: false,
        })
    }

    /// The repository as it stands (files by path relative to /repo).
    pub fn workspace(&self) -> &Workspace {
        &self.workspace
    }

    /// The current source of the function's file (files cannot be deleted, so it is there).
    pub fn source(&self) -> &str {
        self.workspace.files.get(&self.bug.source_file()).map_or("", String::as_str)
    }

    /// Grade `<fn>.py` as it stands: only that file enters the grading job.
    fn grade(&mut self, truncated: bool) -> Result<Outcome, EnvError> {
        self.done = true;
        self.stats.truncated = truncated;
        let source = self.source().to_string();
        let reward = episode_reward(self.sandbox.as_ref(), &self.bug, &source, &mut self.stats);
        Ok(Outcome { reward, stats: self.stats.clone() })
    }
}

fn prompt(bug: &BugTask, max_turns: u32) -> String {
    format!(
        "The function `{f}` in {file} has a bug. Its tests are in {tests}. Find the bug and fix it in {file}. \
         You have at most {max_turns} turns.",
        f = bug.function,
        file = display(&bug.source_file()),
        tests = display(&bug.test_file()),
    )
}

impl EnvSession for ToolsSession {
    fn messages(&self) -> &[Message] {
        &self.messages
    }

    fn step(&mut self, turn: &AssistantTurn) -> Result<Step, EnvError> {
        if self.done {
            return Err(EnvError::Finished);
        }
        self.stats.turns += 1;
        if turn.calls.is_empty() {
            // The final answer: the episode ends with the repository as it stands.
            if claims_tests_pass(&turn.text) {
                self.stats.bump(c::FINAL_CLAIMS_PASS);
            }
            return Ok(Step::Done(self.grade(false)?));
        }
        let mut results = Vec::with_capacity(turn.calls.len());
        for (i, parsed) in turn.calls.iter().enumerate() {
            let over_cap;
            let parsed = if i >= self.max_calls_per_turn as usize {
                let reason = format!("more than {} tool calls in one turn", self.max_calls_per_turn);
                over_cap = ParsedCall::Malformed { raw: String::new(), reason };
                &over_cap
            } else {
                parsed
            };
            let mut ctx =
                ToolContext { task: &self.task, workspace: &mut self.workspace, sandbox: self.sandbox.as_ref(), stats: &mut self.stats };
            results.push(dispatch(&ClaudeCodeTools, &mut ctx, parsed));
        }
        if self.stats.turns >= self.max_turns {
            return Ok(Step::Done(self.grade(true)?));
        }
        Ok(Step::Observe(results))
    }

    fn finish(&mut self) -> Result<Outcome, EnvError> {
        if self.done {
            return Err(EnvError::Finished);
        }
        self.grade(true)
    }
}

#[cfg(test)]
mod tests;
