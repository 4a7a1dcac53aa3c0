//! Async off-policy training (`trainer.max_steps_off_policy`): a rollout thread
//! ([`sampler`]) keeps sampling with a versioned snapshot of the weights
//! ([`TrainablePolicy::snapshot`](arl_core::policy::TrainablePolicy::snapshot)) while the
//! trainer steps; the trainer takes complete groups in the order they were started, drops
//! those sampled by weights more than k steps older than its own (counted apart from
//! zero-variance groups), and publishes its new weights after every step.
//!
//! Versions count trainer steps: the weights that step s (0-based) trains are version s; a
//! group sampled by version v and taken at step s has staleness s − v. Stale groups train with
//! the behaviour log-probabilities they were sampled with (the episodes' `sampler_logprobs`;
//! `loss.decoupled`, `loss.tis` or `loss.icepop` correct for them), and the sampler–trainer
//! gap and the behaviour ratio π_old/π_behave are reported per staleness.
//!
//! The data position is the number of tasks whose groups the trainer has taken: groups
//! still in flight at a checkpoint are not in it, so a resumed run discards them (counted,
//! [`OffPolicyMetrics::discarded_in_flight`]) and samples their tasks again — none is lost,
//! none trained twice.

pub mod sampler;

use std::collections::BTreeMap;
use std::sync::mpsc::{Receiver, channel};
use std::time::Instant;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use self::sampler::{Published, SampledGroup, SamplerSetup, Shared};
use super::TrainError;
use super::batch::{BatchOptions, RewardTerms, StepBatch, collect_from, merge};
use super::rollout::RolloutStats;
use super::update::UpdateMetrics;
use arl_core::policy::TrainablePolicy;
use arl_core::{AdvantageFn, Episode};

/// The async part of a step's metrics (`off_policy` in `metrics.jsonl`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct OffPolicyMetrics {
    /// The version of the weights this step trained (steps done before it).
    pub policy_version: u32,
    /// Seconds the trainer waited for finished groups this step.
    pub train_wait_s: f64,
    /// Seconds the rollout thread waited (for a free slot or for weights) since the previous
    /// step.
    pub rollout_wait_s: f64,
    /// Groups taken this step and dropped because weights more than
    /// `trainer.max_steps_off_policy` steps older sampled them (not counted as zero-variance).
    pub dropped_stale_groups: usize,
    /// Groups started by the rollout thread and not yet taken, after this step's update.
    pub groups_in_flight: usize,
    /// The groups this step took and did not drop, by staleness (steps between the weights
    /// that sampled them and this step's).
    pub staleness: BTreeMap<u32, StalenessStats>,
    /// Groups in flight at the checkpoint this run resumed from: discarded, their tasks
    /// sampled again (set on the first step after a resume).
    pub discarded_in_flight: usize,
    /// The data position before and after this step: tasks `tasks_from..tasks_to` of the
    /// run's task order were taken (trained, skipped or dropped).
    pub tasks_from: usize,
    pub tasks_to: usize,
}

/// The groups of one staleness in a step.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StalenessStats {
    pub groups: usize,
    /// Policy tokens of its episodes in the update.
    pub tokens: usize,
    /// Mean |sampler logprob − trainer recomputation| over those tokens, before the update.
    pub logprob_gap_mean: f64,
    /// Mean π_old/π_behave = exp(trainer − sampler logprob) over those tokens.
    pub behaviour_ratio_mean: f64,
}

/// The trainer's end of async sampling.
pub struct AsyncSampling<'a> {
    shared: &'a Shared,
    groups: Receiver<Result<SampledGroup, TrainError>>,
    bound: u32,
    /// Tasks taken so far (the data position).
    position: usize,
    /// This step's counters.
    step: StepCounters,
}

#[derive(Default)]
struct StepCounters {
    version: u32,
    from: usize,
    wait_s: f64,
    dropped: usize,
    /// Staleness of each group of the batch being assembled, by its group id.
    staleness: Vec<u32>,
}

