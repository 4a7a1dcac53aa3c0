//! Rollout rounds, the unit of rollout work and of determinism, and the executor seam behind
//! the training loop.
//!
//! A round is `n` groups (tasks × `group_size` episodes) at one data position, with one
//! sampling seed and one weights version ([`RoundSpec`]). Its episodes are a function of those
//! alone: [`run_round`] clears the sampler's prefix cache first, and every row's random
//! stream depends only on the round's seed and the row's place in the round. A step's groups
//! are split into rounds of `cluster.round_groups` ([`plan`]); with the default (one round
//! per step) the seeds are those of the loop before rounds existed.
//!
//! A [`RolloutExecutor`] runs a step's rounds: [`LocalRollouts`] in the trainer's process,
//! `dist::Coordinator` through rollout workers on a shared filesystem.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::TrainError;
use super::batch::merge;
use super::offpolicy::sampler::round_seed;
use super::rollout::{RolloutOptions, RolloutStats, rollout};
use arl_core::chat::ChatCodec;
use arl_core::policy::{Policy, SamplingParams, TrainablePolicy};
use arl_core::{Env, Episode, Task};

/// One round of rollout work, as the trainer issues it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoundSpec {
    /// Unique within a trainer's incarnation, in issue order.
    pub id: u64,
    /// The weights after this many trainer steps sample it.
    pub version: u32,
    /// The data position of its first task (tasks handed out before it).
    pub position: usize,
    /// The `group` of its first task's episodes (its place among the step's groups).
    pub group_base: usize,
    /// The sampling seed of the whole round.
    pub seed: u64,
    /// Its tasks (training split ids), one group each, in order.
    pub task_ids: Vec<String>,
}

/// A round's episodes (in spec order: task by task, `group_size` each) and counters.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RoundOutput {
    pub episodes: Vec<Episode>,
    pub stats: RolloutStats,
}

/// Faults an executor recovered from since it was last asked (zero for a local one).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Faults {
    /// Rounds issued again after their worker lost its lease.
    pub rounds_retried: usize,
    /// Workers whose heartbeat went stale while they held a round.
    pub workers_lost: usize,
}

/// Runs a step's rollout rounds for the training loop.
pub trait RolloutExecutor {
    /// The trainer's weights are now version `version` (the weights after that many steps):
    /// rounds naming it may be issued from here on.
    fn publish(&mut self, version: u32, policy: &dyn TrainablePolicy) -> Result<(), TrainError>;

    /// Roll out `rounds` and return their outputs in the same order. `policy` is the
    /// trainer's own, at the rounds' version (a local executor samples with it).
    fn run(
        &mut self,
        policy: &mut dyn Policy,
        rounds: &[RoundSpec],
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<Vec<RoundOutput>, TrainError> {
        self.issue(policy, rounds, progress)?;
        self.collect(rounds, progress)
    }

    /// Start `rounds`, to be [`collect`](Self::collect)ed later (pinned off-policy training
    /// issues a step's rounds steps before it trains on them). `policy` is the trainer's own,
    /// at the rounds' version: a local executor rolls them out here, with it.
    fn issue(&mut self, policy: &mut dyn Policy, rounds: &[RoundSpec], progress: &mut dyn FnMut(usize, usize)) -> Result<(), TrainError>;

    /// Wait for issued `rounds` and return their outputs in the same order.
    fn collect(&mut self, rounds: &[RoundSpec], progress: &mut dyn FnMut(usize, usize)) -> Result<Vec<RoundOutput>, TrainError>;

    /// Faults recovered from since the last call.
    fn take_faults(&mut self) -> Faults {
        Faults::default()
    }
}

/// What running a round needs besides the policy: the same on the trainer and on a worker.
pub struct RoundContext<'a> {
    pub env: &'a dyn Env,
    pub codec: &'a dyn ChatCodec,
    /// The training tasks by id.
    pub tasks: HashMap<String, Task>,
    pub group_size: usize,
    /// Sampling and budgets; the seed is each round's own.
    pub rollout: RolloutOptions,
}

impl<'a> RoundContext<'a> {
    pub fn new(env: &'a dyn Env, codec: &'a dyn ChatCodec, tasks: &[Task], group_size: usize, rollout: RolloutOptions) -> Self {
        let tasks = tasks.iter().map(|t| (t.id.clone(), t.clone())).collect();
        Self { env, codec, tasks, group_size, rollout }
    }
}

/// Roll out one round: the prefix cache cleared, every task's `group_size` episodes with the
/// round's seed, episode groups from `group_base` on.
pub fn run_round(
    ctx: &RoundContext<'_>,
    policy: &mut dyn Policy,
    round: &RoundSpec,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<RoundOutput, TrainError> {
    let mut specs = Vec::with_capacity(round.task_ids.len() * ctx.group_size);
    for (j, id) in round.task_ids.iter().enumerate() {
        let task = ctx
            .tasks
            .get(id)
            .ok_or_else(|| TrainError::Other(format!("round {} names training task `{id}`, which this env does not have", round.id)))?;
        specs.extend((0..ctx.group_size).map(|_| (task.clone(), round.group_base + j)));
    }
    let opts = RolloutOptions { sampling: SamplingParams { seed: round.seed, ..ctx.rollout.sampling.clone() }, ..ctx.rollout.clone() };
    policy.clear_cache();
    let (episodes, stats) = rollout(ctx.env, ctx.codec, policy, &specs, &opts, progress)?;
    Ok(RoundOutput { episodes, stats })
}

/// Rounds in the trainer's process, with the trainer's policy: each rolled out when it is
/// issued, its output kept until it is collected.
pub struct LocalRollouts<'a> {
    pub ctx: RoundContext<'a>,
    /// Outputs of issued rounds not yet collected, by round id.
    pub done: HashMap<u64, RoundOutput>,
}

