//! The rollout thread of async off-policy training: it rolls out rounds of groups with the
//! newest published snapshot of the weights, as long as it has free slots, and sends each
//! complete group to the trainer with the policy version that sampled it.

use std::sync::mpsc::Sender;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Instant;

use crate::TrainError;
use crate::rollout::{RolloutOptions, RolloutStats, rollout};
use arl_core::chat::ChatCodec;
use arl_core::config::WeightSync;
use arl_core::policy::{Generation, Policy, PolicyError, SamplingParams, ScoreParams, Scores};
use arl_core::{Env, Episode, Task};

/// A snapshot of the weights after `version` trainer steps.
pub struct Published {
    pub version: u32,
    pub policy: Box<dyn Policy + Send>,
}

/// One complete group (a task's `group_size` episodes) as the rollout thread finished it.
pub struct SampledGroup {
    /// Its task's place in the run's task order (the data position it uses).
    pub position: usize,
    /// The oldest policy version that sampled any turn of its round: its staleness counts
    /// from here.
    pub version: u32,
    /// The newest version that sampled a turn of its round (equal to `version` under
    /// `weight_sync = "sync"`).
    pub newest_version: u32,
    pub episodes: Vec<Episode>,
    /// Its share of its round's rollout counters (episodes, tokens and truncations its own;
    /// seconds and prompt tokens divided evenly between the round's groups).
    pub rollout: RolloutStats,
}

/// What the trainer and the rollout thread share, behind one lock.
#[derive(Default)]
pub struct Shared {
    state: Mutex<State>,
    changed: Condvar,
}

#[derive(Default)]
struct State {
    /// The newest snapshot not yet taken by the rollout thread.
    weights: Option<Published>,
    /// Groups the rollout thread may still start.
    free_slots: usize,
    /// Groups started and not yet taken by the trainer.
    in_flight: usize,
    stop: bool,
    /// Seconds the rollout thread waited for a slot or for weights, since last read.
    idle_s: f64,
}

impl Shared {
    pub fn new(slots: usize) -> Self {
        Self { state: Mutex::new(State { free_slots: slots, ..State::default() }), changed: Condvar::new() }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic on the other side poisons the lock; what it guards is still consistent.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Hand the rollout thread newer weights (an older snapshot it has not taken is dropped).
    pub fn publish(&self, weights: Published) {
        self.lock().weights = Some(weights);
        self.changed.notify_all();
    }

    /// The trainer took a group (trained or dropped it): its slot is free again.
    pub fn release(&self) {
        let mut s = self.lock();
        s.free_slots += 1;
        s.in_flight -= 1;
        drop(s);
        self.changed.notify_all();
    }

    /// Groups started and not yet taken.
    pub fn in_flight(&self) -> usize {
        self.lock().in_flight
    }

    /// Seconds the rollout thread waited since the last call.
    pub fn take_idle_s(&self) -> f64 {
        std::mem::take(&mut self.lock().idle_s)
    }

    /// Ask the rollout thread to stop (it abandons a running round at its next turn).
    pub fn stop(&self) {
        self.lock().stop = true;
        self.changed.notify_all();
    }

    fn stopped(&self) -> bool {
        self.lock().stop
    }
}

/// Everything the rollout thread reads.
pub struct SamplerSetup<'a> {
    pub env: &'a dyn Env,
    pub codec: &'a dyn ChatCodec,
    pub tasks: &'a [Task],
    /// The task order; the thread hands out `order[position % len]` from `start` on.
    pub order: &'a [usize],
    pub start: usize,
    pub group_size: usize,
    /// Groups per step (`trainer.prompts`): a round that starts where a lockstep step would
    /// samples with that step's seed.
    pub prompts: usize,
    pub rollout: RolloutOptions,
    pub weight_sync: WeightSync,
}