impl<'a> AsyncSampling<'a> {
    /// Start the rollout thread in `scope` from data position `setup.start`, sampling with
    /// `first` (the weights after `version` steps); at most `slots` groups in flight.
    pub fn start<'scope, 'env: 'scope>(
        scope: &'scope std::thread::Scope<'scope, 'env>,
        shared: &'env Shared,
        setup: SamplerSetup<'env>,
        first: Published,
        bound: u32,
    ) -> AsyncSampling<'env> {
        let position = setup.start;
        let (tx, groups) = channel();
        shared.publish(first);
        std::thread::Builder::new()
            .name("arl-rollout".into())
            .spawn_scoped(scope, move || sampler::run(setup, shared, tx))
            .expect("spawning the rollout thread");
        AsyncSampling { shared, groups, bound, position, step: StepCounters::default() }
    }

    /// The data position: tasks whose groups the trainer has taken.
    pub fn position(&self) -> usize {
        self.position
    }

    /// Groups started by the rollout thread and not yet taken.
    pub fn in_flight(&self) -> usize {
        self.shared.in_flight()
    }

    /// Step `version`'s batch (as [`collect_from`]), from the groups the rollout thread has
    /// finished, dropping the stale ones. `progress(done, total)` counts fresh groups taken.
    pub fn collect(
        &mut self,
        version: u32,
        advantage: &dyn AdvantageFn,
        opts: &BatchOptions,
        reward_terms: Option<&RewardTerms<'_>>,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<StepBatch, TrainError> {
        self.step = StepCounters { version, from: self.position, ..StepCounters::default() };
        let mut groups = |n: usize, base: usize, _attempt: u32| self.take(n, base, progress);
        collect_from(&mut groups, advantage, opts, reward_terms)
    }

    /// The next `n` groups sampled within the bound, renumbered `base..base + n`.
    fn take(&mut self, n: usize, base: usize, progress: &mut dyn FnMut(usize, usize)) -> Result<(Vec<Episode>, RolloutStats), TrainError> {
        let mut episodes = Vec::new();
        let mut stats = RolloutStats::default();
        let mut taken = 0;
        progress(0, n);
        while taken < n {
            let t = Instant::now();
            let got = self.groups.recv().map_err(|_| TrainError::Other("the rollout thread ended without reporting why".into()));
            self.step.wait_s += t.elapsed().as_secs_f64();
            let group = got??;
            self.shared.release();
            self.position += 1;
            debug_assert_eq!(group.position + 1, self.position, "groups arrive in the order they were started");
            let staleness = self.step.version.saturating_sub(group.version);
            if staleness > self.bound {
                self.step.dropped += 1;
                continue;
            }
            let id = base + taken;
            if self.step.staleness.len() <= id {
                self.step.staleness.resize(id + 1, 0);
            }
            self.step.staleness[id] = staleness;
            merge(&mut stats, &group.rollout);
            episodes.extend(group.episodes.into_iter().map(|e| Episode { group: id, ..e }));
            taken += 1;
            progress(taken, n);
        }
        Ok((episodes, stats))
    }

    /// Hand the rollout thread the weights after `version` steps.
    pub fn publish(&self, version: u32, policy: &dyn TrainablePolicy) -> Result<(), TrainError> {
        self.shared.publish(snapshot(policy, version)?);
        Ok(())
    }

    /// The step's async metrics; `batch` is the step's batch and `update` its update.
    pub fn metrics(&mut self, batch: &StepBatch, update: &UpdateMetrics) -> OffPolicyMetrics {
        let mut staleness: BTreeMap<u32, StalenessStats> = BTreeMap::new();
        let mut counted = vec![false; self.step.staleness.len()];
        for e in &batch.sampled {
            if e.group < counted.len() && !std::mem::replace(&mut counted[e.group], true) {
                staleness.entry(self.step.staleness[e.group]).or_default().groups += 1;
            }
        }
        let mut sums: BTreeMap<u32, (f64, f64)> = BTreeMap::new();
        for (e, gap) in batch.train.iter().zip(&update.episode_gaps) {
            let s = self.step.staleness.get(e.group).copied().unwrap_or(0);
            let entry = staleness.entry(s).or_default();
            entry.tokens += gap.tokens;
            let sum = sums.entry(s).or_default();
            sum.0 += gap.abs_gap_sum;
            sum.1 += gap.ratio_sum;
        }
        for (s, (gap, ratio)) in sums {
            let entry = staleness.get_mut(&s).expect("entered above");
            let n = entry.tokens.max(1) as f64;
            (entry.logprob_gap_mean, entry.behaviour_ratio_mean) = (gap / n, ratio / n);
        }
        OffPolicyMetrics {
            policy_version: self.step.version,
            train_wait_s: self.step.wait_s,
            rollout_wait_s: self.shared.take_idle_s(),
            dropped_stale_groups: self.step.dropped,
            groups_in_flight: self.shared.in_flight(),
            staleness,
            discarded_in_flight: 0,
            tasks_from: self.step.from,
            tasks_to: self.position,
        }
    }
}

impl Drop for AsyncSampling<'_> {
    /// Stop the rollout thread (the scope joins it); groups still in flight are discarded.
    fn drop(&mut self) {
        self.shared.stop();
    }
}

/// A snapshot of `policy`'s weights as version `version` (a policy that cannot make one
/// refuses async training with its own error, see `TrainablePolicy::snapshot`).
pub fn snapshot(policy: &dyn TrainablePolicy, version: u32) -> Result<Published, TrainError> {
    Ok(Published { version, policy: policy.snapshot()? })
}
