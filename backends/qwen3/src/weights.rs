//! Tensors by HF name: read from safetensors files (one `model.safetensors` or shards named
//! by `model.safetensors.index.json`; F32, BF16 and F16 all become f32), made up from a seed
//! (presets), and written back as `model.safetensors` (F32).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Normal};
use safetensors::tensor::{Dtype, SafeTensors, TensorView};

use crate::ModelError;

/// Hands out each weight by its HF name and shape, as f32 in HF's row-major layout.
pub trait WeightSource {
    fn get(&mut self, name: &str, shape: &[usize]) -> Result<Vec<f32>, ModelError>;
    /// Whether a tensor exists (used for the optional `lm_head.weight` of a tied model).
    fn has(&self, name: &str) -> bool;
}

/// The safetensors files of a checkpoint directory, read into memory.
pub struct Checkpoint {
    dir: PathBuf,
    files: Vec<(PathBuf, Vec<u8>)>,
    /// tensor name → index into `files`.
    index: HashMap<String, usize>,
}

impl Checkpoint {
    pub fn open(dir: &Path) -> Result<Self, ModelError> {
        let single = dir.join("model.safetensors");
        let index_path = dir.join("model.safetensors.index.json");
        let shard_names: Vec<String> = if index_path.exists() {
            let text = std::fs::read_to_string(&index_path).map_err(|e| ModelError::missing(&index_path, e))?;
            let doc: serde_json::Value = serde_json::from_str(&text)
                .map_err(|e| ModelError::Config { path: index_path.display().to_string(), message: e.to_string() })?;
            let map = doc["weight_map"]
                .as_object()
                .ok_or_else(|| ModelError::Config { path: index_path.display().to_string(), message: "no `weight_map` object".into() })?;
            let mut names: Vec<String> = map.values().filter_map(|v| v.as_str().map(str::to_string)).collect();
            names.sort();
            names.dedup();
            names
        } else if single.exists() {
            vec!["model.safetensors".into()]
        } else {
            return Err(ModelError::MissingFile {
                path: single,
                source: std::io::Error::new(std::io::ErrorKind::NotFound, "neither it nor model.safetensors.index.json exists"),
            });
        };
        let mut files = Vec::new();
        let mut index = HashMap::new();
        for name in shard_names {
            let path = dir.join(&name);
            let bytes = std::fs::read(&path).map_err(|e| ModelError::missing(&path, e))?;
            let st =
                SafeTensors::deserialize(&bytes).map_err(|e| ModelError::Safetensors { path: path.clone(), message: e.to_string() })?;
            for n in st.names() {
                index.insert(n.to_string(), files.len());
            }
            files.push((path, bytes));
        }
        Ok(Self { dir: dir.to_path_buf(), files, index })
    }
}

impl WeightSource for Checkpoint {
    fn get(&mut self, name: &str, shape: &[usize]) -> Result<Vec<f32>, ModelError> {
        let missing = || ModelError::MissingTensor { name: name.into(), dir: self.dir.clone() };
        let &i = self.index.get(name).ok_or_else(missing)?;
        let (path, bytes) = &self.files[i];
        let st = SafeTensors::deserialize(bytes).map_err(|e| ModelError::Safetensors { path: path.clone(), message: e.to_string() })?;
        let view = st.tensor(name).map_err(|_| missing())?;
        if view.shape() != shape {
            return Err(ModelError::Shape { name: name.into(), expected: shape.to_vec(), found: view.shape().to_vec() });
        }
        to_f32(name, &view)
    }

    fn has(&self, name: &str) -> bool {
        self.index.contains_key(name)
    }
}

pub(crate) fn to_f32(name: &str, view: &TensorView<'_>) -> Result<Vec<f32>, ModelError> {
    let data = view.data();
    Ok(match view.dtype() {
        Dtype::F32 => data.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect(),
        Dtype::BF16 => data.chunks_exact(2).map(|b| half::bf16::from_le_bytes([b[0], b[1]]).to_f32()).collect(),
        Dtype::F16 => data.chunks_exact(2).map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32()).collect(),
        other => return Err(ModelError::DType { name: name.into(), dtype: format!("{other:?}") }),
    })
}

/// Seeded random weights: matrices N(0, std), norm weights 1, biases 0. Each tensor draws
/// from its own stream (seed and name), so the values do not depend on load order.
pub struct RandomInit {
    pub seed: u64,
    pub std: f32,
}

impl WeightSource for RandomInit {
    fn get(&mut self, name: &str, shape: &[usize]) -> Result<Vec<f32>, ModelError> {
        let n: usize = shape.iter().product();
        if name.ends_with("norm.weight") {
            return Ok(vec![1.0; n]);
        }
        if name.ends_with(".bias") {
            return Ok(vec![0.0; n]);
        }
        let stream = arl_core::rng::fnv1a(name.as_bytes());
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed ^ stream);
        let normal = Normal::new(0.0f32, self.std).expect("std is finite and positive");
        Ok((0..n).map(|_| normal.sample(&mut rng)).collect())
    }

    fn has(&self, _name: &str) -> bool {
        false
    }
}

/// Write `tensors` (HF names, row-major f32 with shapes) as one F32 `model.safetensors`.
pub fn write_safetensors(path: &Path, tensors: &[(String, Vec<usize>, Vec<f32>)]) -> Result<(), ModelError> {
    let bytes: Vec<Vec<u8>> = tensors.iter().map(|(_, _, v)| v.iter().flat_map(|x| x.to_le_bytes()).collect()).collect();
    let views = tensors
        .iter()
        .zip(&bytes)
        .map(|((name, shape, _), b)| {
            TensorView::new(Dtype::F32, shape.clone(), b).map(|v| (name.clone(), v)).map_err(|e| ModelError::write(path, e))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let meta = HashMap::from([("format".to_string(), "pt".to_string())]);
    safetensors::serialize_to_file(views, Some(meta), path).map_err(|e| ModelError::write(path, e))
}
