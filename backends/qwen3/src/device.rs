//! `--backend` / `--device-index` / `--dtype` → a burn `DispatchDevice`: the one place that
//! maps a [`BackendKind`] to a device. `cpu` → Flex, `cuda` → Cuda(i), `tch` → LibTorch(Cpu),
//! `tch-cuda` → LibTorch(Cuda(i)). A backend not compiled in is an error naming the feature.

use arl_core::{BackendKind, DeviceSpec};
use burn::tensor::backend::Backend;
use burn::{Dispatch, DispatchDevice};

/// The float type of the weights and the compute (arl-core's, as in `[model] dtype`).
/// Log-probabilities and losses are always accumulated in f32.
pub use arl_core::config::DType;

/// `"f32" | "bf16" | "f16"` → the dtype.
pub fn parse_dtype(text: &str) -> Result<DType, DeviceError> {
    match text {
        "f32" => Ok(DType::F32),
        "bf16" => Ok(DType::Bf16),
        "f16" => Ok(DType::F16),
        _ => Err(DeviceError::UnknownDType(text.to_string())),
    }
}

pub fn dtype_name(dtype: DType) -> &'static str {
    match dtype {
        DType::F32 => "f32",
        DType::Bf16 => "bf16",
        DType::F16 => "f16",
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DeviceError {
    #[error("unknown backend `{0}`; valid backends: cpu, cuda, tch, tch-cuda")]
    UnknownBackend(String),
    #[error("{0}")]
    NotCompiledIn(String),
    #[error(
        "backend `{0}`: no CUDA driver on this machine (libcuda.so.1 did not load); run on a machine with an \
         NVIDIA GPU and driver, or choose --backend cpu"
    )]
    NoCudaDriver(BackendKind),
    #[error("unknown dtype `{0}`; valid dtypes: f32, bf16, f16")]
    UnknownDType(String),
    #[error("--device-index {index} makes no sense for backend `{backend}` (a CPU backend has one device); drop it")]
    IndexOnCpu { backend: BackendKind, index: usize },
    #[error("--dtype {dtype} is not supported by backend `{backend}` on this device; use --dtype f32 or another backend")]
    DTypeUnsupported { backend: BackendKind, dtype: &'static str },
}

/// `f()` on one of rayon's threads, the pool burn-flex's kernels run on: a parallel op then
/// splits its work from that thread and runs a part there, where from outside the pool each op
/// is queued and the caller put to sleep and woken again. 63 decode steps on SmolLM2's shape
/// (≈ 270 parallel products each) took 1.89–2.89 s that way, 1.78–1.95 s on the pool. Not for
/// large ops: a prefill of 16 × 768 tokens and an update were slower there and took more
/// memory, probably as a worker's malloc arena maps large buffers afresh each time
/// (results/bench-peer-cpu.md, session 21). Harmless on other backends, which do not use the
/// pool; a call from inside it runs in place.
pub(crate) fn on_pool<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    rayon::scope(|_| f())
}

/// `"cpu" | "cuda" | "tch" | "tch-cuda"` → the kind (whether or not it is compiled in).
pub fn parse_backend(text: &str) -> Result<BackendKind, DeviceError> {
    BackendKind::from_name(text).ok_or_else(|| DeviceError::UnknownBackend(text.to_string()))
}

/// The device for `backend` (GPU number `index` for cuda/tch-cuda) computing in `dtype`.
pub fn device(backend: BackendKind, index: usize, dtype: DType) -> Result<DispatchDevice, DeviceError> {
    backend.ensure_compiled_in().map_err(DeviceError::NotCompiledIn)?;
    if index != 0 && backend.is_cpu() {
        return Err(DeviceError::IndexOnCpu { backend, index });
    }
    #[cfg(feature = "cuda")]
    if backend == BackendKind::Cuda && !libcuda_loads() {
        // burn-cuda would panic on a worker thread instead.
        return Err(DeviceError::NoCudaDriver(backend));
    }
    let device = match backend {
        BackendKind::Cpu => DispatchDevice::Flex(Default::default()),
        #[cfg(feature = "cuda")]
        BackendKind::Cuda => DispatchDevice::Cuda(burn::backend::cuda::CudaDevice { index }),
        #[cfg(feature = "tch")]
        BackendKind::Tch => DispatchDevice::LibTorch(burn::backend::libtorch::LibTorchDevice::Cpu),
        #[cfg(feature = "tch")]
        BackendKind::TchCuda => DispatchDevice::LibTorch(burn::backend::libtorch::LibTorchDevice::Cuda(index)),
        #[allow(unreachable_patterns)]
        other => unreachable!("`{other}` passed ensure_compiled_in without its device arm"),
    };
    if !<Dispatch as Backend>::supports_dtype(&device, burn_dtype(dtype)) {
        return Err(DeviceError::DTypeUnsupported { backend, dtype: dtype_name(dtype) });
    }
    Ok(device)
}

