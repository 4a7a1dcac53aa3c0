//! `arl list`: every registry, and the backends compiled into this binary.

use std::io::Write;

use arl_core::BackendKind;
use arl_core::config::AlgoPreset;
use arl_core::registry::{self, AdvantagePlugin, EnvPlugin, Kind, LossPlugin, SandboxPlugin, ToolSetPlugin};
use serde_json::{Value, json};

#[derive(Debug, clap::Args)]
pub struct List {
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// One section of the listing: a heading and (name, description) rows.
pub struct Section {
    pub key: &'static str,
    pub title: &'static str,
    pub rows: Vec<(String, String)>,
}

/// Every registry, in a fixed order. A registry with a duplicate name is an error.
pub fn sections() -> anyhow::Result<Vec<Section>> {
    let backends =
        BackendKind::ALL.iter().filter(|b| b.compiled_in()).map(|b| (b.name().to_string(), backend_about(*b).to_string())).collect();
    Ok(vec![
        section::<EnvPlugin>("envs", "Environments")?,
        section::<ToolSetPlugin>("tool_sets", "Tool sets")?,
        section::<SandboxPlugin>("sandboxes", "Sandboxes")?,
        section::<AdvantagePlugin>("advantages", "Advantage estimators")?,
        section::<LossPlugin>("losses", "Policy losses")?,
        section::<AlgoPreset>("algos", "Algorithm presets (--algo)")?,
        Section { key: "models", title: "Model presets (--model; or a directory, a .gguf file, an HF-cache repo id)", rows: models() },
        Section { key: "backends", title: "Backends compiled in", rows: backends },
    ])
}

fn section<P: Kind>(key: &'static str, title: &'static str) -> anyhow::Result<Section> {
    let rows = registry::all::<P>()?.iter().map(|p| (p.name().to_string(), p.about().to_string())).collect();
    Ok(Section { key, title, rows })
}

/// Real models arl can fetch (converted from GGUF once), then the random-weight shapes.
fn models() -> Vec<(String, String)> {
    let real = arl_gguf::known::KNOWN.iter().map(|k| (k.name.to_string(), format!("{}; fetch with {}", k.about, k.setup)));
    let random = arl_qwen3::presets::PRESETS.iter().map(|p| (p.name.to_string(), format!("random weights: {}", p.about)));
    real.chain(random).collect()
}

fn backend_about(b: BackendKind) -> &'static str {
    match b {
        BackendKind::Cpu => "burn-flex, pure Rust CPU",
        BackendKind::Cuda if cfg!(feature = "fusion") => "burn-cuda with kernel fusion (libcuda and NVRTC loaded at run time)",
        BackendKind::Cuda => "burn-cuda (libcuda and NVRTC loaded at run time)",
        BackendKind::Tch => "libtorch on the CPU",
        BackendKind::TchCuda => "libtorch on a CUDA GPU",
    }
}

impl List {
    pub fn execute(self, out: &mut dyn Write) -> anyhow::Result<()> {
        let sections = sections()?;
        if self.json {
            let doc: serde_json::Map<String, Value> = sections
                .iter()
                .map(|s| {
                    let rows = s.rows.iter().map(|(n, a)| json!({"name": n, "about": a})).collect();
                    (s.key.to_string(), Value::Array(rows))
                })
                .collect();
            writeln!(out, "{}", serde_json::to_string_pretty(&doc)?)?;
            return Ok(());
        }
        for (i, s) in sections.iter().enumerate() {
            if i > 0 {
                writeln!(out)?;
            }
            writeln!(out, "{}:", s.title)?;
            if s.rows.is_empty() {
                writeln!(out, "  (none)")?;
            }
            let width = s.rows.iter().map(|(n, _)| n.len()).max().unwrap_or(0);
            for (name, about) in &s.rows {
                writeln!(out, "  {name:width$}  {about}")?;
            }
        }
        Ok(())
    }
}
