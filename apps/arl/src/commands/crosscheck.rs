//! `arl crosscheck`: the same checkpoint on several backends must give the same
//! log-probabilities. Samples `--samples` continuations of seeded random prompts on the first
//! backend, scores the sampled tokens on every backend, and prints one JSON document: per
//! backend pair the mean and max |Δ logprob|, the mismatch KL and the worst token with its
//! context; per backend the load and scoring time. Exits non-zero when a pair's max |Δ|
//! exceeds `--tolerance`.

use std::io::Write;
use std::time::Instant;

use arl_core::policy::SamplingParams;
use arl_qwen3::crosscheck::{self, Scores};
use arl_qwen3::sample;
use serde_json::json;

use super::bench::random_ids;
use super::model_args::{DeviceArgs, load};

#[derive(Debug, clap::Args)]
pub struct Crosscheck {
    /// Model directory, Hugging Face repo id (local cache only) or preset.
    #[arg(long, value_name = "SOURCE", default_value = "tiny")]
    pub model: String,
    /// A LoRA adapter directory applied on --model (unmerged) on every backend.
    #[arg(long, value_name = "DIR")]
    pub adapter: Option<std::path::PathBuf>,
    /// Comma-separated backends, the first one samples (e.g. cpu,tch or cpu,cuda,tch-cuda);
    /// default: every backend compiled into this binary (`arl list`).
    #[arg(long, value_name = "LIST")]
    pub backends: Option<String>,
    #[command(flatten)]
    pub device: DeviceArgs,
    /// Sequences sampled.
    #[arg(long, default_value_t = 4)]
    pub samples: usize,
    /// Random prompt length (token ids).
    #[arg(long, default_value_t = 8)]
    pub prompt_len: usize,
    /// Tokens sampled per sequence (these are scored).
    #[arg(long, default_value_t = 16)]
    pub max_new_tokens: usize,
    /// Largest allowed max |Δ logprob| of any pair.
    #[arg(long, default_value_t = 1e-4)]
    pub tolerance: f64,
    /// Seed of the random prompts and the sampler.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

impl Crosscheck {
    pub fn execute(self, out: &mut dyn Write) -> anyhow::Result<()> {
        let compiled: Vec<&str> = arl_core::BackendKind::ALL.iter().filter(|b| b.compiled_in()).map(|b| b.name()).collect();
        let backends = self.backends.clone().unwrap_or_else(|| compiled.join(","));
        let names: Vec<&str> = backends.split(',').map(str::trim).filter(|s| !s.is_empty()).collect();
        if names.len() < 2 {
            return Err(crate::usage!(
                "--backends `{backends}`: name at least two backends to compare (this binary has {}; \
                 rebuild with --features tch or cuda for more)",
                compiled.join(", ")
            ));
        }
        if self.samples == 0 || self.prompt_len == 0 || self.max_new_tokens == 0 {
            return Err(crate::usage!("--samples, --prompt-len and --max-new-tokens must be ≥ 1"));
        }
        if self.tolerance.is_nan() || self.tolerance < 0.0 {
            return Err(crate::usage!("--tolerance must be ≥ 0, got {}", self.tolerance));
        }
        // Every device first: a backend that is not compiled in fails before any work.
        let devices = names.iter().map(|b| self.device.device(b)).collect::<anyhow::Result<Vec<_>>>()?;

        let start = Instant::now();
        let dtype = self.device.dtype()?;
        let first = load(&self.model, self.adapter.as_deref(), &devices[0], dtype)?;
        let load_first_s = start.elapsed().as_secs_f64();
        let prompts = random_ids(self.samples, self.prompt_len, first.config.vocab_size, self.seed);
        let params = SamplingParams { max_new_tokens: self.max_new_tokens, seed: self.seed, stop_ids: Some(vec![]), ..Default::default() };
        let start = Instant::now();
        let gens = sample::generate(&first, &prompts, &params)?;
        let sample_s = start.elapsed().as_secs_f64();
        let sequences: Vec<Vec<u32>> = prompts.iter().zip(&gens).map(|(p, g)| p.iter().chain(&g.ids).copied().collect()).collect();
        let positions: Vec<Vec<usize>> = sequences.iter().map(|s| (self.prompt_len..s.len()).collect()).collect();

        let mut scores: Vec<Scores> = Vec::new();
        let mut timing = serde_json::Map::new();
        let mut first = Some(first);
        for (i, (name, device)) in names.iter().zip(&devices).enumerate() {
            let start = Instant::now();
            let model = match first.take() {
                Some(m) => m,
                None => load(&self.model, self.adapter.as_deref(), device, dtype)?,
            };
            let load_s = if i == 0 { load_first_s } else { start.elapsed().as_secs_f64() };
            let start = Instant::now();
            scores.push(crosscheck::score_rows(&model, &sequences, &positions)?);
            let score_s = start.elapsed().as_secs_f64();
            timing.insert(format!("{i}:{name}"), json!({ "load_s": load_s, "score_s": score_s }));
        }

        let mut pairs = Vec::new();
        for i in 0..names.len() {
            for j in i + 1..names.len() {
                pairs.push(crosscheck::compare((names[i], &scores[i]), (names[j], &scores[j]), &sequences, &positions));
            }
        }
        let worst = pairs.iter().map(|p| p.max_abs_diff).fold(0.0f32, f32::max);
        let pass = (worst as f64) <= self.tolerance;
        let doc = json!({
            "model": self.model,
            "backends": names,
            "dtype": self.device.dtype,
            "samples": self.samples,
            "prompt_len": self.prompt_len,
            "max_new_tokens": self.max_new_tokens,
            "seed": self.seed,
            "tolerance": self.tolerance,
            "sample_s": sample_s,
            "timing": timing,
            "pairs": pairs,
            "max_abs_diff": worst,
            "pass": pass,
        });
        writeln!(out, "{doc}")?;
        if !pass {
            let p = pairs.iter().find(|p| p.max_abs_diff == worst).expect("worst pair");
            let w = p.worst.as_ref().expect("scored tokens");
            anyhow::bail!(
                "backends {} and {} disagree: max |Δ logprob| {:.3e} > --tolerance {:.1e} (row {}, position {}, token {})",
                p.a,
                p.b,
                worst,
                self.tolerance,
                w.row,
                w.position,
                w.token
            );
        }
        Ok(())
    }
}
