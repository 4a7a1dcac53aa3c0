//! A step's training batch: rollouts, reward shaping, group filtering and resampling.
//!
//! - **Overlong shaping** (DAPO, SPEC §4.4): an episode's policy-token count |y| against the
//!   response budget L_max and a buffer L_cache adds `min(−(|y| − (L_max − L_cache))/L_cache ·
//!   factor, 0)` to the reward (−factor at or beyond L_max), so long answers are penalized
//!   smoothly before the budget cuts them.
//! - **Zero-variance skip**: a group whose rewards (before shaping) are all equal carries no
//!   group-relative signal; with `skip_zero_variance` it leaves the update, so it no longer
//!   dilutes the loss normalizer (trl #6367).
//! - **Dynamic sampling** (DAPO, verl `filter_groups` + `max_num_gen_batches`): with
//!   `max_sampling_attempts` > 1, fresh tasks are rolled out until `prompts` groups with reward
//!   variance are in hand or the attempts run out; surplus groups are dropped in order.
//! - **Overlong masking**: with `mask_truncated`, episodes cut by a budget keep their place in
//!   the group statistics but leave the loss.
//! - **Infrastructure failures** ([`EpisodeStats::infra_failed`](arl_core::EpisodeStats)): an
//!   episode the sandbox, the grading harness or an env process lost (not the model) leaves the
//!   batch before anything else looks at it — its group's statistics, filtering, advantages,
//!   reward terms and the loss — exactly as if it had never been sampled; it is counted
//!   (`infra_failed`) and kept apart ([`StepBatch::infra_failed`]). Nothing is retried.
//!
//! - **KL in the reward** (`loss.kl_placement = "reward"`): the caller's `reward_terms` hook
//!   adds −β·Σ_t k(π_sampler, π_ref) over an episode's policy tokens ([`kl_penalty`]).
//!
//! The raw (correctness) reward stays in each [`Episode`]; the shaped one only drives
//! advantages, and both are reported.

use serde::{Deserialize, Serialize};

use super::TrainError;
use super::rollout::{RolloutOptions, RolloutStats, rollout};
use arl_core::chat::ChatCodec;
use arl_core::config::KlEstimator;
use arl_core::policy::{Policy, SamplingParams};
use arl_core::{AdvantageFn, AdvantageInput, Env, Episode, Task};

/// How a step's batch is assembled (from `[trainer]` and `[sampling]`).
#[derive(Clone, Debug, PartialEq)]
pub struct BatchOptions {
    /// Groups (tasks) the update wants.
    pub prompts: usize,
    pub group_size: usize,
    pub max_sampling_attempts: u32,
    pub skip_zero_variance: bool,
    pub mask_truncated: bool,
    /// Overlong shaping: (L_max, L_cache, factor); `None`: off.
    pub overlong: Option<Overlong>,
}

/// DAPO's soft overlong punishment.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Overlong {
    /// L_max: the episode's response (policy-token) budget.
    pub max_tokens: usize,
    /// L_cache: the span before L_max over which the penalty ramps from 0 to −factor.
    pub buffer: usize,
    pub factor: f64,
}

impl Overlong {
    /// The (non-positive) reward added to an episode with `len` policy tokens.
    pub fn penalty(&self, len: usize) -> f64 {
        let start = self.max_tokens.saturating_sub(self.buffer);
        if len <= start || self.buffer == 0 {
            return if len > self.max_tokens { -self.factor } else { 0.0 };
        }
        let over = (len - start) as f64 / self.buffer as f64;
        -(over.min(1.0) * self.factor)
    }
}

