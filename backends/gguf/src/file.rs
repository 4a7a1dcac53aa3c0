//! The GGUF container (llama.cpp's `gguf.md`, versions 2 and 3): a header, typed metadata
//! key–value pairs, tensor descriptors, then the aligned tensor data. Every length and offset
//! is checked against the file, so a truncated or corrupt file is an error naming what is
//! wrong, never a panic or a short read.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use crate::GgufError;
use crate::quant::GgmlType;

const MAGIC: &[u8; 4] = b"GGUF";
/// Strings and arrays longer than this are taken for corruption (a real vocabulary has
/// ~10^5–10^6 entries; its strings are short).
const MAX_LEN: u64 = 1 << 28;

/// One metadata value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    U64(u64),
    I64(i64),
    F32(f32),
    F64(f64),
    Bool(bool),
    String(String),
    Array(Vec<Value>),
}

impl Value {
    /// Any integer type as u64 (negative values are `None`).
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            Value::U8(v) => Some(v.into()),
            Value::U16(v) => Some(v.into()),
            Value::U32(v) => Some(v.into()),
            Value::U64(v) => Some(v),
            Value::I8(v) => u64::try_from(v).ok(),
            Value::I16(v) => u64::try_from(v).ok(),
            Value::I32(v) => u64::try_from(v).ok(),
            Value::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    /// Any integer or float type as f64.
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Value::F32(v) => Some(v.into()),
            Value::F64(v) => Some(v),
            Value::I8(v) => Some(v.into()),
            Value::I16(v) => Some(v.into()),
            Value::I32(v) => Some(v.into()),
            Value::I64(v) => Some(v as f64),
            _ => self.as_u64().map(|v| v as f64),
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            Value::Bool(b) => Some(b),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&[Value]> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }
}

/// Where one tensor's bytes are and what they hold.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorInfo {
    pub name: String,
    /// GGUF order: `dims[0]` is the fastest-varying axis (a row's length). HF's shape is
    /// the reverse.
    pub dims: Vec<u64>,
    pub ty: GgmlType,
    /// Offset into the file (the data section's start plus the descriptor's offset).
    pub offset: u64,
    pub n_bytes: u64,
}

impl TensorInfo {
    pub fn n_elements(&self) -> u64 {
        self.dims.iter().product()
    }

    /// The shape as HF (row-major, slowest axis first) writes it.
    pub fn hf_shape(&self) -> Vec<usize> {
        self.dims.iter().rev().map(|&d| d as usize).collect()
    }
}

/// An open GGUF file: its metadata and tensor table, read; tensor data read on demand.
pub struct GgufFile {
    pub path: PathBuf,
    pub version: u32,
    pub metadata: BTreeMap<String, Value>,
    pub tensors: Vec<TensorInfo>,
    file: File,
}

impl GgufFile {
    pub fn open(path: &Path) -> Result<Self, GgufError> {
        let io = |e: std::io::Error| GgufError::Io { path: path.to_path_buf(), source: e };
        let file = File::open(path).map_err(io)?;
        let file_len = file.metadata().map_err(io)?.len();
        let mut r = Reader { inner: BufReader::new(file.try_clone().map_err(io)?), path };

        let mut magic = [0u8; 4];
        r.bytes(&mut magic)?;
        if &magic != MAGIC {
            return Err(r.corrupt(format!("does not start with the GGUF magic (found {magic:02x?})")));
        }
        let version = r.u32()?;
        if !(2..=3).contains(&version) {
            return Err(GgufError::Unsupported {
                path: path.to_path_buf(),
                what: format!("GGUF version {version}"),
                supported: "versions 2 and 3".into(),
            });
        }
        let n_tensors = r.len("tensor count")?;
        let n_kv = r.len("metadata count")?;
        let mut metadata = BTreeMap::new();
        for _ in 0..n_kv {
            let key = r.string()?;
            let ty = r.u32()?;
            let value = r.value(ty)?;
            metadata.insert(key, value);
        }
        let mut descriptors = Vec::with_capacity(n_tensors as usize);
        for _ in 0..n_tensors {
            let name = r.string()?;
            let n_dims = r.u32()?;
            if n_dims > 4 {
                return Err(r.corrupt(format!("tensor {name} has {n_dims} dimensions (GGUF allows at most 4)")));
            }
            let dims = (0..n_dims).map(|_| r.u64()).collect::<Result<Vec<_>, _>>()?;
            let raw_ty = r.u32()?;
            let ty = GgmlType::from_id(raw_ty).ok_or_else(|| GgufError::Unsupported {
                path: path.to_path_buf(),
                what: format!("tensor {name}: ggml type id {raw_ty}"),
                supported: GgmlType::SUPPORTED.into(),
            })?;
            let offset = r.u64()?;
            descriptors.push((name, dims, ty, offset));
        }
        let alignment = match metadata.get("general.alignment") {
            None => 32,
            Some(v) => match v.as_u64() {
                Some(a) if a > 0 && a.is_power_of_two() => a,
                _ => return Err(r.corrupt(format!("general.alignment is {v:?}, not a power of two"))),
            },
        };
        let header_end = r.position()?;
        let data_start = header_end.div_ceil(alignment) * alignment;
        let mut tensors = Vec::with_capacity(descriptors.len());
        for (name, dims, ty, offset) in descriptors {
            let n_elements = dims.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d));
            let n_bytes = n_elements.and_then(|n| ty.n_bytes(n));
            let Some(n_bytes) = n_bytes else {
                return Err(r.corrupt(format!("tensor {name}: {dims:?} elements do not fit {ty:?}'s blocks of {}", ty.block_elements())));
            };
            let start = data_start.checked_add(offset);
            match start.and_then(|s| s.checked_add(n_bytes)) {
                Some(end) if end <= file_len => {}
                _ => {
                    return Err(GgufError::Truncated {
                        path: path.to_path_buf(),
                        what: format!("tensor {name} ({n_bytes} bytes at data offset {offset})"),
                        file_len,
                    });
                }
            }
            tensors.push(TensorInfo { name, dims, ty, offset: data_start + offset, n_bytes });
        }
        Ok(Self { path: path.to_path_buf(), version, metadata, tensors, file })
    }

    pub fn get(&self, key: &str) -> Option<&Value> {
        self.metadata.get(key)
    }

    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.tensors.iter().find(|t| t.name == name)
    }

    /// A tensor's raw bytes as stored (blocks of its type).
    pub fn raw(&mut self, info: &TensorInfo) -> Result<Vec<u8>, GgufError> {
        let io = |e: std::io::Error| GgufError::Io { path: self.path.clone(), source: e };
        let mut bytes = vec![0u8; info.n_bytes as usize];
        self.file.seek(SeekFrom::Start(info.offset)).map_err(io)?;
        self.file.read_exact(&mut bytes).map_err(io)?;
        Ok(bytes)
    }

    /// A tensor dequantized to f32, in GGUF's element order (= HF's row-major order).
    pub fn dequantize(&mut self, info: &TensorInfo) -> Result<Vec<f32>, GgufError> {
        let bytes = self.raw(info)?;
        Ok(info.ty.dequantize(&bytes, info.n_elements() as usize))
    }
}