/// The rollout thread's body: rounds of as many groups as there are free slots, until
/// stopped or the trainer hangs up. An error goes to the trainer and ends the thread.
pub fn run(setup: SamplerSetup<'_>, shared: &Shared, tx: Sender<Result<SampledGroup, TrainError>>) {
    let mut current: Option<Published> = None;
    let mut position = setup.start;
    loop {
        let n = {
            let mut s = shared.lock();
            let t = Instant::now();
            while !s.stop && (s.free_slots == 0 || (current.is_none() && s.weights.is_none())) {
                s = shared.changed.wait(s).unwrap_or_else(|e| e.into_inner());
            }
            s.idle_s += t.elapsed().as_secs_f64();
            if s.stop {
                return;
            }
            if let Some(w) = s.weights.take() {
                current = Some(w);
            }
            let n = std::mem::take(&mut s.free_slots);
            s.in_flight += n;
            n
        };
        let Some(now) = current.take() else { unreachable!("weights were waited for") };
        let mut sampler = Versioned {
            oldest: now.version,
            current: now,
            shared,
            background: setup.weight_sync == WeightSync::Background,
            prefilled_before: 0,
        };
        let result = round(&setup, &mut sampler, position, n);
        let (oldest, newest) = (sampler.oldest, sampler.current.version);
        current = Some(sampler.current);
        let (episodes, stats) = match result {
            Ok(r) => r,
            Err(_) if shared.stopped() => return,
            Err(e) => {
                let _ = tx.send(Err(e));
                return;
            }
        };
        let mut by_group: Vec<Vec<Episode>> = (0..n).map(|_| Vec::new()).collect();
        for e in episodes {
            by_group[e.group].push(e);
        }
        for (j, episodes) in by_group.into_iter().enumerate() {
            let rollout = share(&stats, &episodes, n);
            let group = SampledGroup { position: position + j, version: oldest, newest_version: newest, episodes, rollout };
            if tx.send(Ok(group)).is_err() {
                return;
            }
        }
        position += n;
    }
}

/// One round: `n` groups from data position `position`, each episode's `group` its index in
/// the round. The seed follows the data position ([`round_seed`]), so a round samples the
/// same way whenever it starts with the same task and the same weights — also as lockstep's
/// step that starts there.
fn round(setup: &SamplerSetup<'_>, policy: &mut dyn Policy, position: usize, n: usize) -> Result<(Vec<Episode>, RolloutStats), TrainError> {
    let specs: Vec<(Task, usize)> = (0..n)
        .flat_map(|j| {
            let task = &setup.tasks[setup.order[(position + j) % setup.order.len()]];
            (0..setup.group_size).map(move |_| (task.clone(), j))
        })
        .collect();
    let opts = RolloutOptions {
        sampling: SamplingParams {
            seed: round_seed(setup.rollout.sampling.seed, position, setup.prompts),
            ..setup.rollout.sampling.clone()
        },
        ..setup.rollout.clone()
    };
    rollout(setup.env, setup.codec, policy, &specs, &opts, &mut |_, _| {})
}

/// The sampling seed of the round that starts at data position `position`: at
/// `position = step × prompts` it is the seed of lockstep's `step` (0-based), so with one
/// sampling attempt per step and equal weights an async run's first round draws exactly
/// lockstep's first batch; other positions get their own seeds.
pub fn round_seed(seed: u64, position: usize, prompts: usize) -> u64 {
    let prompts = prompts.max(1);
    let (step, offset) = ((position / prompts) as u64, (position % prompts) as u64);
    seed ^ step.wrapping_mul(0x9e37_79b9) ^ offset.wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// A group's share of its round's counters.
fn share(round: &RolloutStats, episodes: &[Episode], groups: usize) -> RolloutStats {
    let part = 1.0 / groups.max(1) as f64;
    RolloutStats {
        episodes: episodes.len(),
        generated_tokens: episodes.iter().map(Episode::policy_tokens).sum(),
        generate_seconds: round.generate_seconds * part,
        env_seconds: round.env_seconds * part,
        seconds: round.seconds * part,
        truncated: episodes.iter().filter(|e| e.stats.truncated).count(),
        prompt_tokens: round.prompt_tokens / groups.max(1),
        prefill_tokens: round.prefill_tokens / groups.max(1),
    }
}

/// The round's sampler: the snapshot it started with, swapped between `generate` calls for a
/// newer one under `background` weight sync. A stop request fails the next call, so a round
/// ends within one turn.
struct Versioned<'a> {
    current: Published,
    oldest: u32,
    shared: &'a Shared,
    background: bool,
    /// Prompt tokens prefilled by snapshots swapped out earlier in the round.
    prefilled_before: u64,
}

