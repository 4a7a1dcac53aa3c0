//! Backend names as users type them, and which this binary has. A backend is just a burn
//! `Dispatch` device; the mapping to devices lives in `backends/`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Which tensor backend a model runs on (`model.backend`, `--backend`).
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
    /// Every backend, compiled in or not, in the order messages list them.
    pub const ALL: [BackendKind; 4] = [Self::Cpu, Self::Cuda, Self::Tch, Self::TchCuda];

    /// The backend `name` names (`cpu`, `cuda`, `tch`, `tch-cuda`), compiled in or not.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|b| b.name() == name)
    }

    /// Whether it runs on the CPU, which is one device (no GPU ordinal).
    pub fn is_cpu(self) -> bool {
        matches!(self, Self::Cpu | Self::Tch)
    }

    /// The name as users type it (`cpu`, `cuda`, `tch`, `tch-cuda`).
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

    /// Whether this binary was built with the backend's cargo feature.
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

/// A device as a user names it in one word (`[model] rollout_device`): `BACKEND` or
/// `BACKEND:GPU` — `cuda:1`, `tch-cuda:0`, `cpu`, `tch`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceSpec {
    /// The backend (`BACKEND`).
    pub backend: BackendKind,
    /// The GPU ordinal (0 on the CPU backends, which have one device).
    pub index: usize,
}

impl std::str::FromStr for DeviceSpec {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let (name, index) = match text.split_once(':') {
            Some((name, index)) => (name, Some(index)),
            None => (text, None),
        };
        let backend = BackendKind::from_name(name).ok_or_else(|| {
            format!("`{text}` names no backend; valid: BACKEND or BACKEND:GPU with BACKEND one of cpu, cuda, tch, tch-cuda (e.g. `cuda:1`)")
        })?;
        let index = match index {
            None => 0,
            Some(i) => i.parse().map_err(|_| format!("`{text}`: `{i}` is not a GPU number; write e.g. `{name}:1`"))?,
        };
        if index != 0 && backend.is_cpu() {
            return Err(format!("`{text}`: backend `{name}` has one device; write `{name}`"));
        }
        Ok(Self { backend, index })
    }
}

impl std::fmt::Display for DeviceSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.backend.is_cpu() { f.write_str(self.backend.name()) } else { write!(f, "{}:{}", self.backend, self.index) }
    }
}

impl std::fmt::Display for BackendKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_specs_parse_and_print_as_typed() {
        for text in ["cpu", "tch", "cuda:1", "tch-cuda:0"] {
            assert_eq!(text.parse::<DeviceSpec>().unwrap().to_string(), text);
        }
        assert_eq!("cuda".parse::<DeviceSpec>().unwrap(), DeviceSpec { backend: BackendKind::Cuda, index: 0 });
        assert_eq!("cuda:2".parse::<DeviceSpec>().unwrap(), DeviceSpec { backend: BackendKind::Cuda, index: 2 });
        let bad = |t: &str| t.parse::<DeviceSpec>().unwrap_err();
        assert!(bad("gpu:1").starts_with("`gpu:1` names no backend; valid: BACKEND or BACKEND:GPU"), "{}", bad("gpu:1"));
        assert_eq!(bad("cuda:x"), "`cuda:x`: `x` is not a GPU number; write e.g. `cuda:1`");
        assert_eq!(bad("cpu:1"), "`cpu:1`: backend `cpu` has one device; write `cpu`");
    }
}