/// What assembling a batch did, for the step metrics.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BatchStats {
    /// Rollout rounds (1 unless dynamic sampling resampled).
    pub attempts: u32,
    /// Groups rolled out over all attempts, and groups whose rewards were all equal.
    pub groups_sampled: usize,
    pub groups_zero_variance: usize,
    /// Of those, groups whose equal rewards were not 0 (all solved, or one shared partial
    /// score): Together's identical-nonzero-reward skips.
    #[serde(default)]
    pub groups_identical_nonzero: usize,
    /// Groups that went into the update.
    pub groups_kept: usize,
    /// Mean reward after shaping over the sampled episodes.
    pub shaped_reward_mean: f64,
    /// Mean overlong penalty over the sampled episodes (0 when shaping is off).
    pub overlong_penalty_mean: f64,
    /// Mean of the caller's extra reward terms (the KL penalty) over the sampled episodes.
    pub extra_reward_mean: f64,
    /// Truncated episodes taken out of the loss by `mask_truncated`.
    pub masked_truncated: usize,
    /// Episodes lost to infrastructure failures, left out of everything above.
    #[serde(default)]
    pub infra_failed: usize,
}

/// A step's episodes: everything sampled (for metrics and tool statistics) and the part the
/// update trains on with its advantages.
pub struct StepBatch {
    /// The sampled episodes, less those lost to infrastructure failures.
    pub sampled: Vec<Episode>,
    /// Episodes lost to infrastructure failures (for their counters only).
    pub infra_failed: Vec<Episode>,
    pub train: Vec<Episode>,
    pub advantages: Vec<f64>,
    pub rollout: RolloutStats,
    pub stats: BatchStats,
}

/// Extra per-episode reward terms, computed on each round's episodes (one value per episode).
pub type RewardTerms<'a> = dyn Fn(&[Episode]) -> Result<Vec<f64>, TrainError> + 'a;

/// KL in the reward: −β·Σ_t k(sampler logprob, reference logprob) over each episode's
/// policy tokens. `reference[i]` is aligned with `episodes[i].ids` (as
/// [`recompute_logprobs`](super::update::recompute_logprobs) returns it). The sampler's
/// logprobs stand for π_old (they are equal up to the logged sampler–trainer gap).
pub fn kl_penalty(episodes: &[Episode], reference: &[Vec<f32>], coef: f64, estimator: KlEstimator) -> Vec<f64> {
    episodes
        .iter()
        .zip(reference)
        .map(|(e, r)| {
            let kl: f64 =
                super::update::policy_positions(e).into_iter().map(|t| estimator.estimate(e.sampler_logprobs[t] as f64, r[t] as f64)).sum();
            -coef * kl
        })
        .collect()
}

/// Roll out `prompts × group_size` episodes, shape, filter and (if allowed) resample.
/// `next_tasks(n)` hands out the next `n` training tasks (it owns the data position).
#[allow(clippy::too_many_arguments)]
pub fn collect(
    env: &dyn Env,
    codec: &dyn ChatCodec,
    policy: &mut dyn Policy,
    advantage: &dyn AdvantageFn,
    next_tasks: &mut dyn FnMut(usize) -> Vec<Task>,
    rollout_opts: &RolloutOptions,
    opts: &BatchOptions,
    reward_terms: Option<&RewardTerms<'_>>,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<StepBatch, TrainError> {
    let mut groups = |n: usize, base: usize, attempt: u32| -> Result<(Vec<Episode>, RolloutStats), TrainError> {
        let tasks = next_tasks(n);
        let specs: Vec<(Task, usize)> =
            tasks.iter().enumerate().flat_map(|(j, t)| (0..opts.group_size).map(move |_| (t.clone(), base + j))).collect();
        let ropts = RolloutOptions {
            sampling: SamplingParams {
                seed: rollout_opts.sampling.seed ^ (attempt as u64).wrapping_mul(0xa076_1d64_78bd_642f),
                ..rollout_opts.sampling.clone()
            },
            ..rollout_opts.clone()
        };
        rollout(env, codec, policy, &specs, &ropts, progress)
    };
    collect_from(&mut groups, advantage, opts, reward_terms)
}

/// Where a batch's groups come from: `groups(n, base, attempt)` returns the episodes of `n`
/// complete groups, their `group` fields `base..base + n`, for rollout round `attempt`.
pub type GroupSource<'a> = dyn FnMut(usize, usize, u32) -> Result<(Vec<Episode>, RolloutStats), TrainError> + 'a;

