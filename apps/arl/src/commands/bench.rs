//! `arl bench gen|score|sandbox`: throughput benchmarks (not tests). Each prints one JSON line
//! (`sandbox`: see bench_sandbox.rs).
//! - `gen`: random prompts, temperature-1 sampling with the KV cache, every row generating
//!   exactly `--new-tokens` (stop ids disabled); prefill and decode tokens/s.
//! - `score`: forward + backward + AdamW step of a clipped policy-gradient loss with the LM
//!   head on the last `policy_frac · seq_len` positions only, on an autodiff device;
//!   `tokens_per_s` = batch · seq_len per step; `--lora` trains adapters on a frozen base.

use std::io::Write;
use std::time::Instant;

use arl_core::policy::SamplingParams;
use arl_qwen3::{DispatchQwen3, sample, score};
use burn::optim::{AdamWConfig, GradientsParams, Optimizer};
use burn::tensor::{Tensor, TensorData};
use burn::{CheckpointingStrategy, Dispatch, DispatchDevice};
use serde_json::json;

use super::ModelArgs;

#[derive(Debug, clap::Subcommand)]
pub enum Bench {
    /// Sampling throughput with the KV cache.
    Gen(BenchGen),
    /// Training-step throughput (forward, backward, AdamW).
    Score(BenchScore),
    /// Jobs/s and cold first-job latency of each sandbox (trivial and grading jobs).
    Sandbox(super::bench_sandbox::BenchSandbox),
}

