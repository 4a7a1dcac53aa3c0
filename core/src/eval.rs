//! Evaluation statistics (SPEC.md §6): unbiased pass@k, task-level bootstrap intervals for
//! pass@1, and the paired before/after difference. Tasks are the independent units:
//! attempts within a task are correlated, so the bootstrap resamples tasks, never attempts.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::rng::SplitMix64;

/// Attempts and successes on one task.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TaskCount {
    /// The task's id ([`crate::Task::id`]); paired differences match tasks by it.
    pub task_id: String,
    /// The task's family ([`crate::Task::family`]).
    pub family: String,
    /// Attempts (episodes) counted; the evaluation leaves infrastructure failures out.
    pub n: u32,
    /// Attempts that solved the task ([`crate::Episode::solved`]), at most `n`.
    pub correct: u32,
}

impl TaskCount {
    /// The task's success rate c/n; 0 with no attempts.
    pub fn pass_at_1(&self) -> f64 {
        if self.n == 0 { 0.0 } else { self.correct as f64 / self.n as f64 }
    }
}

/// Unbiased pass@k (Chen et al. 2021): 1 − C(n−c, k)/C(n, k), in the stable product form
/// 1 − Π_{i=n−c+1}^{n} (1 − k/i); 1 when n − c < k. `None` when n < k or c > n (more successes than attempts).
pub fn pass_at_k(n: u32, c: u32, k: u32) -> Option<f64> {
    if n < k || c > n {
        return None;
    }
    if n - c < k {
        return Some(1.0);
    }
    let product: f64 = (n - c + 1..=n).map(|i| 1.0 - k as f64 / i as f64).product();
    Some(1.0 - product)
}

/// A two-sided interval at `level` (e.g. 0.95).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Interval {
    /// Lower bound: the (1 − level)/2 quantile.
    pub lo: f64,
    /// Upper bound: the (1 + level)/2 quantile.
    pub hi: f64,
    /// Coverage, in (0, 1).
    pub level: f64,
}

/// How intervals are bootstrapped.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Bootstrap {
    /// Number of resamples (10 000 by default).
    pub resamples: u32,
    /// Seed of the resampling; the same seed gives the same interval (the run's
    /// `trainer.seed` in `arl eval` and the trainer's held-out evaluation).
    pub seed: u64,
    /// Coverage of the intervals (0.95 by default).
    pub level: f64,
}

impl Default for Bootstrap {
    fn default() -> Self {
        Self { resamples: 10_000, seed: 0, level: 0.95 }
    }
}

/// pass@1 over tasks with its intervals.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PassSummary {
    /// Tasks summarized (the units of the bootstrap).
    pub tasks: usize,
    /// Attempts over all tasks (Σ n).
    pub episodes: u64,
    /// Solved attempts over all tasks (Σ c).
    pub correct: u64,
    /// Mean over tasks of c/n.
    pub pass_at_1: f64,
    /// Task-level percentile bootstrap interval.
    pub ci: Interval,
    /// Analytic standard error sqrt(Var_j(p_j)/T) (Miller 2024), for comparison.
    pub se: f64,
}

/// The paired before/after difference on the same tasks.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PairedDifference {
    /// Tasks paired.
    pub tasks: usize,
    /// Mean over tasks of p_after − p_before.
    pub mean: f64,
    /// Task-level percentile bootstrap interval of `mean`.
    pub ci: Interval,
    /// Two-sided bootstrap p-value: 2·min(P(d̄* ≤ 0), P(d̄* ≥ 0)), at most 1.
    pub p_value: f64,
    /// Analytic paired standard error sqrt(Var_j(d_j)/T).
    pub se: f64,
}

/// Summarize pass@1 over tasks. Tasks with no attempts are an error (they have no p).
pub fn summarize(counts: &[TaskCount], bootstrap: &Bootstrap) -> Result<PassSummary, String> {
    if let Some(t) = counts.iter().find(|t| t.n == 0) {
        return Err(format!("task {} has no attempts", t.task_id));
    }
    let p: Vec<f64> = counts.iter().map(TaskCount::pass_at_1).collect();
    let means = resample_means(&p, bootstrap);
    Ok(PassSummary {
        tasks: counts.len(),
        episodes: counts.iter().map(|t| t.n as u64).sum(),
        correct: counts.iter().map(|t| t.correct as u64).sum(),
        pass_at_1: mean(&p),
        ci: percentile_interval(means, bootstrap.level),
        se: standard_error(&p),
    })
}