/// Little-endian reads that turn a short file into [`GgufError::Truncated`].
struct Reader<'a> {
    inner: BufReader<File>,
    path: &'a Path,
}

impl Reader<'_> {
    fn corrupt(&self, message: String) -> GgufError {
        GgufError::Corrupt { path: self.path.to_path_buf(), message }
    }

    fn position(&mut self) -> Result<u64, GgufError> {
        self.inner.stream_position().map_err(|e| GgufError::Io { path: self.path.to_path_buf(), source: e })
    }

    fn bytes(&mut self, buf: &mut [u8]) -> Result<(), GgufError> {
        self.inner.read_exact(buf).map_err(|e| match e.kind() {
            std::io::ErrorKind::UnexpectedEof => GgufError::Truncated {
                path: self.path.to_path_buf(),
                what: "the header (metadata or tensor table)".into(),
                file_len: std::fs::metadata(self.path).map(|m| m.len()).unwrap_or(0),
            },
            _ => GgufError::Io { path: self.path.to_path_buf(), source: e },
        })
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], GgufError> {
        let mut buf = [0u8; N];
        self.bytes(&mut buf)?;
        Ok(buf)
    }

    fn u32(&mut self) -> Result<u32, GgufError> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    fn u64(&mut self) -> Result<u64, GgufError> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    /// A count or length, bounded so that a corrupt one cannot ask for terabytes.
    fn len(&mut self, what: &str) -> Result<u64, GgufError> {
        let n = self.u64()?;
        if n > MAX_LEN {
            return Err(self.corrupt(format!("{what} {n} is implausibly large (corrupt file?)")));
        }
        Ok(n)
    }

    fn string(&mut self) -> Result<String, GgufError> {
        let n = self.len("string length")? as usize;
        let mut buf = vec![0u8; n];
        self.bytes(&mut buf)?;
        String::from_utf8(buf).map_err(|e| self.corrupt(format!("a string is not UTF-8: {e}")))
    }

    fn value(&mut self, ty: u32) -> Result<Value, GgufError> {
        Ok(match ty {
            0 => Value::U8(u8::from_le_bytes(self.array()?)),
            1 => Value::I8(i8::from_le_bytes(self.array()?)),
            2 => Value::U16(u16::from_le_bytes(self.array()?)),
            3 => Value::I16(i16::from_le_bytes(self.array()?)),
            4 => Value::U32(self.u32()?),
            5 => Value::I32(i32::from_le_bytes(self.array()?)),
            6 => Value::F32(f32::from_le_bytes(self.array()?)),
            7 => match u8::from_le_bytes(self.array()?) {
                0 => Value::Bool(false),
                1 => Value::Bool(true),
                b => return Err(self.corrupt(format!("a bool holds {b}"))),
            },
            8 => Value::String(self.string()?),
            9 => {
                let item_ty = self.u32()?;
                let n = self.len("array length")?;
                let mut items = Vec::with_capacity(n.min(1 << 20) as usize);
                for _ in 0..n {
                    items.push(self.value(item_ty)?);
                }
                Value::Array(items)
            }
            10 => Value::U64(self.u64()?),
            11 => Value::I64(i64::from_le_bytes(self.array()?)),
            12 => Value::F64(f64::from_le_bytes(self.array()?)),
            other => return Err(self.corrupt(format!("unknown metadata value type {other}"))),
        })
    }
}
