//! `arl merge`: fold a LoRA adapter (arl's or PEFT's) into its base model and write the full
//! weights as an HF checkpoint directory (W + s·B A per adapted layer, computed in f32), with
//! the tokenizer files of the adapter directory (an arl checkpoint carries them) or else of
//! the base. The result loads anywhere a model does, with no adapter.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;

/// Tokenizer and chat-template files copied next to the merged weights when present.
const TOKENIZER_FILES: &[&str] = &["tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja"];

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  arl merge --model Qwen/Qwen3-0.6B --adapter runs/lora/checkpoints/final --out merged\n  arl merge --model tests/fixtures/qwen3/llama --adapter tests/fixtures/lora/llama-layer1 --out /tmp/merged"
)]
pub struct Merge {
    /// The base model: a directory, a repo id in the local Hugging Face cache, or a preset.
    #[arg(long, value_name = "SOURCE")]
    pub model: String,
    /// The adapter directory (adapter_config.json + adapter_model.safetensors).
    #[arg(long, value_name = "DIR")]
    pub adapter: PathBuf,
    /// Where to write the merged checkpoint (a new or empty directory).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
}

impl Merge {
    pub fn execute(self, out: &mut dyn Write) -> anyhow::Result<()> {
        if !self.adapter.is_dir() {
            return Err(crate::usage!("--adapter {}: no such directory", self.adapter.display()));
        }
        if self.out.exists() && std::fs::read_dir(&self.out).map(|mut d| d.next().is_some()).unwrap_or(true) {
            return Err(crate::usage!("--out {}: exists and is not empty; pass a new or empty directory", self.out.display()));
        }
        let device = arl_qwen3::cpu();
        let mut model = arl_qwen3::load_base(&self.model, &device).with_context(|| format!("loading model `{}`", self.model))?;
        let info = model.load_adapter(&self.adapter, None).with_context(|| format!("loading adapter {}", self.adapter.display()))?;
        let merged = model.merge_lora();
        merged.save_dir(&self.out).with_context(|| format!("writing {}", self.out.display()))?;
        let base_dir = match arl_qwen3::hub::resolve(&self.model)? {
            arl_qwen3::hub::Source::Dir(dir) => Some(dir),
            arl_qwen3::hub::Source::Preset(_) => None,
        };
        let mut copied = Vec::new();
        for name in TOKENIZER_FILES {
            let from = [Some(self.adapter.clone()), base_dir.clone()].into_iter().flatten().map(|d| d.join(name)).find(|p| p.is_file());
            if let Some(from) = from {
                let to = self.out.join(name);
                std::fs::copy(&from, &to).with_context(|| format!("copying {} to {}", from.display(), to.display()))?;
                copied.push(*name);
            }
        }
        let rank = info.rank.map_or("several ranks".into(), |r| format!("r {r}"));
        writeln!(
            out,
            "merged {} adapters ({rank}, alpha {}, {}) of {} into `{}` → {} ({})",
            info.modules,
            info.alpha,
            info.target_modules.join(", "),
            self.adapter.display(),
            self.model,
            self.out.display(),
            if copied.is_empty() { "no tokenizer files found to copy".to_string() } else { format!("with {}", copied.join(", ")) }
        )?;
        Ok(())
    }
}
