//! Per-step metrics: one JSON object per step in `metrics.jsonl`, one console line.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use arl_core::Episode;

/// Everything measured in one training step.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StepMetrics {
    /// 1-based step number.
    pub step: u32,
    /// The learning rate of this step's optimizer steps.
    pub lr: f64,
    /// Episodes sampled this step (all rollout rounds).
    pub episodes: usize,
    pub reward_mean: f64,
    /// Fraction of episodes solved ([`Episode::solved`]: reward 1, or the env's correctness
    /// component where the reward is weighted).
    pub pass_rate: f64,
    /// Each component of a weighted reward (the dataset env's `rewards`), its mean score over
    /// the step's episodes, before its weight; absent for a single reward.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub rewards: BTreeMap<String, f64>,
    /// Fraction of sampled groups whose rewards were all equal (no learning signal).
    pub zero_variance_groups: f64,
    /// Fraction of sampled groups left out of the update (zero-variance skip, dynamic
    /// sampling's surplus).
    pub zero_variance_skipped: f64,
    /// Fraction of sampled groups whose rewards were all equal and not 0 (Together's
    /// identical-nonzero-reward ratio: the tasks the policy has outgrown).
    #[serde(default)]
    pub identical_nonzero_groups: f64,
    /// Episodes dropped for length: their prompt exceeded `sampling.max_prompt_tokens`, so
    /// they ended before their first turn (finish `prompt_budget`).
    #[serde(default)]
    pub prompts_over_budget: usize,
    /// Rollout rounds this step (dynamic sampling resamples).
    pub sampling_attempts: u32,
    /// Mean reward after overlong shaping (equals `reward_mean` without shaping).
    pub shaped_reward_mean: f64,
    pub overlong_penalty_mean: f64,
    /// Mean KL-in-reward term −β·Σ_t k (with `loss.kl_placement = "reward"`; else 0).
    pub kl_reward_mean: f64,
    /// Truncated episodes left out of the loss (`mask_truncated`).
    pub masked_truncated: usize,
    pub loss: f64,
    /// Mean next-token entropy of the policy over the step's policy tokens, before the update.
    pub entropy: Option<f64>,
    /// Mean k3 estimate of KL(π_θ‖π_ref) over the step's policy tokens, before the update
    /// (with a reference policy: `loss.kl_coef > 0`).
    pub ref_kl: Option<f64>,
    /// Fraction of policy tokens clipped at 1 + clip_high (positive advantage).
    pub clip_frac_high: f64,
    /// Fraction of policy tokens clipped at 1 − clip_low (negative advantage).
    pub clip_frac_low: f64,
    /// Mean π_θ/π_old over the tokens that reached the loss; null when none did (every
    /// row had advantage 0, or the step's updates were skipped).
    pub ratio_mean: Option<f64>,
    /// Mean global gradient norm (before clipping) of the step's optimizer steps.
    pub grad_norm: f64,
    /// |sampler logprob − trainer recomputation| before the update, over policy tokens.
    pub logprob_gap_mean: f64,
    pub logprob_gap_max: f64,
    /// Episodes that ended on the turn or token budget rather than a final answer.
    pub truncated_frac: f64,
    /// Mean and largest number of tokens the policy generated per episode (all turns).
    #[serde(default)]
    pub response_tokens_mean: f64,
    #[serde(default)]
    pub response_tokens_max: usize,
    /// How the step's episodes ended, counted by reason (`done`, `length`, `max_turns`, …).
    #[serde(default)]
    pub finish: BTreeMap<String, usize>,
    /// Optimizer steps skipped because a loss or gradient was NaN or infinite (weights
    /// unchanged by them).
    #[serde(default)]
    pub non_finite_updates: u32,
    pub malformed_call_rate: f64,
    pub failed_call_rate: f64,
    pub policy_tokens: usize,
    /// Per episode: prompt tokens handed to the sampler over all turns, and those it ran
    /// through the model (the rest came from its KV cache).
    #[serde(default)]
    pub prompt_tokens_per_episode: f64,
    #[serde(default)]
    pub prefill_tokens_per_episode: f64,
    pub generate_tokens_per_s: f64,
    pub update_tokens_per_s: f64,
    /// Where the step's time went: the rollout (`rollout_seconds`), of it the sampler's
    /// decoding (`generate_seconds`) and the env (`env_seconds`: tool calls, the sandbox's jobs,
    /// grading); the update (`update_seconds`), of it the no-grad scoring pass
    /// (`scoring_seconds`: old log-probabilities and the pre-update metrics); the checkpoint
    /// written after the step (`checkpoint_seconds`, 0 when none was); handing the new
    /// weights to the samplers (`publish_seconds`: rollout workers' `dist/weights/v{N}`, the
    /// async sampler's snapshot; 0 in a lockstep run in one process).
    pub rollout_seconds: f64,
    #[serde(default)]
    pub generate_seconds: f64,
    #[serde(default)]
    pub env_seconds: f64,
    pub update_seconds: f64,
    #[serde(default)]
    pub scoring_seconds: f64,
    #[serde(default)]
    pub checkpoint_seconds: f64,
    #[serde(default)]
    pub publish_seconds: f64,
    pub step_seconds: f64,
    /// The process's peak resident memory so far, MiB (getrusage; unix). On a GPU device
    /// this is host memory only: burn 0.21 exposes no device-memory statistic through
    /// `Dispatch`.
    pub peak_rss_mb: Option<f64>,
    /// Jobs the sandbox could not start because the host ran short (disk, inodes, memory);
    /// each cost its episode the reward (counter `sandbox_exhausted`).
    #[serde(default)]
    pub sandbox_exhausted: u64,
    /// Episodes lost to infrastructure failures (the sandbox could not start a job, the grading
    /// harness died first, an env process crashed or hung): left out of the rewards above, the
    /// groups' statistics and the loss.
    #[serde(default)]
    pub infra_failed: usize,
    /// The step's training tasks, in the order drawn (every rollout round).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tasks: Vec<String>,
    /// The difficulty sampler's pools when the step began drawing (`trainer.task_sampler =
    /// "difficulty"`; absent with `uniform`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pools: Option<super::curriculum::PoolSizes>,
    /// Async off-policy training's waits, drops, staleness and groups in flight (with
    /// `trainer.max_steps_off_policy`; absent in lockstep).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub off_policy: Option<super::offpolicy::OffPolicyMetrics>,
    /// Rollout rounds issued again this step because their worker lost its lease
    /// (`cluster.launcher = "procs"`; 0 in-process).
    #[serde(default)]
    pub rounds_retried: usize,
    /// Rollout workers whose heartbeat went stale this step while they held a round.
    #[serde(default)]
    pub workers_lost: usize,
}