/// Each task id once: the paired difference matches tasks by id, so a repeated id would pair
/// one task's episodes with another's. The error names the first repeated id.
pub fn distinct_task_ids<'a>(ids: impl IntoIterator<Item = &'a str>) -> Result<(), String> {
    let mut seen = std::collections::HashSet::new();
    match ids.into_iter().find(|id| !seen.insert(*id)) {
        Some(id) => Err(format!(
            "held-out task id {id:?} appears more than once; the before/after difference pairs tasks by id, so each \
             held-out task needs its own id (the env's held-out split repeats it)"
        )),
        None => Ok(()),
    }
}

/// Paired difference after − before, matching tasks by id. Both sides must hold the same
/// task ids, each once.
pub fn paired_difference(before: &[TaskCount], after: &[TaskCount], bootstrap: &Bootstrap) -> Result<PairedDifference, String> {
    if before.len() != after.len() {
        return Err(format!("before has {} tasks, after has {}", before.len(), after.len()));
    }
    distinct_task_ids(before.iter().map(|t| t.task_id.as_str()))?;
    distinct_task_ids(after.iter().map(|t| t.task_id.as_str()))?;
    let mut d = Vec::with_capacity(before.len());
    for b in before {
        let a = after.iter().find(|a| a.task_id == b.task_id).ok_or_else(|| format!("task {} missing after", b.task_id))?;
        if a.n == 0 || b.n == 0 {
            return Err(format!("task {} has no attempts", b.task_id));
        }
        d.push(a.pass_at_1() - b.pass_at_1());
    }
    let means = resample_means(&d, bootstrap);
    let r = means.len().max(1) as f64;
    let at_most_zero = means.iter().filter(|m| **m <= 0.0).count() as f64 / r;
    let at_least_zero = means.iter().filter(|m| **m >= 0.0).count() as f64 / r;
    Ok(PairedDifference {
        tasks: d.len(),
        mean: mean(&d),
        ci: percentile_interval(means, bootstrap.level),
        p_value: (2.0 * at_most_zero.min(at_least_zero)).min(1.0),
        se: standard_error(&d),
    })
}

fn mean(x: &[f64]) -> f64 {
    if x.is_empty() { 0.0 } else { x.iter().sum::<f64>() / x.len() as f64 }
}

/// sqrt(Var(x)/T) with the unbiased variance; 0 for fewer than two values.
fn standard_error(x: &[f64]) -> f64 {
    let t = x.len();
    if t < 2 {
        return 0.0;
    }
    let m = mean(x);
    let var = x.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / (t - 1) as f64;
    (var / t as f64).sqrt()
}

/// Means of `resamples` draws of len(x) values with replacement (seeded).
fn resample_means(x: &[f64], b: &Bootstrap) -> Vec<f64> {
    if x.is_empty() {
        return Vec::new();
    }
    let mut rng = SplitMix64(b.seed);
    let t = x.len() as u64;
    (0..b.resamples).map(|_| (0..t).map(|_| x[below(&mut rng, t) as usize]).sum::<f64>() / t as f64).collect()
}