/// arl's dtype as burn's.
pub fn burn_dtype(dtype: DType) -> burn::tensor::DType {
    match dtype {
        DType::F32 => burn::tensor::DType::F32,
        DType::Bf16 => burn::tensor::DType::BF16,
        DType::F16 => burn::tensor::DType::F16,
    }
}

/// Whether the CUDA driver library can be loaded (burn-cuda loads it at run time).
#[cfg(feature = "cuda")]
fn libcuda_loads() -> bool {
    // SAFETY: dlopen/dlclose with a valid C string; the handle is closed at once.
    unsafe {
        let handle = libc::dlopen(c"libcuda.so.1".as_ptr(), libc::RTLD_LAZY | libc::RTLD_LOCAL);
        if handle.is_null() {
            return false;
        }
        libc::dlclose(handle);
        true
    }
}

/// `device` from the strings a user typed.
pub fn device_from_args(backend: &str, index: usize, dtype: &str) -> Result<DispatchDevice, DeviceError> {
    device(parse_backend(backend)?, index, parse_dtype(dtype)?)
}

/// The device a run configuration's `[model]` section names.
pub fn device_for(model: &arl_core::config::ModelConfig) -> Result<DispatchDevice, DeviceError> {
    device(model.backend, model.device_index, model.dtype)
}

/// The device `[model] rollout_device` names, when it is not the training device (`None`:
/// sampling shares the training device). The weights keep `model.dtype` there.
pub fn rollout_device_for(model: &arl_core::config::ModelConfig) -> Result<Option<DispatchDevice>, RolloutDeviceError> {
    let Some(text) = &model.rollout_device else { return Ok(None) };
    let spec: DeviceSpec = text.parse().map_err(RolloutDeviceError::Spec)?;
    if spec == (DeviceSpec { backend: model.backend, index: model.device_index }) {
        return Ok(None);
    }
    device(spec.backend, spec.index, model.dtype).map(Some).map_err(RolloutDeviceError::Device)
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RolloutDeviceError {
    #[error("model.rollout_device: {0}")]
    Spec(String),
    #[error("model.rollout_device: {0}")]
    Device(DeviceError),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_is_flex() {
        assert!(matches!(device_from_args("cpu", 0, "f32").unwrap(), DispatchDevice::Flex(_)));
    }

    #[test]
    fn errors_name_the_fix() {
        assert_eq!(device_from_args("gpu", 0, "f32").unwrap_err(), DeviceError::UnknownBackend("gpu".into()));
        assert_eq!(device_from_args("cpu", 0, "f8").unwrap_err(), DeviceError::UnknownDType("f8".into()));
        assert!(device_from_args("cpu", 1, "f32").unwrap_err().to_string().contains("--device-index 1"));
        // burn-flex computes in bf16 and f16.
        assert!(device_from_args("cpu", 0, "bf16").is_ok() && device_from_args("cpu", 0, "f16").is_ok());
        #[cfg(not(feature = "cuda"))]
        assert!(device_from_args("cuda", 0, "f32").unwrap_err().to_string().contains("--features cuda"));
        #[cfg(not(feature = "tch"))]
        assert!(device_from_args("tch-cuda", 1, "f32").unwrap_err().to_string().contains("--features tch"));
    }

    #[test]
    fn the_rollout_device_is_none_when_it_is_the_training_device() {
        let mut model = arl_core::config::ModelConfig::default();
        assert_eq!(rollout_device_for(&model), Ok(None));
        model.rollout_device = Some("cpu".into());
        assert_eq!(rollout_device_for(&model), Ok(None));
        model.rollout_device = Some("cpu:1".into());
        assert_eq!(
            rollout_device_for(&model).unwrap_err().to_string(),
            "model.rollout_device: `cpu:1`: backend `cpu` has one device; write `cpu`"
        );
        #[cfg(not(feature = "cuda"))]
        {
            model.rollout_device = Some("cuda:1".into());
            let e = rollout_device_for(&model).unwrap_err().to_string();
            assert!(e.starts_with("model.rollout_device: backend `cuda` is not compiled into this binary"), "{e}");
        }
        #[cfg(feature = "tch")]
        {
            model.rollout_device = Some("tch".into());
            assert!(matches!(rollout_device_for(&model), Ok(Some(DispatchDevice::LibTorch(_)))));
        }
    }
}
