//! `--model`: a directory, or a repo id in the local Hugging Face cache (never downloaded).
//!
//! A small resolver of its own; the model loader (issue #3) resolves the same way.

use std::path::{Path, PathBuf};

use arl_core::ChatError;

/// The hub cache: `$HF_HUB_CACHE`, else `$HF_HOME/hub`, else `~/.cache/huggingface/hub`.
pub fn hub_cache() -> PathBuf {
    if let Some(dir) = std::env::var_os("HF_HUB_CACHE") {
        return PathBuf::from(dir);
    }
    if let Some(home) = std::env::var_os("HF_HOME") {
        return PathBuf::from(home).join("hub");
    }
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("."), PathBuf::from);
    home.join(".cache").join("huggingface").join("hub")
}

/// `model` as a directory if it is one, else as `org/name` in the hub cache:
/// `models--org--name/refs/main` names the snapshot `snapshots/<rev>`.
pub fn resolve_model_dir(model: &str) -> Result<PathBuf, ChatError> {
    let path = Path::new(model);
    if path.is_dir() {
        return Ok(path.to_path_buf());
    }
    let not_found = |looked: &Path, why: &str| ChatError::Load {
        what: "model",
        path: model.to_string(),
        message: format!("is not a directory and {why} (looked in {}; arl never downloads)", looked.display()),
    };
    let cache = hub_cache();
    if model.split('/').count() != 2 || model.starts_with('/') || model.starts_with('.') {
        return Err(not_found(&cache, "not a repo id of the form org/name"));
    }
    let repo = cache.join(format!("models--{}", model.replace('/', "--")));
    let refs = repo.join("refs").join("main");
    let rev = std::fs::read_to_string(&refs).map_err(|_| not_found(&refs, "not in the Hugging Face cache"))?;
    let snapshot = repo.join("snapshots").join(rev.trim());
    if !snapshot.is_dir() {
        return Err(not_found(&snapshot, "its cached snapshot is missing"));
    }
    Ok(snapshot)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_is_itself() {
        let dir = std::env::temp_dir();
        assert_eq!(resolve_model_dir(dir.to_str().unwrap()).unwrap(), dir);
    }

    #[test]
    fn a_missing_repo_says_where_it_looked() {
        let err = resolve_model_dir("nobody/no-such-model-xyz").unwrap_err().to_string();
        assert!(err.starts_with("model nobody/no-such-model-xyz: is not a directory and not in the Hugging Face cache (looked in "), "{err}");
        assert!(err.contains("models--nobody--no-such-model-xyz/refs/main"), "{err}");
    }
}
