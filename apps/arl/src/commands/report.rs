//! `arl report RUN_DIR [RUN_DIR …]`: the runs as one self-contained HTML page (`crate::report`),
//! and optionally its figures alone as SVG or PNG files.

use anyhow::Context;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::report::{self, Figure, browser};

#[derive(Debug, clap::Args)]
pub struct Report {
    /// Run folders (the --out of `arl run`); several are overlaid, labelled by the config keys
    /// where they differ. A run in progress shows what it has logged so far.
    #[arg(required = true, value_name = "RUN_DIR")]
    pub runs: Vec<PathBuf>,
    /// The HTML file to write [default: RUN_DIR/report.html for one run, report.html for several].
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Also write each figure alone as an SVG file into this folder.
    #[arg(long, value_name = "DIR")]
    pub svg: Option<PathBuf>,
    /// Also write each figure alone as a PNG file into this folder (rasterized by a headless
    /// Chromium: `chromium` on PATH, or $ARL_CHROMIUM).
    #[arg(long, value_name = "DIR")]
    pub png: Option<PathBuf>,
}

impl Report {
    pub fn execute(self, out: &mut dyn Write) -> anyhow::Result<()> {
        let chromium = match &self.png {
            Some(_) => Some(browser::chromium().ok_or_else(|| {
                crate::usage!("--png needs a headless Chromium to rasterize the figures: install it (`apt install chromium`) or set ARL_CHROMIUM; --svg DIR writes them without one")
            })?),
            None => None,
        };
        let runs = report::load_runs(&self.runs)?;
        let page = report::build(&runs);
        let html_path = self.out.clone().unwrap_or_else(|| match self.runs.as_slice() {
            [one] => one.join("report.html"),
            _ => PathBuf::from("report.html"),
        });
        write_atomic(&html_path, page.html.as_bytes())?;
        writeln!(out, "report: {} ({} figures, {} transcripts)", html_path.display(), page.figures.len(), page.transcripts)?;
        if let Some(dir) = &self.svg {
            write_svgs(dir, &page.figures)?;
            writeln!(out, "figures: {} ({} SVG files)", dir.display(), page.figures.len())?;
        }
        if let (Some(dir), Some(chromium)) = (&self.png, chromium) {
            write_pngs(dir, &page.figures, &chromium)?;
            writeln!(out, "figures: {} ({} PNG files)", dir.display(), page.figures.len())?;
        }
        Ok(())
    }
}

/// The HTML file appears whole or not at all (a reader may have the old one open).
fn write_atomic(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if !dir.is_dir() {
        return Err(crate::usage!("--out {}: the folder {} does not exist", path.display(), dir.display()));
    }
    let tmp = dir.join(format!(".{}.tmp", path.file_name().map(|n| n.to_string_lossy()).unwrap_or_default()));
    std::fs::write(&tmp, bytes).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))
}

fn write_svgs(dir: &Path, figures: &[Figure]) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    for f in figures {
        let path = dir.join(format!("{}.svg", f.name));
        std::fs::write(&path, &f.svg).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// Each figure screenshotted at its own size by a headless Chromium.
fn write_pngs(dir: &Path, figures: &[Figure], chromium: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let scratch = std::env::temp_dir().join(format!("arl-report-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).with_context(|| format!("creating {}", scratch.display()))?;
    let result = figures.iter().try_for_each(|f| {
        let (w, h) = size_of(&f.svg);
        let page = scratch.join(format!("{}.html", f.name));
        let html = format!("<!DOCTYPE html><html><body style=\"margin:0;font-family:sans-serif\">{}</body></html>", f.svg);
        std::fs::write(&page, html).with_context(|| format!("writing {}", page.display()))?;
        let png = std::path::absolute(dir.join(format!("{}.png", f.name)))?;
        browser::screenshot(chromium, &page, &png, w, h).map(|_| ())
    });
    let _ = std::fs::remove_dir_all(&scratch);
    result
}

/// The `width`/`height` attributes of an SVG's root element.
fn size_of(svg: &str) -> (u32, u32) {
    let attr = |name: &str| {
        let key = format!(" {name}=\"");
        let start = svg.find(&key)? + key.len();
        let end = svg[start..].find('"')? + start;
        svg[start..end].parse::<f64>().ok().map(|v| v.ceil() as u32)
    };
    (attr("width").unwrap_or(800), attr("height").unwrap_or(600))
}