/// As [`collect`], with the groups from `groups`: a fresh rollout ([`collect`]), or the
/// groups an async rollout thread has finished (`train::offpolicy`).
pub fn collect_from(
    groups: &mut GroupSource<'_>,
    advantage: &dyn AdvantageFn,
    opts: &BatchOptions,
    reward_terms: Option<&RewardTerms<'_>>,
) -> Result<StepBatch, TrainError> {
    let filter = opts.skip_zero_variance || opts.max_sampling_attempts > 1;
    let mut sampled: Vec<Episode> = Vec::new();
    let mut shaped: Vec<f64> = Vec::new();
    let mut kept_groups: Vec<usize> = Vec::new();
    let mut infra_failed: Vec<Episode> = Vec::new();
    let mut stats = BatchStats::default();
    let mut rstats = RolloutStats::default();
    let max_attempts = opts.max_sampling_attempts.max(1);
    while stats.attempts < max_attempts {
        let want = opts.prompts - kept_groups.len().min(opts.prompts);
        // The first round samples a full batch; resampling rounds only what is missing.
        let n = if stats.attempts == 0 { opts.prompts } else { want };
        let base = stats.groups_sampled;
        let (episodes, r) = groups(n, base, stats.attempts)?;
        // Lost to the infrastructure: out before any statistic sees them.
        let (episodes, lost): (Vec<Episode>, Vec<Episode>) = episodes.into_iter().partition(|e| !e.stats.infra_failed);
        stats.infra_failed += lost.len();
        infra_failed.extend(lost);
        merge(&mut rstats, &r);
        stats.attempts += 1;
        stats.groups_sampled += n;
        let extra = match reward_terms {
            Some(terms) => terms(&episodes)?,
            None => vec![0.0; episodes.len()],
        };
        for (e, x) in episodes.iter().zip(extra) {
            let penalty = opts.overlong.map_or(0.0, |o| o.penalty(e.policy_tokens()));
            stats.overlong_penalty_mean += penalty;
            stats.extra_reward_mean += x;
            shaped.push(e.reward + penalty + x);
        }
        sampled.extend(episodes);
        for g in base..base + n {
            // DAPO filters on correctness (`filter_groups.metric = acc`), not on the shaped reward.
            let rewards: Vec<f64> = sampled.iter().filter(|e| e.group == g).map(|e| e.reward).collect();
            if rewards.is_empty() {
                // Every episode of the group was lost: nothing to learn from or to count.
                continue;
            }
            let flat = rewards.windows(2).all(|w| w[0] == w[1]);
            stats.groups_zero_variance += flat as usize;
            stats.groups_identical_nonzero += (flat && rewards.first().is_some_and(|&r| r != 0.0)) as usize;
            if !(filter && flat) && kept_groups.len() < opts.prompts {
                kept_groups.push(g);
            }
        }
        if !filter || kept_groups.len() >= opts.prompts {
            break;
        }
    }
    let n = sampled.len().max(1) as f64;
    stats.overlong_penalty_mean /= n;
    stats.extra_reward_mean /= n;
    stats.shaped_reward_mean = shaped.iter().sum::<f64>() / n;
    stats.groups_kept = kept_groups.len();

    // Advantages over the kept groups (truncated episodes included in the statistics).
    let keep: Vec<usize> = (0..sampled.len()).filter(|&i| kept_groups.contains(&sampled[i].group)).collect();
    let rewards: Vec<f64> = keep.iter().map(|&i| shaped[i]).collect();
    let group_ids: Vec<usize> = keep.iter().map(|&i| sampled[i].group).collect();
    let tokens: Vec<f64> = keep.iter().map(|&i| sampled[i].policy_tokens() as f64).collect();
    let input = AdvantageInput { rewards: &rewards, group_ids: &group_ids, response_tokens: Some(&tokens) };
    let all_advantages = advantage.advantages(&input)?;
    let mut train = Vec::with_capacity(keep.len());
    let mut advantages = Vec::with_capacity(keep.len());
    for (&i, a) in keep.iter().zip(all_advantages) {
        if opts.mask_truncated && sampled[i].stats.truncated {
            stats.masked_truncated += 1;
            continue;
        }
        train.push(sampled[i].clone());
        advantages.push(a);
        // An agent program's other branches train with the same advantage (as verifiers'
        // and rLLM's trajectory splitting).
        for branch in sampled[i].branch_episodes() {
            train.push(branch);
            advantages.push(a);
        }
    }
    Ok(StepBatch { sampled, infra_failed, train, advantages, rollout: rstats, stats })
}

