//! The GGUF container (llama.cpp's `gguf.md`, versions 2 and 3): a header, typed metadata
//! key–value pairs, tensor descriptors, then the aligned tensor data. Every length and offset
//! is checked against the file, so a truncated or corrupt file is an error naming what is
//! wrong, never a panic or a short read; and every count, length and nesting depth is checked
//! against the bytes left in the file and a limit *before* anything is allocated for it, so a
//! hostile header costs at most a bounded multiple of the file's size (never a reservation
//! of gigabytes, never a stack overflow).

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
/// Array elements in all of the metadata at most (each is a [`Value`], 32 bytes in memory,
/// for as little as one byte of file): 8 M, 256 MiB; real files hold ~10^6.
const MAX_ELEMENTS: u64 = 1 << 23;
/// Arrays of arrays nest at most this deep (llama.cpp writes none).
const MAX_DEPTH: u32 = 8;
/// The fewest bytes one metadata pair (key length, one-byte key, type, one-byte value) and
/// one tensor descriptor (name length, dimension count, type, offset) take in the file.
const MIN_PAIR_BYTES: u64 = 8 + 1 + 4 + 1;
const MIN_TENSOR_BYTES: u64 = 8 + 4 + 4 + 8;

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
        let mut r = Reader { inner: BufReader::new(file.try_clone().map_err(io)?), path, file_len, at: 0, elements: 0 };

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
        r.fits("the metadata", n_kv, MIN_PAIR_BYTES)?;
        let mut metadata = BTreeMap::new();
        for _ in 0..n_kv {
            let key = r.string()?;
            let ty = r.u32()?;
            let value = r.value(ty, 0)?;
            metadata.insert(key, value);
        }
        r.fits("the tensor table", n_tensors, MIN_TENSOR_BYTES)?;
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
    file_len: u64,
    /// Bytes read so far.
    at: u64,
    /// Array elements read so far ([`MAX_ELEMENTS`]).
    elements: u64,
}

/// The fewest bytes a metadata value of type `ty` takes in the file.
fn min_bytes(ty: u32) -> u64 {
    match ty {
        0 | 1 | 7 => 1,
        2 | 3 => 2,
        4..=6 => 4,
        8 => 8,
        9 => 4 + 8,
        _ => 8,
    }
}