impl StepMetrics {
    /// The console line: labelled, `step k/N`, learning rate, time per step, elapsed and the
    /// time left (`eta`, from the mean step time of this process); everything else is in
    /// `metrics.jsonl`.
    pub fn console_line(&self, total_steps: u32, elapsed_s: f64, eta_s: Option<f64>) -> String {
        let mut line = format!("step {}/{total_steps}  reward {:.3}", self.step, self.reward_mean);
        if !self.rewards.is_empty() {
            // The weighted reward's components, compact: `(hash 0.250 format-hash 0.800)`.
            let parts: Vec<String> = self.rewards.iter().map(|(k, v)| format!("{k} {v:.3}")).collect();
            line += &format!(" ({})", parts.join(" "));
        }
        line += &format!("  pass {:.3}  loss {:+.4}  grad_norm {:.3}  lr {:.2e}", self.pass_rate, self.loss, self.grad_norm, self.lr);
        match self.ratio_mean {
            Some(_) => line += &format!("  clip_frac {:.3}", self.clip_frac_low + self.clip_frac_high),
            None => line += "  clip_frac -",
        }
        if let Some(h) = self.entropy {
            line += &format!("  entropy {h:.3}");
        }
        if let Some(kl) = self.ref_kl {
            line += &format!("  kl {kl:.2e}");
        }
        line += &format!(
            "  logprob_gap {:.1e}  response_len {:.1}  truncated {:.2}  zero_var_groups {:.2}  time {}  elapsed {}",
            self.logprob_gap_mean,
            self.response_tokens_mean,
            self.truncated_frac,
            self.zero_variance_groups,
            duration(self.step_seconds),
            duration(elapsed_s),
        );
        if let Some(eta) = eta_s {
            line += &format!("  eta {}", duration(eta));
        }
        if let Some(a) = &self.off_policy {
            let stale = a.staleness.keys().next_back().copied().unwrap_or(0);
            line += &format!("  staleness ≤{stale}  dropped_stale {}  train_wait {}", a.dropped_stale_groups, duration(a.train_wait_s));
        }
        if let Some(p) = &self.pools {
            line += &format!("  pools unseen/hard/learning/easy {}/{}/{}/{}", p.unseen, p.too_hard, p.learning, p.too_easy);
        }
        if self.infra_failed > 0 {
            line += &format!("  infra_failed {}", self.infra_failed);
        }
        if self.sandbox_exhausted > 0 {
            line += &format!("  sandbox_exhausted {}", self.sandbox_exhausted);
        }
        line
    }
}

