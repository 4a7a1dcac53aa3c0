//! `arl score`: teacher-forced log-probabilities of token sequences.
//! Input `{"sequences": [[id, …], …], "positions": [[t, …], …]?}`; output
//! `{"logprobs": [[…], …]}` with, per row, `log p(ids[t] | ids[..t])` for each requested `t`
//! (default every `t` in `1..len`, so `len − 1` values), and `"entropy"` with `--entropy`.
//! `--temperature T` scores the distribution the sampler draws from at T (logits / T), so
//! tokens sampled at T get the log-probabilities the sampler recorded.

use std::io::Write;
use std::path::PathBuf;

use arl_qwen3::score;
use serde::Deserialize;

use super::ModelArgs;

#[derive(Debug, clap::Args)]
pub struct Score {
    #[command(flatten)]
    pub model: ModelArgs,
    /// JSON file with `sequences` (token ids) and optional `positions`.
    #[arg(long, value_name = "FILE")]
    pub input: PathBuf,
    /// Also print the entropy of each scored next-token distribution.
    #[arg(long)]
    pub entropy: bool,
    /// Divide the logits by this before the softmax (the sampling temperature; > 0).
    #[arg(long, default_value_t = 1.0)]
    pub temperature: f64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Input {
    sequences: Vec<Vec<u32>>,
    positions: Option<Vec<Vec<usize>>>,
}

/// At least one sequence, none empty; per row, positions in `1..len`; with `vocab`, every id
/// in the vocabulary.
fn check(sequences: &[Vec<u32>], positions: &[Vec<usize>], vocab: Option<usize>) -> Result<(), String> {
    if sequences.is_empty() {
        return Err("`sequences` is empty; give at least one sequence of token ids".into());
    }
    if positions.len() != sequences.len() {
        return Err(format!("{} position lists for {} sequences", positions.len(), sequences.len()));
    }
    for (r, (s, ts)) in sequences.iter().zip(positions).enumerate() {
        if s.is_empty() {
            return Err(format!("sequence {r} is empty"));
        }
        if let Some(&t) = ts.iter().find(|&&t| t == 0 || t >= s.len()) {
            return Err(format!("sequence {r}: position {t} is not in 1..{} (position t scores token t given those before it)", s.len()));
        }
        if let Some(v) = vocab
            && let Some(&id) = s.iter().find(|&&id| id as usize >= v)
        {
            return Err(format!("sequence {r}: token id {id} is outside the model's vocabulary (size {v})"));
        }
    }
    Ok(())
}

impl Score {
    pub fn execute(self, out: &mut dyn Write) -> anyhow::Result<()> {
        let text = super::read_input(&self.input, "--input")?;
        let input: Input = serde_json::from_str(&text).map_err(|e| {
            crate::usage!("{}: {e} (expected {{\"sequences\": [[id, …]], \"positions\"?: [[t, …]]}})", self.input.display())
        })?;
        let positions = input.positions.unwrap_or_else(|| score::all_positions(&input.sequences));
        check(&input.sequences, &positions, None).map_err(|e| crate::usage!("{}: {e}", self.input.display()))?;
        let device = self.model.device()?;
        let model = self.model.load_on(&device)?;
        check(&input.sequences, &positions, Some(model.config.vocab_size)).map_err(|e| crate::usage!("{}: {e}", self.input.display()))?;
        let params = arl_core::ScoreParams { temperature: self.temperature, entropy: self.entropy };
        let scored = score::score(&model, &input.sequences, Some(&positions), params)?;
        let width = input.sequences.iter().map(Vec::len).max().unwrap_or(0);
        let rows = |t: burn::tensor::Tensor<burn::Dispatch, 2>| -> Vec<Vec<f32>> {
            let flat = t.into_data().convert::<f32>().to_vec::<f32>().expect("f32");
            positions.iter().enumerate().map(|(r, ts)| ts.iter().map(|&t| flat[r * width + t]).collect()).collect()
        };
        let mut doc = serde_json::json!({ "logprobs": rows(scored.logprobs) });
        if let Some(e) = scored.entropy {
            doc["entropy"] = serde_json::json!(rows(e));
        }
        writeln!(out, "{doc}")?;
        Ok(())
    }
}
