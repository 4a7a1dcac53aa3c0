//! `arl bench gen|score|export|sandbox`: throughput benchmarks (not tests). Each prints one JSON
//! line (`sandbox`: see bench_sandbox.rs).
//! - `gen`: random prompts, temperature-1 sampling with the KV cache, every row generating
//!   exactly `--new-tokens` (stop ids disabled), after `--warmup` untimed calls of the same
//!   length (so a GPU backend has compiled and tuned its kernels for every KV length the timed
//!   call reaches); prefill and decode tokens/s, and new tokens/s over the whole call.
//! - `ops`: the device's cost of one launch: `--adds` element-wise adds on `[rows, 1024]`,
//!   then `--matmuls` `[rows, 1024] × [1024, 3072]` products, each batch ended by one read;
//!   µs per op (whether fewer launches or faster kernels matter more).
//! - `score`: one training step as the trainer takes it ([`QwenTrainer`]: scoring with
//!   gradients, backward, global gradient-norm clip at 1, AdamW) of a clipped policy-gradient
//!   loss with the LM head on the last `policy_frac · seq_len` positions only;
//!   `tokens_per_s` = batch · seq_len per step. The first (warm-up) step's loss and gradient
//!   norm are printed too, so a peer implementation of the same step can be checked against it;
//!   `--lora` trains adapters on a frozen base (as a LoRA run: `TrainSetup::lora`).
//! - `export`: the model (a preset's seeded random weights) as an HF directory, so a peer
//!   benchmark (`scripts/bench/peer.py`) runs exactly the same weights.

use std::io::Write;
use std::time::Instant;

use arl_core::policy::{SamplingParams, ScoreParams, TrainablePolicy};
use arl_optim::OptimConfig;
use arl_qwen3::{QwenTrainer, TrainSetup, sample};
use burn::Dispatch;
use burn::tensor::{Tensor, TensorData};
use serde_json::json;

use super::ModelArgs;

#[derive(Debug, clap::Subcommand)]
pub enum Bench {
    /// Sampling throughput with the KV cache.
    Gen(BenchGen),
    /// Microseconds per launch of a trivial op and of a decode-sized matmul on the device.
    Ops(BenchOps),
    /// Training-step throughput (forward, backward, AdamW).
    Score(BenchScore),
    /// Write the model (a preset's random weights) as an HF directory for a peer benchmark.
    Export(BenchExport),
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
    /// Untimed calls first, each the timed call itself (same prompts and length).
    #[arg(long, default_value_t = 1)]
    pub warmup: usize,
}

#[derive(Debug, clap::Args)]
pub struct BenchOps {
    /// cpu | cuda | tch | tch-cuda (`arl list` shows those compiled in).
    #[arg(long, default_value = "cpu")]
    pub backend: String,
    #[command(flatten)]
    pub device: super::model_args::DeviceArgs,
    /// Rows of the operands (a decode step's batch).
    #[arg(long, default_value_t = 8)]
    pub rows: usize,
    /// Element-wise adds on `[rows, 1024]` (each a launch), then one read.
    #[arg(long, default_value_t = 10_000)]
    pub adds: usize,
    /// `[rows, 1024] × [1024, 3072]` products (an MLP projection of Qwen3-0.6B), then one read.
    #[arg(long, default_value_t = 1_000)]
    pub matmuls: usize,
}