pub(crate) fn merge(into: &mut RolloutStats, r: &RolloutStats) {
    into.episodes += r.episodes;
    into.generated_tokens += r.generated_tokens;
    into.generate_seconds += r.generate_seconds;
    into.env_seconds += r.env_seconds;
    into.seconds += r.seconds;
    into.truncated += r.truncated;
    into.prompt_tokens += r.prompt_tokens;
    into.prefill_tokens += r.prefill_tokens;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kl_penalty_sums_the_estimate_over_policy_tokens() {
        // Policy tokens at t = 1 and 3 (t = 0 has no context): k1 = (−1 − −1.5) + (−2 − −1) = −0.5.
        let e = Episode {
            ids: vec![5, 6, 7, 8],
            policy_mask: vec![true, true, false, true],
            sampler_logprobs: vec![0.0, -1.0, 0.0, -2.0],
            turn_ids: vec![0, 0, -1, 1],
            ..Episode::default()
        };
        let reference = vec![vec![9.0, -1.5, 9.0, -1.0]];
        let k1 = kl_penalty(std::slice::from_ref(&e), &reference, 0.1, KlEstimator::K1);
        assert!((k1[0] - 0.05).abs() < 1e-12, "{k1:?}");
        // k2 = ½(0.25 + 1) = 0.625 → −0.0625.
        let k2 = kl_penalty(std::slice::from_ref(&e), &reference, 0.1, KlEstimator::K2);
        assert!((k2[0] + 0.0625).abs() < 1e-12, "{k2:?}");
    }

    /// GRPO's group-normalized advantage (mean and population std per group).
    struct GroupNorm;
    impl AdvantageFn for GroupNorm {
        fn advantages(&self, input: &AdvantageInput<'_>) -> Result<Vec<f64>, arl_core::LossError> {
            let of =
                |g: usize| -> Vec<f64> { input.rewards.iter().zip(input.group_ids).filter(|(_, h)| **h == g).map(|(r, _)| *r).collect() };
            Ok(input
                .rewards
                .iter()
                .zip(input.group_ids)
                .map(|(r, g)| {
                    let rs = of(*g);
                    let mean = rs.iter().sum::<f64>() / rs.len() as f64;
                    let std = (rs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / rs.len() as f64).sqrt();
                    (r - mean) / (std + 1e-6)
                })
                .collect())
        }
    }

    fn episode(group: usize, reward: f64, tokens: usize, infra_failed: bool) -> Episode {
        Episode {
            task_id: format!("task-{group}"),
            group,
            ids: vec![1; tokens + 1],
            policy_mask: (0..=tokens).map(|t| t > 0).collect(),
            sampler_logprobs: vec![-0.5; tokens + 1],
            turn_ids: vec![0; tokens + 1],
            reward,
            stats: arl_core::EpisodeStats { infra_failed, ..Default::default() },
            ..Episode::default()
        }
    }

    #[test]
    fn an_episodes_branches_train_with_its_advantage_and_count_once_in_its_group() {
        let branch = |n: usize| arl_core::TokenStream {
            ids: vec![2; n + 1],
            policy_mask: (0..=n).map(|t| t > 0).collect(),
            sampler_logprobs: vec![-0.25; n + 1],
            turn_ids: (0..=n).map(|t| if t > 0 { 0 } else { -1 }).collect(),
        };
        let plain = vec![episode(0, 1.0, 3, false), episode(0, 0.0, 4, false), episode(0, 0.0, 5, false)];
        let mut forked = plain.clone();
        forked[0].branches = vec![branch(2), branch(6)];
        let opts = BatchOptions {
            prompts: 1,
            group_size: 3,
            max_sampling_attempts: 1,
            skip_zero_variance: false,
            mask_truncated: false,
            overlong: None,
        };
        let run = |episodes: &Vec<Episode>| {
            let mut source = |_: usize, _: usize, _: u32| Ok((episodes.clone(), RolloutStats::default()));
            collect_from(&mut source, &GroupNorm, &opts, None).unwrap()
        };
        let (a, b) = (run(&forked), run(&plain));
        // The group's statistics see three episodes either way.
        assert_eq!((a.stats.clone(), b.advantages.len()), (b.stats.clone(), 3));
        // The first episode's branches follow it, as episodes of its group, with its advantage.
        assert_eq!(a.train.len(), 5);
        assert_eq!(a.advantages, [b.advantages[0], b.advantages[0], b.advantages[0], b.advantages[1], b.advantages[2]]);
        assert_eq!((a.train[1].ids.len(), a.train[2].ids.len(), a.train[1].group, a.train[2].reward), (3, 7, 0, 1.0));
        assert!(a.train[1..3].iter().all(|e| e.branches.is_empty() && e.check().is_ok()));
    }

    #[test]
    fn an_infra_failed_episode_leaves_the_batch_as_if_never_sampled() {
        // Three groups; the lost episodes carry rewards that would change every statistic:
        // group 0 would have variance, group 1 would be all right, group 2 loses everyone.
        let with: Vec<Episode> = vec![
            episode(0, 0.0, 5, false),
            episode(0, 1.0, 9, true),
            episode(0, 0.0, 7, false),
            episode(1, 1.0, 4, false),
            episode(1, 0.0, 3, true),
            episode(1, 0.0, 6, false),
            episode(1, 1.0, 2, false),
            episode(2, 1.0, 2, true),
            episode(2, 0.0, 2, true),
        ];
        let without: Vec<Episode> = with.iter().filter(|e| !e.stats.infra_failed).cloned().collect();
        for skip_zero_variance in [false, true] {
            let opts = BatchOptions {
                prompts: 3,
                group_size: 3,
                max_sampling_attempts: 1,
                skip_zero_variance,
                mask_truncated: false,
                overlong: Some(Overlong { max_tokens: 8, buffer: 4, factor: 1.0 }),
            };
            let run = |episodes: &Vec<Episode>| {
                let mut source = |_: usize, _: usize, _: u32| Ok((episodes.clone(), RolloutStats::default()));
                let terms = |es: &[Episode]| Ok(es.iter().map(|e| -0.01 * e.policy_tokens() as f64).collect());
                collect_from(&mut source, &GroupNorm, &opts, Some(&terms)).unwrap()
            };
            let (a, b) = (run(&with), run(&without));
            assert_eq!(a.train, b.train);
            assert_eq!(
                a.advantages.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                b.advantages.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
            );
            assert_eq!(a.sampled, b.sampled);
            assert_eq!((a.stats.infra_failed, b.stats.infra_failed), (4, 0));
            assert_eq!(a.infra_failed.len(), 4);
            assert_eq!(a.stats, BatchStats { infra_failed: 4, ..b.stats.clone() }, "skip_zero_variance {skip_zero_variance}");
            // Group 0 is flat without its lost episode: it trains only when nothing is skipped.
            assert_eq!(a.train.iter().any(|e| e.group == 0), !skip_zero_variance);
        }
    }

    #[test]
    fn overlong_penalty_follows_dapo() {
        // L_max 20, L_cache 4, factor 1: free up to 16, then −(|y| − 16)/4, −1 from 20 on.
        let o = Overlong { max_tokens: 20, buffer: 4, factor: 1.0 };
        let got: Vec<f64> = [0, 16, 17, 18, 20, 25].iter().map(|&l| o.penalty(l)).collect();
        assert_eq!(got, vec![0.0, 0.0, -0.25, -0.5, -1.0, -1.0]);
        let half = Overlong { factor: 0.5, ..o };
        assert_eq!(half.penalty(18), -0.25);
        // No buffer: a cliff at L_max.
        let cliff = Overlong { buffer: 0, ..o };
        assert_eq!((cliff.penalty(20), cliff.penalty(21)), (0.0, -1.0));
    }
}
