//! Where a `--model` string points: a directory, a built-in random preset, a GGUF source (a
//! `.gguf` file or a known model such as `smollm2-135m`, converted once into arl's cache by
//! [`arl_gguf::known`]), or a repo id in the local Hugging Face cache ([`arl_core::hub`]).
//! Nothing is ever downloaded.

use std::path::{Path, PathBuf};

use arl_core::hub::{self, HubError};

use crate::{ModelError, presets};

/// What a model source string resolved to.
#[derive(Clone, Debug, PartialEq)]
pub enum Source {
    Dir(PathBuf),
    Preset(&'static str),
}

/// A directory (has config.json), else a preset name, else a GGUF source, else a repo id in
/// `cache`.
pub fn resolve_in(source: &str, cache: &Path) -> Result<Source, ModelError> {
    let path = Path::new(source);
    if path.is_dir() {
        return Ok(Source::Dir(path.to_path_buf()));
    }
    if let Some(p) = presets::find(source) {
        return Ok(Source::Preset(p.name));
    }
    if let Some(dir) = arl_gguf::known::resolve(source)? {
        return Ok(Source::Dir(dir));
    }
    let presets = || presets::names().into_iter().chain(arl_gguf::known::KNOWN.iter().map(|k| k.name)).collect::<Vec<_>>().join(", ");
    let not_found = |looked_in: String| ModelError::NotFound { source_name: source.to_string(), looked_in, presets: presets() };
    let snapshot = hub::snapshot_in(source, cache).map_err(|e| match e {
        HubError::NotRepoId(_) if source.contains('/') || source.starts_with(['.', '~']) => {
            ModelError::NoSuchDir { path: source.to_string(), presets: presets() }
        }
        HubError::NotRepoId(_) => ModelError::Unknown { source_name: source.to_string(), presets: presets() },
        HubError::NotCached { refs } => not_found(refs.display().to_string()),
        HubError::MissingSnapshot { snapshot } => not_found(format!("{} (named by refs/main; missing)", snapshot.display())),
    })?;
    if !snapshot.join("config.json").exists() {
        return Err(not_found(format!("{} (the snapshot refs/main names has no config.json)", snapshot.display())));
    }
    Ok(Source::Dir(snapshot))
}

/// [`resolve_in`] the cache named by the environment.
pub fn resolve(source: &str) -> Result<Source, ModelError> {
    resolve_in(source, &hub::cache_dir())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repo_id_resolves_through_refs_main_to_the_snapshot() {
        let cache = std::env::temp_dir().join(format!("arl-hub-test-{}", std::process::id()));
        let snap = cache.join("models--Qwen--Qwen3-0.6B/snapshots/abc123");
        std::fs::create_dir_all(&snap).unwrap();
        std::fs::create_dir_all(cache.join("models--Qwen--Qwen3-0.6B/refs")).unwrap();
        std::fs::write(cache.join("models--Qwen--Qwen3-0.6B/refs/main"), "abc123\n").unwrap();
        std::fs::write(snap.join("config.json"), "{}").unwrap();
        assert_eq!(resolve_in("Qwen/Qwen3-0.6B", &cache).unwrap(), Source::Dir(snap));
        let err = resolve_in("Qwen/Qwen3-1.7B", &cache).unwrap_err().to_string();
        assert!(err.contains("models--Qwen--Qwen3-1.7B/refs/main") && err.contains("huggingface-cli download"), "{err}");
        std::fs::remove_dir_all(&cache).unwrap();
    }

    #[test]
    fn presets_and_unknown_names() {
        assert_eq!(resolve_in("tiny", Path::new("/nonexistent")).unwrap(), Source::Preset("tiny"));
        let err = resolve_in("no-such-model", Path::new("/nonexistent")).unwrap_err().to_string();
        assert!(err.starts_with("`no-such-model` is not a model directory, a preset (tiny, "), "{err}");
        for path in ["/no/such/dir", "./nope", "a/b/c", "~/x"] {
            let err = resolve_in(path, Path::new("/nonexistent")).unwrap_err().to_string();
            assert!(err.starts_with(&format!("model directory {path} does not exist")), "{err}");
            assert!(!err.contains("huggingface-cli"), "a path is not downloaded: {err}");
        }
    }
}
