//! Backend names as users type them, and which this binary has. A backend is just a burn
//! `Dispatch` device; the mapping to devices lives in `backends/`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum BackendKind {
    /// burn-flex, pure Rust, always compiled in.
    #[serde(rename = "cpu")]
    Cpu,
    /// burn-cuda (cargo feature `cuda`).
    #[serde(rename = "cuda")]
    Cuda,
    /// libtorch on the CPU (cargo feature `tch`).
    #[serde(rename = "tch")]
    Tch,
    /// libtorch on a CUDA GPU (cargo feature `tch`).
    #[serde(rename = "tch-cuda")]
    TchCuda,
}

impl BackendKind {
    pub const ALL: [BackendKind; 4] = [Self::Cpu, Self::Cuda, Self::Tch, Self::TchCuda];

    pub fn name(self) -> &'static str {
        match self {
            Self::Cpu => "cpu",
            Self::Cuda => "cuda",
            Self::Tch => "tch",
            Self::TchCuda => "tch-cuda",
        }
    }

    /// The cargo feature that compiles this backend in (`None`: always there).
    pub fn feature(self) -> Option<&'static str> {
        match self {
            Self::Cpu => None,
            Self::Cuda => Some("cuda"),
            Self::Tch | Self::TchCuda => Some("tch"),
        }
    }

    pub fn compiled_in(self) -> bool {
        match self {
            Self::Cpu => true,
            Self::Cuda => cfg!(feature = "cuda"),
            Self::Tch | Self::TchCuda => cfg!(feature = "tch"),
        }
    }

    /// Ok if compiled in, else a one-line error naming the feature to enable.
    pub fn ensure_compiled_in(self) -> Result<(), String> {
        if self.compiled_in() {
            return Ok(());
        }
        let feature = self.feature().unwrap_or_default();
        Err(format!(
            "backend `{}` is not compiled into this binary; rebuild with `--features {feature}` \
             (this binary has: {})",
            self.name(),
            Self::ALL.iter().filter(|b| b.compiled_in()).map(|b| b.name()).collect::<Vec<_>>().join(", ")
        ))
    }
}

impl std::fmt::Display for BackendKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
