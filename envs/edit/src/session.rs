//! One `edit` episode.

use std::sync::Arc;

use arl_core::{
    AssistantTurn, EnvError, EnvSession, EpisodeStats, Message, Outcome, ParsedCall, Sandbox, Step, Task, ToolContext, Workspace, dispatch,
};
use arl_tasks::{BugTask, episode_reward};

use crate::tools::{EDIT, EditTools, READ, SUBMIT, TEST};

const SYSTEM: &str = "You fix bugs in small Python functions. Use the tools to read the source, apply exactly one \
of the listed edits, run the public tests, and submit. Hidden tests decide whether the fix is right.";

pub struct EditSession {
    task: Task,
    bug: BugTask,
    messages: Vec<Message>,
    workspace: Workspace,
    stats: EpisodeStats,
    sandbox: Arc<dyn Sandbox>,
    max_turns: u32,
    done: bool,
}

impl EditSession {
    pub fn new(task: &Task, max_turns: u32, sandbox: Arc<dyn Sandbox>) -> Result<Self, EnvError> {
        let bug = BugTask::from_task(task).map_err(|e| EnvError::Other(e.to_string()))?;
        let mut workspace = Workspace::default();
        workspace.files.insert(bug.source_file(), bug.source.clone());
        workspace.files.insert(bug.test_file(), bug.public_tests.clone());
        let messages = vec![Message::system(SYSTEM), Message::user(prompt(&bug, max_turns))];
        Ok(Self { task: task.clone(), bug, messages, workspace, stats: EpisodeStats::default(), sandbox, max_turns, done: false })
    }

    /// The current source of the function's file.
    pub fn source(&self) -> &str {
        &self.workspace.files[&self.bug.source_file()]
    }

    fn grade(&mut self, truncated: bool) -> Result<Outcome, EnvError> {
        self.done = true;
        self.stats.truncated = truncated;
        let source = self.source().to_string();
        let reward = episode_reward(self.sandbox.as_ref(), &self.bug, &source, &mut self.stats);
        Ok(Outcome { reward, stats: self.stats.clone() })
    }
}

fn prompt(bug: &BugTask, max_turns: u32) -> String {
    let mut text = format!(
        "The function `{f}` in {file} has a bug; its public tests are in {tests}.\n\
         Fix it by applying exactly one of these edits:\n",
        f = bug.function,
        file = bug.source_file(),
        tests = bug.test_file()
    );
    for op in &bug.ops {
        text.push_str(&format!("{}: replace `{}` with `{}`\n", op.name, op.old, op.new));
    }
    text.push_str(&format!(
        "Tools: {READ} shows the source, {EDIT} applies one edit by name (one per episode), {TEST} runs the \
         public tests, {SUBMIT} ends the episode. You have at most {max_turns} turns."
    ));
    text
}

impl EnvSession for EditSession {
    fn messages(&self) -> &[Message] {
        &self.messages
    }

    fn step(&mut self, turn: &AssistantTurn) -> Result<Step, EnvError> {
        if self.done {
            return Err(EnvError::Finished);
        }
        self.stats.turns += 1;
        if turn.calls.is_empty() {
            // A final answer: the episode ends with the source as it stands.
            return Ok(Step::Done(self.grade(false)?));
        }
        let mut results = Vec::with_capacity(turn.calls.len());
        for parsed in &turn.calls {
            let mut ctx =
                ToolContext { task: &self.task, workspace: &mut self.workspace, sandbox: self.sandbox.as_ref(), stats: &mut self.stats };
            let result = dispatch(&EditTools, &mut ctx, parsed);
            let submitted = matches!(parsed, ParsedCall::Call(call) if call.name == SUBMIT);
            results.push(result);
            if submitted {
                self.stats.bump("submitted");
                return Ok(Step::Done(self.grade(false)?));
            }
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
