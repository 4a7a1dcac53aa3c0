//! `arl convert FILE.gguf --out DIR`: a GGUF file as a Hugging Face model directory
//! (arl-gguf). `--model FILE.gguf` does the same on first use, into arl's cache.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;

#[derive(Debug, clap::Args)]
pub struct Convert {
    /// The GGUF file (llama, qwen2 or qwen3; F32/F16/BF16, Q4_0/Q4_1/Q5_0/Q5_1/Q8_0 and the
    /// K-quants Q2_K–Q6_K).
    pub gguf: PathBuf,
    /// The directory to write (must not exist, or be empty): config.json,
    /// generation_config.json, model.safetensors (f32), tokenizer.json, tokenizer_config.json.
    #[arg(long)]
    pub out: PathBuf,
}

impl Convert {
    pub fn execute(self, out: &mut dyn Write) -> anyhow::Result<()> {
        let started = std::time::Instant::now();
        let done = arl_gguf::convert(&self.gguf, &self.out).with_context(|| format!("converting {}", self.gguf.display()))?;
        writeln!(
            out,
            "converted {} ({}, {} tensors, {:.1}M parameters, sha256 {}) into {} in {:.1}s",
            self.gguf.display(),
            done.arch,
            done.n_tensors,
            done.n_params as f64 / 1e6,
            &done.sha256[..16],
            done.dir.display(),
            started.elapsed().as_secs_f64()
        )?;
        Ok(())
    }
}
