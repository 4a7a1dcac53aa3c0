//! A GGUF file → an HF model directory: `config.json`, `generation_config.json`,
//! `model.safetensors` (f32), `tokenizer.json`, `tokenizer_config.json` (with the chat
//! template) and `gguf_source.json` (where it came from). Written into a temporary sibling
//! and renamed into place, so a failed conversion leaves nothing half-written.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use safetensors::tensor::{Dtype, TensorView};
use serde_json::{Value as Json, json};
use sha2::{Digest, Sha256};

use crate::GgufError;
use crate::file::GgufFile;
use crate::hf_config::{Arch, hf_config};
use crate::names::{hf_name, unpermute_rows};
use crate::tokenizer::tokenizer_files;

/// A hash of this crate's source (build.rs): a directory converted by other code is stale.
pub const CONVERTER: &str = env!("ARL_GGUF_CONVERTER");

/// What a conversion wrote.
#[derive(Clone, Debug)]
pub struct Converted {
    pub dir: PathBuf,
    pub arch: &'static str,
    pub n_tensors: usize,
    pub n_params: u64,
    pub sha256: String,
}

/// The hex sha256 of a file.
pub fn sha256_file(path: &Path) -> Result<String, GgufError> {
    let io = |e| GgufError::Io { path: path.to_path_buf(), source: e };
    let mut file = std::fs::File::open(path).map_err(io)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf).map_err(io)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hasher.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

/// Convert `gguf` into the directory `out`, which must not exist yet (or be empty).
pub fn convert(gguf: &Path, out: &Path) -> Result<Converted, GgufError> {
    let write_err = |path: &Path, message: String| GgufError::Write { path: path.to_path_buf(), message };
    if out.exists() && std::fs::read_dir(out).map(|mut d| d.next().is_some()).unwrap_or(true) {
        return Err(write_err(out, "it exists and is not empty; choose another --out or delete it".into()));
    }
    let mut file = GgufFile::open(gguf)?;
    let (config, generation, shape) = hf_config(&file)?;
    let tokenizer = tokenizer_files(&file)?;

    // Every tensor, dequantized and renamed, before anything is written.
    let mut tensors: BTreeMap<String, (Vec<usize>, Vec<u8>)> = BTreeMap::new();
    let mut types: BTreeMap<String, usize> = BTreeMap::new();
    let mut n_params = 0u64;
    for info in file.tensors.clone() {
        let name = hf_name(&info.name).ok_or_else(|| GgufError::Tensor {
            path: gguf.to_path_buf(),
            message: format!("tensor `{}` has no Hugging Face counterpart in a {} model", info.name, shape.arch.gguf_name()),
        })?;
        *types.entry(format!("{:?}", info.ty)).or_default() += 1;
        let hf_shape = info.hf_shape();
        let mut data = file.dequantize(&info)?;
        if shape.arch == Arch::Llama {
            let heads = if info.name.contains(".attn_q.") {
                Some(shape.n_heads)
            } else if info.name.contains(".attn_k.") {
                Some(shape.n_kv_heads)
            } else {
                None
            };
            if let Some(heads) = heads {
                let row_len = if hf_shape.len() == 2 { hf_shape[1] } else { 1 };
                if hf_shape[0] != heads * shape.head_dim {
                    return Err(GgufError::Tensor {
                        path: gguf.to_path_buf(),
                        message: format!(
                            "{} is {hf_shape:?}, expected {} rows ({heads} heads of {})",
                            info.name,
                            heads * shape.head_dim,
                            shape.head_dim
                        ),
                    });
                }
                data = unpermute_rows(&data, heads, row_len);
            }
        }
        n_params += data.len() as u64;
        let bytes: Vec<u8> = data.iter().flat_map(|v| v.to_le_bytes()).collect();
        tensors.insert(name, (hf_shape, bytes));
    }
    if !shape.tied && !tensors.contains_key("lm_head.weight") {
        return Err(GgufError::Tensor { path: gguf.to_path_buf(), message: "has no output.weight".into() });
    }
    let sha256 = sha256_file(gguf)?;

    let parent = out.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).map_err(|e| write_err(parent, e.to_string()))?;
    let leaf = out.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "model".into());
    let tmp = parent.join(format!(".tmp-{leaf}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let result = (|| -> Result<(), GgufError> {
        std::fs::create_dir_all(&tmp).map_err(|e| write_err(&tmp, e.to_string()))?;
        let put_json = |name: &str, value: &Json| -> Result<(), GgufError> {
            let path = tmp.join(name);
            let text = serde_json::to_string_pretty(value).expect("JSON serializes");
            std::fs::write(&path, text + "\n").map_err(|e| write_err(&path, e.to_string()))
        };
        put_json("config.json", &config)?;
        put_json("generation_config.json", &generation)?;
        put_json("tokenizer.json", &tokenizer.tokenizer_json)?;
        put_json("tokenizer_config.json", &tokenizer.tokenizer_config)?;
        let source = json!({
            "gguf_file": gguf.file_name().map(|n| n.to_string_lossy().into_owned()),
            "sha256": sha256,
            "gguf_version": file.version,
            "general.name": file.get("general.name").and_then(|v| v.as_str()),
            "architecture": shape.arch.gguf_name(),
            "tensor_types": types,
            "converter": CONVERTER,
        });
        put_json("gguf_source.json", &source)?;
        let views = tensors
            .iter()
            .map(|(name, (shape, bytes))| {
                let view = TensorView::new(Dtype::F32, shape.clone(), bytes).expect("sizes match by construction");
                (name.clone(), view)
            })
            .collect::<Vec<_>>();
        let path = tmp.join("model.safetensors");
        let metadata = Some([("format".to_string(), "pt".to_string())].into());
        safetensors::serialize_to_file(views, metadata, &path).map_err(|e| write_err(&path, e.to_string()))?;
        if out.exists() {
            std::fs::remove_dir(out).map_err(|e| write_err(out, e.to_string()))?;
        }
        std::fs::rename(&tmp, out).map_err(|e| write_err(out, e.to_string()))
    })();
    if result.is_err() {
        let _ = std::fs::remove_dir_all(&tmp);
    }
    result?;
    Ok(Converted { dir: out.to_path_buf(), arch: shape.arch.gguf_name(), n_tensors: tensors.len(), n_params, sha256 })
}
