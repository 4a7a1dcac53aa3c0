//! Saving and restoring AdamW's moments across processes.
//!
//! burn keys the optimizer record by `ParamId`, and a module reloaded from safetensors gets
//! fresh ids, so the record is written by *parameter order* instead: the module's trainable
//! float parameters are visited in their fixed declaration order and trainable parameter
//! `i`'s moments are stored as tensors `i.moment_1` / `i.moment_2` (f32) in one safetensors
//! file, with its step count `time` in the metadata (`i.time`). Loading visits the new module
//! in the same order and rebuilds the map with its ids. A parameter that never had a gradient
//! has no entry. Frozen parameters (`require_grad` off: a LoRA run's base weights) take no
//! index, so a LoRA run's state holds and counts only its adapters. Moments are restored in
//! their parameter's dtype (f32 on disk holds bf16/f16 exactly).

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use burn::module::{AutodiffModule, ModuleVisitor, Param};
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{Tensor, TensorData};
use safetensors::tensor::{Dtype, SafeTensors, TensorView};

use crate::Optim;
use crate::flat::{FlatAdamW, Group, Moments};

/// Reading or writing the optimizer state failed, or it does not fit the module.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("optimizer state {path}: {message}")]
    Io { path: String, message: String },
    #[error("optimizer state {path} does not fit the model: {message}")]
    Mismatch { path: String, message: String },
}

impl<B: AutodiffBackend, M: AutodiffModule<B>> Optim<M, B> {
    /// Write the AdamW moments of `module`'s parameters to `path` (safetensors), by
    /// parameter order. Accumulated, unstepped gradients are not saved.
    pub fn save_state(&self, module: &M, path: &Path) -> Result<(), StateError> {
        let io = |e: String| StateError::Io { path: path.display().to_string(), message: e };
        let mut saver = Saver::<B> { groups: &self.adamw.groups, index: 0, tensors: Vec::new(), meta: HashMap::new() };
        module.visit(&mut saver);
        let Saver { tensors, mut meta, index, .. } = saver;
        meta.insert("parameters".into(), index.to_string());
        let views: Vec<(String, TensorView<'_>)> = tensors
            .iter()
            .map(|(name, shape, bytes)| {
                Ok((name.clone(), TensorView::new(Dtype::F32, shape.clone(), bytes).map_err(|e| io(e.to_string()))?))
            })
            .collect::<Result<_, StateError>>()?;
        safetensors::serialize_to_file(views, Some(meta), path).map_err(|e| io(e.to_string()))
    }

    /// Restore moments written by [`Optim::save_state`] for `module` (the same architecture,
    /// typically reloaded from the checkpoint beside them), replacing any current state.
    pub fn load_state(&mut self, module: &M, path: &Path) -> Result<(), StateError> {
        let p = path.display().to_string();
        let bytes = std::fs::read(path).map_err(|e| StateError::Io { path: p.clone(), message: e.to_string() })?;
        let (_, header) = SafeTensors::read_metadata(&bytes).map_err(|e| StateError::Io { path: p.clone(), message: e.to_string() })?;
        let meta = header.metadata().clone().unwrap_or_default();
        let st = SafeTensors::deserialize(&bytes).map_err(|e| StateError::Io { path: p.clone(), message: e.to_string() })?;
        let mut loader = Loader::<B> { st: &st, meta: &meta, index: 0, parts: BTreeMap::new(), error: None };
        module.visit(&mut loader);
        if let Some(message) = loader.error {
            return Err(StateError::Mismatch { path: p, message });
        }
        let saved: usize = meta.get("parameters").and_then(|s| s.parse().ok()).unwrap_or(usize::MAX);
        if saved != loader.index {
            return Err(StateError::Mismatch {
                path: p,
                message: format!("{saved} trainable parameters saved, the model has {}", loader.index),
            });
        }
        self.adamw = FlatAdamW { groups: FlatAdamW::join(loader.parts) };
        self.zero_grad();
        Ok(())
    }
}

struct Saver<'a, B: AutodiffBackend> {
    groups: &'a [Group<B>],
    index: usize,
    tensors: Vec<(String, Vec<usize>, Vec<u8>)>,
    meta: HashMap<String, String>,
}

fn f32_bytes<B: burn::tensor::backend::Backend, const D: usize>(t: Tensor<B, D>) -> Vec<u8> {
    t.into_data().convert::<f32>().as_bytes().to_vec()
}

impl<B: AutodiffBackend> ModuleVisitor<B> for Saver<'_, B> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        if !param.val().is_require_grad() {
            return;
        }
        let i = self.index;
        self.index += 1;
        let Some((group, range)) = self.groups.iter().find_map(|g| g.range(i).map(|r| (g, r))) else { return };
        self.meta.insert(format!("{i}.time"), group.time.to_string());
        let shape = param.val().dims().to_vec();
        let part = |t: &Tensor<B::InnerBackend, 1>| f32_bytes(t.clone().narrow(0, range.start, range.len()));
        self.tensors.push((format!("{i}.moment_1"), shape.clone(), part(&group.m)));
        self.tensors.push((format!("{i}.moment_2"), shape, part(&group.v)));
    }
}