impl<'a> LocalRollouts<'a> {
    pub fn new(ctx: RoundContext<'a>) -> Self {
        LocalRollouts { ctx, done: HashMap::new() }
    }
}

impl RolloutExecutor for LocalRollouts<'_> {
    fn publish(&mut self, _: u32, _: &dyn TrainablePolicy) -> Result<(), TrainError> {
        Ok(())
    }

    fn issue(&mut self, policy: &mut dyn Policy, rounds: &[RoundSpec], progress: &mut dyn FnMut(usize, usize)) -> Result<(), TrainError> {
        let total: usize = rounds.iter().map(|r| r.task_ids.len() * self.ctx.group_size).sum();
        let mut done = 0;
        for round in rounds {
            let r = run_round(&self.ctx, policy, round, &mut |d, _| progress(done + d, total))?;
            done += r.episodes.len();
            self.done.insert(round.id, r);
        }
        Ok(())
    }

    fn collect(&mut self, rounds: &[RoundSpec], _: &mut dyn FnMut(usize, usize)) -> Result<Vec<RoundOutput>, TrainError> {
        rounds
            .iter()
            .map(|r| self.done.remove(&r.id).ok_or_else(|| TrainError::Other(format!("round {} was collected before it was issued", r.id))))
            .collect()
    }
}

/// Where a step's rollout call draws its rounds from.
pub struct Plan {
    /// The run's sampling seed (`trainer.seed`).
    pub seed: u64,
    /// Groups per step (`trainer.prompts`).
    pub prompts: usize,
    /// Groups per round (`cluster.round_groups`).
    pub round_groups: usize,
    /// The trainer step (0-based) the rounds are for.
    pub step: u32,
    /// The weights version that samples them: `step` in lockstep, older with pinned
    /// off-policy training.
    pub version: u32,
}

impl Plan {
    /// The rounds of one rollout call: `tasks` (ids, drawn from data position `position`)
    /// split into rounds of `round_groups`, their groups from `group_base` on, for dynamic
    /// sampling's `attempt`. Round `j` of the call samples with the seed of the data position
    /// `step × prompts + j × round_groups`, mixed with the attempt as before rounds existed,
    /// so one round per step keeps every earlier seed. Ids are taken from `next_id`.
    pub fn rounds(&self, tasks: Vec<String>, position: usize, group_base: usize, attempt: u32, next_id: &mut u64) -> Vec<RoundSpec> {
        let size = self.round_groups.max(1);
        let step_start = self.step as usize * self.prompts;
        let attempt_mix = (attempt as u64).wrapping_mul(0xa076_1d64_78bd_642f);
        tasks
            .chunks(size)
            .enumerate()
            .map(|(j, ids)| {
                let id = *next_id;
                *next_id += 1;
                RoundSpec {
                    id,
                    version: self.version,
                    position: position + j * size,
                    group_base: group_base + j * size,
                    seed: round_seed(self.seed, step_start + j * size, self.prompts) ^ attempt_mix,
                    task_ids: ids.to_vec(),
                }
            })
            .collect()
    }
}

/// The outputs of one rollout call as one batch of episodes and counters.
pub fn concat(outputs: Vec<RoundOutput>) -> (Vec<Episode>, RolloutStats) {
    let mut stats = RolloutStats::default();
    let mut episodes = Vec::new();
    for o in outputs {
        merge(&mut stats, &o.stats);
        episodes.extend(o.episodes);
    }
    (episodes, stats)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("t{i}")).collect()
    }

    #[test]
    fn one_round_per_step_keeps_the_seeds_before_rounds() {
        let plan = Plan { seed: 7, prompts: 4, round_groups: 4, step: 3, version: 3 };
        let mut next = 0;
        for attempt in 0..3u32 {
            let r = plan.rounds(ids(4), 12, 0, attempt, &mut next);
            assert_eq!(r.len(), 1);
            // The seed the lockstep loop used: the step's round seed, then the attempt mixed in.
            let before = round_seed(7, 12, 4) ^ (attempt as u64).wrapping_mul(0xa076_1d64_78bd_642f);
            assert_eq!(r[0].seed, before);
        }
        assert_eq!(next, 3);
    }

    #[test]
    fn rounds_split_a_call_in_order_with_their_own_seeds() {
        let plan = Plan { seed: 7, prompts: 4, round_groups: 1, step: 2, version: 2 };
        let mut next = 10;
        let r = plan.rounds(ids(4), 8, 0, 0, &mut next);
        assert_eq!(
            r.iter().map(|r| (r.id, r.position, r.group_base, r.task_ids.len())).collect::<Vec<_>>(),
            [(10, 8, 0, 1), (11, 9, 1, 1), (12, 10, 2, 1), (13, 11, 3, 1)]
        );
        assert_eq!(r[0].seed, round_seed(7, 8, 4));
        let mut seeds: Vec<u64> = r.iter().map(|r| r.seed).collect();
        seeds.dedup();
        assert_eq!(seeds.len(), 4);
        assert!(r.iter().all(|r| r.version == 2));
    }
}
