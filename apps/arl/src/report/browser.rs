//! A headless Chromium, for the PNG figures and the report's own screenshot test.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context;

/// A headless Chromium: $ARL_CHROMIUM, else the first of the usual names on PATH.
pub fn chromium() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("ARL_CHROMIUM") {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .flat_map(|d| ["chromium", "chromium-browser", "google-chrome", "chrome"].map(|n| d.join(n)))
        .find(|p| p.is_file())
}

/// Screenshot `page` into `png` at `w` × `h` CSS pixels. Returns the page's console messages
/// (Chromium's `CONSOLE` log lines: script errors, `console.*` calls), empty for a clean page.
pub fn screenshot(chromium: &Path, page: &Path, png: &Path, w: u32, h: u32) -> anyhow::Result<Vec<String>> {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let k = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let profile = std::env::temp_dir().join(format!("arl-chromium-profile-{}-{k}", std::process::id()));
    let output = Command::new(chromium)
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run", "--enable-logging=stderr", "--v=0"])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("--window-size={w},{h}"))
        .arg(format!("--screenshot={}", png.display()))
        .arg(format!("file://{}", std::path::absolute(page)?.display()))
        .output()
        .with_context(|| format!("running {}", chromium.display()))?;
    let _ = std::fs::remove_dir_all(&profile);
    if !output.status.success() || !png.is_file() {
        anyhow::bail!("{} could not screenshot {} ({})", chromium.display(), page.display(), output.status);
    }
    Ok(String::from_utf8_lossy(&output.stderr).lines().filter(|l| l.contains(":CONSOLE")).map(str::to_string).collect())
}