#[derive(Debug, clap::Args)]
pub struct BenchExport {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Directory to write (config.json, generation_config.json, model.safetensors).
    #[arg(long)]
    pub out: std::path::PathBuf,
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
    /// Measured steps (after one warm-up step); `step_s` is their median.
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

/// Deterministic random token ids (arl-core's splitmix64).
pub(crate) fn random_ids(rows: usize, len: usize, vocab: usize, seed: u64) -> Vec<Vec<u32>> {
    let mut rng = arl_core::rng::SplitMix64(seed.wrapping_add(0x9E37_79B9_7F4A_7C15));
    (0..rows).map(|_| (0..len).map(|_| (rng.next_u64() % vocab as u64) as u32).collect()).collect()
}

impl Bench {
    pub fn execute(self, out: &mut dyn Write) -> anyhow::Result<()> {
        match self {
            Bench::Gen(b) => b.execute(out),
            Bench::Ops(b) => b.execute(out),
            Bench::Score(b) => b.execute(out),
            Bench::Export(b) => b.execute(out),
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
        // Warm-up at the timed length: a GPU backend compiles (and autotunes) kernels per shape,
        // and every decode step has a new KV length (2 tokens left the rest to the timed call).
        let mut warmup_new_tokens = 0;
        for _ in 0..self.warmup {
            let gens = sample::generate(&model, &prompts, &params)?;
            warmup_new_tokens = gens.iter().map(|g| g.ids.len()).min().unwrap_or(0);
        }
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
            "warmup": self.warmup,
            // Tokens each row generated in the (last) warm-up call.
            "warmup_new_tokens": warmup_new_tokens,
            "prefill_s": t.prefill_s,
            "decode_s": t.decode_s,
            "prefill_tokens_per_s": (self.batch * self.prompt_len) as f64 / t.prefill_s,
            "decode_tokens_per_s": t.decode_tokens as f64 / t.decode_s,
            "new_tokens_per_s": (self.batch * self.new_tokens) as f64 / (t.prefill_s + t.decode_s),
            "peak_rss_mb": arl_train::metrics::peak_rss_mb(),
        });
        writeln!(out, "{doc}")?;
        Ok(())
    }
}

