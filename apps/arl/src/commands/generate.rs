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
    #[arg(long, required = true)]
    pub prompt: Vec<String>,
    #[arg(long, default_value_t = 32)]
    pub max_new_tokens: usize,
    #[arg(long, default_value_t = 1.0)]
    pub temperature: f64,
    #[arg(long)]
    pub top_k: Option<usize>,
    #[arg(long)]
    pub top_p: Option<f64>,
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
            s.parse::<u32>().map_err(|_| {
                anyhow::anyhow!("--prompt `{text}`: `{s}` is not a token id (prompts are token ids until the tokenizer lands)")
            })
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    anyhow::ensure!(!ids.is_empty(), "--prompt `{text}` has no token ids");
    Ok(ids)
}

impl Generate {
    pub fn execute(self, out: &mut dyn Write) -> anyhow::Result<()> {
        let prompts = self.prompt.iter().map(|p| parse_ids(p)).collect::<anyhow::Result<Vec<_>>>()?;
        let device = self.model.device()?;
        let model = self.model.load_on(&device)?;
        let params = SamplingParams {
            temperature: self.temperature,
            top_k: self.top_k,
            top_p: self.top_p,
            max_new_tokens: self.max_new_tokens,
            seed: self.seed,
            stop_ids: None,
        };
        for g in sample::generate(&model, &prompts, &params)? {
            writeln!(out, "{}", serde_json::to_string(&g)?)?;
        }
        Ok(())
    }
}
