//! `arl generate`: sample continuations of token-id prompts (the tokenizer arrives with
//! issue #4; until then prompts are token ids). One JSON line per prompt.

use std::io::Write;

use arl_core::policy::SamplingParams;
use arl_qwen3::sample;

use super::ModelArgs;

#[derive(Debug, clap::Args)]
pub struct Generate {
    #[command(flatten)]
    pub model: ModelArgs,
    /// A prompt as token ids, e.g. "151644,872,198" or "[1, 2, 3]" (repeatable: one batch).
    #[arg(long, required = true, value_name = "IDS")]
    pub prompt: Vec<String>,
    /// New tokens per prompt (at most; a stop id ends a row early).
    #[arg(long, value_name = "N", default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_new_tokens: u32,
    /// Softmax temperature (> 0; 0 is greedy).
    #[arg(long, default_value_t = 1.0)]
    pub temperature: f64,
    /// Sample only from the k most likely tokens (≥ 1); unset: no truncation.
    #[arg(long, value_name = "K", value_parser = clap::value_parser!(u32).range(1..))]
    pub top_k: Option<u32>,
    /// Nucleus sampling: the smallest set of tokens with probability ≥ p, in (0, 1]; unset: none.
    #[arg(long, value_name = "P")]
    pub top_p: Option<f64>,
    /// Seed of every row's random stream.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

/// "1,2,3", "1 2 3" or "[1, 2, 3]" → ids.
pub fn parse_ids(text: &str) -> anyhow::Result<Vec<u32>> {
    let ids = text
        .trim()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<u32>()
                .map_err(|_| crate::usage!("--prompt `{text}`: `{s}` is not a token id (prompts are token ids; `arl render` makes them)"))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    if ids.is_empty() {
        return Err(crate::usage!("--prompt `{text}` has no token ids"));
    }
    Ok(ids)
}

impl Generate {
    pub fn execute(self, out: &mut dyn Write) -> anyhow::Result<()> {
        let prompts = self.prompt.iter().map(|p| parse_ids(p)).collect::<anyhow::Result<Vec<_>>>()?;
        if !(self.temperature.is_finite() && self.temperature >= 0.0) {
            return Err(crate::usage!("--temperature {}: must be a finite number ≥ 0", self.temperature));
        }
        if let Some(p) = self.top_p
            && !(p > 0.0 && p <= 1.0)
        {
            return Err(crate::usage!("--top-p {p}: must be in (0, 1]"));
        }
        let device = self.model.device()?;
        let model = self.model.load_on(&device)?;
        let vocab = model.config.vocab_size;
        if let Some(id) = prompts.iter().flatten().find(|&&id| id as usize >= vocab) {
            return Err(crate::usage!("--prompt: token id {id} is outside the vocabulary of model `{}` (size {vocab})", self.model.model));
        }
        let params = SamplingParams {
            temperature: self.temperature,
            top_k: self.top_k.map(|k| k as usize),
            top_p: self.top_p,
            max_new_tokens: self.max_new_tokens as usize,
            seed: self.seed,
            stop_ids: None,
        };
        for g in sample::generate(&model, &prompts, &params)? {
            writeln!(out, "{}", serde_json::to_string(&g)?)?;
        }
        Ok(())
    }
}