impl BenchOps {
    pub fn execute(self, out: &mut dyn Write) -> anyhow::Result<()> {
        if !(self.rows > 0 && self.adds > 0 && self.matmuls > 0) {
            return Err(crate::usage!("--rows, --adds and --matmuls must be ≥ 1"));
        }
        let device = self.device.device(&self.backend)?;
        let dtype = arl_qwen3::device::burn_dtype(self.device.dtype()?);
        let x = Tensor::<Dispatch, 2>::ones([self.rows, 1024], (&device, dtype));
        let w = Tensor::<Dispatch, 2>::ones([1024, 3072], (&device, dtype)).mul_scalar(1e-3);
        let read = |t: Tensor<Dispatch, 2>| drop(t.into_data());
        // Each op once first (kernel compilation), then timed: launches queued, one read.
        let adds = |n: usize| {
            let mut y = x.clone();
            for _ in 0..n {
                y = y.add_scalar(1.0);
            }
            read(y)
        };
        let matmuls = |n: usize| {
            let mut z = x.clone();
            for _ in 0..n {
                z = x.clone().matmul(w.clone());
            }
            read(z)
        };
        adds(1);
        matmuls(1);
        let start = Instant::now();
        adds(self.adds);
        let add_s = start.elapsed().as_secs_f64();
        let start = Instant::now();
        matmuls(self.matmuls);
        let matmul_s = start.elapsed().as_secs_f64();
        let doc = json!({
            "bench": "ops",
            "backend": self.backend,
            "dtype": self.device.dtype,
            "rows": self.rows,
            "adds": self.adds,
            "us_per_add": add_s * 1e6 / self.adds as f64,
            "matmuls": self.matmuls,
            "us_per_matmul": matmul_s * 1e6 / self.matmuls as f64,
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
        let device = self.model.device()?;
        let lora = self.lora.then(|| arl_core::config::LoraConfig {
            rank: self.lora_rank,
            alpha: self.lora_rank as f64,
            ..arl_core::config::LoraConfig::default()
        });
        // As a run sets it up: with LoRA the base frozen (no gradients, no AdamW moments), f32 adapters.
        let setup = TrainSetup {
            dtype: self.model.device.dtype()?,
            gradient_checkpointing: self.gradient_checkpointing,
            lora: lora.clone(),
            adapter: self.model.adapter.clone(),
            seed: self.seed,
        };
        let mut trainer = QwenTrainer::load_setup(&self.model.model, &device, OptimConfig::default(), &setup)?;
        let (total_params, trainable_params) = trainer.param_counts();
        let vocab = trainer.model().config.vocab_size;
        let n_pol = ((self.policy_frac * l as f64).round() as usize).clamp(1, l - 1);
        let positions: Vec<Vec<usize>> = (0..b).map(|_| (l - n_pol..l).collect()).collect();
        let mask: Vec<f32> = (0..b).flat_map(|_| (0..l).map(|t| if t >= l - n_pol { 1.0 } else { 0.0 })).collect();
        let (mut times, mut optim_times) = (Vec::new(), Vec::new());
        let (mut first_loss, mut first_grad_norm) = (0.0, 0.0);
        for step in 0..=self.steps {
            let seqs = random_ids(b, l, vocab, self.seed + step as u64);
            let adv: Vec<f32> = seqs.iter().flat_map(|s| s.iter().map(|&id| if id % 2 == 0 { 1.0 } else { -1.0 })).collect();
            let start = Instant::now();
            let lp = trainer.score_with_grad(&seqs, Some(&positions), ScoreParams::default())?.logprobs;
            let device = trainer.device();
            let mask = Tensor::<Dispatch, 2>::from_data(TensorData::new(mask.clone(), [b, l]), &device);
            let adv = Tensor::<Dispatch, 2>::from_data(TensorData::new(adv, [b, l]), &device);
            let ratio = (lp.clone() - lp.detach()).exp();
            let surrogate = (ratio.clone() * adv.clone()).min_pair(ratio.clamp(0.8, 1.2) * adv);
            let loss = (surrogate * mask.clone()).sum().neg() / mask.sum();
            let loss_value =
                if step == 0 { loss.clone().into_data().convert::<f64>().to_vec::<f64>().map_or(f64::NAN, |v| v[0]) } else { 0.0 };
            trainer.backward(loss)?;
            let optim_start = Instant::now();
            let stats = trainer.step(1e-6)?;
            // Flex runs eagerly; reading a trained weight back makes the timing include the update.
            let model = trainer.model();
            match &model.layers[0].self_attn.qkv_proj.loras[0] {
                Some(adapter) => drop(adapter.b.val().into_data()),
                None => drop(model.norm.weight.val().into_data()),
            }
            if step > 0 {
                times.push(start.elapsed().as_secs_f64());
                optim_times.push(optim_start.elapsed().as_secs_f64());
            } else {
                (first_loss, first_grad_norm) = (loss_value, stats.grad_norm);
            }
        }
        // The median resists a noisy neighbour on a shared machine better than the mean.
        let median = |times: &[f64]| {
            let mut sorted = times.to_vec();
            sorted.sort_by(f64::total_cmp);
            if sorted.is_empty() { f64::NAN } else { (sorted[(sorted.len() - 1) / 2] + sorted[sorted.len() / 2]) / 2.0 }
        };
        let step_s_median = median(&times);
        let step_s_mean = times.iter().sum::<f64>() / times.len().max(1) as f64;
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
            "step_s": step_s_median,
            "step_s_mean": step_s_mean,
            "tokens_per_s": (b * l) as f64 / step_s_median,
            // Of `step_s`: the optimizer step (gradient clipping and AdamW), median.
            "optimizer_s": median(&optim_times),
            "gradient_checkpointing": self.gradient_checkpointing,
            "first_loss": first_loss,
            "first_grad_norm": first_grad_norm,
            "lora_rank": lora.as_ref().map(|l| l.rank),
            "params": total_params,
            "trainable_params": trainable_params,
            // The whole process's peak resident memory (host memory; the model's on the CPU).
            "peak_rss_mb": arl_train::metrics::peak_rss_mb(),
        });
        writeln!(out, "{doc}")?;
        Ok(())
    }
}

impl BenchExport {
    pub fn execute(self, out: &mut dyn Write) -> anyhow::Result<()> {
        let model = self.model.load_on(&self.model.device()?)?;
        model.save_dir(&self.out)?;
        writeln!(out, "{}", json!({ "bench": "export", "model": self.model.model, "out": self.out }))?;
        Ok(())
    }
}
