use std::path::PathBuf;

/// Why a GGUF file cannot be read or converted. Each message names the file and, where
/// something is unsupported, what is.
#[derive(Debug, thiserror::Error)]
pub enum GgufError {
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{}: not a valid GGUF file: {message}", path.display())]
    Corrupt { path: PathBuf, message: String },
    #[error("{}: truncated: {what} runs past the end of the file ({file_len} bytes); download it again", path.display())]
    Truncated { path: PathBuf, what: String, file_len: u64 },
    #[error("{}: {what} is not supported (supported: {supported})", path.display())]
    Unsupported { path: PathBuf, what: String, supported: String },
    #[error("{}: metadata key `{key}` {problem}", path.display())]
    Metadata { path: PathBuf, key: String, problem: String },
    #[error("{}: {message}", path.display())]
    Tensor { path: PathBuf, message: String },
    #[error("{}: sha256 is {found}, expected {expected}: the file is not the one arl knows; delete it and fetch it again", path.display())]
    Checksum { path: PathBuf, expected: String, found: String },
    #[error("{}: cannot write the converted model: {message}", path.display())]
    Write { path: PathBuf, message: String },
    #[error("{what} is not here: {}; {fix}", path.display())]
    MissingAsset { what: String, path: PathBuf, fix: String },
}
