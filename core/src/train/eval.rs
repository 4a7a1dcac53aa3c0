//! Held-out evaluation: `n` episodes per task, pass@1 per task with counts, the overall
//! pass@1 with a task-level bootstrap interval (see [`crate::eval`]).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::TrainError;
use super::rollout::{RolloutOptions, rollout};
use crate::chat::ChatCodec;
use crate::eval::{Bootstrap, PassSummary, TaskCount, summarize};
use crate::policy::Policy;
use crate::{Env, Episode, EpisodeFinish, Split};

/// One evaluation of a policy on the held-out split.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Evaluation {
    pub per_task: Vec<TaskCount>,
    pub summary: PassSummary,
    /// One decoded transcript per task (its first episode).
    pub transcripts: Vec<Transcript>,
    /// Every episode: its reward, response length and how it ended.
    #[serde(default)]
    pub episodes: Vec<EpisodeSummary>,
    /// Tool and episode counters summed over the evaluation's episodes (as the run's
    /// `tool_stats` sums them over training).
    #[serde(default)]
    pub tool_stats: BTreeMap<String, u64>,
}

/// One evaluation episode in numbers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct EpisodeSummary {
    pub task_id: String,
    pub reward: f64,
    /// Tokens the policy generated over all turns.
    pub response_tokens: usize,
    pub turns: u32,
    pub tool_calls: u32,
    pub finish: Option<EpisodeFinish>,
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
            transcripts.push(Transcript { task_id: t.id.clone(), reward: e.reward, text: codec.decode_transcript(&e.ids)? });
        }
    }
    let mut tool_stats = BTreeMap::new();
    for e in &episodes {
        super::metrics::sum_counters(&mut tool_stats, e);
    }
    let episodes = episodes
        .iter()
        .map(|e| EpisodeSummary {
            task_id: e.task_id.clone(),
            reward: e.reward,
            response_tokens: e.policy_tokens(),
            turns: e.stats.turns,
            tool_calls: e.stats.tool_calls,
            finish: e.stats.finish,
        })
        .collect();
    Ok(Evaluation { per_task, summary, transcripts, episodes, tool_stats })
}