/// Percentile interval with linear interpolation between order statistics (numpy's
/// default "linear" method).
fn percentile_interval(mut values: Vec<f64>, level: f64) -> Interval {
    if values.is_empty() {
        return Interval { lo: 0.0, hi: 0.0, level };
    }
    values.sort_by(f64::total_cmp);
    let alpha = (1.0 - level) / 2.0;
    Interval { lo: quantile(&values, alpha), hi: quantile(&values, 1.0 - alpha), level }
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    let pos = q * (sorted.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

/// Uniform in 0..n from `rng` (Lemire's multiply-shift; the bias is below 2^-40 for our n).
fn below(rng: &mut SplitMix64, n: u64) -> u64 {
    ((rng.next_u64() as u128 * n as u128) >> 64) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(id: &str, n: u32, correct: u32) -> TaskCount {
        TaskCount { task_id: id.into(), family: "f".into(), n, correct }
    }

    #[test]
    fn pass_at_k_matches_the_binomial_formula() {
        // 1 − C(7,5)/C(10,5) = 1 − 21/252, computed by hand.
        assert!((pass_at_k(10, 3, 5).unwrap() - (1.0 - 21.0 / 252.0)).abs() < 1e-12);
        assert!((pass_at_k(10, 3, 1).unwrap() - 0.3).abs() < 1e-12);
        // 1 − C(2,2)/C(4,2) = 1 − 1/6
        assert!((pass_at_k(4, 2, 2).unwrap() - 5.0 / 6.0).abs() < 1e-12);
        assert_eq!(pass_at_k(5, 3, 3), Some(1.0), "n − c < k");
        assert_eq!(pass_at_k(5, 0, 2), Some(0.0));
        assert_eq!(pass_at_k(2, 1, 3), None, "needs n ≥ k");
    }

    #[test]
    fn bootstrap_interval_is_close_to_the_normal_one_for_many_tasks() {
        // 200 tasks, half always solved: mean 0.5, SE = sqrt(0.25·200/199 / 200).
        let counts: Vec<_> = (0..200).map(|i| task(&i.to_string(), 4, if i % 2 == 0 { 4 } else { 0 })).collect();
        let s = summarize(&counts, &Bootstrap::default()).unwrap();
        assert_eq!((s.tasks, s.episodes, s.correct), (200, 800, 400));
        assert!((s.pass_at_1 - 0.5).abs() < 1e-12);
        let se = (0.25 * 200.0 / 199.0 / 200.0f64).sqrt();
        assert!((s.se - se).abs() < 1e-12);
        assert!((s.ci.lo - (0.5 - 1.96 * se)).abs() < 0.01, "{:?}", s.ci);
        assert!((s.ci.hi - (0.5 + 1.96 * se)).abs() < 0.01, "{:?}", s.ci);
    }

    #[test]
    fn bootstrap_is_seeded_and_degenerate_when_tasks_agree() {
        let counts = vec![task("a", 4, 1), task("b", 4, 3), task("c", 2, 0)];
        let b = Bootstrap { resamples: 500, seed: 3, level: 0.9 };
        assert_eq!(summarize(&counts, &b).unwrap(), summarize(&counts, &b).unwrap());
        let same = vec![task("a", 4, 2), task("b", 2, 1)];
        let s = summarize(&same, &b).unwrap();
        assert_eq!((s.ci.lo, s.ci.hi, s.se), (0.5, 0.5, 0.0));
    }

    #[test]
    fn paired_difference_of_identical_runs_is_zero_with_p_one() {
        let counts = vec![task("a", 4, 1), task("b", 4, 3)];
        let d = paired_difference(&counts, &counts, &Bootstrap::default()).unwrap();
        assert_eq!((d.mean, d.ci.lo, d.ci.hi, d.p_value), (0.0, 0.0, 0.0, 1.0));
    }

    #[test]
    fn paired_difference_matches_tasks_by_id_and_detects_a_uniform_gain() {
        let before = vec![task("a", 4, 0), task("b", 4, 1), task("c", 4, 2)];
        let after = vec![task("c", 4, 3), task("a", 4, 1), task("b", 4, 2)];
        let d = paired_difference(&before, &after, &Bootstrap::default()).unwrap();
        assert!((d.mean - 0.25).abs() < 1e-12);
        assert_eq!((d.ci.lo, d.ci.hi), (0.25, 0.25));
        assert_eq!(d.p_value, 0.0);
    }

    /// A repeated id would pair one task's episodes with another's (the first `a` after
    /// matched both `a`s before): refused, naming the id.
    #[test]
    fn a_repeated_task_id_is_refused_naming_it() {
        let want = "held-out task id \"a\" appears more than once; the before/after difference pairs tasks by id, so each \
                    held-out task needs its own id (the env's held-out split repeats it)";
        let twice = vec![task("a", 4, 0), task("a", 4, 4)];
        let swapped = vec![task("a", 4, 4), task("a", 4, 0)];
        assert_eq!(paired_difference(&twice, &swapped, &Bootstrap::default()).unwrap_err(), want);
        let once = vec![task("a", 4, 0), task("b", 4, 4)];
        assert_eq!(paired_difference(&once, &twice, &Bootstrap::default()).unwrap_err(), want);
        assert_eq!(distinct_task_ids(["b", "a", "c", "a", "b"]).unwrap_err(), want, "the first id seen twice");
        distinct_task_ids(["a", "b"]).unwrap();
    }

    #[test]
    fn mismatched_task_sets_are_errors() {
        let before = vec![task("a", 4, 0)];
        assert!(paired_difference(&before, &[task("b", 4, 0)], &Bootstrap::default()).is_err());
        assert!(paired_difference(&before, &[], &Bootstrap::default()).is_err());
        assert!(summarize(&[task("z", 0, 0)], &Bootstrap::default()).is_err());
    }
}