/// `0.4s`, `12.3s`, `4m05s`, `1h02m`: seconds at a glance.
pub fn duration(secs: f64) -> String {
    if !secs.is_finite() || secs < 0.0 {
        return "?".into();
    }
    if secs < 60.0 {
        return format!("{secs:.1}s");
    }
    let s = secs.round() as u64;
    if s < 3600 { format!("{}m{:02}s", s / 60, s % 60) } else { format!("{}h{:02}m", s / 3600, (s % 3600) / 60) }
}

/// Add an episode's counters (turns, tool calls, malformed and failed calls, truncation, the
/// env's own) into `into`.
/// The mean score of each reward component ([`arl_core::EpisodeStats::rewards`]) over the
/// episodes that recorded it; empty when none did.
pub fn reward_components<'a>(episodes: impl IntoIterator<Item = &'a Episode>) -> BTreeMap<String, f64> {
    let mut sums: BTreeMap<String, (f64, usize)> = BTreeMap::new();
    for e in episodes {
        for (k, v) in &e.stats.rewards {
            let s = sums.entry(k.clone()).or_default();
            s.0 += v;
            s.1 += 1;
        }
    }
    sums.into_iter().map(|(k, (sum, n))| (k, sum / n as f64)).collect()
}

pub fn sum_counters(into: &mut BTreeMap<String, u64>, e: &Episode) {
    let s = &e.stats;
    for (k, v) in
        [("turns", s.turns), ("tool_calls", s.tool_calls), ("malformed_calls", s.malformed_calls), ("failed_calls", s.failed_calls)]
    {
        *into.entry(k.to_string()).or_default() += v as u64;
    }
    *into.entry("truncated_episodes".to_string()).or_default() += s.truncated as u64;
    for (k, v) in &s.counters {
        *into.entry(k.clone()).or_default() += v;
    }
}

/// Jobs of these episodes that the sandbox could not start for want of host resources.
pub fn sandbox_exhausted(episodes: &[arl_core::Episode]) -> u64 {
    episodes.iter().filter_map(|e| e.stats.counters.get(arl_core::SANDBOX_EXHAUSTED)).sum()
}

