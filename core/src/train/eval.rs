//! Held-out evaluation: `n` episodes per task, pass@1 per task with counts, the overall
//! pass@1 with a task-level bootstrap interval (see [`crate::eval`]).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::TrainError;
use super::rollout::{RolloutOptions, rollout};
use crate::chat::ChatCodec;
use crate::eval::{Bootstrap, PassSummary, TaskCount, summarize};
use crate::policy::Policy;
use crate::{Env, Episode, Split};

/// One evaluation of a policy on the held-out split.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Evaluation {
    pub per_task: Vec<TaskCount>,
    pub summary: PassSummary,
    /// One decoded transcript per task (its first episode).
    pub transcripts: Vec<Transcript>,
}

/// A decoded episode, for reading what the model did.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Transcript {
    pub task_id: String,
    pub reward: f64,
    pub text: String,
}

/// Evaluate `policy` on every held-out task, `n` episodes each.
pub fn evaluate(
    env: &dyn Env,
    codec: &dyn ChatCodec,
    policy: &mut dyn Policy,
    n: usize,
    opts: &RolloutOptions,
    bootstrap: &Bootstrap,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<Evaluation, TrainError> {
    let tasks = env.tasks(Split::Heldout)?;
    let specs: Vec<_> = tasks.iter().enumerate().flat_map(|(g, t)| (0..n).map(move |_| (t.clone(), g))).collect();
    let (episodes, _) = rollout(env, codec, policy, &specs, opts, progress)?;
    let per_task: Vec<TaskCount> = tasks
        .iter()
        .enumerate()
        .map(|(g, t)| {
            let mine: Vec<&Episode> = episodes.iter().filter(|e| e.group == g).collect();
            TaskCount {
                task_id: t.id.clone(),
                family: t.family.clone(),
                n: mine.len() as u32,
                correct: mine.iter().filter(|e| e.reward >= 1.0).count() as u32,
            }
        })
        .collect();
    let summary = summarize(&per_task, bootstrap).map_err(TrainError::Other)?;
    let mut transcripts = Vec::new();
    for (g, t) in tasks.iter().enumerate() {
        if let Some(e) = episodes.iter().find(|e| e.group == g) {
            transcripts.push(Transcript { task_id: t.id.clone(), reward: e.reward, text: codec.decode(&e.ids)? });
        }
    }
    Ok(Evaluation { per_task, summary, transcripts })
}
