//! `--model`: a directory, or a repo id in the local Hugging Face cache (never downloaded).
//!
//! The cache layout is arl-core's ([`arl_core::hub`]), shared with the model loader.

use std::path::{Path, PathBuf};

use arl_core::ChatError;
use arl_core::hub::{self, HubError};

/// `model` as a directory if it is one, else as a GGUF source converted once into arl's
/// cache ([`arl_gguf::known`]: a `.gguf` file or a known model such as `smollm2-135m`), else
/// as `org/name` in the hub cache ([`arl_core::hub`]).
pub fn resolve_model_dir(model: &str) -> Result<PathBuf, ChatError> {
    let path = Path::new(model);
    if path.is_dir() {
        return Ok(path.to_path_buf());
    }
    match arl_gguf::known::resolve(model) {
        Ok(Some(dir)) => return Ok(dir),
        Ok(None) => {}
        Err(e) => return Err(ChatError::Load { what: "model", path: model.to_string(), message: e.to_string() }),
    }
    let not_found = |why: String| ChatError::Load {
        what: "model",
        path: model.to_string(),
        message: format!("is not a directory and {why}; arl never downloads"),
    };
    hub::snapshot(model).map_err(|e| match e {
        HubError::NotRepoId(_) => not_found(format!("not a repo id of the form org/name (hub cache: {})", hub::cache_dir().display())),
        other => not_found(other.to_string()),
    })
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
        assert!(
            err.starts_with("model nobody/no-such-model-xyz: is not a directory and not in the Hugging Face cache (looked in "),
            "{err}"
        );
        assert!(err.contains("models--nobody--no-such-model-xyz/refs/main"), "{err}");
    }
}
