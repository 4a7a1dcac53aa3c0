//! Why a model could not be built, loaded, saved or run. Every message names the file, the
//! tensor or the value at fault and, where there is one, the fix.

use std::path::{Path, PathBuf};

use thiserror::Error;

#[derive(Debug, Error)]
pub enum ModelError {
    #[error("{path}: {message}")]
    Config { path: String, message: String },
    #[error("unsupported architecture `{found}`; arl loads {}", crate::config::Family::SUPPORTED)]
    UnsupportedArchitecture { found: String },
    #[error("missing file {path}: {source}")]
    MissingFile { path: PathBuf, source: std::io::Error },
    #[error("{path}: not a valid safetensors file: {message}")]
    Safetensors { path: PathBuf, message: String },
    #[error("tensor `{name}` is missing from the checkpoint in {dir}")]
    MissingTensor { name: String, dir: PathBuf },
    #[error("tensor `{name}` has shape {found:?}, expected {expected:?} from config.json")]
    Shape { name: String, expected: Vec<usize>, found: Vec<usize> },
    #[error("tensor `{name}` has dtype {dtype}; arl loads F32, BF16 and F16")]
    DType { name: String, dtype: String },
    #[error(
        "`{source_name}` is not a directory, a preset ({presets}), or a repo id in the local Hugging Face cache \
         (looked in {looked_in}); download it first, e.g. `huggingface-cli download {source_name}`, \
         or pass a model directory"
    )]
    NotFound { source_name: String, looked_in: String, presets: String },
    /// A source written as a path (`./x`, `/x`, `~/x`, `a/b/c`) that is no directory.
    #[error("model directory {path} does not exist (a path; presets are {presets})")]
    NoSuchDir { path: String, presets: String },
    /// Neither a directory, a preset nor something shaped like a repo id.
    #[error("`{source_name}` is not a model directory, a preset ({presets}) or a repo id of the form org/name")]
    Unknown { source_name: String, presets: String },
    #[error("cannot write {path}: {message}")]
    Write { path: PathBuf, message: String },
    #[error(transparent)]
    Gguf(#[from] arl_gguf::GgufError),
    #[error("invalid request: {0}")]
    Request(String),
    /// LoRA settings the model cannot take (an unknown target module, rank 0).
    #[error("LoRA: {0}")]
    Lora(String),
    /// An adapter directory that cannot be used with this base model.
    #[error("adapter {path}: {message}")]
    Adapter { path: String, message: String },
}

impl ModelError {
    pub(crate) fn missing(path: &Path, source: std::io::Error) -> Self {
        Self::MissingFile { path: path.to_path_buf(), source }
    }

    pub(crate) fn write(path: &Path, e: impl std::fmt::Display) -> Self {
        Self::Write { path: path.to_path_buf(), message: e.to_string() }
    }

    /// Re-attribute a config error to the file it came from.
    pub(crate) fn in_file(self, path: &Path) -> Self {
        match self {
            Self::Config { message, .. } => Self::Config { path: path.display().to_string(), message },
            other => other,
        }
    }
}