struct Loader<'a, B: AutodiffBackend> {
    st: &'a SafeTensors<'a>,
    meta: &'a HashMap<String, String>,
    index: usize,
    parts: BTreeMap<usize, Moments<B>>,
    error: Option<String>,
}

impl<B: AutodiffBackend> Loader<'_, B> {
    fn tensor<const D: usize>(
        &self,
        name: &str,
        shape: &[usize],
        like: &Tensor<B::InnerBackend, D>,
    ) -> Result<Tensor<B::InnerBackend, 1>, String> {
        let view = self.st.tensor(name).map_err(|e| format!("{name}: {e}"))?;
        if view.shape() != shape || view.dtype() != Dtype::F32 {
            return Err(format!("{name}: shape {:?} {:?}, the parameter is {shape:?}", view.shape(), view.dtype()));
        }
        let values: Vec<f32> = view.data().chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
        // In the parameter's dtype (a bf16 run's moments are bf16): `from_data` on a bare
        // device would make them the device's default float type, f32.
        let n = values.len();
        Ok(Tensor::from_data(TensorData::new(values, [n]), (&like.device(), like.dtype())))
    }
}

impl<B: AutodiffBackend> ModuleVisitor<B> for Loader<'_, B> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        if !param.val().is_require_grad() {
            return;
        }
        let i = self.index;
        self.index += 1;
        if self.error.is_some() {
            return;
        }
        let Some(time) = self.meta.get(&format!("{i}.time")) else { return };
        let inner = param.val().inner();
        let shape = inner.dims().to_vec();
        let result = (|| {
            let time: usize = time.parse().map_err(|_| format!("{i}.time: not a number: {time}"))?;
            let m = self.tensor::<D>(&format!("{i}.moment_1"), &shape, &inner)?;
            let v = self.tensor::<D>(&format!("{i}.moment_2"), &shape, &inner)?;
            Ok::<_, String>(Moments { dtype: inner.dtype(), time, m, v })
        })();
        match result {
            Ok(moments) => {
                self.parts.insert(i, moments);
            }
            Err(e) => self.error = Some(format!("parameter {i}: {e}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use burn::module::{Module, Param};
    use burn::tensor::{Tensor, TensorData};

    use crate::testing::{Two, device, two};
    use crate::{Optim, OptimConfig};

    /// A fresh module (new `ParamId`s) with the given values, as a reload from disk gives.
    fn build(a: Vec<f32>, b: Vec<f32>) -> Two<burn::Dispatch> {
        two(a, b)
    }

    fn values(m: &Two<burn::Dispatch>) -> (Vec<f32>, Vec<f32>) {
        let host = |d: burn::tensor::TensorData| d.convert::<f32>().to_vec().unwrap();
        (host(m.a.val().into_data()), host(m.b.val().into_data()))
    }

    /// A loss whose gradient depends on the parameters, so the moments matter.
    fn step(optim: &mut Optim<Two<burn::Dispatch>>, m: Two<burn::Dispatch>) -> Two<burn::Dispatch> {
        let loss = (m.a.val().powi_scalar(2).sum() * 0.5 + (m.b.val() * m.b.val().exp()).sum()).reshape([1]);
        optim.backward(&m, loss);
        optim.step(m, 0.05).0
    }

    #[test]
    fn save_then_load_into_a_reloaded_module_continues_bit_identically() {
        let config = OptimConfig { weight_decay: 0.01, ..Default::default() };
        let mut optim = Optim::new(config.clone());
        let mut m = build(vec![1.0, -2.0, 0.5, 3.0], vec![0.25, -1.0]);
        for _ in 0..3 {
            m = step(&mut optim, m);
        }
        let dir = std::env::temp_dir().join(format!("arl-optim-state-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("optimizer.safetensors");
        optim.save_state(&m, &path).unwrap();
        let (a, b) = values(&m);
        let (a0, b0) = (a.clone(), b.clone());

        // Uninterrupted: two more steps.
        let mut straight = m;
        for _ in 0..2 {
            straight = step(&mut optim, straight);
        }
        // Resumed: a new module (new ids) and a new optimizer restored from disk.
        let mut resumed = build(a, b);
        let mut optim2 = Optim::new(config);
        optim2.load_state(&resumed, &path).unwrap();
        for _ in 0..2 {
            resumed = step(&mut optim2, resumed);
        }
        assert_eq!(values(&straight), values(&resumed));

        // Without the state, the continuation differs (the moments matter).
        let mut fresh = build(a0, b0);
        let mut optim3 = Optim::new(OptimConfig { weight_decay: 0.01, ..Default::default() });
        for _ in 0..2 {
            fresh = step(&mut optim3, fresh);
        }
        assert_ne!(values(&straight), values(&fresh));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A bf16 module's moments come back in bf16, so the resumed steps are the uninterrupted
    /// ones bit for bit (f32 moments would make them f32 arithmetic, or a dtype mismatch).
    #[test]
    fn bf16_moments_are_restored_in_bf16() {
        use crate::testing::two_in;
        use burn::tensor::DType;
        let bf16 = |a: Vec<f32>, b: Vec<f32>| two_in(a, b, DType::BF16);
        let mut optim = Optim::new(OptimConfig::default());
        let mut m = bf16(vec![1.0, -2.0, 0.5, 3.0], vec![0.25, -1.0]);
        for _ in 0..2 {
            m = step(&mut optim, m);
        }
        let path = std::env::temp_dir().join(format!("arl-optim-bf16-{}.safetensors", std::process::id()));
        optim.save_state(&m, &path).unwrap();
        let (a, b) = values(&m);
        let mut straight = m;
        for _ in 0..2 {
            straight = step(&mut optim, straight);
        }
        let mut resumed = bf16(a, b);
        let mut optim2 = Optim::new(OptimConfig::default());
        optim2.load_state(&resumed, &path).unwrap();
        for _ in 0..2 {
            resumed = step(&mut optim2, resumed);
        }
        assert_eq!(resumed.a.val().dtype(), DType::BF16);
        assert_eq!(values(&straight), values(&resumed));
        std::fs::remove_file(&path).unwrap();
    }

    /// A frozen parameter (a LoRA base weight) gets no gradient, no step and no place in the
    /// saved state: only the trainable ones are counted, saved and restored.
    #[test]
    fn frozen_parameters_are_neither_stepped_nor_saved() {
        let frozen = |a: Vec<f32>, b: Vec<f32>| {
            let m = build(a, b);
            Two { a: m.a.set_require_grad(false), b: m.b }
        };
        let a0 = vec![1.0, -2.0, 0.5, 3.0];
        let mut optim = Optim::new(OptimConfig::default());
        let mut m = frozen(a0.clone(), vec![0.25, -1.0]);
        for _ in 0..2 {
            m = step(&mut optim, m);
        }
        let (a, b) = values(&m);
        assert_eq!(a, a0, "the frozen parameter did not move");
        assert_ne!(b, vec![0.25, -1.0], "the trainable one did");
        let path = std::env::temp_dir().join(format!("arl-optim-frozen-{}.safetensors", std::process::id()));
        optim.save_state(&m, &path).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
        let mut names: Vec<String> = st.names().into_iter().map(str::to_string).collect();
        names.sort();
        assert_eq!(names, ["0.moment_1", "0.moment_2"], "one trainable parameter, `b`, as index 0");
        assert_eq!(st.tensor("0.moment_1").unwrap().shape(), [2]);
        let mut straight = m;
        for _ in 0..2 {
            straight = step(&mut optim, straight);
        }
        let mut resumed = frozen(a.clone(), b.clone());
        let mut optim2 = Optim::new(OptimConfig::default());
        optim2.load_state(&resumed, &path).unwrap();
        for _ in 0..2 {
            resumed = step(&mut optim2, resumed);
        }
        assert_eq!(values(&straight), values(&resumed));
        // A module that trains both does not fit a state of one.
        let mut o = Optim::new(OptimConfig::default());
        let err = o.load_state(&build(a, b), &path).unwrap_err().to_string();
        assert!(err.contains("does not fit the model: parameter 0: 0.moment_1: shape [2] F32, the parameter is [2, 2]"), "{err}");
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn a_state_for_another_model_is_refused() {
        let mut optim = Optim::new(OptimConfig::default());
        let m = step(&mut optim, build(vec![1.0, -2.0, 0.5, 3.0], vec![0.25, -1.0]));
        let path = std::env::temp_dir().join(format!("arl-optim-bad-{}.safetensors", std::process::id()));
        optim.save_state(&m, &path).unwrap();
        #[derive(Module, Debug)]
        struct One<B: burn::tensor::backend::Backend> {
            a: Param<Tensor<B, 2>>,
        }
        let one =
            One { a: Param::from_tensor(Tensor::<burn::Dispatch, 2>::from_data(TensorData::new(vec![0.0f32; 6], [3, 2]), &device())) };
        let mut o = Optim::<One<burn::Dispatch>>::new(OptimConfig::default());
        let err = o.load_state(&one, &path).unwrap_err().to_string();
        assert!(err.contains("does not fit"), "{err}");
        std::fs::remove_file(&path).unwrap();
    }
}