impl Policy for Versioned<'_> {
    fn generate(&mut self, prompts: &[Vec<u32>], params: &SamplingParams) -> Result<Vec<Generation>, PolicyError> {
        {
            let mut s = self.shared.lock();
            if s.stop {
                return Err(PolicyError("the rollout thread was stopped".into()));
            }
            if self.background
                && let Some(newer) = s.weights.take()
            {
                self.prefilled_before += self.current.policy.prefill_tokens().unwrap_or(0);
                self.current = newer;
            }
        }
        self.current.policy.generate(prompts, params)
    }

    fn score(&self, sequences: &[Vec<u32>], positions: Option<&[Vec<usize>]>, params: ScoreParams) -> Result<Scores, PolicyError> {
        self.current.policy.score(sequences, positions, params)
    }

    fn prefill_tokens(&self) -> Option<u64> {
        self.current.policy.prefill_tokens().map(|n| n + self.prefilled_before)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Answers every prompt with its own version id and counts prompt tokens as prefilled.
    struct Fixed {
        id: u32,
        prefilled: u64,
    }

    impl Policy for Fixed {
        fn generate(&mut self, prompts: &[Vec<u32>], _: &SamplingParams) -> Result<Vec<Generation>, PolicyError> {
            self.prefilled += prompts.iter().map(|p| p.len() as u64).sum::<u64>();
            Ok(prompts
                .iter()
                .map(|_| Generation { ids: vec![self.id], sampler_logprobs: vec![0.0], finish: arl_core::policy::FinishReason::Stop })
                .collect())
        }
        fn score(&self, _: &[Vec<u32>], _: Option<&[Vec<usize>]>, _: ScoreParams) -> Result<Scores, PolicyError> {
            Err(PolicyError("not used".into()))
        }
        fn prefill_tokens(&self) -> Option<u64> {
            Some(self.prefilled)
        }
    }

    fn published(version: u32) -> Published {
        Published { version, policy: Box::new(Fixed { id: 100 + version, prefilled: 0 }) }
    }

    /// Two turns of one round with weights published between them: `(ids of turn 1, of turn
    /// 2, oldest version, newest version, prefill counts after each turn)`.
    fn two_turns(background: bool) -> (u32, u32, u32, u32, [u64; 2]) {
        let shared = Shared::new(1);
        let mut v = Versioned { current: published(3), oldest: 3, shared: &shared, background, prefilled_before: 0 };
        let p = SamplingParams::default();
        let first = v.generate(&[vec![1, 2, 3]], &p).unwrap()[0].ids[0];
        let after_first = v.prefill_tokens().unwrap();
        shared.publish(published(4));
        let second = v.generate(&[vec![1, 2, 3, 4, 5]], &p).unwrap()[0].ids[0];
        (first, second, v.oldest, v.current.version, [after_first, v.prefill_tokens().unwrap()])
    }

    #[test]
    fn background_sync_swaps_weights_between_turns_and_keeps_the_oldest_version() {
        assert_eq!(two_turns(true), (103, 104, 3, 4, [3, 8]), "the prefill count keeps growing across the swap");
        assert_eq!(two_turns(false), (103, 103, 3, 3, [3, 8]), "sync keeps the round's weights");
    }

    #[test]
    fn a_stop_request_fails_the_next_turn_and_slots_count_groups_in_flight() {
        let shared = Shared::new(2);
        let mut v = Versioned { current: published(0), oldest: 0, shared: &shared, background: false, prefilled_before: 0 };
        shared.lock().in_flight = 2;
        shared.lock().free_slots = 0;
        shared.release();
        assert_eq!((shared.in_flight(), shared.lock().free_slots), (1, 1));
        shared.stop();
        let err = v.generate(&[vec![1]], &SamplingParams::default()).unwrap_err();
        assert_eq!(err.to_string(), "policy: the rollout thread was stopped");
    }
}