#[derive(Debug, clap::Args)]
pub struct BenchGen {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Rows decoded together.
    #[arg(long, default_value_t = 8)]
    pub batch: usize,
    /// Random prompt tokens per row.
    #[arg(long, default_value_t = 64)]
    pub prompt_len: usize,
    /// Tokens generated per row (≥ 2; stop ids are disabled).
    #[arg(long, default_value_t = 64)]
    pub new_tokens: usize,
    /// Seed of the random prompts and the sampler.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

#[derive(Debug, clap::Args)]
pub struct BenchScore {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Rows per step.
    #[arg(long, default_value_t = 4)]
    pub batch: usize,
    /// Tokens per row (≥ 2).
    #[arg(long, default_value_t = 256)]
    pub seq_len: usize,
    /// Fraction of each sequence (its end) that is policy tokens, scored through the LM head.
    #[arg(long, default_value_t = 0.5)]
    pub policy_frac: f64,
    /// Measured steps (after one warm-up step).
    #[arg(long, default_value_t = 3)]
    pub steps: usize,
    /// Seed of the random sequences.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Recompute activations in the backward pass (burn's balanced checkpointing), as
    /// `trainer.gradient_checkpointing` does; compare `peak_rss_mb` with and without.
    #[arg(long)]
    pub gradient_checkpointing: bool,
    /// Train LoRA adapters (rank --lora-rank, alpha = rank, every linear layer) on the frozen
    /// base instead of every weight; compare `step_s` and `peak_rss_mb` with and without.
    #[arg(long)]
    pub lora: bool,
    /// Rank of the --lora adapters.
    #[arg(long, default_value_t = 16, requires = "lora", value_parser = clap::value_parser!(u32).range(1..))]
    pub lora_rank: u32,
}

/// (all parameters, trainable parameters) of a model on an autodiff device.
fn param_counts(model: &DispatchQwen3) -> (usize, usize) {
    use burn::module::{Module, ModuleVisitor, Param};
    struct Count(usize, usize);
    impl ModuleVisitor<Dispatch> for Count {
        fn visit_float<const D: usize>(&mut self, p: &Param<Tensor<Dispatch, D>>) {
            let n = p.shape().num_elements();
            self.0 += n;
            if p.val().is_require_grad() {
                self.1 += n;
            }
        }
    }
    let mut c = Count(0, 0);
    model.visit(&mut c);
    (c.0, c.1)
}

/// Deterministic random token ids (splitmix64), no RNG crate needed.
pub(crate) fn random_ids(rows: usize, len: usize, vocab: usize, seed: u64) -> Vec<Vec<u32>> {
    let mut s = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut next = move || {
        s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = s;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    (0..rows).map(|_| (0..len).map(|_| (next() % vocab as u64) as u32).collect()).collect()
}

impl Bench {
    pub fn execute(self, out: &mut dyn Write) -> anyhow::Result<()> {
        match self {
            Bench::Gen(b) => b.execute(out),
            Bench::Score(b) => b.execute(out),
            Bench::Sandbox(b) => b.execute(out),
        }
    }
}

impl BenchGen {
    pub fn execute(self, out: &mut dyn Write) -> anyhow::Result<()> {
        if !(self.batch > 0 && self.prompt_len > 0 && self.new_tokens > 1) {
            return Err(crate::usage!("--batch, --prompt-len must be ≥ 1 and --new-tokens ≥ 2"));
        }
        let device = self.model.device()?;
        let model = self.model.load_on(&device)?;
        let prompts = random_ids(self.batch, self.prompt_len, model.config.vocab_size, self.seed);
        let params = SamplingParams { max_new_tokens: self.new_tokens, seed: self.seed, stop_ids: Some(vec![]), ..Default::default() };
        let (gens, t) = sample::generate_timed(&model, &prompts, &params)?;
        anyhow::ensure!(gens.iter().all(|g| g.ids.len() == self.new_tokens), "a row stopped early");
        let doc = json!({
            "bench": "gen",
            "model": self.model.model,
            "backend": self.model.backend,
            "dtype": self.model.device.dtype,
            "batch": self.batch,
            "prompt_len": self.prompt_len,
            "new_tokens": self.new_tokens,
            "prefill_s": t.prefill_s,
            "decode_s": t.decode_s,
            "prefill_tokens_per_s": (self.batch * self.prompt_len) as f64 / t.prefill_s,
            "decode_tokens_per_s": t.decode_tokens as f64 / t.decode_s,
        });
        writeln!(out, "{doc}")?;
        Ok(())
    }
}

impl BenchScore {
    pub fn execute(self, out: &mut dyn Write) -> anyhow::Result<()> {
        let (b, l) = (self.batch, self.seq_len);
        if !(b > 0 && l > 1) {
            return Err(crate::usage!("--batch must be ≥ 1 and --seq-len ≥ 2"));
        }
        if !(self.policy_frac > 0.0 && self.policy_frac <= 1.0) {
            return Err(crate::usage!("--policy-frac must be in (0, 1], got {}", self.policy_frac));
        }
        let strategy = if self.gradient_checkpointing { CheckpointingStrategy::Balanced } else { CheckpointingStrategy::None };
        let device = DispatchDevice::autodiff_checkpointed(self.model.device()?, strategy);
        let mut model: DispatchQwen3 = self.model.load_on(&device)?;
        let lora = self.lora.then(|| arl_core::config::LoraConfig {
            rank: self.lora_rank,
            alpha: self.lora_rank as f64,
            ..arl_core::config::LoraConfig::default()
        });
        if let Some(config) = &lora {
            // As a LoRA run: the base frozen (no gradients, no AdamW moments), f32 adapters.
            model = burn::module::Module::no_grad(model);
            model.attach_lora(config, self.seed)?;
        }
        let (total_params, trainable_params) = param_counts(&model);
        let mut optim = AdamWConfig::new().init::<Dispatch, DispatchQwen3>();
        let n_pol = ((self.policy_frac * l as f64).round() as usize).clamp(1, l - 1);
        let positions: Vec<Vec<usize>> = (0..b).map(|_| (l - n_pol..l).collect()).collect();
        let mask: Vec<f32> = (0..b).flat_map(|_| (0..l).map(|t| if t >= l - n_pol { 1.0 } else { 0.0 })).collect();
        let mut times = Vec::new();
        for step in 0..=self.steps {
            let seqs = random_ids(b, l, model.config.vocab_size, self.seed + step as u64);
            let adv: Vec<f32> = seqs.iter().flat_map(|s| s.iter().map(|&id| if id % 2 == 0 { 1.0 } else { -1.0 })).collect();
            let start = Instant::now();
            let lp = score::score(&model, &seqs, Some(&positions), Default::default())?.logprobs;
            let mask = Tensor::<Dispatch, 2>::from_data(TensorData::new(mask.clone(), [b, l]), &device);
            let adv = Tensor::<Dispatch, 2>::from_data(TensorData::new(adv, [b, l]), &device);
            let ratio = (lp.clone() - lp.detach()).exp();
            let surrogate = (ratio.clone() * adv.clone()).min_pair(ratio.clamp(0.8, 1.2) * adv);
            let loss = (surrogate * mask.clone()).sum().neg() / mask.sum();
            let grads = GradientsParams::from_grads(loss.backward(), &model);
            model = optim.step(1e-6, model, grads);
            // Flex runs eagerly; reading a trained weight back makes the timing include the update.
            match &model.layers[0].self_attn.q_proj.lora {
                Some(adapter) => drop(adapter.b.val().into_data()),
                None => drop(model.norm.weight.val().into_data()),
            }
            if step > 0 {
                times.push(start.elapsed().as_secs_f64());
            }
        }
        let step_s = times.iter().sum::<f64>() / times.len().max(1) as f64;
        // The median resists a noisy neighbour on a shared machine better than the mean.
        let mut sorted = times.clone();
        sorted.sort_by(f64::total_cmp);
        let step_s_median = if sorted.is_empty() { 0.0 } else { (sorted[(sorted.len() - 1) / 2] + sorted[sorted.len() / 2]) / 2.0 };
        let doc = json!({
            "bench": "score",
            "model": self.model.model,
            "backend": self.model.backend,
            "dtype": self.model.device.dtype,
            "batch": b,
            "seq_len": l,
            "policy_frac": self.policy_frac,
            "policy_tokens_per_row": n_pol,
            "steps": times.len(),
            "step_s": step_s,
            "step_s_median": step_s_median,
            "tokens_per_s": (b * l) as f64 / step_s,
            "gradient_checkpointing": self.gradient_checkpointing,
            "lora_rank": lora.as_ref().map(|l| l.rank),
            "params": total_params,
            "trainable_params": trainable_params,
            // The whole process's peak resident memory (host memory; the model's on the CPU).
            "peak_rss_mb": arl_core::train::metrics::peak_rss_mb(),
        });
        writeln!(out, "{doc}")?;
        Ok(())
    }
}