/// The process's peak resident set size in MiB (`getrusage(RUSAGE_SELF)`), where the OS
/// reports it.
pub fn peak_rss_mb() -> Option<f64> {
    #[cfg(unix)]
    {
        let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
        // SAFETY: getrusage writes a `rusage` into the pointer it is given.
        let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) };
        if rc != 0 {
            return None;
        }
        // SAFETY: rc == 0, so the struct was written.
        let max = unsafe { usage.assume_init() }.ru_maxrss as f64;
        // Linux reports KiB, macOS bytes.
        let bytes = if cfg!(target_os = "macos") { max } else { max * 1024.0 };
        Some(bytes / (1024.0 * 1024.0))
    }
    #[cfg(not(unix))]
    {
        None
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn exhausted_sandbox_jobs_are_summed_over_the_step() {
        let mut a = arl_core::Episode::default();
        a.stats.bump(arl_core::SANDBOX_EXHAUSTED);
        a.stats.bump(arl_core::SANDBOX_EXHAUSTED);
        let mut b = arl_core::Episode::default();
        b.stats.bump("edits");
        assert_eq!(super::sandbox_exhausted(&[a, b, arl_core::Episode::default()]), 2);
        let m = super::StepMetrics { sandbox_exhausted: 2, ..Default::default() };
        let line = m.console_line(1, 0.0, None);
        assert!(line.ends_with("sandbox_exhausted 2"), "{line}");
        assert!(!super::StepMetrics::default().console_line(1, 0.0, None).contains("sandbox_exhausted"));
    }

    #[test]
    fn peak_rss_is_reported_and_plausible() {
        let mb = super::peak_rss_mb().expect("unix reports it");
        assert!(mb > 1.0 && mb < 1e6, "{mb}");
    }

    #[test]
    fn durations_read_at_a_glance() {
        for (secs, want) in [(0.0, "0.0s"), (2.94, "2.9s"), (59.9, "59.9s"), (62.0, "1m02s"), (3725.0, "1h02m"), (f64::NAN, "?")] {
            assert_eq!(super::duration(secs), want);
        }
    }

    #[test]
    fn the_console_line_is_labelled_with_step_of_total_lr_and_time_left() {
        let m = super::StepMetrics {
            step: 3,
            lr: 1e-5,
            reward_mean: 0.5,
            pass_rate: 0.25,
            loss: 0.0123,
            grad_norm: 0.84,
            ratio_mean: None,
            response_tokens_mean: 45.25,
            step_seconds: 2.9,
            ..Default::default()
        };
        let line = m.console_line(20, 62.0, Some(250.0));
        assert_eq!(
            line,
            "step 3/20  reward 0.500  pass 0.250  loss +0.0123  grad_norm 0.840  lr 1.00e-5  clip_frac -  logprob_gap 0.0e0  \
             response_len 45.2  truncated 0.00  zero_var_groups 0.00  time 2.9s  elapsed 1m02s  eta 4m10s"
        );
    }

    /// Issue #49: each component of a weighted reward, its mean per step, in `metrics.jsonl`
    /// and compactly on the console line; the pass rate is the correctness component's.
    #[test]
    fn reward_components_are_averaged_per_step_and_shown_compactly() {
        let episode = |hash: f64, format: f64| {
            let mut e = arl_core::Episode { reward: hash + 2.0 * format, ..Default::default() };
            e.stats.rewards = [("hash".to_string(), hash), ("format-hash".to_string(), format)].into();
            e.stats.solved = Some(hash >= 1.0);
            e
        };
        let episodes = [episode(1.0, 1.0), episode(0.0, 1.0), episode(0.0, 0.5), episode(0.0, 0.0)];
        let means = super::reward_components(&episodes);
        assert_eq!(means, [("format-hash".to_string(), 0.625), ("hash".to_string(), 0.25)].into());
        assert_eq!(episodes.iter().filter(|e| e.solved()).count(), 1, "format credit alone (reward 2) is not solved");
        assert!(super::reward_components(&[arl_core::Episode::default()]).is_empty());
        let m = super::StepMetrics { step: 1, rewards: means, ..Default::default() };
        let line = m.console_line(2, 0.0, None);
        assert!(line.starts_with("step 1/2  reward 0.000 (format-hash 0.625 hash 0.250)  pass 0.000"), "{line}");
        let json = serde_json::to_value(&m).unwrap();
        assert_eq!(json["rewards"]["hash"], 0.25);
        assert!(serde_json::to_value(super::StepMetrics::default()).unwrap().get("rewards").is_none(), "absent for one reward");
    }
}
