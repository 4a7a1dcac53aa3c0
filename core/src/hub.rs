//! The local Hugging Face hub cache, the one place that knows its layout: a repo id `org/name`
//! lives in `models--org--name/`, whose `refs/main` names the snapshot `snapshots/<rev>/`.
//! The cache is `$HF_HUB_CACHE`, else `$HF_HOME/hub`, else `~/.cache/huggingface/hub`.
//! Nothing is ever downloaded. Both `--model` resolvers (the weights in arl-qwen3, the
//! tokenizer and template in arl-chat) go through here.

use std::path::{Path, PathBuf};

/// Why a repo id has no usable snapshot in the cache.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HubError {
    /// The text (given here) is not of the form `org/name` ([`is_repo_id`]).
    #[error("`{0}` is not a repo id of the form org/name")]
    NotRepoId(String),
    /// The repo has no `refs/main` in the cache: it was never downloaded there (arl never
    /// downloads it), or the cache is elsewhere (`$HF_HUB_CACHE`, `$HF_HOME`).
    #[error("not in the Hugging Face cache (looked in {})", refs.display())]
    NotCached {
        /// The `refs/main` file that was looked for.
        refs: PathBuf,
    },
    /// `refs/main` names a snapshot directory that is not there (an incomplete or pruned
    /// download).
    #[error("refs/main names snapshot {}, which is missing", snapshot.display())]
    MissingSnapshot {
        /// The snapshot directory `refs/main` points to.
        snapshot: PathBuf,
    },
}

/// The hub cache directory named by the environment.
pub fn cache_dir() -> PathBuf {
    cache_dir_from(|k| std::env::var_os(k).map(PathBuf::from))
}

/// [`cache_dir`] with the environment as a function (for tests).
pub fn cache_dir_from(var: impl Fn(&str) -> Option<PathBuf>) -> PathBuf {
    if let Some(p) = var("HF_HUB_CACHE") {
        return p;
    }
    if let Some(p) = var("HF_HOME") {
        return p.join("hub");
    }
    var("HOME").unwrap_or_else(|| PathBuf::from("/root")).join(".cache/huggingface/hub")
}

/// Whether `text` has the shape of a repo id (`org/name`, neither part empty, not a path).
pub fn is_repo_id(text: &str) -> bool {
    !text.starts_with(['/', '.', '~']) && text.split_once('/').is_some_and(|(o, n)| !o.is_empty() && !n.is_empty() && !n.contains('/'))
}

/// The snapshot directory of `repo_id` in `cache`.
pub fn snapshot_in(repo_id: &str, cache: &Path) -> Result<PathBuf, HubError> {
    if !is_repo_id(repo_id) {
        return Err(HubError::NotRepoId(repo_id.to_string()));
    }
    let repo = cache.join(format!("models--{}", repo_id.replace('/', "--")));
    let refs = repo.join("refs").join("main");
    let rev = std::fs::read_to_string(&refs).map_err(|_| HubError::NotCached { refs: refs.clone() })?;
    let snapshot = repo.join("snapshots").join(rev.trim());
    if !snapshot.is_dir() {
        return Err(HubError::MissingSnapshot { snapshot });
    }
    Ok(snapshot)
}

/// [`snapshot_in`] the cache named by the environment.
pub fn snapshot(repo_id: &str) -> Result<PathBuf, HubError> {
    snapshot_in(repo_id, &cache_dir())
}

/// The snapshot revision (the commit hash in `snapshots/<rev>/`) when `dir` is a snapshot
/// directory of the hub cache layout, else `None`.
pub fn snapshot_revision(dir: &Path) -> Option<String> {
    let dir = dir.canonicalize().ok()?;
    let parent = dir.parent()?;
    let in_repo = parent.file_name()? == "snapshots" && parent.parent()?.file_name()?.to_string_lossy().starts_with("models--");
    in_repo.then(|| dir.file_name().map(|n| n.to_string_lossy().into_owned())).flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_dir_follows_hf_hub_cache_then_hf_home_then_home() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| PathBuf::from(v))
        };
        assert_eq!(cache_dir_from(env(&[("HF_HUB_CACHE", "/a"), ("HF_HOME", "/b")])), PathBuf::from("/a"));
        assert_eq!(cache_dir_from(env(&[("HF_HOME", "/b"), ("HOME", "/h")])), PathBuf::from("/b/hub"));
        assert_eq!(cache_dir_from(env(&[("HOME", "/h")])), PathBuf::from("/h/.cache/huggingface/hub"));
    }

    #[test]
    fn a_repo_id_resolves_through_refs_main() {
        let cache = std::env::temp_dir().join(format!("arl-core-hub-{}", std::process::id()));
        let snap = cache.join("models--Qwen--Qwen3-0.6B/snapshots/abc123");
        std::fs::create_dir_all(&snap).unwrap();
        std::fs::create_dir_all(cache.join("models--Qwen--Qwen3-0.6B/refs")).unwrap();
        std::fs::write(cache.join("models--Qwen--Qwen3-0.6B/refs/main"), "abc123\n").unwrap();
        assert_eq!(snapshot_in("Qwen/Qwen3-0.6B", &cache).unwrap(), snap);
        assert_eq!(snapshot_revision(&snap).as_deref(), Some("abc123"));
        assert_eq!(snapshot_revision(&cache), None);
        assert_eq!(
            snapshot_in("Qwen/Qwen3-1.7B", &cache).unwrap_err(),
            HubError::NotCached { refs: cache.join("models--Qwen--Qwen3-1.7B/refs/main") }
        );
        std::fs::write(cache.join("models--Qwen--Qwen3-0.6B/refs/main"), "def456\n").unwrap();
        assert!(matches!(snapshot_in("Qwen/Qwen3-0.6B", &cache), Err(HubError::MissingSnapshot { .. })));
        for bad in ["tiny", "/abs/path", "./rel/x", "a/b/c", "org/", "/x"] {
            assert_eq!(snapshot_in(bad, &cache).unwrap_err(), HubError::NotRepoId(bad.into()), "{bad}");
        }
        std::fs::remove_dir_all(&cache).unwrap();
    }
}
