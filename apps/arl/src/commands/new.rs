//! `arl new env NAME`: an environment plugin crate outside arl's tree, with its own two-line
//! binary (`NAME-arl`: arl's command line with the env linked in). The crate depends on arl's
//! crates by path (the checkout this binary was built from, or `--arl DIR`) and gets arl's
//! `Cargo.lock` and profiles, so a shared `CARGO_TARGET_DIR` reuses arl's dependency builds.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;

#[derive(Debug, clap::Subcommand)]
pub enum New {
    /// An env plugin crate (a word-reversal env to make yours) and its `NAME-arl` binary.
    Env {
        /// The crate's name (lowercase letters, digits and `-`); also the env's name.
        name: String,
        /// Where to write the crate [default: ./NAME].
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
        /// The arl checkout its dependencies point at [default: the one this binary was built from].
        #[arg(long, value_name = "DIR")]
        arl: Option<PathBuf>,
    },
}

const CARGO_TOML: &str = include_str!("../../templates/env/Cargo.toml.tmpl");
const LIB_RS: &str = include_str!("../../templates/env/lib.rs.tmpl");
const MAIN_RS: &str = include_str!("../../templates/env/main.rs.tmpl");

impl New {
    pub fn execute(self, out: &mut dyn Write) -> anyhow::Result<()> {
        let New::Env { name, out: dir, arl } = self;
        let valid = !name.is_empty()
            && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && name.starts_with(|c: char| c.is_ascii_lowercase());
        if !valid {
            return Err(crate::usage!("`{name}` is not a crate name: use lowercase letters, digits and `-`, starting with a letter"));
        }
        let arl = arl.unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."));
        let arl = std::fs::canonicalize(&arl).map_err(|_| crate::usage!("--arl {}: no such directory", arl.display()))?;
        if !arl.join("core/Cargo.toml").is_file() || !arl.join("apps/arl/Cargo.toml").is_file() {
            return Err(crate::usage!(
                "--arl {}: not an arl checkout (no core/ and apps/arl/); give the folder you cloned arl into",
                arl.display()
            ));
        }
        let dir = dir.unwrap_or_else(|| PathBuf::from(&name));
        if dir.exists() && std::fs::read_dir(&dir).map(|mut d| d.next().is_some()).unwrap_or(true) {
            return Err(crate::usage!("{}: exists and is not empty; choose another --out", dir.display()));
        }
        let krate = name.replace('-', "_");
        let manifest = arl.join("Cargo.toml");
        let root = read_toml(&manifest)?;
        let (profiles, patches) = (arl_profiles(&arl, &root)?, arl_patches(&arl, &manifest, &root)?);
        let fill = |t: &str| {
            t.replace("{{name}}", &name)
                .replace("{{crate}}", &krate)
                .replace("{{arl}}", &arl.display().to_string())
                .replace("{{arl_profiles}}", &profiles)
                .replace("{{arl_patches}}", &patches)
        };
        std::fs::create_dir_all(dir.join("src")).with_context(|| format!("creating {}", dir.display()))?;
        let files = [("Cargo.toml", fill(CARGO_TOML)), ("src/lib.rs", fill(LIB_RS)), ("src/main.rs", fill(MAIN_RS))];
        for (path, text) in &files {
            std::fs::write(dir.join(path), text).with_context(|| format!("writing {}", dir.join(path).display()))?;
        }
        // arl's lock file: the same dependency versions as arl's own build.
        if let Ok(lock) = std::fs::read_to_string(arl.join("Cargo.lock")) {
            std::fs::write(dir.join("Cargo.lock"), lock).with_context(|| format!("writing {}", dir.join("Cargo.lock").display()))?;
        }
        writeln!(out, "wrote {} (env `{name}`, binary `{name}-arl`, arl at {})", dir.display(), arl.display())?;
        writeln!(out, "next: cd {} && cargo run -- list && cargo run -- run --env {name} --model smollm2-135m", dir.display())?;
        Ok(())
    }
}

/// arl's `[patch.crates-io]` (its patched copies of upstream crates, `third_party/`), with the
/// paths made absolute: `[patch]` applies only in the workspace being built, so without it a
/// plugin's binary would build the unpatched releases (burn-flex's `slice_assign` copying the
/// whole KV cache at every decode step, the autodiff softmax recorded op by op) and not share
/// arl's builds of them.
fn arl_patches(arl: &Path, path: &Path, root: &toml::Table) -> anyhow::Result<String> {
    let Some(patches) = root.get("patch").and_then(|p| p.get("crates-io")).and_then(|p| p.as_table()) else {
        return Ok(String::new());
    };
    let mut out = String::from("\n# arl's patched copies of upstream crates (its Cargo.toml says why).\n[patch.crates-io]\n");
    for (name, spec) in patches {
        let Some(dir) = spec.get("path").and_then(|p| p.as_str()) else {
            anyhow::bail!("{}: [patch.crates-io] {name} has no path; arl new env copies path patches only", path.display());
        };
        out.push_str(&format!("{name} = {{ path = \"{}\" }}\n", arl.join(dir).display()));
    }
    Ok(out)
}

/// Profile overrides that give arl's own crates the settings they have in arl's workspace (there
/// they are members, here `"*"` would cover them): the same settings mean the same artifacts, so a
/// shared `CARGO_TARGET_DIR` builds nothing of arl twice.
fn arl_profiles(arl: &Path, root: &toml::Table) -> anyhow::Result<String> {
    let members: Vec<String> = root
        .get("workspace")
        .and_then(|w| w.get("members"))
        .and_then(|m| m.as_array())
        .map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_string)).collect())
        .unwrap_or_default();
    let overrides = root.get("profile").and_then(|p| p.get("dev")).and_then(|d| d.get("package")).and_then(|p| p.as_table());
    let mut out = String::new();
    for member in members {
        let manifest = read_toml(&arl.join(&member).join("Cargo.toml"))?;
        let Some(name) = manifest.get("package").and_then(|p| p.get("name")).and_then(|n| n.as_str()) else { continue };
        let (opt, debug) = match overrides.and_then(|o| o.get(name)) {
            Some(o) => (o.get("opt-level").and_then(|v| v.as_integer()).unwrap_or(0), "\"line-tables-only\""),
            None => (0, "\"line-tables-only\""),
        };
        out.push_str(&format!("[profile.dev.package.{name}]\nopt-level = {opt}\ndebug = {debug}\n\n"));
    }
    Ok(out)
}

fn read_toml(path: &Path) -> anyhow::Result<toml::Table> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    text.parse::<toml::Table>().with_context(|| format!("{}: not valid TOML", path.display()))
}
