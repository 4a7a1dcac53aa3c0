//! Where a `--model` string points: a directory, a built-in preset, or a repo id in the local
//! Hugging Face cache (`HF_HUB_CACHE`, else `HF_HOME/hub`, else `~/.cache/huggingface/hub`;
//! `models--{org}--{name}/refs/main` names the snapshot). Nothing is ever downloaded.

use std::path::{Path, PathBuf};

use crate::{ModelError, presets};

/// What a model source string resolved to.
#[derive(Clone, Debug, PartialEq)]
pub enum Source {
    Dir(PathBuf),
    Preset(&'static str),
}

/// The Hugging Face hub cache directory from the environment.
pub fn hub_cache_dir() -> PathBuf {
    hub_cache_dir_from(|k| std::env::var_os(k).map(PathBuf::from))
}

fn hub_cache_dir_from(var: impl Fn(&str) -> Option<PathBuf>) -> PathBuf {
    if let Some(p) = var("HF_HUB_CACHE") {
        return p;
    }
    if let Some(p) = var("HF_HOME") {
        return p.join("hub");
    }
    var("HOME").unwrap_or_else(|| PathBuf::from("/root")).join(".cache/huggingface/hub")
}

/// A directory (has config.json), else a preset name, else a repo id in `cache`.
pub fn resolve_in(source: &str, cache: &Path) -> Result<Source, ModelError> {
    let path = Path::new(source);
    if path.is_dir() {
        return Ok(Source::Dir(path.to_path_buf()));
    }
    if let Some(p) = presets::find(source) {
        return Ok(Source::Preset(p.name));
    }
    let not_found = |looked_in: String| ModelError::NotFound {
        source_name: source.to_string(),
        looked_in,
        presets: presets::names().join(", "),
    };
    let Some((org, name)) = source.split_once('/').filter(|(o, n)| !o.is_empty() && !n.is_empty() && !n.contains('/'))
    else {
        return Err(not_found(format!("{} (not a directory either)", cache.display())));
    };
    let repo = cache.join(format!("models--{org}--{name}"));
    let refs = repo.join("refs/main");
    let rev = std::fs::read_to_string(&refs).map_err(|_| not_found(refs.display().to_string()))?;
    let snapshot = repo.join("snapshots").join(rev.trim());
    if !snapshot.join("config.json").exists() {
        return Err(not_found(format!("{} (refs/main names {}, which has no config.json)", repo.display(), rev.trim())));
    }
    Ok(Source::Dir(snapshot))
}

/// [`resolve_in`] the cache named by the environment.
pub fn resolve(source: &str) -> Result<Source, ModelError> {
    resolve_in(source, &hub_cache_dir())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_dir_follows_hf_hub_cache_then_hf_home_then_home() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| PathBuf::from(v))
        };
        assert_eq!(hub_cache_dir_from(env(&[("HF_HUB_CACHE", "/a"), ("HF_HOME", "/b")])), PathBuf::from("/a"));
        assert_eq!(hub_cache_dir_from(env(&[("HF_HOME", "/b"), ("HOME", "/h")])), PathBuf::from("/b/hub"));
        assert_eq!(hub_cache_dir_from(env(&[("HOME", "/h")])), PathBuf::from("/h/.cache/huggingface/hub"));
    }

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
        assert!(err.contains("tiny") && err.contains("/nonexistent"), "{err}");
    }
}
