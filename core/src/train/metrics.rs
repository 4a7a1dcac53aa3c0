//! Per-step metrics: one JSON object per step in `metrics.jsonl`, one console line.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Everything measured in one training step.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StepMetrics {
    pub step: u32,
    pub lr: f64,
    pub episodes: usize,
    pub reward_mean: f64,
    /// Fraction of episodes with reward 1.
    pub pass_rate: f64,
    /// Fraction of sampled groups whose rewards were all equal (no learning signal).
    pub zero_variance_groups: f64,
    /// Fraction of sampled groups left out of the update (zero-variance skip, dynamic
    /// sampling's surplus).
    pub zero_variance_skipped: f64,
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
    pub clip_frac_high: f64,
    pub clip_frac_low: f64,
    pub ratio_mean: f64,
    pub grad_norm: f64,
    /// |sampler logprob − trainer recomputation| before the update, over policy tokens.
    pub logprob_gap_mean: f64,
    pub logprob_gap_max: f64,
    /// Episodes that ended on the turn or token budget rather than a final answer.
    pub truncated_frac: f64,
    pub malformed_call_rate: f64,
    pub failed_call_rate: f64,
    pub policy_tokens: usize,
    pub generate_tokens_per_s: f64,
    pub update_tokens_per_s: f64,
    pub rollout_seconds: f64,
    pub update_seconds: f64,
    pub step_seconds: f64,
    /// The process's peak resident memory so far, MiB (getrusage; unix). On a GPU device
    /// this is host memory only: burn 0.21 exposes no device-memory statistic through
    /// `Dispatch`.
    pub peak_rss_mb: Option<f64>,
    /// Jobs the sandbox could not start because the host ran short (disk, inodes, memory);
    /// each cost its episode the reward (counter `sandbox_exhausted`).
    #[serde(default)]
    pub sandbox_exhausted: u64,
}

impl StepMetrics {
    /// The console line.
    pub fn line(&self) -> String {
        let mut extra = String::new();
        if let Some(h) = self.entropy {
            extra += &format!("  ent {h:.3}");
        }
        if let Some(kl) = self.ref_kl {
            extra += &format!("  kl {kl:.1e}");
        }
        if let Some(mb) = self.peak_rss_mb {
            extra += &format!("  rss {mb:.0} MiB");
        }
        if self.sandbox_exhausted > 0 {
            extra += &format!("  sandbox-exhausted {}", self.sandbox_exhausted);
        }
        let line = format!(
            "step {:>3}  reward {:.3}  pass {:.3}  zero-var {:.2} (skipped {:.2}, {} rounds)  loss {:+.4}  clip {:.3}/{:.3}  gap {:.1e}/{:.1e}  \
             gnorm {:.3}  trunc {:.2}  malformed {:.2}  gen {:.0} tok/s  upd {:.0} tok/s  {:.1}s",
            self.step,
            self.reward_mean,
            self.pass_rate,
            self.zero_variance_groups,
            self.zero_variance_skipped,
            self.sampling_attempts,
            self.loss,
            self.clip_frac_low,
            self.clip_frac_high,
            self.logprob_gap_mean,
            self.logprob_gap_max,
            self.grad_norm,
            self.truncated_frac,
            self.malformed_call_rate,
            self.generate_tokens_per_s,
            self.update_tokens_per_s,
            self.step_seconds,
        );
        line + &extra
    }
}

/// Jobs of these episodes that the sandbox could not start for want of host resources.
pub fn sandbox_exhausted(episodes: &[crate::Episode]) -> u64 {
    episodes.iter().filter_map(|e| e.stats.counters.get(crate::SANDBOX_EXHAUSTED)).sum()
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
        let mut a = crate::Episode::default();
        a.stats.bump(crate::SANDBOX_EXHAUSTED);
        a.stats.bump(crate::SANDBOX_EXHAUSTED);
        let mut b = crate::Episode::default();
        b.stats.bump("edits");
        assert_eq!(super::sandbox_exhausted(&[a, b, crate::Episode::default()]), 2);
        let m = super::StepMetrics { sandbox_exhausted: 2, ..Default::default() };
        assert!(m.line().ends_with("sandbox-exhausted 2"), "{}", m.line());
        assert!(!super::StepMetrics::default().line().contains("sandbox-exhausted"));
    }

    #[test]
    fn peak_rss_is_reported_and_plausible() {
        let mb = super::peak_rss_mb().expect("unix reports it");
        assert!(mb > 1.0 && mb < 1e6, "{mb}");
    }
}
