//! Held-out evaluation: `n` episodes per task, pass@1 per task with counts, the overall
//! pass@1 with a task-level bootstrap interval (see [`arl_core::eval`]). Episodes lost to
//! infrastructure failures ([`arl_core::EpisodeStats::infra_failed`]) are not counted (a task that
//! lost all of them leaves the summary); `infra_failed` says how many.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::TrainError;
use super::rollout::{RolloutOptions, rollout};
use arl_core::chat::ChatCodec;
use arl_core::eval::{Bootstrap, PassSummary, TaskCount, distinct_task_ids, summarize};
use arl_core::policy::Policy;
use arl_core::{Env, Episode, EpisodeFinish, Split};

/// One evaluation of a policy on a held-out split.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Evaluation {
    /// The split evaluated (`heldout` in files older than the second split).
    #[serde(default = "heldout")]
    pub split: Split,
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
    /// Episodes lost to infrastructure failures, left out of the counts above.
    #[serde(default)]
    pub infra_failed: usize,
    /// Each component of a weighted reward, its mean score over the counted episodes (before
    /// its weight); absent for a single reward.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub rewards: BTreeMap<String, f64>,
}

fn heldout() -> Split {
    Split::Heldout
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
    /// Lost to an infrastructure failure (not counted).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub infra_failed: bool,
}

/// A decoded episode, for reading what the model did.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Transcript {
    pub task_id: String,
    pub reward: f64,
    pub text: String,
}

/// Evaluate `policy` on every task of the `heldout` split, `n` episodes each.
pub fn evaluate(
    env: &dyn Env,
    codec: &dyn ChatCodec,
    policy: &mut dyn Policy,
    n: usize,
    opts: &RolloutOptions,
    bootstrap: &Bootstrap,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<Evaluation, TrainError> {
    evaluate_split(env, codec, policy, Split::Heldout, n, opts, bootstrap, progress)
}

/// Evaluate `policy` on every task of a held-out `split` (which must have tasks), `n`
/// episodes each. Task ids must be distinct (the paired difference matches tasks by id); a
/// repeated one is refused before anything is sampled.
#[allow(clippy::too_many_arguments)]
pub fn evaluate_split(
    env: &dyn Env,
    codec: &dyn ChatCodec,
    policy: &mut dyn Policy,
    split: Split,
    n: usize,
    opts: &RolloutOptions,
    bootstrap: &Bootstrap,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<Evaluation, TrainError> {
    let tasks = env.tasks(split)?;
    if tasks.is_empty() {
        return Err(TrainError::Other(format!("the env has no {split} tasks to evaluate")));
    }
    distinct_task_ids(tasks.iter().map(|t| t.id.as_str())).map_err(TrainError::Other)?;
    let specs: Vec<_> = tasks.iter().enumerate().flat_map(|(g, t)| (0..n).map(move |_| (t.clone(), g))).collect();
    let (episodes, _) = rollout(env, codec, policy, &specs, opts, progress)?;
    let infra_failed = episodes.iter().filter(|e| e.stats.infra_failed).count();
    let per_task: Vec<TaskCount> = tasks
        .iter()
        .enumerate()
        .map(|(g, t)| {
            let mine: Vec<&Episode> = episodes.iter().filter(|e| e.group == g && !e.stats.infra_failed).collect();
            TaskCount {
                task_id: t.id.clone(),
                family: t.family.clone(),
                n: mine.len() as u32,
                correct: mine.iter().filter(|e| e.solved()).count() as u32,
            }
        })
        .filter(|c| c.n > 0)
        .collect();
    if per_task.is_empty() {
        return Err(TrainError::Other(format!(
            "every {split} episode was lost to infrastructure failures ({infra_failed} of {}); see the sandbox or env errors above",
            episodes.len()
        )));
    }
    let summary = summarize(&per_task, bootstrap).map_err(TrainError::Other)?;
    let mut transcripts = Vec::new();
    for (g, t) in tasks.iter().enumerate() {
        if let Some(e) = episodes.iter().find(|e| e.group == g) {
            transcripts.push(Transcript { task_id: t.id.clone(), reward: e.reward, text: codec.decode_transcript(&e.ids)? });
        }
    }
    let rewards = super::metrics::reward_components(episodes.iter().filter(|e| !e.stats.infra_failed));
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
            infra_failed: e.stats.infra_failed,
        })
        .collect();
    Ok(Evaluation { split, per_task, summary, transcripts, episodes, tool_stats, infra_failed, rewards })
}

#[cfg(test)]
mod tests {
    use super::*;
    use arl_core::chat::ChatError;
    use arl_core::policy::{Generation, PolicyError, SamplingParams, ScoreParams, Scores};
    use arl_core::{EnvError, EnvSession, Message, Task, ToolSchema};

    /// Held-out tasks `a`, `b`, `a` (as a process env or an out-of-tree env may list them).
    struct Repeats;

    impl Env for Repeats {
        fn tasks(&self, split: Split) -> Result<Vec<Task>, EnvError> {
            Ok(["a", "b", "a"]
                .iter()
                .map(|id| Task { id: id.to_string(), family: "f".into(), split, data: serde_json::Value::Null })
                .collect())
        }
        fn tools(&self) -> Vec<ToolSchema> {
            vec![]
        }
        fn reset(&self, _: &Task) -> Result<Box<dyn EnvSession>, EnvError> {
            panic!("a repeated held-out id is refused before any episode starts")
        }
    }

    struct Never;

    impl Policy for Never {
        fn generate(&mut self, _: &[Vec<u32>], _: &SamplingParams) -> Result<Vec<Generation>, PolicyError> {
            panic!("nothing is sampled")
        }
        fn score(&self, _: &[Vec<u32>], _: Option<&[Vec<usize>]>, _: ScoreParams) -> Result<Scores, PolicyError> {
            panic!("nothing is scored")
        }
    }

    impl ChatCodec for Never {
        fn prompt_ids(&self, _: &[Message], _: &[ToolSchema]) -> Result<Vec<u32>, ChatError> {
            panic!("nothing is rendered")
        }
        fn observation_ids(&self, _: &[Message], _: &[Message], _: &[ToolSchema], _: Option<u32>) -> Result<Vec<u32>, ChatError> {
            panic!("nothing is rendered")
        }
        fn decode(&self, _: &[u32]) -> Result<String, ChatError> {
            panic!("nothing is decoded")
        }
        fn stop_ids(&self) -> &[u32] {
            &[]
        }
        fn self_check(&self) -> Result<String, ChatError> {
            Ok("never".into())
        }
    }

    #[test]
    fn a_repeated_held_out_task_id_is_refused_naming_it() {
        let opts = RolloutOptions {
            max_turns: 1,
            max_calls_per_turn: 1,
            sampling: SamplingParams::default(),
            gen_batch: None,
            gen_tokens: None,
            max_episode_tokens: 16,
            max_prompt_tokens: None,
            max_response_tokens: None,
        };
        let err = evaluate(&Repeats, &Never, &mut Never, 2, &opts, &Bootstrap::default(), &mut |_, _| {}).unwrap_err().to_string();
        assert!(err.starts_with("held-out task id \"a\" appears more than once;") && !err.contains('\n'), "{err}");
    }
}