impl Reader<'_> {
    fn corrupt(&self, message: String) -> GgufError {
        GgufError::Corrupt { path: self.path.to_path_buf(), message }
    }

    fn position(&mut self) -> Result<u64, GgufError> {
        self.inner.stream_position().map_err(|e| GgufError::Io { path: self.path.to_path_buf(), source: e })
    }

    /// `n` items of at least `each` bytes fit in what is left of the file: a count checked
    /// before anything is allocated for it.
    fn fits(&self, what: &str, n: u64, each: u64) -> Result<(), GgufError> {
        let left = self.file_len.saturating_sub(self.at);
        if n.checked_mul(each).is_none_or(|need| need > left) {
            return Err(GgufError::Truncated {
                path: self.path.to_path_buf(),
                what: format!("{what} ({n} entries of at least {each} bytes, {left} bytes left)"),
                file_len: self.file_len,
            });
        }
        Ok(())
    }

    fn bytes(&mut self, buf: &mut [u8]) -> Result<(), GgufError> {
        self.at += buf.len() as u64;
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
        let n = self.len("string length")?;
        self.fits("a string", n, 1)?;
        let mut buf = vec![0u8; n as usize];
        self.bytes(&mut buf)?;
        String::from_utf8(buf).map_err(|e| self.corrupt(format!("a string is not UTF-8: {e}")))
    }

    /// A value of type `ty`, inside `depth` arrays.
    fn value(&mut self, ty: u32, depth: u32) -> Result<Value, GgufError> {
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
                if depth >= MAX_DEPTH {
                    return Err(self.corrupt(format!("metadata arrays nest deeper than {MAX_DEPTH}")));
                }
                let item_ty = self.u32()?;
                let n = self.len("array length")?;
                self.fits("an array", n, min_bytes(item_ty))?;
                self.elements += n;
                if self.elements > MAX_ELEMENTS {
                    return Err(self.corrupt(format!("the metadata's arrays hold more than {MAX_ELEMENTS} elements")));
                }
                let mut items = Vec::with_capacity(n as usize);
                for _ in 0..n {
                    items.push(self.value(item_ty, depth + 1)?);
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

#[cfg(test)]
mod tests {
    use std::os::unix::process::CommandExt;
    use std::path::Path;
    use std::process::Command;

    use super::GgufFile;

    /// The GGUF v3 header: magic, version, tensor count, metadata count.
    fn header(n_tensors: u64, n_kv: u64) -> Vec<u8> {
        let mut b = b"GGUF".to_vec();
        b.extend(3u32.to_le_bytes());
        b.extend(n_tensors.to_le_bytes());
        b.extend(n_kv.to_le_bytes());
        b
    }

    /// A metadata key followed by a value's type.
    fn key(b: &mut Vec<u8>, name: &str, ty: u32) {
        b.extend((name.len() as u64).to_le_bytes());
        b.extend(name.as_bytes());
        b.extend(ty.to_le_bytes());
    }

    /// Files `arl convert` once aborted on (issue #50), with what the error must say.
    const HOSTILE: [(&str, &str); 6] = [
        ("deep.gguf", "nest deeper than 8"),
        ("tensors.gguf", "the tensor table (268435456 entries"),
        ("pairs.gguf", "the metadata (268435456 entries"),
        ("bytes.gguf", "more than 8388608 elements"),
        ("string.gguf", "a string (268435455 entries"),
        ("array.gguf", "an array (1000000 entries of at least 8 bytes"),
    ];

    fn write_hostile(dir: &Path) {
        let write = |name: &str, bytes: Vec<u8>| std::fs::write(dir.join(name), bytes).unwrap();
        // Arrays of arrays 200 000 deep: the recursion overflowed the stack.
        let mut b = header(0, 1);
        key(&mut b, "deep", 9);
        for _ in 0..200_000 {
            b.extend(9u32.to_le_bytes());
            b.extend(1u64.to_le_bytes());
        }
        b.extend(0u32.to_le_bytes());
        b.extend(0u64.to_le_bytes());
        write("deep.gguf", b);
        // 2^28 tensors in a 24-byte file: 16 GiB reserved before any was read.
        write("tensors.gguf", header(1 << 28, 0));
        // As many metadata pairs.
        write("pairs.gguf", header(0, 1 << 28));
        // A 64 MiB u8 array: 2.2 GB of values before its error.
        let mut b = header(0, 1);
        key(&mut b, "bytes", 9);
        b.extend(0u32.to_le_bytes());
        b.extend((64u64 << 20).to_le_bytes());
        b.resize(b.len() + (64 << 20), 0);
        write("bytes.gguf", b);
        // A string of 2^28 - 1 bytes in a small file.
        let mut b = header(0, 1);
        key(&mut b, "s", 8);
        b.extend(((1u64 << 28) - 1).to_le_bytes());
        b.extend(b"short");
        write("string.gguf", b);
        // An array whose length needs more bytes than are left.
        let mut b = header(0, 1);
        key(&mut b, "a", 9);
        b.extend(8u32.to_le_bytes());
        b.extend(1_000_000u64.to_le_bytes());
        write("array.gguf", b);
    }

    /// Issue #50: every hostile header is a one-line error, in a process whose address space
    /// is 1 GiB and whose threads have the default 2 MiB stack (the old reader overflowed the
    /// stack, reserved 16 GiB, or grew to 2.2 GB, and aborted).
    #[test]
    fn hostile_headers_are_one_line_errors_in_bounded_memory() {
        let dir = std::env::temp_dir().join(format!("arl-gguf-hostile-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        write_hostile(&dir);
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        cmd.args(["--exact", "file::tests::hostile_headers_in_this_process", "--include-ignored", "--nocapture", "--test-threads", "1"])
            .env("ARL_GGUF_HOSTILE_DIR", &dir);
        // SAFETY: setrlimit between fork and exec touches nothing of the parent.
        unsafe {
            cmd.pre_exec(|| {
                let limit = libc::rlimit { rlim_cur: 1 << 30, rlim_max: 1 << 30 };
                if libc::setrlimit(libc::RLIMIT_AS, &limit) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let out = cmd.output().unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success() && text.contains("1 passed"), "{:?}\n{text}", out.status);
    }

    #[test]
    #[ignore = "run by hostile_headers_are_one_line_errors_in_bounded_memory, with an address-space limit"]
    fn hostile_headers_in_this_process() {
        let dir = std::path::PathBuf::from(std::env::var_os("ARL_GGUF_HOSTILE_DIR").expect("the hostile files' directory"));
        for (name, says) in HOSTILE {
            let err = GgufFile::open(&dir.join(name)).err().unwrap_or_else(|| panic!("{name} opened")).to_string();
            eprintln!("{name}: {err}");
            assert!(!err.contains('\n') && err.contains(says), "{name}: {err}");
        }
    }
}
